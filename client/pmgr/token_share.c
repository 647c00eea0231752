/* The pod's token shared by its processes: the decisions (token_share.h). */
#include "token_share.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_error.h"

void gmt_tshare_dev_init(gmt_tshare_dev_t *d, gmt_tshare_t *pod)
{
  memset(d, 0, sizeof *d);
  d->pod = pod;
  d->wtail = &d->waiters;
}

void gmt_tshare_dev_free(gmt_tshare_dev_t *d)
{
  free(d->sharers);
  d->sharers = NULL;
  d->nsharers = d->capsharers = 0;
}

/* ---- the set of sharers ---- */

static void sharer_add(gmt_tshare_dev_t *d, uint32_t pid, gmt_tshare_act_t *act)
{
  for (size_t i = 0; i < d->nsharers; i++)
    if (d->sharers[i] == pid)
      return;
  if (d->nsharers == d->capsharers) {
    size_t cap = d->capsharers ? 2 * d->capsharers : 8;
    uint32_t *s = realloc(d->sharers, cap * sizeof *s);
    if (!s) {
      /* Not knowing a sharer only means the grant goes back when the
       * known ones are done; the process asks again then. */
      act->unrecorded = pid;
      return;
    }
    d->sharers = s;
    d->capsharers = cap;
  }
  d->sharers[d->nsharers++] = pid;
}

static void sharer_remove(gmt_tshare_dev_t *d, uint32_t pid)
{
  for (size_t i = 0; i < d->nsharers; i++) {
    if (d->sharers[i] == pid) {
      d->sharers[i] = d->sharers[--d->nsharers];
      return;
    }
  }
}

static gmt_tshare_waiter_t *take_all(gmt_tshare_dev_t *d)
{
  gmt_tshare_waiter_t *w = d->waiters;
  d->waiters = NULL;
  d->wtail = &d->waiters;
  return w;
}

gmt_tshare_waiter_t *gmt_tshare_take(gmt_tshare_dev_t *d, uint32_t pid)
{
  if (pid == 0)
    return take_all(d);
  gmt_tshare_waiter_t *taken = NULL, **ttail = &taken;
  for (gmt_tshare_waiter_t **pw = &d->waiters; *pw;) {
    gmt_tshare_waiter_t *w = *pw;
    if (w->pid != pid) {
      pw = &w->next;
      continue;
    }
    *pw = w->next;
    w->next = NULL;
    *ttail = w;
    ttail = &w->next;
  }
  d->wtail = &d->waiters;
  while (*d->wtail)
    d->wtail = &(*d->wtail)->next;
  return taken;
}

/* ---- decisions ---- */

static void kick(gmt_tshare_dev_t *d, const gmt_tshare_in_t *in, gmt_tshare_act_t *act);

static void upstream(gmt_tshare_act_t *act, int kind, uint32_t pid, double burst_ms,
                     double overuse_ms, double idle_ms)
{
  act->send = kind;
  act->pid = pid;
  act->burst_ms = burst_ms;
  act->overuse_ms = overuse_ms;
  act->idle_ms = idle_ms;
}

/* No process holds a share of the grant any more: back to the scheduler
 * (with the overuse still to charge), unless a request is on its way or
 * will be (waiters: kick's request ends the grant). A grant whose quota ran
 * out is released too: the scheduler waits for it, its work being done. */
static void maybe_release(gmt_tshare_dev_t *d, const gmt_tshare_in_t *in, uint32_t pid,
                          gmt_tshare_act_t *act)
{
  if (d->nsharers > 0 || d->waiters || d->up_seq || d->rel_seq)
    return;
  uint64_t now = in->now_ns;
  /* The pod's grant went unused since the last of its processes was done. */
  double idle_ms =
      d->busy_until_ns && now > d->busy_until_ns ? (double)(now - d->busy_until_ns) / 1e6 : 0;
  bool owed = d->owed && !d->local;
  d->expiry_ns = 0;
  d->busy_until_ns = 0;
  act->drain = GMT_TSHARE_TIMER_STOP;
  if (!(owed || d->overuse_ms > 0) || d->pod->outage || in->schd_down)
    return;
  upstream(act, GMT_TSHARE_SEND_RELEASE, pid, 0, d->overuse_ms, owed ? idle_ms : 0);
}

static void outage(gmt_tshare_dev_t *d, int why, gmt_tshare_act_t *act)
{
  if (d->pod->outage)
    return;
  d->pod->outage = true;
  act->outage = why;
}

/* Answers every waiting call from the grant that runs until expiry. The
 * sharers stay: a process that held a share and has not given it back is
 * still busy, and asks again at its own expiry. */
static void grant(gmt_tshare_dev_t *d, const gmt_tshare_in_t *in, double quota_ms, bool local,
                  gmt_tshare_act_t *act)
{
  d->expiry_ns = in->now_ns + (uint64_t)(quota_ms * 1e6);
  d->local = local;
  d->owed = !local;
  d->busy_until_ns = 0;
  if (!local) {
    act->drain = GMT_TSHARE_TIMER_START;
    act->drain_ms = (uint64_t)quota_ms + GMT_TOKEN_DRAIN_MAX_MS;
  }
  act->granted = take_all(d);
  act->quota_ms = quota_ms;
  uint32_t pid = 0;
  for (gmt_tshare_waiter_t *w = act->granted; w; w = w->next) {
    sharer_add(d, w->pid, act);
    pid = w->pid;
  }
  /* Everyone who asked has exited meanwhile. */
  if (d->nsharers == 0)
    maybe_release(d, in, pid, act);
}

/* The answer for the pod is no: every waiting process gets it. An answer,
 * not an outage: no local grant follows. */
static void refuse(gmt_tshare_dev_t *d, int rc, int refusal, gmt_tshare_act_t *act)
{
  act->refused = take_all(d);
  act->refuse_rc = rc;
  act->refusal = refusal;
}

static bool is_refusal(int rc)
{
  return rc == GMT_ENOPOD || rc == -EPERM || rc == GMT_EDEVICE;
}

/* The outage path: the base quota, then a pause of quota x (1 - LIMIT) /
 * LIMIT, so that the pod's GPU time stays within its LIMIT. */
static void local_grant(gmt_tshare_dev_t *d, const gmt_tshare_in_t *in, gmt_tshare_act_t *act)
{
  if (!d->waiters)
    return;
  if (!in->allowed) {
    refuse(d, GMT_EDEVICE, GMT_TSHARE_REFUSED_DEVICE, act);
    return;
  }
  if (in->unlisted) {
    refuse(d, GMT_ENOPOD, GMT_TSHARE_REFUSED_UNLISTED, act);
    return;
  }
  if (in->limit <= 0) {
    refuse(d, -EPERM, GMT_TSHARE_REFUSED_LIMIT, act);
    return;
  }
  uint64_t now = in->now_ns;
  if (now < d->local_next_ns) {
    if (!d->hold_armed) {
      d->hold_armed = true;
      act->hold = GMT_TSHARE_TIMER_START;
      act->hold_ms = (d->local_next_ns - now + 999999) / 1000000;
    }
    return;
  }
  double limit = in->limit;
  if (limit < GMT_TSHARE_MIN_LIMIT)
    limit = GMT_TSHARE_MIN_LIMIT;
  if (limit > 1)
    limit = 1;
  double pause_ms = GMT_TOKEN_BASE_QUOTA_MS * (1 - limit) / limit;
  d->local_next_ns = now + (uint64_t)((GMT_TOKEN_BASE_QUOTA_MS + pause_ms) * 1e6);
  grant(d, in, GMT_TOKEN_BASE_QUOTA_MS, true, act);
}

/* Asks for the token for the waiting processes, if nothing is on its way. */
static void kick(gmt_tshare_dev_t *d, const gmt_tshare_in_t *in, gmt_tshare_act_t *act)
{
  if (!d->waiters || d->up_seq || d->rel_seq || in->closing || d->hold_armed)
    return;
  /* The request ends the pod's grant upstream: not while a process still
   * runs under it (its queued work would delay the next pod's grant). */
  if (d->owed && d->nsharers > 0)
    return;
  if (in->schd_down) {
    outage(d, GMT_TSHARE_OUTAGE_DOWN, act);
    local_grant(d, in, act);
    return;
  }
  double burst = 0;
  for (gmt_tshare_waiter_t *w = d->waiters; w; w = w->next)
    if (w->burst_ms > burst)
      burst = w->burst_ms;
  upstream(act, GMT_TSHARE_SEND_REQUEST, d->waiters->pid, burst, d->overuse_ms, 0);
}

/* ---- events ---- */

int gmt_tshare_request(gmt_tshare_dev_t *d, const gmt_tshare_in_t *in, uint32_t pid,
                       double burst_ms, double overuse_ms, void *call, gmt_tshare_act_t *act)
{
  *act = (gmt_tshare_act_t){0};
  double overuse = overuse_ms > 0 ? overuse_ms : 0;
  uint64_t now = in->now_ns;
  if (d->expiry_ns && now + GMT_TSHARE_MARGIN_NS < d->expiry_ns) {
    /* The pod holds the token: this process shares what is left. */
    d->overuse_ms += overuse;
    sharer_add(d, pid, act);
    act->share_ms = (double)(d->expiry_ns - now) / 1e6;
    return 0;
  }
  gmt_tshare_waiter_t *w = calloc(1, sizeof *w);
  if (!w)
    return -ENOMEM;
  w->call = call;
  w->pid = pid;
  w->burst_ms = burst_ms > 0 ? burst_ms : 0;
  d->overuse_ms += overuse;
  sharer_remove(d, pid); /* its share of the spent grant is over */
  *d->wtail = w;
  d->wtail = &w->next;
  kick(d, in, act);
  return 0;
}

void gmt_tshare_release(gmt_tshare_dev_t *d, const gmt_tshare_in_t *in, uint32_t pid,
                        double overuse_ms, double idle_ms, gmt_tshare_act_t *act)
{
  *act = (gmt_tshare_act_t){0};
  if (overuse_ms > 0)
    d->overuse_ms += overuse_ms;
  uint64_t now = in->now_ns;
  uint64_t idle_ns = idle_ms > 0 && idle_ms < 1e6 ? (uint64_t)(idle_ms * 1e6) : 0;
  uint64_t done = idle_ns < now ? now - idle_ns : now;
  if (done > d->busy_until_ns)
    d->busy_until_ns = done;
  sharer_remove(d, pid);
  if (d->waiters)
    kick(d, in, act); /* the last sharer done: the waiting processes' request may go */
  else
    maybe_release(d, in, pid, act);
}

void gmt_tshare_sent(gmt_tshare_dev_t *d, const gmt_tshare_act_t *sent, uint64_t seq)
{
  if (sent->send == GMT_TSHARE_SEND_RELEASE)
    d->rel_seq = seq;
  else
    d->up_seq = seq;
  d->owed = false; /* a request or a release: either ends the grant upstream */
  d->overuse_ms = 0;
}

void gmt_tshare_send_failed(gmt_tshare_dev_t *d, const gmt_tshare_in_t *in,
                            const gmt_tshare_act_t *sent, gmt_tshare_act_t *act)
{
  *act = (gmt_tshare_act_t){0};
  /* A release not sent leaves the grant to end with the next request. */
  if (sent->send != GMT_TSHARE_SEND_REQUEST)
    return;
  outage(d, GMT_TSHARE_OUTAGE_FAILED, act);
  local_grant(d, in, act);
}

void gmt_tshare_answered(gmt_tshare_dev_t *d, const gmt_tshare_in_t *in, bool release, uint64_t seq,
                         int rc, double quota_ms, gmt_tshare_act_t *act)
{
  *act = (gmt_tshare_act_t){0};
  if (release) {
    if (seq == d->rel_seq)
      d->rel_seq = 0;
    kick(d, in, act);
    return;
  }

  uint64_t now = in->now_ns;
  if (seq != d->up_seq) {
    /* Given up on during an outage. A grant that comes anyway is used if
     * the pod has none from the scheduler, else handed back. */
    if (rc < 0 || quota_ms <= 0)
      return;
    if (!d->local && d->expiry_ns && now < d->expiry_ns)
      return;
    act->again = GMT_TSHARE_AGAIN_LATE;
    d->pod->outage = false;
    if (d->waiters) {
      grant(d, in, quota_ms, false, act);
    } else {
      d->expiry_ns = now + (uint64_t)(quota_ms * 1e6);
      d->local = false;
      d->owed = true;
      maybe_release(d, in, 0, act);
    }
    return;
  }
  d->up_seq = 0;
  if (rc == -ESRCH && (!d->esrch_ns || now - d->esrch_ns < GMT_TSHARE_ESRCH_FOR_NS)) {
    if (!d->esrch_ns)
      d->esrch_ns = now;
    act->esrch_retry = true;
    d->hold_armed = true;
    act->hold = GMT_TSHARE_TIMER_START;
    act->hold_ms = GMT_TSHARE_ESRCH_RETRY_MS;
    return;
  }
  d->esrch_ns = 0;
  if (is_refusal(rc)) {
    refuse(d, rc, GMT_TSHARE_REFUSED_BY_SCHD, act);
    return;
  }
  if (rc < 0 || quota_ms <= 0) {
    outage(d, GMT_TSHARE_OUTAGE_FAILED, act);
    local_grant(d, in, act);
    return;
  }
  if (d->pod->outage) {
    d->pod->outage = false;
    act->again = GMT_TSHARE_AGAIN;
  }
  grant(d, in, quota_ms, false, act);
}

bool gmt_tshare_in_flight(const gmt_tshare_dev_t *d)
{
  return d->up_seq || d->rel_seq;
}

/* A scheduler that the heartbeat finds down will not answer, so the
 * waiting processes get a local grant. */
void gmt_tshare_lost(gmt_tshare_dev_t *d, const gmt_tshare_in_t *in, gmt_tshare_act_t *act)
{
  *act = (gmt_tshare_act_t){0};
  outage(d, GMT_TSHARE_OUTAGE_STOPPED, act);
  d->up_seq = 0; /* a late answer is handled as given up on */
  d->rel_seq = 0;
  local_grant(d, in, act);
}

void gmt_tshare_held(gmt_tshare_dev_t *d, const gmt_tshare_in_t *in, gmt_tshare_act_t *act)
{
  *act = (gmt_tshare_act_t){0};
  d->hold_armed = false;
  if (!d->up_seq)
    kick(d, in, act);
}

/* A grant's quota ran out GMT_TOKEN_DRAIN_MAX_MS ago and some of its
 * sharers have neither come back nor released it (stalled, or a release
 * lost): they are done with it as far as the pod is concerned. */
void gmt_tshare_drained(gmt_tshare_dev_t *d, const gmt_tshare_in_t *in, gmt_tshare_act_t *act)
{
  *act = (gmt_tshare_act_t){0};
  if (!d->owed || d->nsharers == 0)
    return;
  act->dropped = d->nsharers;
  d->nsharers = 0;
  if (d->waiters)
    kick(d, in, act);
  else
    maybe_release(d, in, 0, act);
}

bool gmt_tshare_watchable(const gmt_tshare_dev_t *d)
{
  return d->owed && !d->local && d->nsharers > 0;
}

void gmt_tshare_revoked(gmt_tshare_dev_t *d, const gmt_tshare_in_t *in)
{
  if (d->owed && !d->local && d->expiry_ns > in->now_ns)
    d->expiry_ns = in->now_ns;
}
