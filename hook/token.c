/* The launch gate: a kernel starts only while this process holds its pod's
 * token on the device (docs/protocol.md, "Token").
 *
 * Fast path, on every launch: the device of the calling context (a
 * per-thread cache keyed by the current context), one clock read, one
 * relaxed atomic load of that device's token expiry. No lock, no RPC, no
 * signal: a training job launches tens of thousands of kernels a second.
 *
 * Slow path, under the device's mutex, once per quota: wait for the kernels
 * queued under the old quota (their time past it is the overuse the pod is
 * charged), then ask the pod manager for the token, telling it the length
 * of this process's natural kernel bursts so that the scheduler can size
 * the quota. A process without a pod manager is never gated; a pod manager
 * that stops answering does not stop the program either: it launches
 * ungated and asks again a second later.
 *
 * An idle thread notices, from the launch counter the wrappers already
 * keep, that the process has not launched for 20 ms and gives the token
 * back at once, so that another pod need not wait for the quota to run
 * out; that end of a busy period is also where the burst is measured. At
 * exit the token is given back too (the pod manager also treats a process
 * that exits as having released it). */
#include "token.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "channel.h"
#include "counters.h"
#include "fork.h"
#include "gmt_error.h"
#include "gmt_wire.h"
#include "log.h"
#include "thread.h"
#include "report.h"

/* The pod manager answers within its own 30 s upstream timeout. */
#define GMT_TOKEN_RPC_TIMEOUT_MS 35000
#define GMT_TOKEN_RELEASE_TIMEOUT_MS 2000
#define GMT_TOKEN_EXIT_TIMEOUT_MS 500
#define GMT_TOKEN_RETRY_NS 1000000000LL /* after a failed request: ungated this long */
#define GMT_TOKEN_IDLE_NS 20000000LL    /* no launch for this long: idle */
#define GMT_TOKEN_TICK_NS 5000000LL     /* how often the idle thread looks */
#define GMT_TOKEN_SYNC_WAITED_NS 100000 /* a sync this long found work queued */
#define GMT_TOKEN_EMA_WEIGHT 0.3        /* of a new burst in the estimate */

#define GMT_TLS __attribute__((tls_model("initial-exec")))

typedef struct {
  /* CLOCK_MONOTONIC ns until which launches pass: 0 = no token,
   * INT64_MAX = ungated for good (no pod manager). The fast path reads
   * only this. */
  _Atomic int64_t expiry;
  /* Everything below is under mu. */
  pthread_mutex_t mu;
  int held;              /* a grant not given back yet */
  int64_t grant_ns;      /* when it came */
  int64_t busy_start_ns; /* start of the busy period; 0 while idle */
  int busy_cut;          /* a quota ran out during it: not a natural burst */
  double burst_ema_ms;   /* 0 until one busy period has been measured */
} tok_dev_t;

static tok_dev_t g_dev[GMT_TOKEN_MAX_DEVICES] = {
    [0 ... GMT_TOKEN_MAX_DEVICES - 1] = {.mu = PTHREAD_MUTEX_INITIALIZER},
};

static _Atomic int g_held;            /* devices with held set */
static _Atomic int g_rpc_inflight;    /* token calls on the channel now */
static _Atomic int g_outage;          /* a failed request was said on stderr */
static _Atomic int64_t g_activity_ns; /* the launch counter was last seen moving */

static pthread_mutex_t g_idle_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_idle_cv = PTHREAD_COND_INITIALIZER;
static int g_idle_started; /* under g_idle_mu */

static GMT_TLS __thread CUcontext t_ctx;
static GMT_TLS __thread int t_dev = -1;

static inline int64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- the RPC ---- */

static int token_rpc(int dev, double burst_ms, double overuse_ms, int release, double *quota_ms,
                     int timeout_ms)
{
  Gmt__TokenRequest r = GMT__TOKEN_REQUEST__INIT;
  r.pid = (uint32_t)getpid();
  r.device = dev;
  r.burst_ms = burst_ms;
  r.overuse_ms = overuse_ms;
  r.release = release != 0;
  Gmt__Envelope env = GMT__ENVELOPE__INIT;
  env.body_case = GMT__ENVELOPE__BODY_TOKEN_REQ;
  env.token_req = &r;

  Gmt__Envelope *rep = NULL;
  atomic_fetch_add(&g_rpc_inflight, 1);
  int rc = gmt__channel_call(GMT_CH_TOKEN, &env, &rep, timeout_ms);
  atomic_fetch_sub(&g_rpc_inflight, 1);
  if (rc == 0) {
    char err[256] = "";
    rc = gmt_wire_expect(rep, GMT__ENVELOPE__BODY_TOKEN_REP, err, sizeof(err));
    if (rc == 0)
      *quota_ms = rep->token_rep->quota_ms;
    else
      GMT_HOOK_DEBUG("token request refused on device %d: %s (%s)", dev, gmt_strerror(rc), err);
    gmt_wire_free(rep);
  }
  return rc;
}

/* ---- the idle thread ---- */

/* Gives the token of d back when the process has not launched since
 * last_ns (the launch counter's last move) for the idle time. */
static void idle_release(tok_dev_t *d, int dev, int64_t last_ns, int64_t now)
{
  if (pthread_mutex_trylock(&d->mu) != 0)
    return; /* a launch is in the slow path: not idle */
  if (!d->held) {
    pthread_mutex_unlock(&d->mu);
    return;
  }
  int64_t act = last_ns > d->grant_ns ? last_ns : d->grant_ns;
  if (now - act < GMT_TOKEN_IDLE_NS) {
    pthread_mutex_unlock(&d->mu);
    return;
  }
  int64_t expiry = atomic_load_explicit(&d->expiry, memory_order_relaxed);
  atomic_store_explicit(&d->expiry, 0, memory_order_relaxed);
  double overuse = act > expiry ? (double)(act - expiry) / 1e6 : 0;
  /* A busy period that ended before its quota ran out is a natural
   * burst; one cut short by the quota says only that more was wanted
   * (and a continuous load would otherwise be measured as one endless
   * burst at its first pause, and ask for the longest quota there is). */
  if (act < expiry && d->busy_start_ns && !d->busy_cut) {
    double burst = (double)(act - d->busy_start_ns) / 1e6;
    d->burst_ema_ms = d->burst_ema_ms > 0 ? (1 - GMT_TOKEN_EMA_WEIGHT) * d->burst_ema_ms +
                                                GMT_TOKEN_EMA_WEIGHT * burst
                                          : burst;
  }
  d->busy_start_ns = 0;
  d->busy_cut = 0;
  d->held = 0;
  atomic_fetch_sub(&g_held, 1);
  double q = 0;
  int rc = token_rpc(dev, 0, overuse, 1, &q, GMT_TOKEN_RELEASE_TIMEOUT_MS);
  GMT_HOOK_DEBUG("device %d idle: token given back (%s), overuse %.1f ms, burst estimate %.1f ms",
                 dev, rc == 0 ? "ok" : gmt_strerror(rc), overuse, d->burst_ema_ms);
  pthread_mutex_unlock(&d->mu);
}

static void *idle_main(void *arg)
{
  (void)arg;
  uint64_t seen = 0;
  int64_t seen_ns = 0;
  pthread_mutex_lock(&g_idle_mu);
  for (;;) {
    if (atomic_load(&g_held) == 0) {
      while (atomic_load(&g_held) == 0)
        pthread_cond_wait(&g_idle_cv, &g_idle_mu);
      /* A new busy period: the counter's past says nothing about it. */
      seen = atomic_load_explicit(&gmt__launches, memory_order_relaxed);
      seen_ns = now_ns();
      atomic_store_explicit(&g_activity_ns, seen_ns, memory_order_relaxed);
    }
    pthread_mutex_unlock(&g_idle_mu);

    struct timespec ts = {0, GMT_TOKEN_TICK_NS};
    nanosleep(&ts, NULL);
    uint64_t n = atomic_load_explicit(&gmt__launches, memory_order_relaxed);
    int64_t now = now_ns();
    if (n != seen) {
      seen = n;
      seen_ns = now;
      atomic_store_explicit(&g_activity_ns, now, memory_order_relaxed);
    } else if (now - seen_ns >= GMT_TOKEN_IDLE_NS) {
      for (int i = 0; i < GMT_TOKEN_MAX_DEVICES && atomic_load(&g_held) > 0; i++)
        idle_release(&g_dev[i], i, seen_ns, now);
    }
    pthread_mutex_lock(&g_idle_mu);
  }
  return NULL;
}

/* d->held was just set (under d->mu). */
static void held_one_more(void)
{
  atomic_fetch_add(&g_held, 1);
  pthread_mutex_lock(&g_idle_mu);
  if (!g_idle_started) {
    g_idle_started = gmt__thread_start(idle_main) == 0;
    if (!g_idle_started)
      GMT_HOOK_DEBUG("cannot start the idle thread: tokens go back only when they run out");
  }
  pthread_cond_signal(&g_idle_cv);
  pthread_mutex_unlock(&g_idle_mu);
}

/* ---- the gate ---- */

static void set_all_ungated(void)
{
  for (int i = 0; i < GMT_TOKEN_MAX_DEVICES; i++)
    atomic_store_explicit(&g_dev[i].expiry, INT64_MAX, memory_order_relaxed);
}

__attribute__((noinline)) static void gate_slow(tok_dev_t *d, int dev)
{
  /* A forked child that launches before anything else registers here. */
  gmt__report_ensure();
  pthread_mutex_lock(&d->mu);
  int64_t now = now_ns();
  if (now < atomic_load_explicit(&d->expiry, memory_order_relaxed)) {
    pthread_mutex_unlock(&d->mu); /* another thread got it meanwhile */
    return;
  }
  double overuse = 0;
  if (d->held) {
    /* The quota ran out: the kernels queued under it run on, and their
     * time past the quota is charged to the pod. */
    int64_t expiry = atomic_load_explicit(&d->expiry, memory_order_relaxed);
    CUresult (*sync)(void) = (CUresult(*)(void))gmt__real(GMT_SYM_cuCtxSynchronize);
    if (sync)
      sync();
    int64_t after = now_ns();
    /* A sync that returned at once found the device done earlier: the
     * work ended no later than the last launch seen. */
    int64_t end = after;
    if (after - now < GMT_TOKEN_SYNC_WAITED_NS) {
      int64_t act = atomic_load_explicit(&g_activity_ns, memory_order_relaxed) + GMT_TOKEN_TICK_NS;
      end = act < now ? act : now;
    }
    overuse = end > expiry ? (double)(end - expiry) / 1e6 : 0;
    d->busy_cut = 1;
    d->held = 0;
    atomic_fetch_sub(&g_held, 1);
    now = after;
  }

  double quota = 0;
  int rc = token_rpc(dev, d->burst_ema_ms, overuse, 0, &quota, GMT_TOKEN_RPC_TIMEOUT_MS);
  int64_t t = now_ns();
  if (rc == 0 && quota > 0) {
    d->held = 1;
    d->grant_ns = t;
    if (!d->busy_start_ns)
      d->busy_start_ns = t;
    atomic_store_explicit(&d->expiry, t + (int64_t)(quota * 1e6), memory_order_relaxed);
    held_one_more();
    GMT_HOOK_DEBUG("device %d: token for %.1f ms (overuse %.1f ms, burst estimate %.1f ms)", dev,
                   quota, overuse, d->burst_ema_ms);
    if (atomic_exchange(&g_outage, 0))
      gmt__say("tokens from the pod manager again");
  } else if (rc == -ENOTCONN) {
    /* Not registered: no pod manager, so no gate, ever. */
    GMT_HOOK_DEBUG("no pod manager: launches are not gated");
    set_all_ungated();
  } else {
    if (rc == 0)
      rc = -EPROTO; /* a grant of nothing */
    if (!atomic_exchange(&g_outage, 1))
      gmt__say("no token from the pod manager on device %d (%s); launching ungated, "
               "asking again every second",
               dev, gmt_strerror(rc));
    atomic_store_explicit(&d->expiry, t + GMT_TOKEN_RETRY_NS, memory_order_relaxed);
  }
  pthread_mutex_unlock(&d->mu);
}

/* The device of the calling thread's context, -1 without one. */
static inline int gate_device(void)
{
  CUresult (*cur)(CUcontext *) = (CUresult(*)(CUcontext *))gmt__real(GMT_SYM_cuCtxGetCurrent);
  CUcontext c = NULL;
  if (!cur || cur(&c) != CUDA_SUCCESS || !c)
    return -1; /* the launch fails on its own */
  if (c == t_ctx)
    return t_dev;
  t_ctx = c;
  t_dev = gmt__current_device();
  return t_dev;
}

void gmt__token_gate(void)
{
  int dev = gate_device();
  if ((unsigned)dev >= GMT_TOKEN_MAX_DEVICES)
    return;
  tok_dev_t *d = &g_dev[dev];
  if (now_ns() < atomic_load_explicit(&d->expiry, memory_order_relaxed))
    return;
  gate_slow(d, dev);
}

void gmt__token_gate_stream(CUstream s)
{
  CUresult (*get)(CUstream, CUcontext *) =
      (CUresult(*)(CUstream, CUcontext *))gmt__real(GMT_SYM_cuStreamGetCtx);
  CUresult (*push)(CUcontext) = (CUresult(*)(CUcontext))gmt__real(GMT_SYM_cuCtxPushCurrent_v2);
  CUresult (*pop)(CUcontext *) = (CUresult(*)(CUcontext *))gmt__real(GMT_SYM_cuCtxPopCurrent_v2);
  CUcontext c = NULL;
  if (s && get && push && pop && get(s, &c) == CUDA_SUCCESS && c && push(c) == CUDA_SUCCESS) {
    gmt__token_gate();
    pop(&c);
    return;
  }
  gmt__token_gate();
}

/* ---- exit and fork ---- */

__attribute__((destructor)) static void token_dtor(void)
{
  if (atomic_load(&g_held) == 0)
    return;
  /* A thread waiting for a token holds the channel: the pod manager sees
   * the exit anyway, so do not wait behind it. */
  if (atomic_load(&g_rpc_inflight) > 0)
    return;
  for (int i = 0; i < GMT_TOKEN_MAX_DEVICES && atomic_load(&g_held) > 0; i++) {
    tok_dev_t *d = &g_dev[i];
    if (pthread_mutex_trylock(&d->mu) != 0)
      continue;
    if (d->held) {
      atomic_store_explicit(&d->expiry, 0, memory_order_relaxed);
      d->held = 0;
      atomic_fetch_sub(&g_held, 1);
      double q = 0;
      token_rpc(i, 0, 0, 1, &q, GMT_TOKEN_EXIT_TIMEOUT_MS);
    }
    pthread_mutex_unlock(&d->mu);
  }
}

/* The token's locks are not taken at fork (see fork.h): a device's mutex
 * is held across the token RPC and cuCtxSynchronize. */
static void token_child(void)
{
  /* The parent's grants stay the parent's; the idle thread was not
   * forked. The child asks for its own token at its first launch. */
  for (int i = 0; i < GMT_TOKEN_MAX_DEVICES; i++) {
    tok_dev_t *d = &g_dev[i];
    pthread_mutex_init(&d->mu, NULL);
    atomic_store_explicit(&d->expiry, 0, memory_order_relaxed);
    d->held = 0;
    d->grant_ns = 0;
    d->busy_start_ns = 0;
    d->busy_cut = 0;
    d->burst_ema_ms = 0;
  }
  atomic_store(&g_held, 0);
  atomic_store(&g_rpc_inflight, 0);
  atomic_store(&g_outage, 0);
  pthread_mutex_init(&g_idle_mu, NULL);
  pthread_cond_init(&g_idle_cv, NULL);
  g_idle_started = 0;
  t_ctx = NULL;
  t_dev = -1;
}

static const gmt_fork_ops_t g_fork_ops = {.child = token_child};

__attribute__((constructor)) static void token_register(void)
{
  gmt__fork_register(GMT_LOCK_TOKEN, &g_fork_ops);
}
