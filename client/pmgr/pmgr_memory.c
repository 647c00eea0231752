/* gmt-pmgr: the calls it forwards (gmt_rpc_kinds.h): the pod's memory
 * calls (Reserve, Release, MemInfo, Advise for pinned host memory, and
 * mode=swap's Resident) and the views Devices and Pick. They are stamped
 * with the pod's name (a process cannot name another pod) and forwarded
 * to the scheduler, whose ledger decides.
 *
 * While the scheduler cannot be reached (the heartbeat says so, or a
 * forwarded call gets no answer) the pod manager answers itself: memory
 * from its count of the whole pod (client/pmgr/outage_policy.h decides; this
 * file keeps the count and applies the verdicts). A report that shows more held settles
 * the grants it includes (a report from before a grant settles nothing),
 * so the count never drops below what is held. Each kind's answer then is
 * the table's (gmt_rpc_kinds.h, its outage column), made below.
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
 * answer and goes back as it is, but for one case: a Reserve refused for
 * the quota (by the scheduler, or here in an outage) that the pod's live
 * allocations leave room for is held (client/pmgr/slack_policy.h): the pod's
 * processes that report slack are asked for it in the replies to their
 * reports, and the Reserve is tried again as their Releases come back,
 * until it is granted or the hold ends (at most GMT_SLACK_HOLD_MS, then
 * the last refusal is the answer). The loop never waits for it: a timer
 * looks at the held Reserves while there are any, and the policy's pass
 * (gmt_held_step()) says what to do with each. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_rpc_kinds.h"
#include "pmgr_memory.h"
#include "pmgr_procs.h"
#include "pmgr_schd.h"
#include "outage_policy.h"

/* Held Reserves are looked at this often (when each is tried again is
 * the policy's: client/pmgr/outage_policy.h). */
#define PMGR_HELD_TICK_MS 10
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

/* The pod's memory as the pod manager counts it. */
static gmt_outage_count_t count_of(gmt_pmgr_t *pm)
{
  gmt_outage_count_t c = {.limit = pm->config.memory_limit,
                          .reported = gmt__pmgr_procs_reserved(pm)};
  for (pmgr_mem_proc_t *m = pm->mem_local; m; m = m->next) {
    c.up += m->up;
    c.down += m->down;
  }
  return c;
}

static uint64_t pod_used(gmt_pmgr_t *pm)
{
  gmt_outage_count_t c = count_of(pm);
  return gmt_outage_used(&c);
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

/* ---- Reserves held for slack ---- */

/* A Reserve waiting for the pod's slack: refused for the quota, or come
 * while others wait (it does not overtake them). */
struct pmgr_held {
  pmgr_held_t *next;
  gmt_call_t *call;
  uint32_t pid;
  uint64_t bytes;
  uint64_t since_ms;      /* when the pod manager had it first */
  uint64_t tried_ms;      /* its last try, 0: none yet */
  uint64_t tried_news;    /* pm->ledger_news then */
  bool in_flight;         /* a try is with the scheduler, which owns the call meanwhile */
  Gmt__Envelope *refusal; /* the scheduler's last, the answer at the end */
  bool here;              /* else refused by the count here (an outage) */
};

/* A Reserve with the scheduler, and its answer on the way to the loop. */
typedef struct {
  gmt_inbox_item_t item; /* first: on_reserve_landed finds the whole from it */
  gmt_pmgr_t *pm;
  gmt_call_t *call;
  pmgr_held_t *held; /* NULL: its first try */
  uint64_t since_ms;
  int rc;
  Gmt__Envelope *rep;
} reserve_up_t;

static bool is_quota_refusal(const Gmt__Envelope *rep)
{
  return rep && rep->body_case == GMT__ENVELOPE__BODY_ERROR && rep->error &&
         rep->error->code == GMT_EQUOTA;
}

/* On an nng thread: what a Reserve or Release reply says of the pod's total
 * in the ledger, for the held Reserves. */
static void note_ledger(gmt_pmgr_t *pm, int rc, const Gmt__Envelope *rep)
{
  if (rc < 0 || !rep)
    return;
  if (rep->body_case == GMT__ENVELOPE__BODY_RESERVE_REP && rep->reserve_rep)
    atomic_store(&pm->ledger_seen, rep->reserve_rep->memory_used);
  else if (rep->body_case == GMT__ENVELOPE__BODY_RELEASE_REP && rep->release_rep)
    atomic_store(&pm->ledger_seen, rep->release_rep->memory_used);
  else
    return;
  atomic_fetch_add(&pm->ledger_news, 1);
}

/* The pod as its reports say, seen from pid (the others' slack). */
static gmt_slack_pod_t slack_of(gmt_pmgr_t *pm, uint32_t pid)
{
  gmt_slack_pod_t pod = {.limit = pm->config.memory_limit};
  gmt__pmgr_procs_slack(pm, pid, &pod.used, &pod.others_slack);
  return pod;
}

/* The count's refusal of r (the scheduler is unreachable). */
static void refuse_local(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__ReserveRequest *r)
{
  uint64_t limit = pm->config.memory_limit, used = pod_used(pm);
  gmt_call_reply_error(call, GMT_EQUOTA,
                       "pod '%s' holds %" PRIu64 " bytes (%.1f MiB) of its limit %" PRIu64
                       " bytes (%.1f MiB); %" PRIu64
                       " more do not fit (counted by its pod manager: the scheduler is "
                       "unreachable)",
                       pm->name, used, (double)used / MIB, limit, (double)limit / MIB, r->bytes);
}

/* In an outage: grants r from the count when it fits (true), else false
 * and nothing is answered. */
static bool grant_local(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__ReserveRequest *r)
{
  gmt_outage_count_t c = count_of(pm);
  uint64_t limit = c.limit, used = gmt_outage_used(&c);
  if (!gmt_outage_fits(&c, r->bytes))
    return false;
  pmgr_mem_proc_t *m = local_find(pm, r->pid, true);
  if (!m) {
    gmt_call_reply_error(call, -ENOMEM, "pod manager out of memory");
    return true;
  }
  m->up += r->bytes;
  gmt_debug("pid %u: %" PRIu64 " bytes granted locally, pod holds %" PRIu64 " of %" PRIu64, r->pid,
            r->bytes, used + r->bytes, limit);
  Gmt__ReserveReply body = GMT__RESERVE_REPLY__INIT;
  body.memory_used = used + r->bytes;
  body.memory_limit = limit;
  gmt_call_reply_body(call, GMT__ENVELOPE__BODY_RESERVE_REP, &body);
  return true;
}

static const Gmt__ReserveRequest *reserve_of(gmt_call_t *call)
{
  return gmt_call_request(call)->reserve_req;
}

/* Answers a held Reserve with its last refusal: the scheduler's, or the
 * count's in an outage. One never tried is answered only when the pod
 * manager stops. */
static void answer_refusal(gmt_pmgr_t *pm, const pmgr_held_t *h)
{
  if (h->refusal) {
    if (gmt_call_reply(h->call, h->refusal) < 0)
      gmt_debug("a refusal could not be sent (the process has gone?)");
  } else if (h->here) {
    refuse_local(pm, h->call, reserve_of(h->call));
  } else {
    gmt_call_reply_error(h->call, -ESHUTDOWN, "pod manager is stopping");
  }
}

static void held_drop(gmt_pmgr_t *pm, pmgr_held_t *h)
{
  for (pmgr_held_t **pp = &pm->held; *pp; pp = &(*pp)->next) {
    if (*pp == h) {
      *pp = h->next;
      pm->nheld--;
      break;
    }
  }
  gmt_wire_free(h->refusal);
  free(h);
}

static void on_held_tick(uv_timer_t *t);

/* On the loop: holds call's Reserve behind the others; NULL (nothing
 * answered) when out of memory. tried: it was just refused (refusal: the
 * scheduler's, owned from here; NULL: by the count here), else it has not
 * been tried. */
static pmgr_held_t *held_add(gmt_pmgr_t *pm, gmt_call_t *call, uint64_t since_ms, uint64_t now,
                             bool tried, Gmt__Envelope *refusal)
{
  const Gmt__ReserveRequest *r = reserve_of(call);
  pmgr_held_t *h = calloc(1, sizeof *h);
  if (!h)
    return NULL;
  h->call = call;
  h->pid = r->pid;
  h->bytes = r->bytes;
  h->since_ms = since_ms;
  h->tried_ms = tried ? now : 0;
  h->tried_news = atomic_load(&pm->ledger_news);
  h->refusal = refusal;
  h->here = tried && !refusal;
  pmgr_held_t **pp = &pm->held;
  while (*pp)
    pp = &(*pp)->next;
  *pp = h;
  if (pm->nheld++ == 0)
    uv_timer_start(&pm->held_timer, on_held_tick, PMGR_HELD_TICK_MS, PMGR_HELD_TICK_MS);
  gmt_debug("pid %u: %" PRIu64 " bytes %s; held while the pod gives back slack", r->pid, r->bytes,
            tried ? "refused for the quota" : "behind other Reserves");
  return h;
}

/* As held_add() when the policy holds it (the held are not too many). */
static pmgr_held_t *hold(gmt_pmgr_t *pm, gmt_call_t *call, uint64_t since_ms, bool tried,
                         Gmt__Envelope *refusal)
{
  const Gmt__ReserveRequest *r = reserve_of(call);
  uint64_t now = gmt_now_ms();
  gmt_slack_pod_t pod = slack_of(pm, r->pid);
  if (!gmt_held_admit(&pod, r->bytes, since_ms, now, pm->nheld >= PMGR_HELD_MAX))
    return NULL;
  return held_add(pm, call, since_ms, now, tried, refusal);
}

/* On the loop: call's Reserve was refused (refusal as in hold()): held,
 * or answered with the refusal. */
static void hold_or_refuse(gmt_pmgr_t *pm, gmt_call_t *call, uint64_t since_ms,
                           Gmt__Envelope *refusal)
{
  if (hold(pm, call, since_ms, true, refusal))
    return;
  if (refusal) {
    if (gmt_call_reply(call, refusal) < 0)
      gmt_debug("a refusal could not be sent (the process has gone?)");
    gmt_wire_free(refusal);
  } else {
    refuse_local(pm, call, reserve_of(call));
  }
}

/* ---- answers while the scheduler is unreachable ---- */

typedef void (*outage_fn)(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req,
                          uint64_t since_ms);

/* Reserve: the policy decides on the count (client/pmgr/outage_policy.h). */
static void outage_reserve(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req,
                           uint64_t since_ms)
{
  const Gmt__ReserveRequest *r = req->reserve_req;
  gmt_outage_reserve_t in = {
      .count = count_of(pm),
      .slack = slack_of(pm, r->pid),
      .bytes = r->bytes,
      .since_ms = since_ms,
      .now_ms = gmt_now_ms(),
      .unlisted = pm->pod_unlisted,
      .device_allowed =
          gmt_podcfg_devices_allow(pm->config.devices, pm->config.n_devices, r->device),
      .others_held = pm->held != NULL,
      .held_full = pm->nheld >= PMGR_HELD_MAX,
  };
  gmt_outage_verdict_t v = gmt_outage_reserve(&in);
  if (v == GMT_OUTAGE_HOLD_BEHIND || v == GMT_OUTAGE_HOLD) {
    if (held_add(pm, call, since_ms, in.now_ms, v == GMT_OUTAGE_HOLD, NULL))
      return;
    /* No memory to hold it: answered now. */
    v = gmt_outage_fits(&in.count, r->bytes) ? GMT_OUTAGE_GRANT : GMT_OUTAGE_REFUSE;
  }
  switch (v) {
  case GMT_OUTAGE_NOPOD:
    gmt_call_reply_error(call, GMT_ENOPOD,
                         "the scheduler no longer lists pod '%s': no memory beyond what it holds",
                         pm->name);
    return;
  case GMT_OUTAGE_DEVICE:
    gmt_call_reply_error(call, GMT_EDEVICE,
                         "pod '%s' may not use GPU %d (devices= in its config; counted by its "
                         "pod manager: the scheduler is unreachable)",
                         pm->name, r->device);
    return;
  case GMT_OUTAGE_GRANT:
    if (grant_local(pm, call, r))
      return;
    refuse_local(pm, call, r);
    return;
  default: refuse_local(pm, call, r); return;
  }
}

static void outage_release(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req,
                           uint64_t since_ms)
{
  (void)since_ms;
  const Gmt__ReleaseRequest *r = req->release_req;
  pmgr_mem_proc_t *m = local_find(pm, r->pid, true);
  if (m)
    m->down += r->bytes;                 /* not counted: the safe error */
  atomic_fetch_add(&pm->ledger_news, 1); /* held Reserves: look again */
  Gmt__ReleaseReply body = GMT__RELEASE_REPLY__INIT;
  body.memory_used = pod_used(pm);
  gmt_call_reply_body(call, GMT__ENVELOPE__BODY_RELEASE_REP, &body);
}

static void outage_meminfo(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req,
                           uint64_t since_ms)
{
  (void)req;
  (void)since_ms;
  gmt_outage_count_t c = count_of(pm);
  Gmt__MemInfoReply body = GMT__MEM_INFO_REPLY__INIT;
  body.memory_used = gmt_outage_used(&c);
  body.memory_limit = c.limit;
  gmt_call_reply_body(call, GMT__ENVELOPE__BODY_MEMINFO_REP, &body);
}

/* Never a pin without the scheduler's ledger (see the top). */
static void outage_advise(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req,
                          uint64_t since_ms)
{
  (void)pm;
  (void)since_ms;
  const Gmt__AdviseRequest *r = req->advise_req;
  if (r->bytes)
    gmt_debug("pid %u: pin of %" PRIu64 " bytes refused: the scheduler is unreachable", r->pid,
              r->bytes);
  Gmt__AdviseReply body = GMT__ADVISE_REPLY__INIT;
  body.pin = false;
  body.reason = GMT__PIN_REASON__PIN_REASON_UNREACHABLE;
  gmt_call_reply_body(call, GMT__ENVELOPE__BODY_ADVISE_REP, &body);
}

static void outage_resident(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req,
                            uint64_t since_ms)
{
  (void)pm;
  (void)since_ms;
  const Gmt__ResidentRequest *r = req->resident_req;
  gmt_debug("pid %u: %llu bytes resident on device %d granted: the scheduler is unreachable",
            r->pid, (unsigned long long)r->bytes, r->device);
  Gmt__ResidentReply body = GMT__RESIDENT_REPLY__INIT;
  body.granted = true;
  body.reason = GMT__RESIDENT_REASON__RESIDENT_REASON_UNREACHABLE;
  gmt_call_reply_body(call, GMT__ENVELOPE__BODY_RESIDENT_REP, &body);
}

/* Unknown, each: the process keeps its CUDA ordinals until it asks again
 * (hook/memory/devmap.c). */
static void outage_devices(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req,
                           uint64_t since_ms)
{
  (void)pm;
  (void)since_ms;
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
}

static void outage_pick(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req,
                        uint64_t since_ms)
{
  (void)req;
  (void)since_ms;
  gmt_call_reply_error(call, -EHOSTUNREACH,
                       "cannot pick a GPU: the scheduler is unreachable from pod '%s'", pm->name);
}

/* The outage answer of each call the table forwards (its outage column
 * says which kind of answer). */
static const outage_fn outage_answers[] = {
    [GMT__ENVELOPE__BODY_RESERVE_REQ] = outage_reserve,
    [GMT__ENVELOPE__BODY_RELEASE_REQ] = outage_release,
    [GMT__ENVELOPE__BODY_MEMINFO_REQ] = outage_meminfo,
    [GMT__ENVELOPE__BODY_ADVISE_REQ] = outage_advise,
    [GMT__ENVELOPE__BODY_RESIDENT_REQ] = outage_resident,
    [GMT__ENVELOPE__BODY_DEVICES_REQ] = outage_devices,
    [GMT__ENVELOPE__BODY_PICK_REQ] = outage_pick,
};

/* The scheduler is unreachable: the pod manager answers from its count.
 * since_ms: when it had the call first (a refused Reserve's hold counts
 * from then). */
static void reply_local(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req,
                        uint64_t since_ms)
{
  unsigned c = (unsigned)req->body_case;
  outage_fn fn = c < sizeof outage_answers / sizeof outage_answers[0] ? outage_answers[c] : NULL;
  if (fn)
    fn(pm, call, req, since_ms);
  else
    gmt_call_reply_error(call, -EINVAL, "not a memory call");
}

/* On the loop: a forwarded call that got no answer. */
static void on_unanswered(void *data, gmt_call_t *call, int status)
{
  if (status < 0) {
    gmt_call_reply_error(call, status, "pod manager is stopping");
    return;
  }
  reply_local(data, call, gmt_call_request(call), gmt_now_ms());
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

  note_ledger(pm, rc, rep);
  if (rc == -ESHUTDOWN)
    gmt_call_reply_error(call, rc, "pod manager is stopping"); /* the line closed */
  else if (rc < 0)
    gmt_inbox_push_call(&pm->inbox, call, on_unanswered, pm, "pod manager");
  else if (gmt_call_reply(call, rep) < 0)
    gmt_warn("cannot pass the scheduler's reply back to a process");
  gmt_wire_free(rep);
}

/* ---- a Reserve with the scheduler ---- */

static void held_landed(reserve_up_t *u);

/* On the loop, or handed back when the inbox closes. */
static void on_reserve_landed(gmt_inbox_item_t *item, int status)
{
  reserve_up_t *u = (reserve_up_t *)item;
  if (status < 0) {
    /* Stopping: what came is the answer (a held one's call is this try's). */
    if (u->rc == 0 && u->rep)
      gmt_call_reply(u->call, u->rep);
    else
      gmt_call_reply_error(u->call, -ESHUTDOWN, "pod manager is stopping");
    gmt_wire_free(u->rep);
    free(u);
    return;
  }
  if (u->held) {
    held_landed(u);
    return;
  }
  gmt_pmgr_t *pm = u->pm;
  if (u->rc == -ESHUTDOWN)
    gmt_call_reply_error(u->call, u->rc, "pod manager is stopping");
  else if (u->rc < 0)
    reply_local(pm, u->call, gmt_call_request(u->call), u->since_ms);
  else if (is_quota_refusal(u->rep)) {
    hold_or_refuse(pm, u->call, u->since_ms, u->rep);
    u->rep = NULL; /* the held Reserve's now */
  } else if (gmt_call_reply(u->call, u->rep) < 0)
    gmt_warn("cannot pass the scheduler's reply back to a process");
  gmt_wire_free(u->rep);
  free(u);
}

static void on_orphan_released(void *arg, int rc, Gmt__Envelope *rep)
{
  (void)arg;
  (void)rc;
  gmt_wire_free(rep);
}

/* On an nng thread: the scheduler granted a Reserve whose process has
 * given up on it (closed its connection: it takes the Reserve as not
 * granted); given back at once, or the ledger would charge the pod for
 * bytes no one holds until the process exits. */
static void release_orphan(gmt_pmgr_t *pm, const Gmt__ReserveRequest *r)
{
  Gmt__ReleaseRequest rl = GMT__RELEASE_REQUEST__INIT;
  rl.pod = (char *)pm->name;
  rl.pid = r->pid;
  rl.device = r->device;
  rl.bytes = r->bytes;
  Gmt__Envelope env = GMT__ENVELOPE__INIT;
  gmt_wire_set_body(&env, GMT__ENVELOPE__BODY_RELEASE_REQ, &rl);
  gmt_debug("pid %u: %" PRIu64 " bytes granted after it gave up; given back", r->pid, r->bytes);
  if (gmt__pmgr_schd_call(pm, &env, GMT_RPC_PMGR_WAIT_MS, on_orphan_released, NULL) < 0)
    gmt_warn("pid %u: %" PRIu64 " bytes granted after it gave up stay in the ledger", r->pid,
             r->bytes);
}

/* On an nng thread: a Reserve's answer. A first try's grant goes straight
 * back; anything a held Reserve or the policy must see goes to the loop. */
static void on_reserve_answered(void *arg, int rc, Gmt__Envelope *rep)
{
  reserve_up_t *u = arg;
  note_ledger(u->pm, rc, rep);
  if (rc == 0 && rep->body_case == GMT__ENVELOPE__BODY_RESERVE_REP && gmt_call_caller_gone(u->call))
    release_orphan(u->pm, reserve_of(u->call));
  if (!u->held && rc == 0 && !is_quota_refusal(rep)) {
    if (gmt_call_reply(u->call, rep) < 0)
      gmt_warn("cannot pass the scheduler's reply back to a process");
    gmt_wire_free(rep);
    free(u);
    return;
  }
  u->rc = rc;
  u->rep = rep;
  /* Never touches u->held here: once the inbox is closed the loop may be
   * freeing the held Reserves. */
  if (gmt_inbox_push(&u->pm->inbox, &u->item, on_reserve_landed) < 0)
    on_reserve_landed(&u->item, -ESHUTDOWN);
}

/* Sends call's Reserve to the scheduler with the pod's name; held: a try
 * of a held one. */
static int reserve_up(gmt_pmgr_t *pm, gmt_call_t *call, pmgr_held_t *held, uint64_t since_ms,
                      int timeout_ms)
{
  Gmt__Envelope env = *gmt_call_request(call);
  Gmt__ReserveRequest reserve = *env.reserve_req;
  reserve.pod = (char *)pm->name;
  env.reserve_req = &reserve;
  reserve_up_t *u = calloc(1, sizeof *u);
  if (!u)
    return -ENOMEM;
  u->pm = pm;
  u->call = call;
  u->held = held;
  u->since_ms = since_ms;
  int rc = gmt__pmgr_schd_call(pm, &env, timeout_ms, on_reserve_answered, u);
  if (rc < 0)
    free(u);
  return rc;
}

/* On the loop: a try of a held Reserve came back. */
static void held_landed(reserve_up_t *u)
{
  gmt_pmgr_t *pm = u->pm;
  pmgr_held_t *h = u->held;
  h->in_flight = false;
  if (u->rc == -ESHUTDOWN) {
    gmt_call_reply_error(h->call, u->rc, "pod manager is stopping");
    held_drop(pm, h);
  } else if (u->rc < 0) {
    /* Unreachable now: the count here decides; not granted, it stays
     * held and the timer looks again. */
    if (grant_local(pm, h->call, reserve_of(h->call)))
      held_drop(pm, h);
    else {
      gmt_wire_free(h->refusal);
      h->refusal = NULL;
      h->here = true;
    }
  } else if (is_quota_refusal(u->rep)) {
    gmt_wire_free(h->refusal);
    h->refusal = u->rep;
    h->here = false;
    u->rep = NULL;
  } else {
    if (u->rep->body_case == GMT__ENVELOPE__BODY_RESERVE_REP)
      gmt_debug("pid %u: %" PRIu64 " bytes granted after %" PRIu64 " ms held", h->pid, h->bytes,
                gmt_now_ms() - h->since_ms);
    if (gmt_call_reply(h->call, u->rep) < 0)
      gmt_warn("cannot pass the scheduler's reply back to a process");
    held_drop(pm, h);
  }
  gmt_wire_free(u->rep);
  free(u);
}

/* The timer, while Reserves are held: the policy's pass over them in
 * arrival order (gmt_held_step(): refused once the hold ends, the others
 * granted in turn, none ahead of an earlier one that does not fit); this
 * applies what it says. */
static void on_held_tick(uv_timer_t *t)
{
  gmt_pmgr_t *pm = t->data;
  uint64_t total = atomic_load(&pm->ledger_seen), limit = pm->config.memory_limit;
  gmt_held_pass_t pass = {
      .now_ms = gmt_now_ms(),
      .outage = pm->schd_down,
      .room = limit > total ? limit - total : 0,
      .news = atomic_load(&pm->ledger_news),
  };
  uint64_t now = pass.now_ms;
  for (pmgr_held_t *h = pm->held, *next; h; h = next) {
    next = h->next;
    gmt_held_view_t v = {
        .bytes = h->bytes,
        .since_ms = h->since_ms,
        .tried_ms = h->tried_ms,
        .tried_news = h->tried_news,
        .in_flight = h->in_flight,
    };
    if (!h->in_flight) {
      v.caller_gone = gmt_call_caller_gone(h->call);
      v.slack = slack_of(pm, h->pid);
      if (pass.outage)
        v.count = count_of(pm);
    }
    int timeout_ms = 0;
    switch (gmt_held_step(&pass, &v, &timeout_ms)) {
    case GMT_HELD_WAIT: break;
    case GMT_HELD_CANCEL:
      gmt_debug("pid %u: gave up on %" PRIu64 " bytes after %" PRIu64 " ms held", h->pid, h->bytes,
                now - h->since_ms);
      gmt_call_reply_error(h->call, -ECANCELED, "the caller has gone");
      held_drop(pm, h);
      break;
    case GMT_HELD_ASK: {
      /* Never asked (it waited behind others): the ledger, or the count,
       * answers it once, as if it came now. */
      gmt_call_t *call = h->call;
      uint64_t since_ms = h->since_ms;
      held_drop(pm, h);
      if (pm->schd_down || reserve_up(pm, call, NULL, since_ms, GMT_RPC_PMGR_WAIT_MS) < 0)
        reply_local(pm, call, gmt_call_request(call), since_ms);
      break;
    }
    case GMT_HELD_REFUSE:
      gmt_debug("pid %u: %" PRIu64 " bytes refused after %" PRIu64 " ms held", h->pid, h->bytes,
                now - h->since_ms);
      answer_refusal(pm, h);
      held_drop(pm, h);
      break;
    case GMT_HELD_GRANT:
      if (grant_local(pm, h->call, reserve_of(h->call)))
        held_drop(pm, h);
      else
        pass.blocked = true;
      break;
    case GMT_HELD_TRY:
      h->tried_ms = now;
      h->tried_news = pass.news;
      if (reserve_up(pm, h->call, h, h->since_ms, timeout_ms) == 0) {
        h->in_flight = true;
        gmt_held_took(&pass, h->bytes);
      }
      break;
    }
  }
  if (!pm->nheld)
    uv_timer_stop(t);
}

static void forward(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req)
{
  if (req->body_case == GMT__ENVELOPE__BODY_RESERVE_REQ) {
    /* Not ahead of Reserves that wait for slack (the timer tries them
     * in turn); its answer may be held too (above). */
    uint64_t now = gmt_now_ms();
    if (pm->held && hold(pm, call, now, false, NULL))
      return;
    int rc = reserve_up(pm, call, NULL, now, GMT_RPC_PMGR_WAIT_MS);
    if (rc == -ESHUTDOWN)
      gmt_call_reply_error(call, rc, "pod manager is stopping");
    else if (rc < 0)
      reply_local(pm, call, req, now);
    return;
  }

  /* Only the pod differs (a process picks among its own pod's GPUs); the
   * request is packed before gmt_client_call_async() returns. */
  Gmt__Envelope env;
  void *body;
  int rc = gmt_rpc_with_pod(req, pm->name, &env, &body);
  if (rc < 0) {
    gmt_call_reply_error(call, rc,
                         rc == -ENOMEM ? "pod manager out of memory" : "not a request to forward");
    return;
  }
  forward_t *f = malloc(sizeof *f);
  if (!f) {
    free(body);
    gmt_call_reply_error(call, -ENOMEM, "pod manager out of memory");
    return;
  }
  f->pm = pm;
  f->call = call;
  rc = gmt__pmgr_schd_call(pm, &env, gmt_rpc_kind(req->body_case)->pmgr_wait_ms, on_forwarded, f);
  free(body);
  if (rc < 0) {
    free(f);
    if (rc == -ESHUTDOWN)
      gmt_call_reply_error(call, rc, "pod manager is stopping");
    else
      reply_local(pm, call, req, gmt_now_ms());
  }
}

void gmt__pmgr_handle_memory(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req)
{
  /* A Reserve or Release that its process gave up on (it waited while the
   * pod manager was stopped, say) is taken there as not done: done now,
   * it would charge bytes that no one holds, or give bytes back twice. */
  if ((req->body_case == GMT__ENVELOPE__BODY_RESERVE_REQ ||
       req->body_case == GMT__ENVELOPE__BODY_RELEASE_REQ) &&
      gmt_call_caller_gone(call)) {
    gmt_debug("a %s its process gave up on is dropped",
              req->body_case == GMT__ENVELOPE__BODY_RESERVE_REQ ? "Reserve" : "Release");
    gmt_call_reply_error(call, -ECANCELED, "the caller has gone");
    return;
  }
  if (pm->schd_down)
    reply_local(pm, call, req, gmt_now_ms());
  else
    forward(pm, call, req);
}

int gmt__pmgr_memory_init(gmt_pmgr_t *pm)
{
  int rc = uv_timer_init(pm->loop, &pm->held_timer);
  pm->held_timer.data = pm;
  return rc;
}

void gmt__pmgr_memory_close(gmt_pmgr_t *pm)
{
  /* A held Reserve with a try in flight is answered by that try. */
  while (pm->held) {
    pmgr_held_t *h = pm->held;
    if (!h->in_flight)
      answer_refusal(pm, h);
    held_drop(pm, h);
  }
  if (pm->held_timer.data && !uv_is_closing((uv_handle_t *)&pm->held_timer))
    uv_close((uv_handle_t *)&pm->held_timer, NULL);
  while (pm->mem_local) {
    pmgr_mem_proc_t *m = pm->mem_local;
    pm->mem_local = m->next;
    free(m);
  }
}
