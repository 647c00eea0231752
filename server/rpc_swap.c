/* mode=swap on the wire: Resident (a swap process's bytes on the GPU, as a
 * total), the eviction targets that heartbeat replies carry to the pods
 * whose processes are asked to move memory out, and their upkeep when pods
 * and processes change. The bookkeeping and the decision are server/swap.c;
 * this file gathers what they need (the GPU space's limit and what else
 * occupies it, from rpc_tiers.c; who holds a token, from rpc_token.c), and
 * logs. docs/tiers.md, "Swap mode in the scheduler". */
#include <inttypes.h>
#include <stdlib.h>

#include "gmt_error.h"
#include "gmt_log.h"
#include "reply.h"
#include "schd.h"
#include "swap.h"

#define MIB (1024.0 * 1024.0)

int gmt__swap_init(gmt_schd_t *s)
{
  int rc = gmt_swap_new(&s->swap);
  return rc < 0 ? rc : gmt__turns_init(s);
}

void gmt__swap_close(gmt_schd_t *s)
{
  gmt__turns_close(s);
  gmt_swap_free(s->swap);
  s->swap = NULL;
}

/* A pod running on the device (it holds the token) is never asked. */
static bool may_ask(void *arg, const char *pod, int device)
{
  return !gmt__tokens_holds(arg, pod, device);
}

/* Victims: the least recently run first (server/swap.c). */
static double last_run(void *arg, const char *pod, int device)
{
  return gmt__tokens_last_run(arg, pod, device);
}

/* A pod waiting for the token has work: its memory moves by turns. So
 * does one whose grant was just cut short: it asks again once its queued
 * work is done, and the pod that cut it (one waking, or a latency pod)
 * needs the room now; asked only at that pod's next request, a training
 * job began to move out for an 8 GiB inference pod's wake 50 ms later
 * (H200). */
static bool waits(void *arg, const char *pod, int device)
{
  return gmt__tokens_waits(arg, pod, device) || gmt__tokens_cut(arg, pod, device);
}

/* One that does not wait moves after its idle-out= (a pod no longer in
 * the config: at once). */
static double idle_out_ms(void *arg, const char *pod)
{
  gmt_schd_t *s = arg;
  const gmt_pod_t *p = gmt_pods_find(s->pods, pod);
  return p ? (double)p->cfg.idle_out_ms : 0;
}

static const char *drop_why(gmt_swap_drop_t why)
{
  switch (why) {
  case GMT_SWAP_DROP_MET: return "met";
  case GMT_SWAP_DROP_EXPIRED: return "not met in time; dropped";
  case GMT_SWAP_DROP_RUNNING: return "dropped: the pod holds the token now";
  case GMT_SWAP_DROP_GONE: break;
  }
  return "dropped: the process is gone";
}

static void log_drop(void *arg, const char *pod, uint32_t pid, int device, uint64_t keep,
                     uint64_t resident, gmt_swap_drop_t why)
{
  (void)arg;
  if (why == GMT_SWAP_DROP_EXPIRED)
    gmt_info("swap: pod '%s' pid %u still has %" PRIu64 " bytes on device %d %d ms after it was "
             "asked to keep %" PRIu64 "; the target is dropped",
             pod, pid, resident, device, GMT_SWAP_TARGET_MS, keep);
  else
    gmt_debug("swap: pod '%s' pid %u device %d: target %" PRIu64 " (has %" PRIu64 ") %s", pod, pid,
              device, keep, resident, drop_why(why));
}

static void expire(gmt_schd_t *s)
{
  gmt_swap_expire(s->swap, uv_now(s->loop), may_ask, s, log_drop, NULL);
}

/* What may come to be occupied on device at once: base and the quotas of
 * the pods whose memory moves and that may use it. */
static uint64_t committed_on(gmt_schd_t *s, int device, uint64_t base)
{
  return gmt_bytes_add(base, gmt_config_quotas_on(s->cfg, device, true, NULL, NULL));
}

/* A device's GPU space as server/swap.c takes it. */
static gmt_swap_space_t space_of(gmt_schd_t *s, uint64_t limit, uint64_t base)
{
  return (gmt_swap_space_t){.limit = limit,
                            .base = base,
                            .now_ms = uv_now(s->loop),
                            .may_ask = may_ask,
                            .last_run = last_run,
                            .waits = waits,
                            .idle_out_ms = idle_out_ms,
                            .arg = s};
}

/* Past the GPU space's trigger, idle swap processes are asked to move
 * out down to its stop threshold (docs/tiers.md, "Pressure"): after a
 * raise is granted (but the raising pod's, about to run), and at swap
 * pods' heartbeats (a pod that ran at the raise may be idle now). */
static void relieve(gmt_schd_t *s, const char *spare, int device)
{
  uint64_t limit, base, trigger, stop, excess = 0;
  if (!s->swap || gmt__tiers_gpu_space(s, device, &limit, &base, &trigger, &stop) < 0)
    return;
  gmt_swap_space_t sp = space_of(s, limit, base);
  sp.committed = committed_on(s, device, base);
  long asked = gmt_swap_pressure(s->swap, spare, device, &sp, trigger, stop, &excess);
  if (asked > 0)
    gmt_info("swap: device %d is occupied past its trigger (%.1f MiB); %ld idle process%s asked "
             "to move %.1f MiB out, down to its stop threshold (%.1f MiB)",
             device, (double)trigger / MIB, asked, asked == 1 ? "" : "es", (double)excess / MIB,
             (double)stop / MIB);
  else if (asked < 0)
    gmt_warn("swap: device %d past its trigger: %s", device, gmt_strerror((int)asked));
}

static Gmt__ResidentReason wire_reason(gmt_swap_reason_t r)
{
  switch (r) {
  case GMT_SWAP_ROOM: return GMT__RESIDENT_REASON__RESIDENT_REASON_ROOM;
  case GMT_SWAP_WAIT: return GMT__RESIDENT_REASON__RESIDENT_REASON_WAIT;
  case GMT_SWAP_PARTIAL: return GMT__RESIDENT_REASON__RESIDENT_REASON_PARTIAL;
  case GMT_SWAP_TOO_BIG: /* never fits, as the next: */
  case GMT_SWAP_QUOTA: break;
  }
  return GMT__RESIDENT_REASON__RESIDENT_REASON_TOO_BIG;
}

/* mode=um: managed memory past the card's free memory can hang the GPU
 * (docs/tiers.md, "Unified memory"). A new managed allocation of
 * r->bytes less what the process has fits only when, with every other
 * um process's managed bytes off the card (they come back), it stays
 * within r->card_free (the requester's own bytes off the card are taken
 * off it already). *more: the raise; *off: those other bytes, as their
 * last reports say. */
static bool card_full(gmt_schd_t *s, const Gmt__ResidentRequest *r, uint64_t *more, uint64_t *off)
{
  *off = 0;
  for (size_t i = 0; s->pods && i < s->pods->npods; i++) {
    const gmt_pod_t *p = &s->pods->pods[i];
    if (p->cfg.mode != GMT__MEM_MODE__MEM_UM)
      continue;
    for (size_t j = 0; j < p->nprocs; j++)
      if (p->procs[j].pid != r->pid && p->procs[j].c.swap_device == r->device)
        *off = gmt_bytes_add(*off, p->procs[j].c.swap_host);
  }
  uint64_t had = s->swap ? gmt_swap_resident(s->swap, r->pod, r->pid, r->device) : 0;
  *more = r->bytes > had ? r->bytes - had : 0;
  return gmt_bytes_add(*more, *off) > r->card_free;
}

void gmt__rpc_resident(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req)
{
  const Gmt__ResidentRequest *r = req->resident_req;
  gmt_pod_t *pod = gmt_pods_find(s->pods, r->pod);
  if (!pod) {
    gmt__reply_nopod(call, s->cfg, r->pod);
    return;
  }
  if (r->pid == 0) {
    gmt_call_reply_error(call, -EINVAL, "Resident names its process (pid 0 is none)");
    return;
  }
  if (r->device < 0 || r->device >= GMT_SWAP_DEVICES) {
    gmt_call_reply_error(call, -EINVAL, "device %d is out of range (0 to %d)", r->device,
                         GMT_SWAP_DEVICES - 1);
    return;
  }
  if (!gmt_mem_mode_moves(pod->cfg.mode)) {
    /* Its reservations occupy the card already; resident bytes would
     * count them twice. */
    gmt_call_reply_error(call, -EPERM,
                         "pod '%s' is in mode %s: Resident is for mode=swap and mode=um pods "
                         "(docs/tiers.md)",
                         pod->cfg.name, gmt_mem_mode_name(pod->cfg.mode));
    return;
  }
  /* devices=: no more bytes on a GPU the pod may not use; lowering is
   * always granted (what a reload took away comes off). */
  if (!gmt_pod_config_allows(&pod->cfg, r->device) &&
      r->bytes > gmt_swap_resident(s->swap, pod->cfg.name, r->pid, r->device)) {
    gmt__reply_device_refused(call, s->cfg, pod, r->pid, r->device, "resident memory");
    return;
  }
  Gmt__ResidentReply body = GMT__RESIDENT_REPLY__INIT;
  uint64_t more = 0, off = 0;
  if (r->card_free && card_full(s, r, &more, &off)) {
    gmt_info("um: pod '%s' pid %u: %" PRIu64 " bytes more of managed memory on device %d refused: "
             "the card has %" PRIu64 " free and other processes' managed memory off it is %" PRIu64,
             pod->cfg.name, r->pid, more, r->device, r->card_free, off);
    body.reason = GMT__RESIDENT_REASON__RESIDENT_REASON_CARD_FULL;
    body.room = r->card_free > off ? r->card_free - off : 0;
    gmt_call_reply_body(call, GMT__ENVELOPE__BODY_RESIDENT_REP, &body);
    return;
  }
  uint64_t limit = 0, base = 0;
  if (gmt__tiers_gpu_space(s, r->device, &limit, &base, NULL, NULL) < 0) {
    /* No space declared: the card's own out-of-memory is the bound. */
    body.granted = true;
    body.reason = GMT__RESIDENT_REASON__RESIDENT_REASON_NO_SPACE;
    gmt_call_reply_body(call, GMT__ENVELOPE__BODY_RESIDENT_REP, &body);
    return;
  }
  expire(s);
  gmt_swap_space_t sp = space_of(s, limit, base);
  sp.quota = pod->cfg.memory_limit;
  gmt_swap_answer_t a;
  uint64_t had = gmt_swap_resident(s->swap, pod->cfg.name, r->pid, r->device);
  int rc = gmt_swap_request_part(s->swap, pod->cfg.name, r->pid, r->device, r->bytes, r->at_least,
                                 &sp, &a);
  if (rc < 0) {
    gmt_call_reply_error(call, rc, "cannot count resident bytes on device %d: %s", r->device,
                         gmt_strerror(rc));
    return;
  }
  if (a.reason == GMT_SWAP_QUOTA && gmt__say_now(&pod->said_quota_ms, uv_now(s->loop)))
    gmt_info("swap: pod '%s' pid %u: %" PRIu64 " bytes (%.1f MiB) on device %d refused: past its "
             "quota of %" PRIu64 " bytes (%.1f MiB), with %" PRIu64
             " resident elsewhere in the pod",
             pod->cfg.name, r->pid, r->bytes, (double)r->bytes / MIB, r->device,
             pod->cfg.memory_limit, (double)pod->cfg.memory_limit / MIB, a.pod_total - had);
  if (a.asked)
    gmt_info("swap: pod '%s' pid %u wants %" PRIu64 " bytes (%.1f MiB) on device %d, %" PRIu64
             " short; %zu process%s of idle pods asked to move out",
             pod->cfg.name, r->pid, r->bytes, (double)r->bytes / MIB, r->device, a.shortfall,
             a.asked, a.asked == 1 ? "" : "es");
  if (a.reason == GMT_SWAP_PARTIAL)
    gmt_debug("swap: pod '%s' pid %u device %d: %" PRIu64 " of %" PRIu64 " bytes granted, the "
              "rest as the others move out",
              pod->cfg.name, r->pid, r->device, a.granted_total, r->bytes);
  else if (a.reason == GMT_SWAP_WAIT && !a.asked)
    gmt_debug("swap: pod '%s' pid %u wants %" PRIu64 " bytes on device %d, %" PRIu64
              " short, %" PRIu64 " coming from targets already set: wait",
              pod->cfg.name, r->pid, r->bytes, r->device, a.shortfall, a.coming);
  else if (a.reason != GMT_SWAP_WAIT && a.reason != GMT_SWAP_QUOTA)
    gmt_debug("swap: pod '%s' pid %u device %d: %" PRIu64 " -> %" PRIu64 " bytes %s, room %" PRIu64,
              pod->cfg.name, r->pid, r->device, had, r->bytes,
              a.granted ? "granted" : "refused (more than the space's limit)", a.room);
  if (a.granted && r->bytes > had)
    relieve(s, pod->cfg.name, r->device);
  if (a.granted_total > had)
    gmt__turns_resident(s, pod->cfg.name, r->device, a.granted_total - had, r->at_least > 0);
  body.granted = a.granted;
  body.reason = wire_reason(a.reason);
  body.retry_ms = a.retry_ms;
  body.room = a.room;
  body.granted_bytes = a.granted_total;
  gmt_call_reply_body(call, GMT__ENVELOPE__BODY_RESIDENT_REP, &body);
}

/* mode=swap: whether the pod's processes are to prepare host copies: one
 * of them holds memory on a device that gmt_swap_prepare_due calls
 * contested (docs/tiers.md, "Prepared host copies"). mode=um pins
 * nothing to move, so never. */
static bool prepare_due(gmt_schd_t *s, const gmt_pod_t *pod)
{
  if (pod->cfg.mode != GMT__MEM_MODE__MEM_SWAP)
    return false;
  for (int d = 0; d < GMT_SWAP_DEVICES; d++) {
    uint64_t total = gmt_swap_device_total(s->swap, d), mine = 0, limit, base, stop;
    for (size_t i = 0; total && i < pod->nprocs; i++)
      mine = gmt_bytes_add(mine, gmt_swap_resident(s->swap, pod->cfg.name, pod->procs[i].pid, d));
    if (!mine || gmt__tiers_gpu_space(s, d, &limit, &base, NULL, &stop) < 0)
      continue;
    if (gmt_swap_prepare_due(gmt_bytes_add(base, total), stop, committed_on(s, d, base), limit))
      return true;
  }
  return false;
}

int gmt__swap_heartbeat_evicts(gmt_schd_t *s, const gmt_pod_t *pod, Gmt__HeartbeatReply *reply)
{
  if (!s->swap || !gmt_mem_mode_moves(pod->cfg.mode))
    return 0;
  expire(s);
  for (int d = 0; d < GMT_SWAP_DEVICES; d++)
    if (gmt_swap_device_total(s->swap, d) > 0)
      relieve(s, NULL, d);
  uint64_t host_room, disk_room;
  const char *dir;
  bool bounded = gmt__tiers_swap_rooms(s, &host_room, &disk_room, &dir);
  if (prepare_due(s, pod)) {
    reply->prepare = true;
    reply->prepare_bounded = bounded;
    reply->prepare_host_room = host_room;
  }
  size_t n = gmt_swap_evicts(s->swap, pod->cfg.name, NULL, 0);
  if (n == 0)
    return 0;
  /* One block: the pointers, the messages, then the policy's list. */
  Gmt__Evict **pp = calloc(n, sizeof *pp + sizeof **pp + sizeof(gmt_swap_evict_t));
  if (!pp)
    return -ENOMEM;
  Gmt__Evict *ev = (Gmt__Evict *)(pp + n);
  gmt_swap_evict_t *list = (gmt_swap_evict_t *)(ev + n);
  n = gmt_swap_evicts(s->swap, pod->cfg.name, list, n);
  for (size_t i = 0; i < n; i++) {
    gmt__evict__init(&ev[i]);
    ev[i].pid = list[i].pid;
    ev[i].keep_bytes = list[i].keep_bytes;
    /* Each is told the whole room: victims of one heartbeat may together
     * pass it by what they move at once (docs/tiers.md). */
    ev[i].bounded = bounded;
    ev[i].host_room = host_room;
    ev[i].disk_room = disk_room;
    ev[i].spill_dir = (char *)dir;
    pp[i] = &ev[i];
    gmt_debug("swap: pod '%s' pid %u is asked to keep at most %" PRIu64 " bytes on the GPU",
              pod->cfg.name, list[i].pid, list[i].keep_bytes);
  }
  reply->n_evict = n;
  reply->evict = pp;
  return 0;
}

static void log_reclaim(void *arg, const char *pod, uint32_t pid, int device, uint64_t resident,
                        bool had_target)
{
  (void)arg;
  gmt_debug("swap: pod '%s' pid %u is gone (or no longer in swap mode): its %" PRIu64
            " resident bytes on device %d are no longer counted%s",
            pod, pid, resident, device, had_target ? ", its target is dropped" : "");
}

static bool pod_swaps(void *arg, const char *name)
{
  const gmt_pod_t *pod = gmt_pods_find(((gmt_schd_t *)arg)->pods, name);
  return pod && gmt_mem_mode_moves(pod->cfg.mode);
}

void gmt__swap_pod_changed(gmt_schd_t *s, const gmt_pod_t *pod)
{
  if (!s->swap)
    return;
  /* A pod that a reload removed, or took out of swap mode, is no longer
   * visited by name: sweep. */
  gmt_swap_retain_pods(s->swap, pod_swaps, log_reclaim, s);
  gmt__turns_forget(s);
  if (!gmt_mem_mode_moves(pod->cfg.mode))
    return;
  gmt__turns_reported(s, pod);
  uint32_t stack[64] = {0}, *pids = stack;
  if (pod->nprocs > sizeof stack / sizeof stack[0] &&
      !(pids = malloc(pod->nprocs * sizeof *pids))) {
    gmt_warn("pod '%s': out of memory checking its resident bytes; later", pod->cfg.name);
    return;
  }
  for (size_t i = 0; i < pod->nprocs; i++)
    pids[i] = pod->procs[i].pid;
  uint64_t now = uv_now(s->loop);
  gmt_swap_retain(s->swap, pod->cfg.name, pids, pod->nprocs, now, log_reclaim, s);
  if (pids != stack)
    free(pids);
  /* After a restart: what the processes have on the GPU, as they report
   * it, until their own Resident calls say more. */
  for (size_t i = 0; i < pod->nprocs; i++) {
    const gmt_proc_t *pr = &pod->procs[i];
    uint64_t add = gmt_swap_adopt(s->swap, pod->cfg.name, pr->pid, pr->c.swap_device,
                                  pr->c.swap_gpu, pod->cfg.memory_limit, now);
    if (add)
      gmt_info("pod '%s': pid %u reports %" PRIu64 " bytes on device %d in swap mode; counted "
               "as resident",
               pod->cfg.name, pr->pid, add, pr->c.swap_device);
  }
}
