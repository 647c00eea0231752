/* The launch gate: a kernel starts only while this process holds its pod's
 * token on the device (docs/protocol.md, "Token").
 *
 * Fast path, on every launch: the device of the calling context (a
 * per-thread cache keyed by the current context), one coarse clock read
 * (the precise one too in a grant's last 10 ms: grant_on), one relaxed
 * atomic load of that device's token expiry. No lock, no RPC, no
 * signal: a training job launches tens of thousands of kernels a second.
 *
 * Slow path, under the device's mutex, once per quota: wait for the work
 * queued under the old quota (no new launch is admitted before it has run,
 * so the next pod's grant is not eaten by this one's queue; its time past
 * the quota is the overuse the pod is charged), then ask the pod manager
 * for the token, telling it the length of this process's natural bursts
 * so that the scheduler can size the quota. A process without a pod
 * manager is never gated; a pod manager that stops answering does not stop
 * the program either: it launches ungated and asks again a second later.
 *
 * An idle thread gives the token back early, so that another pod need not
 * wait for the quota to run out: once the process has launched nothing for
 * a while it waits (off the launch path) for the work queued so far, and
 * the grant is idle only when nothing was launched for 20 ms after that
 * work was done (busy.c holds the rule). A process waiting in a
 * synchronize for its own kernels is busy, not idle. The release says how
 * long the grant went unused, so the pod is charged only for its busy
 * time. At exit the token is given back too (the pod manager also treats
 * a process that exits as having released it).
 *
 * A watch thread asks, once per grant, to hear when the grant ends
 * (TokenWatch). The scheduler cuts a grant short when a pod that was idle
 * launches again (or a latency pod has work): then no new launch is
 * admitted, the work already queued runs, and the token goes back at
 * once, so the other pod waits for that work, not for the rest of the
 * grant. One device is watched at a time (the one granted last).
 *
 * A latency pod's grant (TokenReply.ahead_us) lets its process, once it
 * has given the grant back as idle, launch again at once: the launch goes
 * ahead and the ask thread asks for the next grant meanwhile. So a
 * request waits for the batch pod's queued work, not for a trip to
 * gmt-schd and back. Launches wait again once ahead_us has passed with no
 * answer, and the time the process ran ahead goes to the scheduler as
 * overuse with its next request. */
#include "token.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bell.h"
#include "busy.h"
#include "calllog.h"
#include "channel.h"
#include "queue.h"
#include "reserve.h" /* GMT_FAIL_CLOSED */
#include "devmap.h"
#include "counters.h"
#include "fork.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_wire.h"
#include "log.h"
#include "thread.h"
#include "report.h"
#include "state.h"
#include "swap.h"

/* The pod manager answers within its own 30 s upstream timeout. */
#define GMT_TOKEN_RPC_TIMEOUT_MS 35000
#define GMT_TOKEN_RELEASE_TIMEOUT_MS 2000
#define GMT_TOKEN_EXIT_TIMEOUT_MS 500
#define GMT_TOKEN_RETRY_NS 1000000000LL /* after a failed request: ungated this long */
#define GMT_TOKEN_REFUSED_WAIT_MS 1000  /* a refused pod asks again this often */
/* A TokenWatch waits as long as a grant lasts: the pod manager's own
 * bound on it (30 s) and a little. */
#define GMT_TOKEN_WATCH_TIMEOUT_MS 35000
#define GMT_TOKEN_WATCH_RETRY_S 1 /* after a failed watch */

#define GMT_TLS __attribute__((tls_model("initial-exec")))

typedef struct {
  /* CLOCK_MONOTONIC ns until which launches pass: 0 = no token,
   * INT64_MAX = ungated for good (no pod manager). The fast path reads
   * only this. */
  _Atomic int64_t expiry;
  /* Everything below is under mu. */
  pthread_mutex_t mu;
  int held; /* a grant not given back yet */
  /* The scheduler refused the device (devices=, GMT_EDEVICE): launches
   * there fail at once until this CLOCK_MONOTONIC ns, then ask again (a
   * reload may have allowed it). said: the refusal was told on stderr. */
  int64_t denied_until;
  CUresult denied_rc; /* what a launch until then gets */
  int denied_said;
  CUcontext ctx; /* the context it was asked from: what the idle thread waits on */
  gmt_busy_t b;  /* its busy periods (busy.h) */
  /* The bound its grant puts on the work it may queue, in microseconds
   * (queue.h; 0: none). Read unlocked on the launch path: a stale value
   * costs one launch the bound, or a lock. */
  _Atomic uint32_t bound_us;
  /* The bell (bell.h), read unlocked on the launch path: a latency
   * grant's launches ring it (kept after the grant, for the launches that
   * go ahead of the next); a batch grant's heed it for bell_left_ns more
   * in all. */
  _Atomic int latency;
  _Atomic int64_t bell_left_ns;
  /* The grant has the device to itself (TokenReply.alone): the idle
   * thread looks less often while the process launches. */
  _Atomic int alone;
  /* Launching ahead of a grant (a latency pod's, see above). */
  uint32_t ahead_us;       /* the grant's term: may run ahead after it */
  int ahead_ok;            /* it was given back idle: the next launch may go ahead */
  int asking;              /* the ask thread's request is out */
  int64_t ahead_ns;        /* the launch that went ahead */
  double ahead_owed_ms;    /* time run ahead, for the next request's overuse */
  pthread_cond_t answered; /* asking ended */
} tok_dev_t;

static tok_dev_t g_dev[GMT_TOKEN_MAX_DEVICES] = {
    [0 ... GMT_TOKEN_MAX_DEVICES - 1] = {.mu = PTHREAD_MUTEX_INITIALIZER,
                                         .answered = PTHREAD_COND_INITIALIZER},
};

static _Atomic int g_rpc_inflight;      /* token calls on the channel now */
static _Atomic int g_outage;            /* a failed request was said on stderr */
static _Atomic unsigned g_refused;      /* refusals said on stderr, a bit per why (refused_bit) */
static _Atomic int64_t g_activity_ns;   /* the launch counter was last seen moving */
static _Atomic int64_t g_fast_until_ns; /* a latency grant may be held until then */

static pthread_mutex_t g_idle_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_idle_cv = PTHREAD_COND_INITIALIZER;
static int g_idle_started; /* under g_idle_mu */

/* The watch thread: woken by each grant (g_watch_dev: the device granted
 * last, -1: none new). Off for good once the pod manager or the
 * scheduler says it does not know TokenWatch. */
static pthread_mutex_t g_watch_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_watch_cv = PTHREAD_COND_INITIALIZER;
static int g_watch_started;  /* under g_watch_mu */
static int g_watch_dev = -1; /* under g_watch_mu */
static _Atomic int g_watch_off;

/* The ask thread: asks for the grant of a launch that went ahead, on the
 * devices whose asking is set and whose request it has not sent yet
 * (g_ask_pending, a bit per device). */
static pthread_mutex_t g_ask_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_ask_cv = PTHREAD_COND_INITIALIZER;
static int g_ask_started;      /* under g_ask_mu: 1 started, -1 failed */
static uint64_t g_ask_pending; /* under g_ask_mu */
_Static_assert(GMT_TOKEN_MAX_DEVICES <= 64, "g_ask_pending has a bit per device");

static GMT_TLS __thread CUcontext t_ctx;
static GMT_TLS __thread int t_dev = -1;

static inline int64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The gate's first look reads the coarse clock: the kernel's time at its
 * last tick, which the vDSO returns without reading the TSC (the precise
 * read was a third of what the gate added to an H200 launch). It lags the
 * precise clock by about a tick (4 ms here; up to 5.9 ms seen on a loaded
 * 2-core VM), so a grant that ends more than g_coarse_slack_ns after it is
 * still on, and only in a grant's last g_coarse_slack_ns does the precise
 * clock decide. Without a coarse clock the slack is so large that it
 * always does. Set once, in the constructor. */
#define GMT_COARSE_SLACK_MIN_NS 10000000LL
static int64_t g_coarse_slack_ns = INT64_MAX / 2;

static inline int64_t coarse_ns(void)
{
  struct timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
    return INT64_MAX; /* not on: the precise clock decides */
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The grant of d is still on (its expiry is 0 once given back or cut). */
static inline int grant_on(tok_dev_t *d)
{
  int64_t expiry = atomic_load_explicit(&d->expiry, memory_order_relaxed);
  return coarse_ns() < expiry - g_coarse_slack_ns || now_ns() < expiry;
}

/* ---- the RPC ---- */

/* why (may be NULL): the refusal's words, when there is one. terms (may be
 * NULL): the grant's. */
static int token_rpc(int dev, double burst_ms, double overuse_ms, int release, double idle_ms,
                     double *quota_ms, gmt_token_terms_t *terms, int timeout_ms, char *why,
                     size_t why_len)
{
  Gmt__TokenRequest r = GMT__TOKEN_REQUEST__INIT;
  r.pid = (uint32_t)getpid();
  r.device = gmt__node_device(dev);
  r.burst_ms = burst_ms;
  r.overuse_ms = overuse_ms;
  r.release = release != 0;
  r.idle_ms = idle_ms;
  r.bell = gmt__bell_have() != 0;
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
    if (rc == 0) {
      *quota_ms = rep->token_rep->quota_ms;
      if (terms)
        *terms = gmt_token_terms_of(rep->token_rep);
    } else
      GMT_HOOK_DEBUG("token request refused on device %d: %s (%s)", dev, gmt_strerror(rc), err);
    if (rc < 0 && why)
      snprintf(why, why_len, "%s", err[0] ? err : gmt_strerror(rc));
    gmt_wire_free(rep);
  }
  return rc;
}

/* ---- the idle thread ---- */

/* Waits for the work queued so far on d's context and notes when it was
 * done (d->mu held). */
static void drain(tok_dev_t *d, uint64_t launches, int64_t last_ns)
{
  __typeof__(&cuCtxPushCurrent_v2) push = GMT_REAL(cuCtxPushCurrent_v2);
  __typeof__(&cuCtxPopCurrent_v2) pop = GMT_REAL(cuCtxPopCurrent_v2);
  __typeof__(&cuCtxSynchronize) sync = GMT_REAL(cuCtxSynchronize);
  if (!push || !pop || !sync || !d->ctx || push(d->ctx) != CUDA_SUCCESS)
    return; /* then only the quota ends the grant */
  int64_t start = now_ns();
  CUresult rc = sync();
  int64_t end = now_ns();
  CUcontext c;
  pop(&c);
  if (rc != CUDA_SUCCESS)
    GMT_HOOK_DEBUG("idle thread: waiting for the queued work failed (%d)", (int)rc);
  uint64_t after = atomic_load_explicit(&gmt__launches, memory_order_relaxed);
  gmt__busy_drained(&d->b, launches, rc == CUDA_SUCCESS ? after : after + 1, last_ns, start, end);
}

/* d's grant no longer held here (d->mu held): given back, or spent. */
static void let_go(tok_dev_t *d)
{
  d->held = 0;
  atomic_store_explicit(&d->alone, 0, memory_order_relaxed);
  atomic_fetch_sub(&gmt__token_held, 1);
}

/* d's grant given back (d->mu held); e says how it ended. */
static void give_back(tok_dev_t *d, int dev, gmt_busy_end_t e, int timeout_ms, const char *why)
{
  atomic_store_explicit(&d->expiry, 0, memory_order_relaxed);
  let_go(d);
  /* The grant ends here, before the release's round trip (a test of the
   * pins made ahead reads the time). */
  GMT_HOOK_DEBUG("device %d %s: letting the token go", dev, why);
  double q = 0;
  int rc = token_rpc(dev, 0, e.overuse_ms, 1, e.idle_ms, &q, NULL, timeout_ms, NULL, 0);
  atomic_store_explicit(&d->bound_us, 0, memory_order_relaxed);
  atomic_store_explicit(&d->bell_left_ns, 0, memory_order_relaxed);
  GMT_HOOK_DEBUG("device %d %s: token given back (%s), overuse %.1f ms, unused %.1f ms, burst "
                 "estimate %.1f ms",
                 dev, why, rc == 0 ? "ok" : gmt_strerror(rc), e.overuse_ms, e.idle_ms,
                 d->b.burst_ema_ms);
}

/* One look at device dev: the launch counter is launches, last seen to
 * move at last_ns. */
static void idle_step(tok_dev_t *d, int dev, uint64_t launches, int64_t last_ns)
{
  if (atomic_load(&gmt__swap_waiting) > 0)
    return; /* waiting for room to bring memory back: busy (swap.h) */
  uint64_t held_bytes = gmt__swap_claimed(dev);
  if (pthread_mutex_trylock(&d->mu) != 0)
    return; /* a launch is in the slow path: not idle */
  if (d->held) {
    gmt__busy_held(&d->b, held_bytes);
    switch (gmt__busy_next(&d->b, launches, last_ns, now_ns())) {
    case GMT_BUSY_DRAIN:
      if (atomic_load_explicit(&d->latency, memory_order_relaxed))
        gmt__bell_ring_drain(dev, now_ns());
      drain(d, launches, last_ns);
      /* A latency process's work is done: batch pods go on at once. */
      if (d->b.drained_ns && atomic_load_explicit(&d->latency, memory_order_relaxed))
        gmt__bell_hush(dev, now_ns());
      break;
    case GMT_BUSY_IDLE:
      give_back(d, dev, gmt__busy_end(&d->b, now_ns(), 1), GMT_TOKEN_RELEASE_TIMEOUT_MS, "idle");
      d->ahead_ok = d->ahead_us > 0;
      break;
    default: break;
    }
  }
  pthread_mutex_unlock(&d->mu);
}

/* Whether the one grant held has the device to itself (TokenReply.alone). */
static int one_alone(void)
{
  if (atomic_load(&gmt__token_held) != 1)
    return 0;
  for (int i = 0; i < GMT_TOKEN_MAX_DEVICES; i++)
    if (atomic_load_explicit(&g_dev[i].alone, memory_order_relaxed))
      return 1;
  return 0;
}

static void *idle_main(void *arg)
{
  (void)arg;
  uint64_t seen = 0, seen_mem = 0;
  int64_t seen_ns = 0;
  int launching = 0; /* the last look saw the launch counter move */
  pthread_mutex_lock(&g_idle_mu);
  for (;;) {
    if (atomic_load(&gmt__token_held) == 0) {
      while (atomic_load(&gmt__token_held) == 0)
        pthread_cond_wait(&g_idle_cv, &g_idle_mu);
      /* A new busy period: the counter's past says nothing about it. */
      seen = atomic_load_explicit(&gmt__launches, memory_order_relaxed);
      seen_mem = gmt__state_calls();
      seen_ns = now_ns();
      atomic_store_explicit(&g_activity_ns, seen_ns, memory_order_relaxed);
      launching = 0;
    }
    pthread_mutex_unlock(&g_idle_mu);

    /* A latency grant is looked at more often, one alone on the device
     * that keeps launching less (busy.h: the ticks). */
    int64_t fast = atomic_load_explicit(&g_fast_until_ns, memory_order_relaxed);
    struct timespec ts = {0, gmt__busy_sleep_ns(now_ns() < fast, one_alone(), launching)};
    nanosleep(&ts, NULL);
    uint64_t n = atomic_load_explicit(&gmt__launches, memory_order_relaxed);
    uint64_t mem = gmt__state_calls();
    launching = n != seen;
    /* A wait for room to bring memory back is activity: the quiet after
     * it counts from its end, not from the last launch before it (an
     * allocation that waited 300 ms in a swap turn gave the turn away
     * before its first launch). So are allocations and frees: PyTorch
     * released 4.5 GiB of cached pages (expandable segments) in 0.47 s
     * as a swap turn began, at the hook's own asking before a move out,
     * launching nothing, and the turn went back after 250 ms (H200). */
    if (n != seen || mem != seen_mem || atomic_load(&gmt__swap_waiting) > 0) {
      seen = n;
      seen_mem = mem;
      seen_ns = now_ns();
      atomic_store_explicit(&g_activity_ns, seen_ns, memory_order_relaxed);
    }
    for (int i = 0; i < GMT_TOKEN_MAX_DEVICES && atomic_load(&gmt__token_held) > 0; i++)
      idle_step(&g_dev[i], i, n, seen_ns);
    pthread_mutex_lock(&g_idle_mu);
  }
  return NULL;
}

/* d->held was just set (under d->mu). */
static void held_one_more(void)
{
  atomic_fetch_add(&gmt__token_held, 1);
  pthread_mutex_lock(&g_idle_mu);
  if (!g_idle_started) {
    g_idle_started = gmt__thread_start("gmt-idle", idle_main) == 0;
    if (!g_idle_started)
      GMT_HOOK_DEBUG("cannot start the idle thread: tokens go back only when they run out");
  }
  pthread_cond_signal(&g_idle_cv);
  pthread_mutex_unlock(&g_idle_mu);
}

/* ---- the watch thread ---- */

/* Whether rc says the other side does not serve TokenWatch at all. */
static int watch_unknown(int rc)
{
  return rc == GMT_EUNIMPL || rc == -EINVAL || rc == GMT_EDECODE || rc == GMT_EUNEXPECTED;
}

static int watch_rpc(int dev, int *revoked)
{
  Gmt__TokenWatchRequest r = GMT__TOKEN_WATCH_REQUEST__INIT;
  r.pid = (uint32_t)getpid();
  r.device = gmt__node_device(dev);
  Gmt__Envelope env = GMT__ENVELOPE__INIT;
  env.body_case = GMT__ENVELOPE__BODY_TOKEN_WATCH_REQ;
  env.token_watch_req = &r;
  Gmt__Envelope *rep = NULL;
  int rc = gmt__channel_call(GMT_CH_WATCH, &env, &rep, GMT_TOKEN_WATCH_TIMEOUT_MS);
  if (rc == 0) {
    char err[256] = "";
    rc = gmt_wire_expect(rep, GMT__ENVELOPE__BODY_TOKEN_WATCH_REP, err, sizeof err);
    *revoked = rc == 0 && rep->token_watch_rep->revoked;
    if (rc < 0)
      GMT_HOOK_DEBUG("token watch on device %d: %s (%s)", dev, gmt_strerror(rc), err);
    gmt_wire_free(rep);
  }
  return rc;
}

/* The grant on device dev was cut short, as answered at answered_ns: no
 * new launch, the queued work runs, the token goes back. The grant held
 * now is the one cut if it began before the answer; one that began after
 * (this process's launch asked again while the answer waited for d->mu)
 * is a new grant, and stays. */
static void revoked(tok_dev_t *d, int dev, int64_t answered_ns)
{
  atomic_store_explicit(&d->expiry, 0, memory_order_relaxed);
  pthread_mutex_lock(&d->mu);
  if (d->held && d->b.grant_ns <= answered_ns) {
    uint64_t n = atomic_load_explicit(&gmt__launches, memory_order_relaxed);
    drain(d, n, atomic_load_explicit(&g_activity_ns, memory_order_relaxed));
    atomic_store(&gmt__token_cut_ms, gmt_now_ms());
    give_back(d, dev, gmt__busy_end(&d->b, now_ns(), 0), GMT_TOKEN_RELEASE_TIMEOUT_MS, "cut short");
  }
  pthread_mutex_unlock(&d->mu);
}

static void *watch_main(void *arg)
{
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&g_watch_mu);
    while (g_watch_dev < 0)
      pthread_cond_wait(&g_watch_cv, &g_watch_mu);
    int dev = g_watch_dev;
    g_watch_dev = -1;
    pthread_mutex_unlock(&g_watch_mu);

    int cut = 0, rc = watch_rpc(dev, &cut);
    GMT_HOOK_DEBUG("device %d: token watch answered: %s", dev,
                   rc < 0 ? gmt_strerror(rc)
                   : cut  ? "cut short"
                          : "grant over");
    if (rc == 0 && cut) {
      revoked(&g_dev[dev], dev, now_ns());
    } else if (rc < 0 && watch_unknown(rc)) {
      GMT_HOOK_DEBUG("the pod manager does not serve TokenWatch (%s): grants run their course",
                     gmt_strerror(rc));
      atomic_store(&g_watch_off, 1);
      return NULL;
    } else if (rc < 0) {
      struct timespec ts = {GMT_TOKEN_WATCH_RETRY_S, 0};
      nanosleep(&ts, NULL);
    }
  }
  return NULL;
}

/* Device dev was just granted (under its mu): the watch thread watches it. */
static void watch_grant(int dev)
{
  if (atomic_load(&g_watch_off))
    return;
  pthread_mutex_lock(&g_watch_mu);
  if (!g_watch_started) {
    g_watch_started = gmt__thread_start("gmt-watch", watch_main) == 0 ? 1 : -1;
    if (g_watch_started < 0)
      GMT_HOOK_DEBUG("cannot start the token watch thread: grants run their course");
  }
  g_watch_dev = dev;
  pthread_cond_signal(&g_watch_cv);
  pthread_mutex_unlock(&g_watch_mu);
}

static void set_all_ungated(void)
{
  for (int i = 0; i < GMT_TOKEN_MAX_DEVICES; i++)
    atomic_store_explicit(&g_dev[i].expiry, INT64_MAX, memory_order_relaxed);
}

/* A grant of quota_ms came at t (d->mu held, d->ctx set); terms.turn_ms:
 * a swap pod's turn, as gmt-schd planned it (0: none). */
static void install(tok_dev_t *d, int dev, int64_t t, double quota, gmt_token_terms_t terms,
                    double overuse)
{
  d->denied_said = 0;
  d->held = 1;
  d->ahead_ok = 0;
  d->ahead_us = terms.ahead_us;
  gmt__busy_grant(&d->b, t, quota, terms.idle_us);
  gmt__busy_turn(&d->b, terms.turn_ms);
  gmt__busy_held(&d->b, gmt__swap_claimed(dev));
  atomic_store_explicit(&d->bound_us, terms.queue_bound_us, memory_order_relaxed);
  atomic_store_explicit(&d->latency, terms.idle_us > 0, memory_order_relaxed);
  atomic_store_explicit(&d->alone, terms.alone != 0, memory_order_relaxed);
  atomic_store(&gmt__token_cut_ms, 0);
  atomic_store_explicit(&d->bell_left_ns, (int64_t)terms.bell_max_us * 1000, memory_order_relaxed);
  if (terms.idle_us || terms.bell_max_us)
    gmt__bell_need(t);
  if (terms.idle_us)
    atomic_store_explicit(&g_fast_until_ns, d->b.expiry_ns, memory_order_relaxed);
  atomic_store_explicit(&d->expiry, d->b.expiry_ns, memory_order_relaxed);
  held_one_more();
  watch_grant(dev);
  GMT_HOOK_DEBUG("device %d: token for %.1f ms (overuse %.1f ms, burst estimate %.1f ms, "
                 "queue bound %u us, idle after %u us, ahead %u us, bell heeded %u us, swap turn "
                 "%u ms%s)",
                 dev, quota, overuse, d->b.burst_ema_ms, terms.queue_bound_us, terms.idle_us,
                 terms.ahead_us, terms.bell_max_us, terms.turn_ms, terms.alone ? ", alone" : "");
  if (atomic_exchange(&g_outage, 0) | atomic_exchange(&g_refused, 0))
    gmt__say("tokens from the pod manager again");
}

/* ---- launching ahead ---- */

/* The ask thread's request for device dev; its answer decides what the
 * launches that went ahead become: a grant, or (any other answer) the
 * next launch waits in gate_slow, which asks again and says what went
 * wrong. */
static void ask_one(tok_dev_t *d, int dev)
{
  pthread_mutex_lock(&d->mu);
  double burst = d->b.burst_ema_ms, overuse = d->ahead_owed_ms;
  d->ahead_owed_ms = 0;
  pthread_mutex_unlock(&d->mu);

  double quota = 0;
  gmt_token_terms_t terms = {0};
  int rc = token_rpc(dev, burst, overuse, 0, 0, &quota, &terms, GMT_TOKEN_RPC_TIMEOUT_MS, NULL, 0);
  int64_t t = now_ns();
  pthread_mutex_lock(&d->mu);
  /* Charged from the launch that went ahead until the answer: half a
   * trip more than the GPU ran ahead of the grant, never less. */
  d->ahead_owed_ms += (double)(t - d->ahead_ns) / 1e6;
  if (rc == 0 && quota > 0) {
    install(d, dev, t, quota, terms, overuse);
  } else {
    GMT_HOOK_DEBUG("device %d: no grant after launching ahead (%s): the next launch waits", dev,
                   rc == 0 ? "a grant of nothing" : gmt_strerror(rc));
    d->ahead_owed_ms += overuse; /* not charged: sent again */
    atomic_store_explicit(&d->expiry, 0, memory_order_relaxed);
  }
  d->asking = 0;
  pthread_cond_broadcast(&d->answered);
  pthread_mutex_unlock(&d->mu);
}

static void *ask_main(void *arg)
{
  (void)arg;
  pthread_mutex_lock(&g_ask_mu);
  for (;;) {
    while (!g_ask_pending)
      pthread_cond_wait(&g_ask_cv, &g_ask_mu);
    int dev = __builtin_ctzll(g_ask_pending);
    g_ask_pending &= ~(1ull << dev);
    pthread_mutex_unlock(&g_ask_mu);
    ask_one(&g_dev[dev], dev);
    pthread_mutex_lock(&g_ask_mu);
  }
  return NULL;
}

/* Whether the launch on d may go ahead of its grant: then the ask thread
 * asks for it (d->mu held; the launch passes until ahead_us has gone by). */
static int go_ahead(tok_dev_t *d, int dev, int64_t now)
{
  if (!d->ahead_ok || d->held)
    return 0;
  d->ahead_ok = 0;
  pthread_mutex_lock(&g_ask_mu);
  if (!g_ask_started) {
    g_ask_started = gmt__thread_start("gmt-ask", ask_main) == 0 ? 1 : -1;
    if (g_ask_started < 0)
      GMT_HOOK_DEBUG("cannot start the ask thread: launches wait for their grants");
  }
  int ok = g_ask_started > 0;
  if (ok) {
    g_ask_pending |= 1ull << dev;
    pthread_cond_signal(&g_ask_cv);
  }
  pthread_mutex_unlock(&g_ask_mu);
  if (!ok)
    return 0;
  d->asking = 1;
  d->ahead_ns = now;
  d->ctx = t_ctx;
  atomic_store_explicit(&d->expiry, now + (int64_t)d->ahead_us * 1000, memory_order_relaxed);
  GMT_HOOK_DEBUG("device %d: launching ahead of the next grant (for at most %u us)", dev,
                 d->ahead_us);
  return 1;
}

/* Waits for the ask thread's answer on d (d->mu held): its request is
 * bounded by GMT_TOKEN_RPC_TIMEOUT_MS, after which it clears asking
 * whatever the answer, so this wait is too. */
static void wait_asked(tok_dev_t *d)
{
  while (d->asking)
    gmt__cond_wait_ms(&d->answered, &d->mu, 1000);
}

/* ---- the gate ---- */

/* A launch starts waiting in the slow path: returns when. */
static int64_t wait_begin(void)
{
  int64_t t = now_ns();
  if (atomic_fetch_add(&gmt__token_waiters, 1) == 0)
    atomic_store_explicit(&gmt__token_waiting_since_ns, t, memory_order_relaxed);
  return t;
}

/* ... and stops, having spent own_ns of it waiting for its own queued
 * work (a grant's end): not a wait for the token. The per-call logs get
 * the whole hold as tokenWait (calllog.h), own_ns with it: the gate held
 * the launch for both; passed: it was let through or refused at once,
 * no hold. */
static void wait_end(int64_t t0, int64_t own_ns, int passed)
{
  int64_t end = now_ns(), waited = end - t0 - own_ns;
  if (!passed)
    gmt__calllog_gate_held(t0, end - t0);
  if (waited > 0)
    atomic_fetch_add_explicit(&gmt__token_wait_ns, (uint64_t)waited, memory_order_relaxed);
  /* The oldest wait's start is kept while others go on: slightly early
   * for the rest, never late. */
  if (atomic_fetch_sub(&gmt__token_waiters, 1) == 1)
    atomic_store_explicit(&gmt__token_waiting_since_ns, 0, memory_order_relaxed);
}

static CUresult gate_slow_timed(tok_dev_t *d, int dev, int64_t *own_ns, int *passed);

__attribute__((noinline)) static CUresult gate_slow(tok_dev_t *d, int dev)
{
  int64_t own_ns = 0, t0 = wait_begin();
  int passed = 0;
  CUresult rc = gate_slow_timed(d, dev, &own_ns, &passed);
  wait_end(t0, own_ns, passed);
  return rc;
}

/* A token refusal's why, as a bit of g_refused: a pod the config does
 * not list, LIMIT 0 by the scheduler, or the pod manager's own refusal
 * while the scheduler is unreachable (its words begin "gmt-pmgr"). */
static unsigned refused_bit(int rc, const char *why)
{
  if (!strncmp(why, "gmt-pmgr", 8))
    return 4u;
  return rc == GMT_ENOPOD ? 1u : 2u;
}

static CUresult gate_slow_timed(tok_dev_t *d, int dev, int64_t *own_ns, int *passed)
{
  /* A forked child that launches before anything else registers here. */
  gmt__report_ensure();
  pthread_mutex_lock(&d->mu);
  wait_asked(d); /* launches that went ahead ran out of time: the answer decides */
  int64_t now = now_ns();
  if (now < atomic_load_explicit(&d->expiry, memory_order_relaxed)) {
    pthread_mutex_unlock(&d->mu); /* another thread got it meanwhile */
    return CUDA_SUCCESS;
  }
  if (now < d->denied_until) {
    /* Refused a moment ago: not a GPU of the pod, or failing closed. */
    pthread_mutex_unlock(&d->mu);
    *passed = 1;
    return d->denied_rc;
  }
  double overuse = 0;
  if (d->held) {
    /* The quota ran out: no launch until the work queued under it has run
     * (the next pod's grant must not start behind it). Its time past the
     * quota is charged to the pod. */
    __typeof__(&cuCtxSynchronize) sync = GMT_REAL(cuCtxSynchronize);
    uint64_t before = atomic_load_explicit(&gmt__launches, memory_order_relaxed);
    if (sync)
      sync();
    int64_t after = now_ns();
    *own_ns = after - now;
    gmt__busy_drained(&d->b, before, atomic_load_explicit(&gmt__launches, memory_order_relaxed),
                      atomic_load_explicit(&g_activity_ns, memory_order_relaxed), now, after);
    overuse = gmt__busy_end(&d->b, after, 0).overuse_ms;
    let_go(d);
    GMT_HOOK_DEBUG("device %d: quota spent; its queued work ran %.1f ms past it", dev, overuse);
  } else if (go_ahead(d, dev, now)) {
    pthread_mutex_unlock(&d->mu);
    *passed = 1;
    return CUDA_SUCCESS;
  }
  overuse += d->ahead_owed_ms;
  d->ahead_owed_ms = 0;

  double quota = 0;
  int rc;
  /* A refusal (a pod the config does not list, LIMIT 0) is an answer: the
   * pod gets no GPU time, so the launch waits until it does. */
  double burst = d->b.burst_ema_ms;
  char why[256] = "";
  gmt_token_terms_t terms = {0};
  while ((rc = token_rpc(dev, burst, overuse, 0, 0, &quota, &terms, GMT_TOKEN_RPC_TIMEOUT_MS, why,
                         sizeof why)) == GMT_ENOPOD ||
         rc == -EPERM) {
    /* The scheduler's words say which pod, why and what to change;
     * the pod manager's own (gmt-schd unreachable) say so. Once per why. */
    unsigned bit = refused_bit(rc, why);
    if (!(atomic_fetch_or(&g_refused, bit) & bit))
      gmt__say("launches on device %d wait for GPU time: %s (said once; launches go on once "
               "the pod gets some)",
               dev, why[0] ? why : gmt_strerror(rc));
    struct timespec ts = {GMT_TOKEN_REFUSED_WAIT_MS / 1000, 0};
    nanosleep(&ts, NULL);
    overuse = 0;
  }
  int64_t t = now_ns();
  CUresult out = CUDA_SUCCESS;
  if (rc == GMT_EDEVICE) {
    /* Not one of the pod's GPUs (devices=): the launch fails, as on a GPU
     * the process may not use, instead of waiting for a token that never
     * comes. Asked again a second later. */
    d->denied_until = t + (int64_t)GMT_TOKEN_REFUSED_WAIT_MS * 1000000;
    d->denied_rc = CUDA_ERROR_INVALID_DEVICE;
    if (!d->denied_said) {
      d->denied_said = 1;
      gmt__say("launches on device %d fail with CUDA_ERROR_INVALID_DEVICE: %s", dev, why);
    }
    out = CUDA_ERROR_INVALID_DEVICE;
  } else if (rc == 0 && quota > 0) {
    d->ctx = t_ctx;
    install(d, dev, t, quota, terms, overuse);
  } else if (gmt__reserve_fails_closed() && !gmt__reserve_limit_heard()) {
    /* GMT_FAIL_CLOSED and no pod manager has ever known this process: its
     * launches fail rather than run outside every share, and ask again a
     * second later. One that was known keeps the outage policy below. */
    d->denied_until = t + (int64_t)GMT_TOKEN_REFUSED_WAIT_MS * 1000000;
    d->denied_rc = CUDA_ERROR_NOT_PERMITTED;
    if (!d->denied_said) {
      d->denied_said = 1;
      gmt__say("GMT_FAIL_CLOSED: no pod manager has registered this process (%s); launches on "
               "device %d fail with CUDA_ERROR_NOT_PERMITTED until one does",
               gmt_strerror(rc), dev);
    }
    out = CUDA_ERROR_NOT_PERMITTED;
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
  return out;
}

/* The device of the calling thread's context, -1 without one. */
static inline int gate_device(void)
{
  __typeof__(&cuCtxGetCurrent) cur = GMT_REAL(cuCtxGetCurrent);
  CUcontext c = NULL;
  if (!cur || cur(&c) != CUDA_SUCCESS || !c)
    return -1; /* the launch fails on its own */
  if (c == t_ctx)
    return t_dev;
  t_ctx = c;
  t_dev = gmt__current_device();
  return t_dev;
}

/* A batch launch while a latency pod may need the GPU: it waits while the
 * bell rings (within its grant's allowance), then passes the gate again,
 * since the grant may have been cut short meanwhile. */
static CUresult heed_bell(tok_dev_t *d, int dev)
{
  int64_t left = atomic_load_explicit(&d->bell_left_ns, memory_order_relaxed);
  if (left <= 0)
    return CUDA_SUCCESS;
  int64_t waited = gmt__bell_heed(dev, left, gmt__queue_launch_ns(dev));
  if (!waited)
    return CUDA_SUCCESS;
  atomic_fetch_sub_explicit(&d->bell_left_ns, waited, memory_order_relaxed);
  atomic_fetch_add_explicit(&gmt__bell_wait_ns, (uint64_t)waited, memory_order_relaxed);
  int64_t end = now_ns();
  gmt__calllog_gate_held(end - waited, waited); /* a hold at the gate too (calllog.h) */
  return end < atomic_load_explicit(&d->expiry, memory_order_relaxed) ? CUDA_SUCCESS
                                                                      : gate_slow(d, dev);
}

CUresult gmt__token_check(void)
{
  int dev = gate_device();
  if ((unsigned)dev >= GMT_TOKEN_MAX_DEVICES)
    return CUDA_SUCCESS;
  tok_dev_t *d = &g_dev[dev];
  CUresult rc = grant_on(d) ? CUDA_SUCCESS : gate_slow(d, dev);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (atomic_load_explicit(&d->latency, memory_order_relaxed))
    gmt__bell_ring(dev, now_ns()); /* after any wait in gate_slow: a ring starts from now */
  uint32_t bound = atomic_load_explicit(&d->bound_us, memory_order_relaxed);
  if (bound) {
    rc = heed_bell(d, dev);
    if (rc == CUDA_SUCCESS)
      gmt__queue_before(dev, bound);
  }
  return rc;
}

/* The latency device the calling thread synchronizes on, or -1. */
static int sync_device(void)
{
  int dev = gate_device();
  return (unsigned)dev < GMT_TOKEN_MAX_DEVICES &&
                 atomic_load_explicit(&g_dev[dev].latency, memory_order_relaxed)
             ? dev
             : -1;
}

void gmt__token_syncing(void)
{
  int dev = sync_device();
  if (dev >= 0)
    gmt__bell_ring_drain(dev, now_ns());
}

void gmt__token_synced(void)
{
  int dev = sync_device();
  if (dev >= 0)
    gmt__bell_hush(dev, now_ns());
}

void gmt__token_gate(void)
{
  (void)gmt__token_check();
}

CUresult gmt__token_check_stream(CUstream s)
{
  __typeof__(&cuStreamGetCtx) get = GMT_REAL(cuStreamGetCtx);
  __typeof__(&cuCtxPushCurrent_v2) push = GMT_REAL(cuCtxPushCurrent_v2);
  __typeof__(&cuCtxPopCurrent_v2) pop = GMT_REAL(cuCtxPopCurrent_v2);
  CUcontext c = NULL;
  if (s && get && push && pop && get(s, &c) == CUDA_SUCCESS && c && push(c) == CUDA_SUCCESS) {
    CUresult rc = gmt__token_check();
    pop(&c);
    return rc;
  }
  return gmt__token_check();
}

/* ---- exit and fork ---- */

__attribute__((destructor)) static void token_dtor(void)
{
  if (atomic_load(&gmt__token_held) == 0)
    return;
  /* A thread waiting for a token holds the channel: the pod manager sees
   * the exit anyway, so do not wait behind it. */
  if (atomic_load(&g_rpc_inflight) > 0)
    return;
  for (int i = 0; i < GMT_TOKEN_MAX_DEVICES && atomic_load(&gmt__token_held) > 0; i++) {
    tok_dev_t *d = &g_dev[i];
    if (pthread_mutex_trylock(&d->mu) != 0)
      continue;
    if (d->held)
      give_back(d, i, (gmt_busy_end_t){0, 0}, GMT_TOKEN_EXIT_TIMEOUT_MS, "exit");
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
    d->ctx = NULL;
    d->b = (gmt_busy_t){0};
    d->denied_until = 0;
    d->denied_said = 0;
    atomic_store_explicit(&d->bound_us, 0, memory_order_relaxed);
    atomic_store_explicit(&d->latency, 0, memory_order_relaxed);
    atomic_store_explicit(&d->alone, 0, memory_order_relaxed);
    atomic_store_explicit(&d->bell_left_ns, 0, memory_order_relaxed);
    d->ahead_us = 0;
    d->ahead_ok = 0;
    d->asking = 0;
    d->ahead_owed_ms = 0;
    pthread_cond_init(&d->answered, NULL);
  }
  atomic_store(&gmt__token_held, 0);
  atomic_store(&g_rpc_inflight, 0);
  atomic_store(&g_outage, 0);
  atomic_store(&g_refused, 0);
  pthread_mutex_init(&g_idle_mu, NULL);
  pthread_cond_init(&g_idle_cv, NULL);
  g_idle_started = 0;
  pthread_mutex_init(&g_watch_mu, NULL);
  pthread_cond_init(&g_watch_cv, NULL);
  g_watch_started = 0;
  g_watch_dev = -1;
  pthread_mutex_init(&g_ask_mu, NULL);
  pthread_cond_init(&g_ask_cv, NULL);
  g_ask_started = 0;
  g_ask_pending = 0;
  gmt__queue_child();
  t_ctx = NULL;
  t_dev = -1;
}

static const gmt_fork_ops_t g_fork_ops = {.child = token_child};

__attribute__((constructor)) static void token_register(void)
{
  gmt__fork_register(GMT_LOCK_TOKEN, &g_fork_ops);
  struct timespec res;
  if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 && res.tv_sec == 0) {
    int64_t slack = 4LL * res.tv_nsec;
    g_coarse_slack_ns = slack > GMT_COARSE_SLACK_MIN_NS ? slack : GMT_COARSE_SLACK_MIN_NS;
  }
}
