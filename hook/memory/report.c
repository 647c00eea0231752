/* The hook's side of the pod manager protocol (docs/protocol.md, "Hooked
 * process -> pod manager"): Register at the first cuInit, then one
 * reporter thread that sends Report with the totals and the events since
 * the last report, at most every 20 ms while something changed.
 *
 * The connection is conn.c's own SP peer, not nng: nng aborts a forked
 * child that uses it, and the children of a hooked process must register.
 *
 * A pod manager that refuses the process leaves it unhooked for good. One
 * that does not answer (not started yet, restarting, stalled) is not a
 * refusal: the process runs ungated within what it last knew (one line on
 * stderr), and the reporter keeps reporting, at least every
 * GMT_REPORT_KEEPALIVE_MS even when nothing changed. That keepalive is
 * cheap, and it is what finds a pod manager back (channel.c's liveness)
 * and registers the process with a restarted one: a report from an
 * unknown pid registers it, with the totals and the memory it holds. The
 * RPC is never made with a lock held that an allocation or a launch would
 * need. */
#include "report.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "channel.h"
#include "conn.h"
#include "counters.h"
#include "devmap.h"
#include "fork.h"
#include "hostpin.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_wire.h"
#include "log.h"
#include "pin.h"
#include "pyrelease.h"
#include "stage.h"
#include "reserve.h"
#include "swap.h"
#include "state.h"
#include "thread.h"

#define GMT_REGISTER_TIMEOUT_MS 1000
#define GMT_REPORT_TIMEOUT_MS 1000
#define GMT_REPORT_MIN_GAP_MS 20 /* at most one report per 20 ms */
#define GMT_REPORT_POLL_MS 100   /* how soon a launch alone is noticed */
#define GMT_REPORT_BACKOFF_MAX_MS 1000
#define GMT_REPORT_KEEPALIVE_MS 500 /* a report at least this often */
/* In mode=swap: a move-out target for this process comes back in the
 * reply to a report, so it is heard within this (and the pod manager's
 * heartbeat, 20 ms for a swap pod: client/pmgr/pmgr_heartbeat.c says why). */
#define GMT_REPORT_SWAP_KEEPALIVE_MS 20
/* A move out this soon after the process's grant was cut short is on the
 * way of a pod that waits for the GPU now (gmt__token_cut_ms): PyTorch's
 * cached blocks move with the rest, not freed first. On an H200 an idle
 * inference pod's wake waited for a training job's empty_cache, which
 * gave back 1.07 GB in 98 ms (the driver's frees of 256 MiB blocks, 8 ms
 * each) where its move out copied 4.5 GB in 107 ms. */
#define GMT_REPORT_CUT_NO_RELEASE_MS 1000

enum { REP_NONE = 0, REP_ACTIVE = 1, REP_UNHOOKED = 2 };

/* g_mu serialises registration; the reporter thread never takes it. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int g_state;
static char g_exe[4096];
static const char *g_url;

static void sleep_ms(uint64_t ms)
{
  struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* One report; *evict, *keep and *where get the reply's Evict (mode=swap),
 * *give_back whether the pod manager asks for this process's slack. */
static int send_report(const gmt_hook_totals_t *t, const gmt_hook_event_t *ev, size_t n, int *evict,
                       uint64_t *keep, gmt_swap_where_t *where, int *give_back)
{
  Gmt__MemEvent *evs = n ? calloc(n, sizeof(*evs)) : NULL;
  Gmt__MemEvent **pev = n ? calloc(n, sizeof(*pev)) : NULL;
  if (n && (!evs || !pev)) {
    free(evs);
    free(pev);
    return -ENOMEM;
  }
  for (size_t i = 0; i < n; i++) {
    gmt__mem_event__init(&evs[i]);
    evs[i].free = ev[i].free;
    evs[i].kind = (Gmt__AllocKind)ev[i].kind;
    evs[i].address = ev[i].address;
    evs[i].size = ev[i].size;
    evs[i].device = gmt__node_device(ev[i].device);
    pev[i] = &evs[i];
  }
  Gmt__ProcessCounters c = GMT__PROCESS_COUNTERS__INIT;
  c.memory_used = t->memory_used;
  c.launches = t->launches;
  c.allocs = t->allocs;
  c.frees = t->frees;
  c.memory_reserved = t->memory_reserved;
  c.pinned_advised = gmt__pin_advised_bytes();
  c.pinned_bytes = gmt__hostpin_bytes() + c.pinned_advised;
  gmt__hostpin_pool_stats(&c.pinned_cached, &c.pinned_reused);
  gmt_swap_stats_t sw;
  gmt__swap_stats(&sw);
  c.swap_gpu = sw.gpu;
  c.swap_host = sw.host;
  c.swap_kept = sw.kept;
  c.swap_disk = sw.disk;
  c.swap_outs = sw.outs;
  c.swap_ins = sw.ins;
  c.swap_device = gmt__node_device(sw.device); /* -1 (none yet) stays -1 */
  c.swap_out_bytes = sw.out_bytes;
  c.swap_in_bytes = sw.in_bytes;
  c.swap_move_us = sw.move_ns / 1000;
  c.swap_wait_us = sw.wait_ns / 1000;
  c.swap_out_us = sw.out_ns / 1000;
  c.token_wait_us = atomic_load_explicit(&gmt__token_wait_ns, memory_order_relaxed) / 1000;
  c.bell_wait_us = atomic_load_explicit(&gmt__bell_wait_ns, memory_order_relaxed) / 1000;
  int64_t since = atomic_load_explicit(&gmt__token_waiting_since_ns, memory_order_relaxed);
  uint64_t now = gmt_now_ns(); /* CLOCK_MONOTONIC, as token.c's */
  c.token_waiting_us = since > 0 && now > (uint64_t)since ? (now - (uint64_t)since) / 1000 : 0;
  Gmt__ProcessReport pr = GMT__PROCESS_REPORT__INIT;
  pr.pid = (uint32_t)getpid();
  pr.exe = g_exe;
  pr.counters = &c;
  pr.n_events = n;
  pr.events = pev;
  Gmt__ReportRequest rr = GMT__REPORT_REQUEST__INIT;
  rr.process = &pr;
  Gmt__Envelope env = GMT__ENVELOPE__INIT;
  env.body_case = GMT__ENVELOPE__BODY_REPORT_REQ;
  env.report_req = &rr;

  Gmt__Envelope *rep = NULL;
  int rc = gmt__channel_call(GMT_CH_REPORT, &env, &rep, GMT_REPORT_TIMEOUT_MS);
  if (rc == 0) {
    char err[256] = "";
    rc = gmt_wire_expect(rep, GMT__ENVELOPE__BODY_REPORT_REP, err, sizeof(err));
    if (rc < 0)
      GMT_HOOK_DEBUG("report refused: %s (%s)", gmt_strerror(rc), err);
    if (rc >= 0 && rep->report_rep && rep->report_rep->prepare)
      gmt__swap_prepare(rep->report_rep->bounded, rep->report_rep->host_room);
    if (rc >= 0 && rep->report_rep && rep->report_rep->give_back_slack)
      *give_back = 1;
    if (rc >= 0 && rep->report_rep && rep->report_rep->evict) {
      const Gmt__ReportReply *rr = rep->report_rep;
      *evict = 1;
      *keep = rr->keep_bytes;
      where->bounded = rr->bounded;
      where->host_room = rr->host_room;
      where->disk_room = rr->disk_room;
      snprintf(where->dir, sizeof where->dir, "%s", rr->spill_dir ? rr->spill_dir : "");
    }
    gmt_wire_free(rep);
  }
  free(evs);
  free(pev);
  return rc;
}

static void *reporter_main(void *arg)
{
  (void)arg;
  gmt_hook_event_t *buf = malloc(GMT_HOOK_EVENT_CAP * sizeof(*buf));
  if (!buf)
    return NULL;
  uint64_t sent_launches = 0, sent_reserved = 0, last_send = 0, backoff = 0;
  int give_back = 0;
  for (;;) {
    int swap = atomic_load_explicit(&gmt__swap_on, memory_order_relaxed);
    /* Asked for slack: given back now, not after the poll. */
    int changed = gmt__state_wait_change(sent_launches, give_back ? 0
                                                        : swap    ? GMT_REPORT_SWAP_KEEPALIVE_MS
                                                                  : GMT_REPORT_POLL_MS);
    give_back = 0;
    /* Idle slack goes back to the ledger from here, never from a free. */
    changed |= gmt__reserve_tick(sent_reserved);
    /* Pins given back and profile histories, from here, never from a free. */
    gmt__pin_tick();
    /* Pinned blocks the pool kept too long, from here too. */
    changed |= gmt__hostpin_tick();
    changed |= gmt__stage_tick();
    changed |= gmt__swap_tick();
    gmt__devmap_ensure(); /* when cuInit could not ask: no-op once known */
    uint64_t now = gmt_now_ms();
    uint64_t keepalive = swap ? GMT_REPORT_SWAP_KEEPALIVE_MS : GMT_REPORT_KEEPALIVE_MS;
    if (!changed && now - last_send < keepalive)
      continue;
    if (last_send && now - last_send < GMT_REPORT_MIN_GAP_MS)
      sleep_ms(GMT_REPORT_MIN_GAP_MS - (now - last_send));
    gmt_hook_totals_t t;
    size_t n = gmt__state_take(&t, buf, GMT_HOOK_EVENT_CAP);
    t.memory_reserved = gmt__reserve_held();
    int evict = 0;
    uint64_t keep = 0;
    gmt_swap_where_t where = {0};
    int rc = send_report(&t, buf, n, &evict, &keep, &where, &give_back);
    last_send = gmt_now_ms();
    if (give_back)
      gmt__reserve_give_back();
    /* The scheduler never asks a pod that holds the token; a target that
     * comes while this process holds it was sent before its grant (the
     * pod manager answers a Report with the last heartbeat's targets):
     * moving out now would be brought back at once, and the turn, its
     * length set by its first wait, cut short (issue 26). */
    if (evict && atomic_load(&gmt__token_held) > 0) {
      GMT_HOOK_DEBUG("a target to move out down to %llu bytes came while this process holds the "
                     "token: left, as one sent before its grant",
                     (unsigned long long)keep);
      evict = 0;
    }
    /* Here, not inside the RPC: the eviction synchronizes and copies.
     * PyTorch's unused cached blocks go first, rather than move. */
    if (evict) {
      gmt_swap_stats_t st;
      gmt__swap_stats(&st);
      uint64_t cut = atomic_load(&gmt__token_cut_ms), since = gmt_now_ms() - cut;
      int urgent = cut > 0 && since < GMT_REPORT_CUT_NO_RELEASE_MS;
      if (urgent && st.gpu > keep)
        GMT_HOOK_DEBUG("a move out %llu ms after this process's grant was cut short: PyTorch's "
                       "cache moves with the rest, not released first",
                       (unsigned long long)since);
      if (st.gpu > keep && !urgent && gmt__pyrelease_cached() > 0) {
        gmt_swap_stats_t after;
        gmt__swap_stats(&after);
        GMT_HOOK_DEBUG("PyTorch's cache gave back %llu bytes before a move out",
                       (unsigned long long)(st.gpu > after.gpu ? st.gpu - after.gpu : 0));
      }
      gmt__swap_evict(keep, &where, 1);
    }
    if (rc == 0) {
      if (backoff)
        GMT_HOOK_DEBUG("reports go through again");
      backoff = 0;
      sent_launches = t.launches;
      sent_reserved = t.memory_reserved;
      GMT_HOOK_DEBUG("report: memory_used=%llu launches=%llu allocs=%llu frees=%llu events=%zu",
                     (unsigned long long)t.memory_used, (unsigned long long)t.launches,
                     (unsigned long long)t.allocs, (unsigned long long)t.frees, n);
      continue;
    }
    /* Keep what did not go out and try again later; the queue stays
     * bounded and the totals stay right meanwhile. */
    gmt__state_untake(buf, n);
    backoff = backoff ? backoff * 2 : 50;
    if (backoff > GMT_REPORT_BACKOFF_MAX_MS)
      backoff = GMT_REPORT_BACKOFF_MAX_MS;
    GMT_HOOK_DEBUG("report failed (%s); again in %llu ms", gmt_strerror(rc),
                   (unsigned long long)backoff);
    sleep_ms(backoff);
  }
  return NULL;
}

/* The pod manager did not answer the registration: run unhooked until it
 * does, with the reporter asking (its first report registers us). */
static int start_unanswered(int why)
{
  char plan[200];
  fprintf(stderr, "gmt[%d]: no pod manager at %s (%s); running unhooked: %s and %s\n",
          (int)getpid(), g_url, gmt_strerror(why),
          gmt__reserve_fails_closed() ? "launches fail (GMT_FAIL_CLOSED) until it answers"
                                      : "launches run ungated",
          gmt__reserve_unheard_plan(plan, sizeof plan));
  int rc = gmt__thread_start("gmt-report", reporter_main);
  if (rc < 0)
    return rc;
  gmt__channels_start(g_url, NULL);
  return 0;
}

/* What a refused process does: it will never hear a limit. */
static const char *refused_plan(void)
{
  return gmt__reserve_fails_closed()
             ? "GMT_FAIL_CLOSED is set: its allocations fail"
             : "running unhooked: its launches are not gated and its allocations not limited";
}

static int do_register(void)
{
  g_url = getenv("GMT_PMGR");
  if (!g_url || !*g_url)
    g_url = GMT_DEFAULT_PMGR;
  ssize_t len = readlink("/proc/self/exe", g_exe, sizeof(g_exe) - 1);
  g_exe[len > 0 ? len : 0] = '\0';

  gmt_conn_t *c = NULL;
  int rc = gmt__conn_open(&c, g_url, GMT_REGISTER_TIMEOUT_MS);
  if (rc < 0)
    return start_unanswered(rc);
  Gmt__RegisterRequest req = GMT__REGISTER_REQUEST__INIT;
  req.pid = (uint32_t)getpid();
  req.exe = g_exe;
  Gmt__Envelope env = GMT__ENVELOPE__INIT;
  env.body_case = GMT__ENVELOPE__BODY_REGISTER_REQ;
  env.register_req = &req;
  Gmt__Envelope *rep = NULL;
  rc = gmt__conn_call(c, &env, &rep, GMT_REGISTER_TIMEOUT_MS);
  if (rc < 0) {
    gmt__conn_close(c);
    return start_unanswered(rc);
  }
  char err[256] = "";
  rc = gmt_wire_expect(rep, GMT__ENVELOPE__BODY_REGISTER_REP, err, sizeof(err));
  if (rc < 0) {
    fprintf(stderr, "gmt[%d]: pod manager at %s refused this process (%s%s%s); %s\n", (int)getpid(),
            g_url, gmt_strerror(rc), *err ? ": " : "", err, refused_plan());
    gmt__pin_set_mode(GMT__PIN_MODE__PIN_OFF);
    gmt_wire_free(rep);
    gmt__conn_close(c);
    return rc;
  }
  const Gmt__PodConfig *pc = rep->register_rep ? rep->register_rep->config : NULL;
  GMT_HOOK_DEBUG("registered pid %d (%s) with %s: pod %s request %.2f limit %.2f memory %llu "
                 "mode %s",
                 (int)getpid(), g_exe, g_url, pc && pc->name ? pc->name : "?",
                 pc ? pc->request : 0.0, pc ? pc->limit : 0.0,
                 (unsigned long long)(pc ? pc->memory_limit : 0),
                 gmt_mem_mode_name(pc ? (int)pc->mode : 0));
  if (pc)
    gmt__reserve_set_limit(pc->memory_limit); /* the fallback while unreachable */
  gmt__pin_set_mode(pc ? (int)pc->pin : GMT__PIN_MODE__PIN_OFF);
  int how = !pc                                   ? GMT_SWAP_OFF
            : pc->mode == GMT__MEM_MODE__MEM_SWAP ? GMT_SWAP_COPIES
            : pc->mode == GMT__MEM_MODE__MEM_UM   ? GMT_SWAP_MANAGED
                                                  : GMT_SWAP_OFF;
  gmt__swap_configure(how, pc ? pc->name : NULL);
  gmt_wire_free(rep);

  rc = gmt__thread_start("gmt-report", reporter_main);
  if (rc < 0) {
    fprintf(stderr, "gmt: cannot start the reporter thread (%s); running unhooked\n",
            gmt_strerror(rc));
    gmt__conn_close(c);
    return rc;
  }
  gmt__channels_start(g_url, c);
  return 0;
}

void gmt__report_ensure(void)
{
  if (atomic_load_explicit(&g_state, memory_order_acquire) != REP_NONE)
    return;
  pthread_mutex_lock(&g_mu);
  if (atomic_load_explicit(&g_state, memory_order_relaxed) == REP_NONE)
    atomic_store_explicit(&g_state, do_register() == 0 ? REP_ACTIVE : REP_UNHOOKED,
                          memory_order_release);
  pthread_mutex_unlock(&g_mu);
}

static void report_prepare(void)
{
  pthread_mutex_lock(&g_mu);
}

static void report_parent(void)
{
  pthread_mutex_unlock(&g_mu);
}

static void report_child(void)
{
  /* The parent's connection stays the parent's (channel.c closes the
   * child's copies), and the child registers itself, with its own pid, on
   * its next cuInit or allocation. It has no reporter thread until then. */
  atomic_store_explicit(&g_state, REP_NONE, memory_order_relaxed);
  pthread_mutex_init(&g_mu, NULL);
}

static const gmt_fork_ops_t g_fork_ops = {report_prepare, report_parent, report_child};

__attribute__((constructor)) static void report_register(void)
{
  gmt__fork_register(GMT_LOCK_REPORT, &g_fork_ops);
}
