/* Pin advice, the hook's side (see pin.h). The per-buffer state lives in
 * the heap's records and, with the rates and the queues below, under the
 * heap lock; the lock is never held across an RPC or a driver call. */
#include "pin.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "channel.h"
#include "driver.h"
#include "fork.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_wire.h"
#include "heap.h"
#include "log.h"
#include "thread.h"

#define ADVISE_TIMEOUT_MS 500
#define RETRY_MS 1000 /* a buffer refused for the budget is asked again after this */
#define COLD_MS 1000  /* a pinned buffer not copied for this long may make room */
/* In adaptive mode a pinned buffer not copied for this long goes back to
 * pageable even when the budget is not short (GMT_PIN_IDLE_MS for tests):
 * long enough that a pause between epochs keeps it, short enough that a
 * phase that is over gives its pins back to the node. */
#define IDLE_UNPIN_MS 10000
#define MEASURE_MIN (256 << 10) /* copies this small time the call, not the bus */
#define HISTORY_CAP 1024
/* Grants are asked for in chunks, so that a run of pins makes one Advise;
 * what is left is given back after SLACK_IDLE_MS without a pin. */
#define CHUNK ((uint64_t)64 << 20)
#define SLACK_IDLE_MS 100
#define EWMA 0.25

/* Until measured: PCIe Gen5 as measured on an H100/H200 (docs/pinning.md):
 * pageable copies ~12 GB/s, pinned ~50 GB/s, cuMemHostRegister ~46 ms/GiB;
 * unregistering is taken to cost as much as registering until timed. */
#define PRIOR_PAGEABLE_NPB (1.0 / 12.0)
#define PRIOR_PINNED_NPB (1.0 / 50.0)
#define PRIOR_REG_NPB (46e6 / 1073741824.0)

static _Atomic int g_mode = -1; /* Gmt__PinMode; -1 until registration says */
static _Atomic uint64_t g_advised;

/* Under the heap lock. */
static struct {
  double pageable_npb, pinned_npb, reg_npb, unreg_npb; /* ns per byte */
  int pageable_seen, pinned_seen, reg_seen, unreg_seen;
  uint64_t release; /* advised bytes unpinned, not yet given back */
  uint64_t slack;   /* granted in a chunk and not pinned yet */
  uint64_t slack_used_ms;
  uint64_t budget_until_ms;
  /* The reporter thread's alone: adaptive's idle time before a pin goes,
   * and when it last looked. */
  uint64_t idle_unpin_ms, idle_scan_ms;
  size_t nhist;
  struct hist {
    char module[GMT_HEAP_MODULE_MAX];
    uint64_t offset, size, copies[2], bytes[2];
    uint32_t nth;
    double lifetime_ms;
  } hist[HISTORY_CAP];
} g = {.pageable_npb = PRIOR_PAGEABLE_NPB,
       .pinned_npb = PRIOR_PINNED_NPB,
       .reg_npb = PRIOR_REG_NPB,
       .unreg_npb = PRIOR_REG_NPB};

static char g_exe[4096];

uint64_t gmt__pin_advised_bytes(void)
{
  return atomic_load_explicit(&g_advised, memory_order_relaxed);
}

/* A profile's size class: floor(log2(bytes)). */
static uint32_t size_class(uint64_t bytes)
{
  return bytes ? (uint32_t)(63 - __builtin_clzll((unsigned long long)bytes)) : 0;
}

static void ewma(double *v, int *seen, double x)
{
  *v = *seen ? (1 - EWMA) * *v + EWMA * x : x;
  *seen = 1;
}

/* ---- the driver ---- */

/* gmt's own pins, for the tracer: `gmt trace` puts a uprobe on this
 * exported no-op (bpf/probes.c) and marks the host buffer at addr as pinned
 * by gmt (pinned 1) or no longer (0). Called right after the driver call. */
GMT_EXPORT __attribute__((noinline, used)) void gmt_trace_pinned(const void *addr, size_t size,
                                                                 int pinned)
{
  __asm__ volatile("" : : "r"(addr), "r"(size), "r"(pinned) : "memory");
}

/* Registers [addr, addr+size) in the calling thread's context (portable:
 * any context's copies see it pinned). Returns the time it took, or -1. */
static double do_register(uintptr_t addr, size_t size, CUcontext *ctx)
{
  __typeof__(&cuMemHostRegister_v2) reg = GMT_REAL(cuMemHostRegister_v2);
  *ctx = gmt__current_ctx();
  if (!reg || !*ctx)
    return -1;
  uint64_t t0 = gmt_now_ns();
  CUresult rc = reg((void *)addr, size, CU_MEMHOSTREGISTER_PORTABLE);
  if (rc != CUDA_SUCCESS) {
    GMT_HOOK_DEBUG("pin: cuMemHostRegister of %zu bytes at %#lx failed (%d); left pageable", size,
                   (unsigned long)addr, (int)rc);
    return -1;
  }
  double ns = (double)(gmt_now_ns() - t0);
  gmt_trace_pinned((const void *)addr, size, 1);
  return ns;
}

/* Unregisters, in ctx when this thread has another one current; sync
 * first when the buffer stays live (a copy from it may be queued). */
static double do_unregister(uintptr_t addr, CUcontext ctx, int sync)
{
  __typeof__(&cuMemHostUnregister) unreg = GMT_REAL(cuMemHostUnregister);
  __typeof__(&cuCtxSynchronize) csync = GMT_REAL(cuCtxSynchronize);
  if (!unreg || !csync)
    return -1;
  int entered = gmt__ctx_enter(ctx);
  CUresult src = sync ? csync() : CUDA_SUCCESS;
  uint64_t t1 = gmt_now_ns();
  CUresult rc = src == CUDA_SUCCESS ? unreg((void *)addr) : src;
  uint64_t t2 = gmt_now_ns();
  gmt__ctx_leave(entered);
  if (rc != CUDA_SUCCESS) {
    GMT_HOOK_DEBUG("pin: cuMemHostUnregister at %#lx failed (%d)", (unsigned long)addr, (int)rc);
    return -1;
  }
  gmt_trace_pinned((const void *)addr, 0, 0);
  return (double)(t2 - t1);
}

/* ---- Advise ---- */

typedef struct {
  Gmt__PinSite site;
  const gmt_heap_site_t *where; /* the heap's site, for the site cache */
  uint64_t bytes;
  int pays_back;
} ask_t;

/* ---- pin=use: what the profile says of each site, kept ----
 *
 * The first answer about a site brings the profile's view of all its
 * buffers (AdviseReply.site_profiled, hot_nths); later buffers there that
 * are not hot are left pageable without asking. Under the heap lock. */

#define SITE_CACHE 256
#define SITE_NTHS 4096 /* nths past this are asked about one by one */

static struct site_answer {
  const gmt_heap_site_t *site; /* NULL: a free slot */
  uint32_t size_class;
  int profiled;
  uint8_t hot[SITE_NTHS / 8];
} g_sites[SITE_CACHE];

static struct site_answer *site_answer_locked(const gmt_heap_site_t *site, uint32_t size_class)
{
  for (size_t i = 0; i < SITE_CACHE && g_sites[i].site; i++)
    if (g_sites[i].site == site && g_sites[i].size_class == size_class)
      return &g_sites[i];
  return NULL;
}

static void keep_site_answer(const ask_t *q, const Gmt__AdviseReply *r)
{
  if (!q || !q->where)
    return;
  gmt__heap_lock();
  struct site_answer *a = site_answer_locked(q->where, q->site.size_class);
  for (size_t i = 0; !a && i < SITE_CACHE; i++)
    if (!g_sites[i].site)
      a = &g_sites[i];
  if (a) {
    memset(a, 0, sizeof *a);
    a->site = q->where;
    a->size_class = q->site.size_class;
    a->profiled = r->site_profiled;
    for (size_t i = 0; i < r->n_hot_nths; i++)
      if (r->hot_nths[i] < SITE_NTHS)
        a->hot[r->hot_nths[i] / 8] |= (uint8_t)(1u << (r->hot_nths[i] % 8));
  }
  gmt__heap_unlock();
}

/* Lock held: what the kept answer says of b (a PinReason: HOT, COLD or
 * UNPROFILED), or -1 when it must be asked about. */
static int known_answer_locked(const gmt_hostbuf_t *b)
{
  const struct site_answer *a = b->site ? site_answer_locked(b->site, size_class(b->size)) : NULL;
  if (!a)
    return -1;
  if (!a->profiled)
    return GMT__PIN_REASON__PIN_REASON_UNPROFILED;
  if (b->nth >= SITE_NTHS)
    return -1;
  return a->hot[b->nth / 8] & (1u << (b->nth % 8)) ? GMT__PIN_REASON__PIN_REASON_HOT
                                                   : GMT__PIN_REASON__PIN_REASON_COLD;
}

static void fill_site(Gmt__PinSite *s, const gmt_hostbuf_t *b)
{
  gmt__pin_site__init(s);
  s->module = (char *)(b->site ? b->site->module : "");
  s->offset = b->site ? b->site->offset : 0;
  s->nth = b->nth;
  s->size_class = size_class(b->size);
}

/* Queues b's history (lock held). */
static void note_history_locked(const gmt_hostbuf_t *b, uint64_t now)
{
  if (!b->pin.copies[0] && !b->pin.copies[1])
    return; /* never transferred: nothing to learn */
  if (g.nhist == HISTORY_CAP) {
    GMT_HOOK_DEBUG("pin: history queue full; a buffer's history is dropped");
    return;
  }
  struct hist *h = &g.hist[g.nhist++];
  snprintf(h->module, sizeof h->module, "%s", b->site ? b->site->module : "");
  h->offset = b->site ? b->site->offset : 0;
  h->nth = b->nth;
  h->size = b->size;
  memcpy(h->copies, b->pin.copies, sizeof h->copies);
  memcpy(h->bytes, b->pin.bytes, sizeof h->bytes);
  h->lifetime_ms = (double)(now - b->born_ms);
}

/* One Advise: asks about q (may be NULL: give back and record only) and
 * carries what is queued. *pin and *reason are the answer; returns 0, or
 * a negative code when no answer came (the queue is put back). */
static pthread_mutex_t g_advise_mu = PTHREAD_MUTEX_INITIALIZER; /* one Advise at a time */

static int advise_locked(const ask_t *q, int *pin, int *reason)
{
  static struct hist sent[HISTORY_CAP]; /* under g_advise_mu */
  if (!g_exe[0]) {
    ssize_t len = readlink("/proc/self/exe", g_exe, sizeof g_exe - 1);
    g_exe[len > 0 ? len : 0] = '\0';
  }
  gmt__heap_lock();
  uint64_t release = g.release;
  size_t nh = g.nhist;
  memcpy(sent, g.hist, nh * sizeof *sent);
  g.release = 0;
  g.nhist = 0;
  gmt__heap_unlock();

  static Gmt__BufferHistory hb[HISTORY_CAP];
  static Gmt__BufferHistory *hp[HISTORY_CAP];
  static Gmt__PinSite hs[HISTORY_CAP];
  for (size_t i = 0; i < nh; i++) {
    gmt__buffer_history__init(&hb[i]);
    gmt__pin_site__init(&hs[i]);
    hs[i].module = sent[i].module;
    hs[i].offset = sent[i].offset;
    hs[i].nth = sent[i].nth;
    hs[i].size_class = size_class(sent[i].size);
    hb[i].site = &hs[i];
    hb[i].size = sent[i].size;
    hb[i].h2d_copies = sent[i].copies[0];
    hb[i].d2h_copies = sent[i].copies[1];
    hb[i].h2d_bytes = sent[i].bytes[0];
    hb[i].d2h_bytes = sent[i].bytes[1];
    hb[i].lifetime_ms = sent[i].lifetime_ms;
    hp[i] = &hb[i];
  }
  Gmt__AdviseRequest rq = GMT__ADVISE_REQUEST__INIT;
  rq.pid = (uint32_t)getpid();
  rq.exe = g_exe;
  if (q) {
    rq.site = (Gmt__PinSite *)&q->site;
    rq.bytes = q->bytes;
    rq.pays_back = q->pays_back;
  }
  rq.release = release;
  rq.n_history = nh;
  rq.history = hp;
  Gmt__Envelope env = GMT__ENVELOPE__INIT;
  env.body_case = GMT__ENVELOPE__BODY_ADVISE_REQ;
  env.advise_req = &rq;
  Gmt__Envelope *rep = NULL;
  int rc = gmt__channel_down() ? -EHOSTDOWN
                               : gmt__channel_call(GMT_CH_MEMORY, &env, &rep, ADVISE_TIMEOUT_MS);
  char err[256] = "";
  if (rc == 0)
    rc = gmt_wire_expect(rep, GMT__ENVELOPE__BODY_ADVISE_REP, err, sizeof err);
  if (rc == 0) {
    *pin = rep->advise_rep->pin;
    *reason = rep->advise_rep->reason;
    if (q && atomic_load_explicit(&g_mode, memory_order_relaxed) == GMT__PIN_MODE__PIN_USE)
      keep_site_answer(q, rep->advise_rep);
  } else {
    GMT_HOOK_DEBUG("pin: Advise failed (%s%s%s)", gmt_strerror(rc), *err ? ": " : "", err);
    /* Keep what did not go out for the next one (histories that no
     * longer fit are dropped). */
    gmt__heap_lock();
    g.release += release;
    size_t room = HISTORY_CAP - g.nhist, k = nh < room ? nh : room;
    memmove(&g.hist[k], g.hist, g.nhist * sizeof *g.hist);
    memcpy(g.hist, sent, k * sizeof *sent);
    g.nhist += k;
    gmt__heap_unlock();
  }
  gmt_wire_free(rep);
  return rc;
}

static int advise(const ask_t *q, int *pin, int *reason)
{
  pthread_mutex_lock(&g_advise_mu);
  int rc = advise_locked(q, pin, reason);
  pthread_mutex_unlock(&g_advise_mu);
  return rc;
}

/* ---- giving pins back ---- */

static void unpinned(uint64_t size, double ns)
{
  atomic_fetch_sub_explicit(&g_advised, size, memory_order_relaxed);
  gmt__heap_lock();
  g.release += size;
  if (ns >= 0 && size >= MEASURE_MIN)
    ewma(&g.unreg_npb, &g.unreg_seen, ns / (double)size);
  gmt__heap_unlock();
}

/* The heap's gone callback: b's memory is going back. */
static void buffer_gone(gmt_hostbuf_t *b)
{
  if (b->pin.state == GMT_PINBUF_PINNED)
    unpinned(b->size, do_unregister(b->addr, (CUcontext)b->pin.ctx, 0));
  if (atomic_load_explicit(&g_mode, memory_order_relaxed) == GMT__PIN_MODE__PIN_PROFILE) {
    gmt__heap_lock();
    note_history_locked(b, gmt_now_ms());
    gmt__heap_unlock();
  }
}

typedef struct {
  uint64_t now, older_than;
  size_t n;
  struct {
    uint64_t id;
    uintptr_t addr;
    size_t size;
    void *ctx;
  } v[16];
} cold_t;

static void find_cold(gmt_hostbuf_t *b, void *arg)
{
  cold_t *c = arg;
  if (c->n < 16 && b->pin.state == GMT_PINBUF_PINNED && b->pin.last_copy_ms < c->older_than) {
    b->pin.state = GMT_PINBUF_ASKING; /* ours while we unpin it */
    c->v[c->n].id = b->id;
    c->v[c->n].addr = b->addr;
    c->v[c->n].size = b->size;
    c->v[c->n].ctx = b->pin.ctx;
    c->n++;
  }
}

/* Unpins this process's buffers not copied for cold_ms (the budget is
 * short, or in adaptive mode they went cold). Returns the bytes freed. */
static uint64_t unpin_cold(uint64_t cold_ms)
{
  cold_t c = {.now = gmt_now_ms()};
  c.older_than = c.now > cold_ms ? c.now - cold_ms : 0;
  gmt__heap_lock();
  gmt__heap_each_locked(find_cold, &c);
  gmt__heap_unlock();
  uint64_t freed = 0;
  for (size_t i = 0; i < c.n; i++) {
    /* It stays live: a copy from it may still be queued. */
    double ns = do_unregister(c.v[i].addr, (CUcontext)c.v[i].ctx, 1);
    gmt__heap_lock();
    gmt_hostbuf_t *b = gmt__heap_by_id_locked((const void *)c.v[i].addr, c.v[i].id);
    if (b)
      b->pin.state = ns >= 0 ? GMT_PINBUF_NONE : GMT_PINBUF_PINNED;
    gmt__heap_unlock();
    if (ns >= 0) {
      unpinned(c.v[i].size, ns);
      freed += c.v[i].size;
      GMT_HOOK_DEBUG("pin: unpinned a buffer of %zu bytes not copied for %llu ms", c.v[i].size,
                     (unsigned long long)cold_ms);
    }
  }
  return freed;
}

/* ---- the copy path ---- */

/* Whether b should be asked about now (lock held). */
static int wants_pin(const gmt_hostbuf_t *b, int mode, uint64_t now, int *pays_back)
{
  *pays_back = 0;
  if (b->pin.state != GMT_PINBUF_NONE || now < b->pin.retry_ms || now < g.budget_until_ms)
    return 0;
  switch (mode) {
  case GMT__PIN_MODE__PIN_PROFILE: return 1;
  case GMT__PIN_MODE__PIN_USE: return 1; /* unless the site's answer is kept (copy_begin) */
  case GMT__PIN_MODE__PIN_ADAPTIVE: {
    /* Ski rental: pin once the extra time its pageable copies took pays
     * for pinning it and unpinning it later. A buffer copied once shows
     * no reuse yet, whatever the rates say (pin late). */
    double cost = (double)b->size * (g.reg_npb + g.unreg_npb);
    *pays_back = b->pin.copies[0] + b->pin.copies[1] >= 2 && b->pin.paid_ns >= cost;
    return *pays_back;
  }
  default: return 0;
  }
}

/* Takes size from the slack when it holds that much. */
static int take_slack(uint64_t size)
{
  gmt__heap_lock();
  int ok = g.slack >= size;
  if (ok) {
    g.slack -= size;
    g.slack_used_ms = gmt_now_ms();
  }
  gmt__heap_unlock();
  return ok;
}

/* A grant for size, asked for as a chunk when one may be, and failing
 * that exactly (the budget may have room for the one but not the other).
 * Returns advise()'s code. */
static int grant(const ask_t *q, uint64_t size, int *pin, int *reason)
{
  ask_t c = *q;
  c.bytes = size < CHUNK ? CHUNK : size;
  int rc = advise(&c, pin, reason);
  if (rc == 0 && !*pin && *reason == GMT__PIN_REASON__PIN_REASON_BUDGET && c.bytes > size) {
    c.bytes = size;
    rc = advise(&c, pin, reason);
  }
  if (rc == 0 && *pin && c.bytes > size) {
    gmt__heap_lock();
    g.slack += c.bytes - size;
    g.slack_used_ms = gmt_now_ms();
    gmt__heap_unlock();
  }
  return rc;
}

/* Asks about buffer id (state ASKING) and pins it on a yes. sure: the
 * answer is known to be yes but for the budget (profile, adaptive's pay
 * back, use's kept hot site): the slack may do without asking. */
static void ask_and_pin(uint64_t id, const ask_t *q, uintptr_t addr, size_t size, int sure,
                        int sure_reason)
{
  int pin = 0, reason = GMT__PIN_REASON__PIN_REASON_UNREACHABLE, rc = 0;
  if (sure && take_slack(size)) {
    pin = 1;
    reason = sure_reason;
  } else {
    rc = grant(q, size, &pin, &reason);
    if (rc == 0 && !pin && reason == GMT__PIN_REASON__PIN_REASON_BUDGET && unpin_cold(COLD_MS) > 0)
      rc = grant(q, size, &pin, &reason); /* the room it made is given back first */
  }
  CUcontext ctx = NULL;
  double ns = rc == 0 && pin ? do_register(addr, size, &ctx) : -1;
  uint64_t now = gmt_now_ms();
  gmt__heap_lock();
  if (rc == 0 && pin && ns < 0)
    g.release += size; /* granted but not pinned: give it back */
  if (ns >= 0 && size >= MEASURE_MIN)
    ewma(&g.reg_npb, &g.reg_seen, ns / (double)size);
  gmt_hostbuf_t *b = gmt__heap_by_id_locked((const void *)addr, id);
  int orphan = ns >= 0 && !b; /* freed while we asked: a program bug, undone below */
  if (b) {
    b->pin.reason = (uint8_t)reason;
    if (ns >= 0) {
      b->pin.state = GMT_PINBUF_PINNED;
      b->pin.ctx = ctx;
      atomic_fetch_add_explicit(&g_advised, size, memory_order_relaxed);
    } else if (rc == 0 && (pin || (reason != GMT__PIN_REASON__PIN_REASON_BUDGET &&
                                   reason != GMT__PIN_REASON__PIN_REASON_UNREACHABLE))) {
      /* Said no for good, or the driver would not register it (it shares
       * pages with a registered range, say): asking again would not help. */
      b->pin.state = GMT_PINBUF_DECLINED;
    } else {
      b->pin.state = GMT_PINBUF_NONE;
      b->pin.retry_ms = now + RETRY_MS;
      if (reason == GMT__PIN_REASON__PIN_REASON_BUDGET)
        g.budget_until_ms = now + RETRY_MS / 4;
    }
  }
  gmt__heap_unlock();
  if (orphan) {
    atomic_fetch_add_explicit(&g_advised, size, memory_order_relaxed);
    unpinned(size, do_unregister(addr, ctx, 0));
  }
  GMT_HOOK_DEBUG("pin: %zu bytes at %#lx: %s (reason %d)", size, (unsigned long)addr,
                 ns >= 0 ? "pinned" : "left pageable", reason);
}

void gmt__pin_copy_begin(gmt_pin_copy_t *c, const void *src, const void *dst, size_t n, int sync)
{
  c->id = 0;
  c->bytes = n;
  c->sync = sync;
  c->pinned = 0;
  int mode = atomic_load_explicit(&g_mode, memory_order_relaxed);
  /* A copy from or to no tracked buffer (an .item()'s 4 bytes) takes
   * neither the lock nor the clock. */
  if (mode <= GMT__PIN_MODE__PIN_OFF || !gmt__heap_any() || n == 0)
    return;
  gmt__heap_lock();
  int dir = 0;
  gmt_hostbuf_t *b = src ? gmt__heap_find_locked(src, n) : NULL;
  if (!b && dst) {
    b = gmt__heap_find_locked(dst, n);
    dir = 1;
  }
  if (!b) {
    gmt__heap_unlock();
    return;
  }
  uint64_t now = gmt_now_ms();
  int pays_back;
  int ask = wants_pin(b, mode, now, &pays_back);
  b->pin.copies[dir]++;
  b->pin.bytes[dir] += n;
  b->pin.last_copy_ms = now;
  ask_t q;
  uint64_t id = b->id;
  uintptr_t addr = b->addr;
  size_t size = b->size;
  int known = ask && mode == GMT__PIN_MODE__PIN_USE ? known_answer_locked(b) : -1;
  int sure =
      mode == GMT__PIN_MODE__PIN_PROFILE || pays_back || known == GMT__PIN_REASON__PIN_REASON_HOT;
  int sure_reason = mode == GMT__PIN_MODE__PIN_PROFILE ? GMT__PIN_REASON__PIN_REASON_PROFILE
                    : pays_back                        ? GMT__PIN_REASON__PIN_REASON_PAYS_BACK
                                                       : GMT__PIN_REASON__PIN_REASON_HOT;
  if (known >= 0 && known != GMT__PIN_REASON__PIN_REASON_HOT) {
    b->pin.state = GMT_PINBUF_DECLINED;
    b->pin.reason = (uint8_t)known;
    ask = 0;
  }
  if (ask) {
    b->pin.state = GMT_PINBUF_ASKING;
    fill_site(&q.site, b);
    q.where = b->site;
    q.bytes = b->size;
    q.pays_back = pays_back;
    gmt__heap_unlock();
    /* The module string is the site table's, which lives as long as the
     * process: safe to read without the lock. */
    ask_and_pin(id, &q, addr, size, sure, sure_reason);
    gmt__heap_lock();
    b = gmt__heap_by_id_locked((const void *)addr, id);
  }
  if (b) {
    c->id = id;
    c->pinned = b->pin.state == GMT_PINBUF_PINNED;
    if (!c->pinned) /* what this copy costs beyond a pinned one, as now estimated */
      b->pin.paid_ns += (double)n * (g.pageable_npb - g.pinned_npb);
  }
  gmt__heap_unlock();
  c->t0_ns = gmt_now_ns();
}

void gmt__pin_copy_end(const gmt_pin_copy_t *c, int ok)
{
  if (!c->id || !c->sync || !ok || c->bytes < MEASURE_MIN)
    return;
  double npb = (double)(gmt_now_ns() - c->t0_ns) / (double)c->bytes;
  gmt__heap_lock();
  if (c->pinned)
    ewma(&g.pinned_npb, &g.pinned_seen, npb);
  else
    ewma(&g.pageable_npb, &g.pageable_seen, npb);
  gmt__heap_unlock();
}

/* ---- the program's own registrations; the reporter; the mode ---- */

typedef struct {
  uintptr_t lo, hi;
  gmt_hostbuf_t *found;
} overlap_t;

static void find_pinned_overlap(gmt_hostbuf_t *b, void *arg)
{
  overlap_t *o = arg;
  if (!o->found && b->pin.state == GMT_PINBUF_PINNED && b->addr < o->hi &&
      b->addr + b->size > o->lo)
    o->found = b;
}

void gmt__pin_yield(const void *p, size_t n)
{
  if (!gmt__pin_advised_bytes())
    return;
  /* Each buffer gmt pinned that overlaps [p, p+n) is let go, one at a
   * time: the lock is not held across the driver call. */
  for (;;) {
    overlap_t o = {(uintptr_t)p, (uintptr_t)p + n, NULL};
    gmt__heap_lock();
    gmt__heap_each_locked(find_pinned_overlap, &o);
    gmt_hostbuf_t *b = o.found;
    uintptr_t addr = b ? b->addr : 0;
    size_t size = b ? b->size : 0;
    void *ctx = b ? b->pin.ctx : NULL;
    if (b)
      b->pin.state = GMT_PINBUF_DECLINED; /* the program pins it now */
    gmt__heap_unlock();
    if (!b)
      return;
    unpinned(size, do_unregister(addr, (CUcontext)ctx, 1));
  }
}

void gmt__pin_tick(void)
{
  /* Adaptive pins that went cold go back (a quarter of the idle time
   * apart at most, so a scan of the buffers stays rare). */
  uint64_t now = gmt_now_ms();
  if (atomic_load_explicit(&g_mode, memory_order_relaxed) == GMT__PIN_MODE__PIN_ADAPTIVE &&
      gmt__pin_advised_bytes() && now - g.idle_scan_ms >= g.idle_unpin_ms / 4) {
    g.idle_scan_ms = now;
    unpin_cold(g.idle_unpin_ms);
  }
  gmt__heap_lock();
  if (g.slack && gmt_now_ms() - g.slack_used_ms >= SLACK_IDLE_MS) {
    g.release += g.slack;
    g.slack = 0;
  }
  int due = g.release || g.nhist;
  gmt__heap_unlock();
  int pin, reason;
  if (due)
    advise(NULL, &pin, &reason);
}

static void live_history(gmt_hostbuf_t *b, void *arg)
{
  note_history_locked(b, *(const uint64_t *)arg);
}

/* At exit, a profile run's live buffers have ended too, and what is queued
 * goes out. An Advise the reporter has in flight may carry the histories
 * already: exit would cut it off (and with it the run's profile), so this
 * waits for it, at most a little past its own timeout. */
__attribute__((destructor)) static void pin_exit(void)
{
  if (atomic_load_explicit(&g_mode, memory_order_relaxed) != GMT__PIN_MODE__PIN_PROFILE)
    return;
  uint64_t now = gmt_now_ms();
  gmt__heap_lock();
  gmt__heap_each_locked(live_history, &now);
  gmt__heap_unlock();
  if (gmt__mutex_lock_ms(&g_advise_mu, ADVISE_TIMEOUT_MS + 500) != 0) {
    GMT_HOOK_DEBUG("pin: an Advise still in flight at exit; this run's histories may be lost");
    return;
  }
  gmt__heap_lock();
  int due = g.nhist || g.release;
  gmt__heap_unlock();
  int pin, reason;
  if (due)
    advise_locked(NULL, &pin, &reason);
  pthread_mutex_unlock(&g_advise_mu);
}

int gmt__pin_on(void)
{
  int mode = atomic_load_explicit(&g_mode, memory_order_relaxed);
  return mode >= 0 && mode != GMT__PIN_MODE__PIN_OFF;
}

void gmt__pin_set_mode(int mode)
{
  atomic_store(&g_mode, mode);
  if (mode == GMT__PIN_MODE__PIN_OFF)
    gmt__heap_stop_tracking();
  else
    gmt__heap_set_gone(buffer_gone);
  GMT_HOOK_DEBUG("pin advice: mode %d", mode);
}

/* A child has nothing registered (heap.c forgets its buffers) and owes
 * nothing: the parent gives its own pins back. The Advise lock may have
 * been held by a thread the child does not have. */
static void pin_child(void)
{
  pthread_mutex_init(&g_advise_mu, NULL);
  atomic_store(&g_advised, 0);
  g.release = 0;
  g.slack = 0;
  g.nhist = 0;
}

static const gmt_fork_ops_t g_fork_ops = {NULL, NULL, pin_child};

__attribute__((constructor)) static void pin_register(void)
{
  const char *idle = getenv("GMT_PIN_IDLE_MS");
  g.idle_unpin_ms = idle && *idle ? strtoull(idle, NULL, 10) : IDLE_UNPIN_MS;
  gmt__fork_register(GMT_LOCK_PIN, &g_fork_ops);
}
