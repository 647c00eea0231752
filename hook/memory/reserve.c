/* Reservations against the pod's memory quota (see reserve.h): per device,
 * what this process holds in the scheduler's ledger and how much of it
 * backs allocations; the rest is slack that makes most allocations and
 * every free RPC-free.
 *
 * One mutex guards the numbers and is never held across an RPC or a
 * driver call. Reserve RPCs are made by the allocating thread; Release
 * RPCs only by the reporter thread (gmt__reserve_tick), on its own
 * channel: a Release never queues behind this process's Reserve that the
 * pod manager holds until slack comes back. */
#include "reserve.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "channel.h"
#include "devmap.h"
#include "driver.h"
#include "fork.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_wire.h"
#include "log.h"

#define GMT_RESERVE_RPC_TIMEOUT_MS 1500
#define GMT_RESERVE_OFFLINE_MIN_MS 1000
#define GMT_RESERVE_OFFLINE_MAX_MS 2000
#define GMT_RESERVE_TRIES 8
/* What was granted offline and the quota refused once back: asked again
 * this often. */
#define GMT_RESERVE_SETTLE_EVERY_MS 1000

typedef struct {
  uint64_t held;    /* in the ledger (or granted locally while offline) */
  uint64_t charged; /* of which allocations and pools use this much */
  uint64_t local;   /* of held, granted while offline: not in the ledger (yet) */
} dev_t_;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static dev_t_ g_dev[GMT_RESERVE_DEVICES];
static uint64_t g_last_activity_ms;
static uint64_t g_limit;         /* the pod's, as last heard */
static int g_limit_known;        /* g_limit was heard at all */
static uint64_t g_others;        /* the pod's other processes held this, last heard */
static uint64_t g_room;          /* the pod's limit less its total, last heard */
static uint64_t g_room_ms;       /* when (monotonic ms); 0: never */
static uint64_t g_tight_until;   /* monotonic ms: no chunks, no slack kept before this */
static uint64_t g_settle_after;  /* monotonic ms: no settling before this */
static uint64_t g_offline_until; /* no RPC before this (monotonic ms) */
static uint64_t g_offline_backoff;
static int g_offline_said;
/* GMT_FAIL_CLOSED: a process that never heard its pod's limit waits for
 * it (from its first allocation that found none, at most g_fail_wait_ms)
 * and then fails allocations, instead of running with no limit. */
static int g_fail_closed = -1; /* -1: not read yet */
static uint64_t g_fail_wait_ms;
static uint64_t g_unheard_since; /* monotonic ms; 0: not yet */
static _Atomic int g_unheard_said;

static int limit_known(void)
{
  pthread_mutex_lock(&g_mu);
  int known = g_limit_known;
  pthread_mutex_unlock(&g_mu);
  return known;
}

static int clamp_dev(int device)
{
  return device >= 0 && device < GMT_RESERVE_DEVICES ? device : 0;
}

void gmt__reserve_set_limit(uint64_t limit)
{
  pthread_mutex_lock(&g_mu);
  g_limit = limit;
  g_limit_known = 1;
  pthread_mutex_unlock(&g_mu);
}

/* What the pod's other processes hold, from the pod's total as just heard
 * (g_mu held); ours excludes what this process granted itself offline,
 * which the ledger has not seen, and adds what is being reserved now. */
static void heard_pod(uint64_t pod_used, uint64_t limit, uint64_t reserving)
{
  uint64_t ours = reserving;
  for (int d = 0; d < GMT_RESERVE_DEVICES; d++)
    ours += g_dev[d].held - g_dev[d].local;
  g_others = pod_used > ours ? pod_used - ours : 0;
  g_limit = limit;
  g_limit_known = 1;
  g_room = limit > pod_used ? limit - pod_used : 0;
  g_room_ms = gmt_now_ms();
}

/* Whether to reserve exactly what an allocation needs (g_mu held): near
 * its limit the pod has no room for chunks that would mostly be slack,
 * which other processes of the pod would then wait for. Room not heard
 * lately counts as near: one exact Reserve tells it. */
static int tight(uint64_t now)
{
  return now < g_tight_until || !g_room_ms || now - g_room_ms >= GMT_RESERVE_TIGHT_MS ||
         g_room < GMT_RESERVE_CHUNK;
}

uint64_t gmt__reserve_held(void)
{
  uint64_t sum = 0;
  pthread_mutex_lock(&g_mu);
  for (int d = 0; d < GMT_RESERVE_DEVICES; d++)
    sum += g_dev[d].held - g_dev[d].local;
  pthread_mutex_unlock(&g_mu);
  return sum;
}

/* ---- a limit never heard ---- */

#define GMT_FAIL_CLOSED_WAIT_DEFAULT_MS 10000
#define GMT_FAIL_CLOSED_WAIT_MAX_MS 600000

static void read_fail_closed(void)
{
  if (g_fail_closed >= 0)
    return;
  const char *on = getenv("GMT_FAIL_CLOSED");
  const char *ms = getenv("GMT_FAIL_CLOSED_WAIT_MS");
  g_fail_closed = on && *on && strcmp(on, "0") != 0;
  g_fail_wait_ms = GMT_FAIL_CLOSED_WAIT_DEFAULT_MS;
  if (ms && *ms) {
    char *end;
    unsigned long long v = strtoull(ms, &end, 10);
    if (*end || v > GMT_FAIL_CLOSED_WAIT_MAX_MS)
      gmt__say("GMT_FAIL_CLOSED_WAIT_MS='%.32s' is not a time in ms from 0 to %d; %d is used", ms,
               GMT_FAIL_CLOSED_WAIT_MAX_MS, GMT_FAIL_CLOSED_WAIT_DEFAULT_MS);
    else
      g_fail_wait_ms = v;
  }
}

int gmt__reserve_limit_heard(void)
{
  return limit_known();
}

int gmt__reserve_fails_closed(void)
{
  pthread_mutex_lock(&g_mu);
  read_fail_closed();
  int closed = g_fail_closed;
  pthread_mutex_unlock(&g_mu);
  return closed;
}

const char *gmt__reserve_unheard_plan(char *buf, size_t len)
{
  pthread_mutex_lock(&g_mu);
  read_fail_closed();
  if (g_fail_closed)
    snprintf(buf, len,
             "GMT_FAIL_CLOSED is set: allocations wait up to %llu ms for the pod's memory limit, "
             "then fail until the pod manager answers",
             (unsigned long long)g_fail_wait_ms);
  else
    snprintf(buf, len,
             "until it answers, allocations are counted but NOT limited "
             "(GMT_FAIL_CLOSED=1 makes them wait and fail instead)");
  pthread_mutex_unlock(&g_mu);
  return buf;
}

enum { UNHEARD_RUN = 0, UNHEARD_RETRY = 1 };

static int offline_now(uint64_t now);

/* An allocation that finds no limit ever heard and none to ask now: the
 * pod manager is down (never answered), or it refused this process
 * (unhooked: nothing will come). Without GMT_FAIL_CLOSED it runs
 * unchecked (report.c and went_offline() say so). With it, it waits
 * until the pod manager answers (UNHEARD_RETRY: ask now) or the bound
 * since the first such allocation has passed (GMT_EQUOTA, said once). */
static int unheard(int unhooked)
{
  pthread_mutex_lock(&g_mu);
  read_fail_closed();
  uint64_t now = gmt_now_ms();
  if (!g_unheard_since)
    g_unheard_since = now;
  uint64_t until = g_unheard_since + g_fail_wait_ms;
  int closed = g_fail_closed;
  pthread_mutex_unlock(&g_mu);
  /* Not closed: registration and went_offline() said what happens. */
  if (!closed)
    return UNHEARD_RUN;
  while (!unhooked && now < until) {
    pthread_mutex_lock(&g_mu);
    int offline = offline_now(now);
    pthread_mutex_unlock(&g_mu);
    if (!offline)
      return UNHEARD_RETRY;
    uint64_t left = until - now;
    struct timespec ts = {0, (long)(left < 20 ? left : 20) * 1000000L};
    nanosleep(&ts, NULL);
    now = gmt_now_ms();
  }
  if (!atomic_exchange(&g_unheard_said, 1))
    gmt__say("GMT_FAIL_CLOSED: %s, so its allocations fail with out of memory%s",
             unhooked ? "the pod manager refused this process"
                      : "no pod manager gave this process its pod's memory limit in time",
             unhooked ? "" : " until it answers");
  return GMT_EQUOTA;
}

/* ---- RPCs ---- */

/* A refusal, said on the job's stderr once per kind (the pod's quota, the
 * GPU's declared space, anything else): an out-of-memory error with no
 * word of why was the worst of it for operators. The scheduler's words
 * say which limit and by how much. */
static void say_refusal(const char *err)
{
  static _Atomic unsigned said;
  unsigned kind = !strncmp(err, "pod '", 5) ? 1u : !strncmp(err, "device ", 7) ? 2u : 4u;
  if (!(atomic_fetch_or(&said, kind) & kind))
    gmt__say("an allocation fails with out of memory: %s (said once; GMT_HOOK_DEBUG=1 says "
             "each)",
             err[0] ? err : "the scheduler refused it");
}

enum { RPC_OK = 0, RPC_QUOTA = 1, RPC_UNHOOKED = 2, RPC_UNREACHABLE = 3, RPC_DEVICE = 4 };

/* Devices whose refusal (devices=) was told on stderr, bit d for device d. */
static _Atomic uint64_t g_denied_said;

/* No RPC now: the pod manager counts as down (channel.c), or a failed call
 * is backing off. */
static int offline_now(uint64_t now)
{
  return gmt__channel_down() || (g_offline_until && now < g_offline_until);
}

static void went_offline(int rc, const char *err)
{
  uint64_t now = gmt_now_ms();
  pthread_mutex_lock(&g_mu);
  g_offline_backoff = g_offline_backoff ? 2 * g_offline_backoff : GMT_RESERVE_OFFLINE_MIN_MS;
  if (g_offline_backoff > GMT_RESERVE_OFFLINE_MAX_MS)
    g_offline_backoff = GMT_RESERVE_OFFLINE_MAX_MS;
  g_offline_until = now + g_offline_backoff;
  /* Not known: never registered, and registration said what happens. */
  int say = !g_offline_said && g_limit_known;
  g_offline_said |= say;
  uint64_t limit = g_limit;
  pthread_mutex_unlock(&g_mu);
  if (say)
    fprintf(stderr,
            "gmt[%d]: memory ledger unreachable (%s%s%s); allocations are checked against the "
            "pod's last known limit of %llu bytes, less what its other processes held then, "
            "until it is back\n",
            (int)getpid(), gmt_strerror(rc), err && *err ? ": " : "", err ? err : "",
            (unsigned long long)limit);
  GMT_HOOK_DEBUG("ledger unreachable (%s); again in %llu ms", gmt_strerror(rc),
                 (unsigned long long)g_offline_backoff);
}

static void came_back(void)
{
  pthread_mutex_lock(&g_mu);
  int was = g_offline_until != 0;
  g_offline_until = g_offline_backoff = 0;
  pthread_mutex_unlock(&g_mu);
  if (was)
    GMT_HOOK_DEBUG("memory ledger reachable again");
}

/* One Reserve or Release on channel ch; a Reserve's reply also brings the
 * pod's limit. */
static int rpc_memory(int ch, int release, int device, uint64_t bytes)
{
  Gmt__ReserveRequest rq = GMT__RESERVE_REQUEST__INIT;
  Gmt__ReleaseRequest rl = GMT__RELEASE_REQUEST__INIT;
  Gmt__Envelope env = GMT__ENVELOPE__INIT;
  if (release) {
    rl.pid = (uint32_t)getpid();
    rl.device = gmt__node_device(device);
    rl.bytes = bytes;
    env.body_case = GMT__ENVELOPE__BODY_RELEASE_REQ;
    env.release_req = &rl;
  } else {
    rq.pid = (uint32_t)getpid();
    rq.device = gmt__node_device(device);
    rq.bytes = bytes;
    env.body_case = GMT__ENVELOPE__BODY_RESERVE_REQ;
    env.reserve_req = &rq;
  }
  Gmt__Envelope *rep = NULL;
  int rc = gmt__channel_call(ch, &env, &rep, GMT_RESERVE_RPC_TIMEOUT_MS);
  if (rc == -ENOTCONN)
    return RPC_UNHOOKED;
  char err[256] = "";
  if (rc == 0)
    rc = gmt_wire_expect(
        rep, release ? GMT__ENVELOPE__BODY_RELEASE_REP : GMT__ENVELOPE__BODY_RESERVE_REP, err,
        sizeof err);
  if (rc == 0) {
    pthread_mutex_lock(&g_mu);
    if (!release) /* a reload may have changed the limit */
      heard_pod(rep->reserve_rep->memory_used, rep->reserve_rep->memory_limit, bytes);
    else if (g_limit_known) {
      g_room =
          g_limit > rep->release_rep->memory_used ? g_limit - rep->release_rep->memory_used : 0;
      g_room_ms = gmt_now_ms();
    }
    pthread_mutex_unlock(&g_mu);
    gmt_wire_free(rep);
    came_back();
    return RPC_OK;
  }
  gmt_wire_free(rep);
  /* Not one of the pod's GPUs (devices=): an answer too, told once per
   * device; the allocation fails with CUDA_ERROR_INVALID_DEVICE. */
  if (rc == GMT_EDEVICE) {
    came_back();
    uint64_t bit = 1ull << (device & 63);
    if (!(atomic_fetch_or(&g_denied_said, bit) & bit))
      gmt__say("allocations on device %d fail with CUDA_ERROR_INVALID_DEVICE: %s", device,
               err[0] ? err : gmt_strerror(rc));
    return RPC_DEVICE;
  }
  /* A refusal is an answer: over the quota, or a pod the config no longer
   * lists (no memory beyond what it holds). */
  if (rc == GMT_EQUOTA || rc == GMT_ENOPOD) {
    came_back();
    GMT_HOOK_DEBUG("reserve of %llu bytes on device %d refused: %s", (unsigned long long)bytes,
                   device, err);
    say_refusal(err);
    return RPC_QUOTA;
  }
  went_offline(rc, err);
  return RPC_UNREACHABLE;
}

/* ---- the allocation side ---- */

/* While the pod manager is down: this process's charges plus what the
 * others held when last heard, against the pod's limit. A process that
 * never heard its limit (started while the pod manager was away) goes
 * through unheard() first; let through, it counts what it takes,
 * unchecked, and reports it once the pod manager answers. */
static int grant_locally(int d, uint64_t bytes)
{
  pthread_mutex_lock(&g_mu);
  if (!g_offline_said && g_limit_known) {
    pthread_mutex_unlock(&g_mu);
    went_offline(-EHOSTDOWN, "the pod manager does not answer");
    pthread_mutex_lock(&g_mu);
  }
  uint64_t charged = g_others;
  for (int i = 0; i < GMT_RESERVE_DEVICES; i++)
    charged += g_dev[i].charged;
  int ok = !g_limit_known || (charged <= g_limit && bytes <= g_limit - charged);
  if (ok) {
    uint64_t slack = g_dev[d].held - g_dev[d].charged;
    if (slack < bytes) {
      g_dev[d].held += bytes - slack;
      g_dev[d].local += bytes - slack;
    }
    g_dev[d].charged += bytes;
  }
  pthread_mutex_unlock(&g_mu);
  return ok ? 0 : GMT_EQUOTA;
}

#define GRANT_ASK 1

/* The pod manager cannot be asked now: within the last known limit, or,
 * never having heard one, as unheard() says. GRANT_ASK: it answers now,
 * ask it. */
static int grant_offline(int d, uint64_t bytes)
{
  if (!limit_known()) {
    int u = unheard(0);
    if (u == UNHEARD_RETRY)
      return GRANT_ASK;
    if (u != UNHEARD_RUN)
      return u;
  }
  return grant_locally(d, bytes);
}

int gmt__reserve(int device, uint64_t bytes)
{
  int d = clamp_dev(device);
  for (int tries = 0; tries < GMT_RESERVE_TRIES; tries++) {
    uint64_t now = gmt_now_ms();
    pthread_mutex_lock(&g_mu);
    g_last_activity_ms = now;
    dev_t_ *v = &g_dev[d];
    uint64_t slack = v->held - v->charged;
    if (slack >= bytes) {
      v->charged += bytes;
      pthread_mutex_unlock(&g_mu);
      return 0;
    }
    uint64_t shortfall = bytes - slack;
    int offline = offline_now(now);
    uint64_t want = tight(now) || shortfall > GMT_RESERVE_CHUNK ? shortfall : GMT_RESERVE_CHUNK;
    pthread_mutex_unlock(&g_mu);
    if (offline) {
      int r = grant_offline(d, bytes);
      if (r == GRANT_ASK)
        continue;
      return r;
    }

    int r = rpc_memory(GMT_CH_MEMORY, 0, d, want), refused = r == RPC_QUOTA;
    if (refused && want > shortfall) {
      want = shortfall;
      r = rpc_memory(GMT_CH_MEMORY, 0, d, want);
    }
    if (refused) {
      /* The pod is short of room: no chunks for a while. */
      pthread_mutex_lock(&g_mu);
      g_tight_until = gmt_now_ms() + GMT_RESERVE_TIGHT_MS;
      pthread_mutex_unlock(&g_mu);
    }
    switch (r) {
    case RPC_OK: {
      /* Taken at once, before the reporter can count it as slack to give
       * back; unless other threads took the slack meanwhile: ask again. */
      pthread_mutex_lock(&g_mu);
      v->held += want;
      int took = v->held - v->charged >= bytes;
      if (took)
        v->charged += bytes;
      pthread_mutex_unlock(&g_mu);
      if (took)
        return 0;
      continue;
    }
    case RPC_UNHOOKED: return unheard(1) == UNHEARD_RUN ? 0 : GMT_EQUOTA;
    case RPC_UNREACHABLE: {
      int g = grant_offline(d, bytes);
      if (g == GRANT_ASK)
        continue;
      return g;
    }
    case RPC_DEVICE: return GMT_EDEVICE;
    default: return GMT_EQUOTA;
    }
  }
  return GMT_EQUOTA;
}

void gmt__unreserve(int device, uint64_t bytes)
{
  int d = clamp_dev(device);
  uint64_t now = gmt_now_ms();
  pthread_mutex_lock(&g_mu);
  dev_t_ *v = &g_dev[d];
  v->charged -= bytes < v->charged ? bytes : v->charged;
  g_last_activity_ms = now;
  pthread_mutex_unlock(&g_mu);
}

int gmt__reserve_meminfo(int device, uint64_t *pod_used, uint64_t *limit)
{
  Gmt__MemInfoRequest rq = GMT__MEM_INFO_REQUEST__INIT;
  Gmt__Envelope env = GMT__ENVELOPE__INIT;
  rq.device = gmt__node_device(device);
  env.body_case = GMT__ENVELOPE__BODY_MEMINFO_REQ;
  env.meminfo_req = &rq;

  pthread_mutex_lock(&g_mu);
  int offline = offline_now(gmt_now_ms());
  pthread_mutex_unlock(&g_mu);
  int rc = -EHOSTUNREACH;
  Gmt__Envelope *rep = NULL;
  char err[256] = "";
  if (!offline) {
    rc = gmt__channel_call(GMT_CH_MEMORY, &env, &rep, GMT_RESERVE_RPC_TIMEOUT_MS);
    if (rc == -ENOTCONN)
      return rc;
    if (rc == 0)
      rc = gmt_wire_expect(rep, GMT__ENVELOPE__BODY_MEMINFO_REP, err, sizeof err);
  }
  if (rc == 0) {
    *pod_used = rep->meminfo_rep->memory_used;
    *limit = rep->meminfo_rep->memory_limit;
    gmt_wire_free(rep);
    pthread_mutex_lock(&g_mu);
    heard_pod(*pod_used, *limit, 0);
    /* Our own slack is reserved but ours to allocate: not used. What was
     * granted offline counts as slack first (the reporter drops it first)
     * and is not in the ledger. */
    uint64_t slack = 0;
    for (int d = 0; d < GMT_RESERVE_DEVICES; d++) {
      uint64_t s = g_dev[d].held - g_dev[d].charged;
      slack += s - (s < g_dev[d].local ? s : g_dev[d].local);
    }
    *pod_used -= slack < *pod_used ? slack : *pod_used;
    pthread_mutex_unlock(&g_mu);
    came_back();
    return 0;
  }
  gmt_wire_free(rep);
  if (!offline)
    went_offline(rc, err);
  /* What this process uses and the others held: the best we know. */
  pthread_mutex_lock(&g_mu);
  if (!g_limit_known) {
    pthread_mutex_unlock(&g_mu);
    return -ENOTCONN; /* no quota heard yet: the device's own numbers */
  }
  *pod_used = g_others;
  for (int d = 0; d < GMT_RESERVE_DEVICES; d++)
    *pod_used += g_dev[d].charged;
  *limit = g_limit;
  pthread_mutex_unlock(&g_mu);
  return 0;
}

/* ---- the reporter side ---- */

/* The reporter, back in touch: what was granted offline is settled. The
 * part that is slack is dropped (the ledger never had it); the part that
 * backs allocations is reserved for real, so that the ledger holds what
 * this process reports (its report leaves offline grants out: a ledger
 * rebuilt from reports after an outage would otherwise take them in, and
 * they would stay there after this process dropped them). Refused (the
 * pod took more than its quota while apart), it stays local and is asked
 * again later. Reserves from here go on the reporter's channel. */
static void settle(uint64_t now)
{
  uint64_t ask[GMT_RESERVE_DEVICES] = {0};
  int any = 0;
  pthread_mutex_lock(&g_mu);
  for (int d = 0; d < GMT_RESERVE_DEVICES; d++) {
    dev_t_ *v = &g_dev[d];
    uint64_t slack = v->held - v->charged;
    uint64_t drop = slack < v->local ? slack : v->local;
    v->held -= drop;
    v->local -= drop;
    ask[d] = now >= g_settle_after ? v->local : 0;
    any |= ask[d] != 0;
  }
  pthread_mutex_unlock(&g_mu);
  for (int d = 0; any && d < GMT_RESERVE_DEVICES; d++) {
    if (!ask[d])
      continue;
    int r = rpc_memory(GMT_CH_REPORT, 0, d, ask[d]);
    pthread_mutex_lock(&g_mu);
    if (r == RPC_OK)
      g_dev[d].local -= ask[d] < g_dev[d].local ? ask[d] : g_dev[d].local;
    else
      g_settle_after = gmt_now_ms() + GMT_RESERVE_SETTLE_EVERY_MS;
    pthread_mutex_unlock(&g_mu);
    GMT_HOOK_DEBUG("%llu bytes granted offline on device %d %s", (unsigned long long)ask[d], d,
                   r == RPC_OK ? "now reserved in the ledger" : "not reserved yet");
  }
}

int gmt__reserve_tick(uint64_t reported)
{
  uint64_t give[GMT_RESERVE_DEVICES] = {0};
  int any = 0;
  uint64_t now = gmt_now_ms();
  pthread_mutex_lock(&g_mu);
  int offline = offline_now(now);
  pthread_mutex_unlock(&g_mu);
  if (!offline)
    settle(now);
  pthread_mutex_lock(&g_mu);
  if (!offline_now(now)) {
    int idle = now - g_last_activity_ms >= GMT_RESERVE_IDLE_MS;
    uint64_t keep = idle || now < g_tight_until ? 0 : GMT_RESERVE_SLACK_KEEP;
    for (int d = 0; d < GMT_RESERVE_DEVICES; d++) {
      /* settle() dropped the offline grants in the slack; one made since
       * counts as slack first and goes at the next tick. */
      uint64_t slack = g_dev[d].held - g_dev[d].charged;
      slack -= slack < g_dev[d].local ? slack : g_dev[d].local;
      if (slack > keep) {
        /* Out of the slack before the RPC, so no allocation counts on
         * what is being given back. */
        give[d] = slack - keep;
        g_dev[d].held -= give[d];
        any = 1;
      }
    }
  }
  pthread_mutex_unlock(&g_mu);
  for (int d = 0; any && d < GMT_RESERVE_DEVICES; d++) {
    if (!give[d])
      continue;
    int r = rpc_memory(GMT_CH_REPORT, 1, d, give[d]);
    if (r == RPC_UNHOOKED)
      continue;
    if (r != RPC_OK) {
      /* Still the ledger's: hold it again and try later. */
      pthread_mutex_lock(&g_mu);
      g_dev[d].held += give[d];
      pthread_mutex_unlock(&g_mu);
      continue;
    }
    GMT_HOOK_DEBUG("gave back %llu bytes of slack on device %d", (unsigned long long)give[d], d);
  }
  return gmt__reserve_held() != reported;
}

void gmt__reserve_give_back(void)
{
  pthread_mutex_lock(&g_mu);
  g_tight_until = gmt_now_ms() + GMT_RESERVE_TIGHT_MS;
  pthread_mutex_unlock(&g_mu);
}

/* ---- fork ---- */

static void reserve_prepare(void)
{
  pthread_mutex_lock(&g_mu);
}

static void reserve_parent(void)
{
  pthread_mutex_unlock(&g_mu);
}

static void reserve_child(void)
{
  /* The child holds nothing: device memory is not inherited, and the
   * ledger's entries are the parent's pid's. */
  memset(g_dev, 0, sizeof g_dev);
  g_last_activity_ms = 0;
  g_offline_until = g_offline_backoff = 0;
  g_offline_said = 0;
  g_unheard_since = 0;
  atomic_store(&g_unheard_said, 0);
  g_others = 0;
  g_room = g_room_ms = 0;
  g_tight_until = g_settle_after = 0;
  atomic_store(&g_denied_said, 0);
  pthread_mutex_init(&g_mu, NULL);
}

static const gmt_fork_ops_t g_fork_ops = {reserve_prepare, reserve_parent, reserve_child};

__attribute__((constructor)) static void reserve_register(void)
{
  gmt__fork_register(GMT_LOCK_RESERVE, &g_fork_ops);
}
