/* gmt-pmgr: the pod's memory calls (Reserve, Release, MemInfo, Advise for
 * pinned host memory, and mode=swap's Resident). They are stamped with the pod's name (a process
 * cannot name another pod) and forwarded to the scheduler, whose ledger
 * decides.
 *
 * While the scheduler cannot be reached (the heartbeat says so, or a
 * forwarded call gets no answer) the pod manager decides, from its view of
 * the whole pod: what each process last reported holding, plus what was
 * granted and given back here since that report, summed against the pod's
 * GPU_MEM as last heard. So the quota holds for the pod's processes
 * together through an outage, not for each alone. A report that shows
 * more held settles the grants it includes (a report from before a grant
 * settles nothing), so the count never drops below what is held.
 *
 * Advise is the exception: the pinned budget is the node's, shared by
 * every pod, and no pod manager can know what the others took. So while
 * the scheduler is away every Advise is answered no, PIN_REASON_UNREACHABLE,
 * and what it carried is lost: the bytes it gave back stay charged to the
 * process in the scheduler's ledger (until the process exits, or the pod
 * is forgotten and its reports rebuilt: over-counting is the safe error),
 * and its buffer histories are not recorded. (A call whose answer came too
 * late may have been applied there all the same: a grant charged, never
 * pinned, until the process exits; a release given back, which the
 * process, having had an answer, does not send again.)
 *
 * Resident (mode=swap: the bytes a process wants on the GPU) is granted
 * while the scheduler is away, RESIDENT_REASON_UNREACHABLE: the node's
 * other pods are out of sight, and refusing would stall the process for
 * nothing; the card's own out-of-memory is then the bound (the hook's
 * side). The scheduler learns the bytes again from the process's next
 * Resident call or, after its restart, from its reports.
 *
 * A refusal by the scheduler (over quota, a pod it does not list) is an
 * answer and goes back as it is. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "gmt_error.h"
#include "gmt_log.h"
#include "pmgr_memory.h"
#include "pmgr_procs.h"
#include "pmgr_schd.h"

/* Well below the hook's own bound on a memory call (1.5 s), so that a
 * process gets the pod's answer, not its own. */
#define PMGR_FORWARD_TIMEOUT_MS 800
/* Below the hook's bound on an Advise (500 ms) for the same reason, and
 * one more: a process that gets no answer sends its release again with
 * its next call, so the pod manager must answer (UNREACHABLE: the release
 * is lost, the safe error) before the process gives up, or a release the
 * scheduler applied late would be given back twice. */
#define PMGR_ADVISE_TIMEOUT_MS 400
/* A Pick may wait for the scheduler's probe of every GPU (daemon.probe-
 * timeout, 3 s by default; under 1 s for two H200s): above that, and
 * below the hook's bound on it (GMT_AUTO_DEVICE_TIMEOUT_MS, 5 s). */
#define PMGR_PICK_TIMEOUT_MS 4000
/* A Resident comes before an allocation's memory is made or brought back:
 * the process waits for it, so the pod manager answers (UNREACHABLE) well
 * before the hook would give up on it. */
#define PMGR_RESIDENT_TIMEOUT_MS 400
#define MIB (1024.0 * 1024.0)

/* What was granted (up) and given back (down) here for pid since its last
 * report, which said seen. */
struct pmgr_mem_proc {
  pmgr_mem_proc_t *next;
  uint32_t pid;
  uint64_t seen, up, down;
};

static pmgr_mem_proc_t *local_find(gmt_pmgr_t *pm, uint32_t pid, bool create)
{
  for (pmgr_mem_proc_t *m = pm->mem_local; m; m = m->next)
    if (m->pid == pid)
      return m;
  if (!create)
    return NULL;
  pmgr_mem_proc_t *m = calloc(1, sizeof *m);
  if (!m)
    return NULL;
  m->pid = pid;
  gmt__pmgr_proc_reserved(pm, pid, &m->seen);
  m->next = pm->mem_local;
  pm->mem_local = m;
  return m;
}

/* The pod's memory as the pod manager sees it. */
static uint64_t pod_used(gmt_pmgr_t *pm)
{
  uint64_t up = 0, down = 0, reported = gmt__pmgr_procs_reserved(pm);
  for (pmgr_mem_proc_t *m = pm->mem_local; m; m = m->next) {
    up += m->up;
    down += m->down;
  }
  uint64_t used = reported + up;
  return used > down ? used - down : 0;
}

void gmt__pmgr_memory_proc(gmt_pmgr_t *pm, uint32_t pid, bool gone)
{
  for (pmgr_mem_proc_t **pp = &pm->mem_local; *pp; pp = &(*pp)->next) {
    pmgr_mem_proc_t *m = *pp;
    if (m->pid != pid)
      continue;
    if (gone) {
      *pp = m->next;
      free(m);
      return;
    }
    uint64_t now = m->seen;
    gmt__pmgr_proc_reserved(pm, pid, &now);
    if (now > m->seen)
      m->up -= now - m->seen < m->up ? now - m->seen : m->up;
    else
      m->down -= m->seen - now < m->down ? m->seen - now : m->down;
    m->seen = now;
    return;
  }
}

static void reply_local(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req)
{
  uint64_t limit = pm->config.memory_limit, used = pod_used(pm);
  switch (req->body_case) {
  case GMT__ENVELOPE__BODY_RESERVE_REQ: {
    const Gmt__ReserveRequest *r = req->reserve_req;
    if (pm->pod_unlisted) {
      gmt_call_reply_error(call, GMT_ENOPOD,
                           "the scheduler no longer lists pod '%s': no memory beyond what it holds",
                           pm->name);
      return;
    }
    if (!gmt__pmgr_config_allows(&pm->config, r->device)) {
      gmt_call_reply_error(call, GMT_EDEVICE,
                           "pod '%s' may not use GPU %d (devices= in its config; counted by its "
                           "pod manager: the scheduler is unreachable)",
                           pm->name, r->device);
      return;
    }
    if (used > limit || r->bytes > limit - used) {
      gmt_call_reply_error(call, GMT_EQUOTA,
                           "pod '%s' holds %" PRIu64 " bytes (%.1f MiB) of its limit %" PRIu64
                           " bytes (%.1f MiB); %" PRIu64
                           " more do not fit (counted by its pod manager: the scheduler is "
                           "unreachable)",
                           pm->name, used, (double)used / MIB, limit, (double)limit / MIB,
                           r->bytes);
      return;
    }
    pmgr_mem_proc_t *m = local_find(pm, r->pid, true);
    if (!m) {
      gmt_call_reply_error(call, -ENOMEM, "pod manager out of memory");
      return;
    }
    m->up += r->bytes;
    gmt_debug("pid %u: %" PRIu64 " bytes granted locally, pod holds %" PRIu64 " of %" PRIu64,
              r->pid, r->bytes, used + r->bytes, limit);
    Gmt__ReserveReply body = GMT__RESERVE_REPLY__INIT;
    body.memory_used = used + r->bytes;
    body.memory_limit = limit;
    gmt_call_reply_body(call, GMT__ENVELOPE__BODY_RESERVE_REP, &body);
    return;
  }
  case GMT__ENVELOPE__BODY_RELEASE_REQ: {
    const Gmt__ReleaseRequest *r = req->release_req;
    pmgr_mem_proc_t *m = local_find(pm, r->pid, true);
    if (m)
      m->down += r->bytes; /* not counted: the safe error */
    Gmt__ReleaseReply body = GMT__RELEASE_REPLY__INIT;
    body.memory_used = pod_used(pm);
    gmt_call_reply_body(call, GMT__ENVELOPE__BODY_RELEASE_REP, &body);
    return;
  }
  case GMT__ENVELOPE__BODY_MEMINFO_REQ: {
    Gmt__MemInfoReply body = GMT__MEM_INFO_REPLY__INIT;
    body.memory_used = used;
    body.memory_limit = limit;
    gmt_call_reply_body(call, GMT__ENVELOPE__BODY_MEMINFO_REP, &body);
    return;
  }
  case GMT__ENVELOPE__BODY_ADVISE_REQ: {
    /* Never a pin without the scheduler's ledger (see the top). */
    const Gmt__AdviseRequest *r = req->advise_req;
    if (r->bytes)
      gmt_debug("pid %u: pin of %" PRIu64 " bytes refused: the scheduler is unreachable", r->pid,
                r->bytes);
    Gmt__AdviseReply body = GMT__ADVISE_REPLY__INIT;
    body.pin = false;
    body.reason = GMT__PIN_REASON__PIN_REASON_UNREACHABLE;
    gmt_call_reply_body(call, GMT__ENVELOPE__BODY_ADVISE_REP, &body);
    return;
  }
  case GMT__ENVELOPE__BODY_RESIDENT_REQ: {
    const Gmt__ResidentRequest *r = req->resident_req;
    gmt_debug("pid %u: %llu bytes resident on device %d granted: the scheduler is unreachable",
              r->pid, (unsigned long long)r->bytes, r->device);
    Gmt__ResidentReply body = GMT__RESIDENT_REPLY__INIT;
    body.granted = true;
    body.reason = GMT__RESIDENT_REASON__RESIDENT_REASON_UNREACHABLE;
    gmt_call_reply_body(call, GMT__ENVELOPE__BODY_RESIDENT_REP, &body);
    return;
  }
  case GMT__ENVELOPE__BODY_DEVICES_REQ: {
    /* Unknown, each: the process keeps its CUDA ordinals until it asks
     * again (hook/devmap.c). */
    const Gmt__DevicesRequest *r = req->devices_req;
    int32_t *index = calloc(r->n_bus_ids + 1, sizeof *index);
    if (!index) {
      gmt_call_reply_error(call, -ENOMEM, "pod manager out of memory");
      return;
    }
    for (size_t i = 0; i < r->n_bus_ids; i++)
      index[i] = -1;
    Gmt__DevicesReply body = GMT__DEVICES_REPLY__INIT;
    body.n_index = r->n_bus_ids;
    body.index = index;
    gmt_call_reply_body(call, GMT__ENVELOPE__BODY_DEVICES_REP, &body);
    free(index);
    return;
  }
  case GMT__ENVELOPE__BODY_PICK_REQ:
    gmt_call_reply_error(call, -EHOSTUNREACH,
                         "cannot pick a GPU: the scheduler is unreachable from pod '%s'", pm->name);
    return;
  default: gmt_call_reply_error(call, -EINVAL, "not a memory call"); return;
  }
}

/* On the loop: a forwarded call that got no answer. */
static void on_unanswered(void *data, gmt_call_t *call, int status)
{
  if (status < 0) {
    gmt_call_reply_error(call, status, "pod manager is stopping");
    return;
  }
  reply_local(data, call, gmt_call_request(call));
}

typedef struct forward {
  gmt_pmgr_t *pm;
  gmt_call_t *call;
} forward_t;

/* On an nng thread of the scheduler client. */
static void on_forwarded(void *arg, int rc, Gmt__Envelope *rep)
{
  forward_t *f = arg;
  gmt_pmgr_t *pm = f->pm;
  gmt_call_t *call = f->call;
  free(f);

  if (rc == -ESHUTDOWN)
    gmt_call_reply_error(call, rc, "pod manager is stopping"); /* the line closed */
  else if (rc < 0)
    gmt_inbox_push_call(&pm->inbox, call, on_unanswered, pm, "pod manager");
  else if (gmt_call_reply(call, rep) < 0)
    gmt_warn("cannot pass the scheduler's reply back to a process");
  gmt_wire_free(rep);
}

static void forward(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req)
{
  Gmt__Envelope env = *req;
  Gmt__ReserveRequest reserve;
  Gmt__ReleaseRequest release;
  Gmt__MemInfoRequest meminfo;
  Gmt__AdviseRequest advise;
  Gmt__ResidentRequest resident;
  Gmt__DevicesRequest devices;
  Gmt__PickRequest pick;
  char *pod = (char *)pm->name;
  int timeout_ms = PMGR_FORWARD_TIMEOUT_MS;

  /* Shallow copies: only the pod differs, and the request is packed
   * before gmt_client_call_async() returns. */
  switch (req->body_case) {
  case GMT__ENVELOPE__BODY_RESERVE_REQ:
    reserve = *req->reserve_req;
    reserve.pod = pod;
    env.reserve_req = &reserve;
    break;
  case GMT__ENVELOPE__BODY_RELEASE_REQ:
    release = *req->release_req;
    release.pod = pod;
    env.release_req = &release;
    break;
  case GMT__ENVELOPE__BODY_MEMINFO_REQ:
    meminfo = *req->meminfo_req;
    meminfo.pod = pod;
    env.meminfo_req = &meminfo;
    break;
  case GMT__ENVELOPE__BODY_ADVISE_REQ:
    advise = *req->advise_req;
    advise.pod = pod;
    env.advise_req = &advise;
    timeout_ms = PMGR_ADVISE_TIMEOUT_MS;
    break;
  case GMT__ENVELOPE__BODY_RESIDENT_REQ:
    resident = *req->resident_req;
    resident.pod = pod;
    env.resident_req = &resident;
    timeout_ms = PMGR_RESIDENT_TIMEOUT_MS;
    break;
  case GMT__ENVELOPE__BODY_DEVICES_REQ:
    devices = *req->devices_req;
    devices.pod = pod;
    env.devices_req = &devices;
    break;
  case GMT__ENVELOPE__BODY_PICK_REQ:
    pick = *req->pick_req; /* a process picks among its own pod's GPUs */
    pick.pod = pod;
    env.pick_req = &pick;
    timeout_ms = PMGR_PICK_TIMEOUT_MS;
    break;
  default: gmt_call_reply_error(call, -EINVAL, "not a request to forward"); return;
  }

  forward_t *f = malloc(sizeof *f);
  if (!f) {
    gmt_call_reply_error(call, -ENOMEM, "pod manager out of memory");
    return;
  }
  f->pm = pm;
  f->call = call;
  int rc = gmt__pmgr_schd_call(pm, &env, timeout_ms, on_forwarded, f);
  if (rc < 0) {
    free(f);
    if (rc == -ESHUTDOWN)
      gmt_call_reply_error(call, rc, "pod manager is stopping");
    else
      reply_local(pm, call, req);
  }
}

void gmt__pmgr_handle_memory(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req)
{
  if (pm->schd_down)
    reply_local(pm, call, req);
  else
    forward(pm, call, req);
}

void gmt__pmgr_memory_close(gmt_pmgr_t *pm)
{
  while (pm->mem_local) {
    pmgr_mem_proc_t *m = pm->mem_local;
    pm->mem_local = m->next;
    free(m);
  }
}
