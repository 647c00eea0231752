/* The memory ledgers on the wire: Reserve, Release and MemInfo, reclaim when
 * a pod's processes go away, and the ledgers' part of Status. The
 * bookkeeping itself is server/ledger.c; this file decides which limit
 * applies (the pod's GPU_MEM in the config in force now, so a reload
 * applies to the next reservation) and what is logged.
 *
 * A pod's GPU_MEM is its total across every device of the node. The
 * second ledger holds the host memory pinned on advice (the HOST tier):
 * Advise (rpc_pin.c) charges it against the node's --pinned-limit; here
 * it is kept in step with the pods' processes as the first one is. What
 * the processes report of themselves is held to what the two ledgers
 * granted them (bound_reports): the node's budgets count grants. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "gmt_error.h"
#include "gmt_log.h"
#include "ledger.h"
#include "reply.h"
#include "reports.h"
#include "schd.h"

#define MIB (1024.0 * 1024.0)

int gmt__ledger_init(gmt_schd_t *s)
{
  int rc = gmt_ledger_new(&s->ledger);
  if (rc == 0 && (rc = gmt_ledger_new(&s->pinned_ledger)) < 0)
    gmt__ledger_close(s);
  return rc;
}

void gmt__ledger_close(gmt_schd_t *s)
{
  gmt_ledger_free(s->ledger);
  gmt_ledger_free(s->pinned_ledger);
  s->ledger = s->pinned_ledger = NULL;
}

/* A Reserve refused for why (GMT_REFUSED_*), in words that say which
 * limit and by how much: answered, counted for status and /metrics, kept
 * as the pod's last refusal, and logged once a period per pod (a job
 * retries an allocation that failed). */
static void refuse(gmt_schd_t *s, gmt_call_t *call, gmt_pod_t *pod, int why, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void refuse(gmt_schd_t *s, gmt_call_t *call, gmt_pod_t *pod, int why, const char *fmt, ...)
{
  char words[sizeof pod->last_refusal];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(words, sizeof words, fmt, ap);
  va_end(ap);
  gmt_pods_refused(pod, why, words);
  if (gmt__say_now(&pod->said_quota_ms, uv_now(s->loop)))
    gmt_info("pod '%s': an allocation refused (%" PRIu64 " so far for its quota, %" PRIu64
             " for the GPU's space): %s",
             pod->cfg.name, pod->refused[GMT_REFUSED_QUOTA], pod->refused[GMT_REFUSED_SPACE],
             pod->last_refusal);
  gmt_call_reply_error(call, GMT_EQUOTA, "%s", pod->last_refusal);
}

void gmt__rpc_reserve(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req)
{
  const Gmt__ReserveRequest *r = req->reserve_req;
  gmt_pod_t *pod = gmt_pods_find(s->pods, r->pod);
  if (!pod) {
    gmt__reply_nopod(call, s->cfg, r->pod);
    return;
  }
  /* devices=: a pod confined to some GPUs reserves on those only. A
   * Release is never refused: what a reload took away is given back. */
  if (!gmt_pod_config_allows(&pod->cfg, r->device)) {
    gmt__reply_device_refused(call, s->cfg, pod, r->pid, r->device, "memory");
    return;
  }
  /* The card first: with --gpu-capacity the pods' reservations on a device
   * together stay within what was declared for it. Not a swap pod's: its
   * bytes occupy the card only while resident (Resident, rpc_swap.c), and
   * its quota is what bounds its reservations. */
  uint64_t room = 0;
  if (!gmt_mem_mode_moves(pod->cfg.mode) && gmt__tiers_device_room(s, r->device, &room) == 0 &&
      r->bytes > room) {
    gmt_debug("pod '%s' pid %u: %" PRIu64 " bytes on device %d refused: %" PRIu64
              " left of its declared capacity",
              pod->cfg.name, r->pid, r->bytes, r->device, room);
    char who[160];
    size_t holders = gmt__tiers_holders(s, r->device, who, sizeof who);
    refuse(s, call, pod, GMT_REFUSED_SPACE,
           "device %d has %" PRIu64 " bytes (%.1f MiB) left of its declared capacity "
           "(gmt-schd --gpu-capacity); %" PRIu64 " more do not fit%s%s",
           r->device, room, (double)room / MIB, r->bytes, holders ? "; held by " : "",
           holders ? who : "");
    return;
  }
  uint64_t limit = pod->cfg.memory_limit, total = 0;
  int rc = gmt_ledger_reserve(s->ledger, pod->cfg.name, r->pid, r->device, r->bytes, limit,
                              uv_now(s->loop), &total);
  if (rc == GMT_EQUOTA) {
    gmt_debug("pod '%s' pid %u: %" PRIu64 " bytes on device %d refused (holds %" PRIu64
              " of %" PRIu64 ")",
              pod->cfg.name, r->pid, r->bytes, r->device, total, limit);
    refuse(s, call, pod, GMT_REFUSED_QUOTA,
           "pod '%s' holds %" PRIu64 " bytes (%.1f MiB) of its limit %" PRIu64
           " bytes (%.1f MiB); %" PRIu64 " more do not fit",
           pod->cfg.name, total, (double)total / MIB, limit, (double)limit / MIB, r->bytes);
    return;
  }
  if (rc < 0) {
    gmt_call_reply_error(call, rc, "cannot reserve on device %d: %s", r->device, gmt_strerror(rc));
    return;
  }
  gmt_debug("pod '%s' pid %u: reserved %" PRIu64 " bytes on device %d, pod holds %" PRIu64
            " of %" PRIu64,
            pod->cfg.name, r->pid, r->bytes, r->device, total, limit);
  Gmt__ReserveReply body = GMT__RESERVE_REPLY__INIT;
  body.memory_used = total;
  body.memory_limit = limit;
  gmt_call_reply_body(call, GMT__ENVELOPE__BODY_RESERVE_REP, &body);
}

void gmt__rpc_release(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req)
{
  const Gmt__ReleaseRequest *r = req->release_req;
  const gmt_pod_t *pod = gmt_pods_find(s->pods, r->pod);
  if (!pod) {
    gmt__reply_nopod(call, s->cfg, r->pod);
    return;
  }
  uint64_t took = gmt_ledger_release(s->ledger, pod->cfg.name, r->pid, r->device, r->bytes);
  uint64_t total = gmt_ledger_pod_total(s->ledger, pod->cfg.name);
  if (took < r->bytes)
    gmt_debug("pod '%s' pid %u: release of %" PRIu64 " bytes on device %d, held only %" PRIu64,
              pod->cfg.name, r->pid, r->bytes, r->device, took);
  else
    gmt_debug("pod '%s' pid %u: released %" PRIu64 " bytes on device %d, pod holds %" PRIu64,
              pod->cfg.name, r->pid, r->bytes, r->device, total);
  Gmt__ReleaseReply body = GMT__RELEASE_REPLY__INIT;
  body.memory_used = total;
  gmt_call_reply_body(call, GMT__ENVELOPE__BODY_RELEASE_REP, &body);
}

void gmt__rpc_meminfo(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req)
{
  const Gmt__MemInfoRequest *r = req->meminfo_req;
  const gmt_pod_t *pod = gmt_pods_find(s->pods, r->pod);
  if (!pod) {
    gmt__reply_nopod(call, s->cfg, r->pod);
    return;
  }
  Gmt__MemInfoReply body = GMT__MEM_INFO_REPLY__INIT;
  body.memory_used = gmt_ledger_pod_total(s->ledger, pod->cfg.name);
  body.memory_limit = pod->cfg.memory_limit;
  gmt_call_reply_body(call, GMT__ENVELOPE__BODY_MEMINFO_REP, &body);
}

/* What sets one ledger apart when a pod's processes change: which of their
 * reports' numbers it is rebuilt from, how far a report is believed (what
 * the pod may hold), and how its bytes are named. */
typedef struct {
  const char *held; /* "reserved": "bytes (x MiB) it had reserved" */
  uint64_t (*reported)(const gmt_proc_t *pr);
  uint64_t (*limit)(gmt_schd_t *s, const gmt_pod_t *pod);
} ledger_kind_t;

static uint64_t reported_reserved(const gmt_proc_t *pr)
{
  return pr->c.memory_reserved;
}

static uint64_t reported_advised(const gmt_proc_t *pr)
{
  return pr->c.pinned_advised;
}

static uint64_t quota(gmt_schd_t *s, const gmt_pod_t *pod)
{
  (void)s;
  return pod->cfg.memory_limit;
}

static uint64_t pin_share(gmt_schd_t *s, const gmt_pod_t *pod)
{
  uint64_t share, own;
  gmt__pin_shares(s, pod, &share, &own);
  return share;
}

static const ledger_kind_t device_kind = {"reserved", reported_reserved, quota};
static const ledger_kind_t pinned_kind = {"pinned on advice", reported_advised, pin_share};

typedef struct {
  gmt_schd_t *s;
  const ledger_kind_t *kind;
} sync_t;

static void log_reclaim(void *arg, const char *pod, uint32_t pid, uint64_t bytes)
{
  const sync_t *y = arg;
  if (bytes)
    gmt_info("pod '%s': pid %u is gone; reclaimed %" PRIu64 " bytes (%.1f MiB) it had %s", pod, pid,
             bytes, (double)bytes / MIB, y->kind->held);
}

static bool pod_listed(void *arg, const char *name)
{
  const sync_t *y = arg;
  return gmt_pods_find(y->s->pods, name) != NULL;
}

/* Keeps one ledger in step with the pod: what processes that are gone
 * held is reclaimed, and after a restart of the scheduler or a
 * reconnection what the processes report is taken in. */
static void ledger_sync(gmt_schd_t *s, gmt_ledger_t *l, const ledger_kind_t *kind,
                        const gmt_pod_t *pod, const uint32_t *pids)
{
  sync_t y = {s, kind};
  /* A pod that a reload removed is no longer visited by name: sweep. */
  gmt_ledger_retain_pods(l, pod_listed, log_reclaim, &y);

  const char *name = pod->cfg.name;
  gmt_ledger_retain(l, name, pids, pod->nprocs, uv_now(s->loop), log_reclaim, &y);
  if (!pod->connected) {
    gmt_ledger_set_synced(l, name, false);
    return;
  }
  /* The processes still hold what they were granted; a report is
   * believed no further than what the pod may hold. */
  bool first = !gmt_ledger_synced(l, name);
  uint64_t limit = kind->limit(s, pod);
  for (size_t i = 0; i < pod->nprocs; i++) {
    const gmt_proc_t *pr = &pod->procs[i];
    uint64_t has = kind->reported(pr);
    uint64_t add = gmt_ledger_adopt(l, name, pr->pid, has, first, limit);
    if (add)
      gmt_info("pod '%s': pid %u reports %" PRIu64 " bytes %s; taken into the ledger (+%" PRIu64
               ")",
               name, pr->pid, has, kind->held, add);
  }
  if (gmt_ledger_set_synced(l, name, true) < 0)
    gmt_warn("pod '%s': out of memory in the ledger", name);
}

/* The pod's reports held to what the ledgers granted each process
 * (reports.h): pins on advice are the pinned ledger's, its programs' own
 * pins count up to the pod's part of the budget (shared by its
 * processes, in pid order), host copies and spill files up to what each
 * reserved. A report past them is counted as granted, and said once a
 * period: a process can lower its own count, never raise the node's. */
static void bound_reports(gmt_schd_t *s, gmt_pod_t *pod)
{
  const char *name = pod->cfg.name;
  uint64_t share, own_part;
  gmt__pin_shares(s, pod, &share, &own_part);
  uint64_t own_left = own_part;
  /* The first process past its grants, for each kind: pins, copies. */
  static const unsigned kinds[2] = {GMT_REPORT_PINNED, GMT_REPORT_SWAP};
  struct {
    uint32_t pid;
    gmt_report_counts_t said, counted;
  } first[2] = {{0}};
  for (size_t i = 0; i < pod->nprocs; i++) {
    gmt_proc_t *pr = &pod->procs[i];
    Gmt__ProcessCounters *rc = &pr->c;
    gmt_report_counts_t c = {rc->pinned_bytes, rc->pinned_advised, rc->pinned_cached,
                             rc->swap_host,    rc->swap_kept,      rc->swap_disk};
    gmt_report_grants_t g = {.reserved = gmt_ledger_pid_total(s->ledger, name, pr->pid),
                             .advised = gmt_ledger_pid_total(s->pinned_ledger, name, pr->pid),
                             .own_room = own_left};
    gmt_report_counts_t was = c;
    unsigned past = gmt_report_bound(&c, &g);
    own_left -= gmt_report_own_pins(&c); /* within own_room */
    for (int k = 0; k < 2; k++)
      if ((past & kinds[k]) && !first[k].pid) {
        first[k].pid = pr->pid;
        first[k].said = was;
        first[k].counted = c;
      }
    rc->pinned_bytes = c.pinned_bytes;
    rc->pinned_advised = c.pinned_advised;
    rc->pinned_cached = c.pinned_cached;
    rc->swap_host = c.swap_host;
    rc->swap_kept = c.swap_kept;
    rc->swap_disk = c.swap_disk;
  }
  if ((!first[0].pid && !first[1].pid) || !gmt__say_now(&pod->said_report_ms, uv_now(s->loop)))
    return;
  const gmt_report_counts_t *said = &first[0].said, *counted = &first[0].counted;
  if (first[0].pid)
    gmt_info("pod '%s': pid %u reports %" PRIu64 " bytes pinned, %" PRIu64 " of them on advice; "
             "gmt granted it %" PRIu64 " on advice and the pod's own pins count at most %" PRIu64
             " (--pinned-limit over the pods that run): counted as %" PRIu64,
             name, first[0].pid, said->pinned_bytes, said->pinned_advised, counted->pinned_advised,
             own_part, counted->pinned_bytes);
  said = &first[1].said;
  counted = &first[1].counted;
  if (first[1].pid)
    gmt_info("pod '%s': pid %u reports %" PRIu64 " bytes in host memory, %" PRIu64
             " kept and %" PRIu64 " in spill files, past the %" PRIu64
             " it reserved: counted as %" PRIu64 ", %" PRIu64 " and %" PRIu64,
             name, first[1].pid, said->swap_host, said->swap_kept, said->swap_disk,
             gmt_ledger_pid_total(s->ledger, name, first[1].pid), counted->swap_host,
             counted->swap_kept, counted->swap_disk);
}

void gmt__ledger_pod_changed(gmt_schd_t *s, gmt_pod_t *pod)
{
  if (!s->ledger || !s->pinned_ledger)
    return;
  uint32_t stack[64] = {0}, *pids = stack; /* {0}: gcc -O2 cannot see nprocs bounds its use */
  if (pod->nprocs > sizeof stack / sizeof stack[0] &&
      !(pids = malloc(pod->nprocs * sizeof *pids))) {
    gmt_warn("pod '%s': out of memory checking its reservations; later", pod->cfg.name);
    return;
  }
  for (size_t i = 0; i < pod->nprocs; i++)
    pids[i] = pod->procs[i].pid;
  ledger_sync(s, s->ledger, &device_kind, pod, pids);
  ledger_sync(s, s->pinned_ledger, &pinned_kind, pod, pids);
  if (pids != stack)
    free(pids);
  bound_reports(s, pod);
}

void gmt__ledger_status(gmt_schd_t *s, const gmt_pod_t *pod, Gmt__PodStatus *ps)
{
  if (!s->ledger || !s->pinned_ledger)
    return;
  const char *name = pod->cfg.name;
  /* Pins on advice are the ledger's now, not as at the last heartbeat:
   * an Advise that gave some back in between would leave pinned_bytes
   * counting them still. A process's own pins are as last counted. */
  uint64_t own_sum = 0;
  ps->totals->memory_reserved = gmt_ledger_pod_total(s->ledger, name);
  ps->totals->pinned_advised = gmt_ledger_pod_total(s->pinned_ledger, name);
  for (size_t i = 0; i < ps->n_processes; i++) {
    Gmt__ProcessCounters *c = ps->processes[i]->counters;
    uint32_t pid = ps->processes[i]->pid;
    gmt_report_counts_t was = {.pinned_bytes = c->pinned_bytes,
                               .pinned_advised = c->pinned_advised};
    uint64_t own = gmt_report_own_pins(&was);
    c->memory_reserved = gmt_ledger_pid_total(s->ledger, name, pid);
    c->pinned_advised = gmt_ledger_pid_total(s->pinned_ledger, name, pid);
    c->pinned_bytes = gmt_bytes_add(c->pinned_advised, own);
    own_sum = gmt_bytes_add(own_sum, own);
  }
  ps->totals->pinned_bytes = gmt_bytes_add(ps->totals->pinned_advised, own_sum);
}

void gmt__ledger_host_status(gmt_schd_t *s, Gmt__HostStatus *host)
{
  if (s->pinned_ledger)
    host->totals->pinned_advised = gmt_ledger_node_total(s->pinned_ledger);
}
