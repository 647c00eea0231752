/* gmt-pmgr: the pod's GPU time token, one per device, shared by the pod's
 * processes (Gemini's pod manager). The decisions are token_share.c's
 * (token_share.h says them); this file is their loop and wire: it gathers
 * what they need (the clock, the pod's config, the heartbeat), and applies
 * what they say: answers to the processes' Token calls, calls to the
 * scheduler, timers and log lines. Everything here runs on the loop. A
 * process call never waits on a dead scheduler for longer than the outage
 * takes to notice (about a second).
 *
 * TokenWatch: the processes sharing the pod's grant on a device each wait
 * for it to end; one TokenWatch goes upstream for all of them, and its
 * answer (revoked or not) is theirs. Without a grant of the scheduler's
 * to watch (none held, or a local one in an outage) a watch is answered
 * at once, not revoked. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gmt_error.h"
#include "gmt_log.h"
#include "pmgr_schd.h"
#include "pmgr_token.h"
#include "token_share.h"

/* A wait for the token may last a whole window (10 s by default). */
#define PMGR_TOKEN_TIMEOUT_MS 30000
/* A grant lasts at most a window, then its drain (1 s). */
#define PMGR_TOKEN_WATCH_TIMEOUT_MS 30000
#define PMGR_TOKEN_RELEASE_TIMEOUT_MS 2000
#define PMGR_TOKEN_WATCH_MS 100 /* how soon an outage frees waiters */

/* A process's TokenWatch call. */
typedef struct pwatch {
  struct pwatch *next;
  gmt_call_t *call;
} pwatch_t;

typedef struct tok_dev {
  struct tok_dev *next;
  pmgr_tokens_t *t;
  int32_t device;
  gmt_tshare_dev_t share;
  uv_timer_t hold;  /* outage: the pause before the next local grant; ESRCH: the next try */
  uv_timer_t drain; /* a grant's sharers are waited for this long past its quota */
  /* The scheduler's terms of its last grant (TokenReply), passed to each
   * process answered from it; none for a local grant. */
  gmt_token_terms_t terms;
  pwatch_t *watches; /* waiting for the pod's grant to end */
  bool bell;         /* the last process that asked heeds the bell (passed up) */
  double turn_ms;    /* the last process that asked: its swap turn's length (passed up) */
  bool watch_up;     /* a TokenWatch upstream is in flight */
} tok_dev_t;

struct pmgr_tokens {
  gmt_pmgr_t *pm;
  tok_dev_t *devs;
  uint64_t seq;
  gmt_tshare_t share;
  bool closing;
  int open_handles; /* freed when the last one has closed */
  uv_timer_t watch;
};

/* An upstream call, and its outcome on the way to the loop. */
typedef struct {
  gmt_inbox_item_t item; /* first: on_landed finds the whole from it */
  gmt_pmgr_t *pm;
  int32_t device;
  uint64_t seq;
  bool release;
  bool watch; /* a TokenWatch */
  int rc;
  Gmt__Envelope *rep;
} tok_up_t;

/* What the decisions need to know now. */
static gmt_tshare_in_t in_of(const tok_dev_t *d)
{
  const gmt_pmgr_t *pm = d->t->pm;
  return (gmt_tshare_in_t){
      .now_ns = gmt_now_ns(),
      .limit = pm->config.limit,
      .allowed = gmt_podcfg_devices_allow(pm->config.devices, pm->config.n_devices, d->device),
      .unlisted = pm->pod_unlisted,
      .schd_down = pm->schd_down,
      .closing = d->t->closing,
  };
}

/* ---- the scheduler ---- */

static void upstream_done(tok_up_t *u);
static void on_watch(uv_timer_t *h);

static void watch_done(tok_up_t *u);

/* On the loop, or handed back when the inbox closes. */
static void on_landed(gmt_inbox_item_t *item, int status)
{
  tok_up_t *u = (tok_up_t *)item;
  if (status == 0 && u->watch)
    watch_done(u); /* frees the reply */
  else if (status == 0)
    upstream_done(u); /* frees the reply */
  else
    gmt_wire_free(u->rep);
  free(u);
}

/* On an nng thread of the scheduler client. */
static void on_upstream(void *arg, int rc, Gmt__Envelope *rep)
{
  tok_up_t *u = arg;
  u->rc = rc;
  u->rep = rep;
  if (gmt_inbox_push(&u->pm->inbox, &u->item, on_landed) < 0) {
    gmt_wire_free(rep);
    free(u);
  }
}

/* Sends the Token request (or release) that a decides for the pod; *seq
 * names it. */
static int send_upstream(tok_dev_t *d, const gmt_tshare_act_t *a, uint64_t *seq)
{
  gmt_pmgr_t *pm = d->t->pm;
  bool release = a->send == GMT_TSHARE_SEND_RELEASE;
  tok_up_t *u = calloc(1, sizeof *u);
  if (!u)
    return -ENOMEM;
  u->pm = pm;
  u->device = d->device;
  u->seq = ++d->t->seq;
  u->release = release;

  Gmt__TokenRequest r = GMT__TOKEN_REQUEST__INIT;
  Gmt__Envelope env = GMT__ENVELOPE__INIT;
  r.pod = (char *)pm->name;
  r.pid = a->pid;
  r.device = d->device;
  r.burst_ms = a->burst_ms;
  r.overuse_ms = a->overuse_ms;
  r.release = release;
  r.idle_ms = a->idle_ms;
  r.bell = d->bell;
  r.turn_ms = release ? 0 : d->turn_ms;
  gmt_wire_set_body(&env, GMT__ENVELOPE__BODY_TOKEN_REQ, &r);

  pmgr_tokens_t *t = d->t;
  int rc = gmt__pmgr_schd_call(
      pm, &env, release ? PMGR_TOKEN_RELEASE_TIMEOUT_MS : PMGR_TOKEN_TIMEOUT_MS, on_upstream, u);
  if (rc < 0) {
    free(u);
    return rc;
  }
  *seq = u->seq;
  if (!uv_is_active((uv_handle_t *)&t->watch))
    uv_timer_start(&t->watch, on_watch, PMGR_TOKEN_WATCH_MS, PMGR_TOKEN_WATCH_MS);
  return 0;
}

/* ---- applying a decision ---- */

static void on_hold(uv_timer_t *h);
static void on_drain(uv_timer_t *h);

static void reply_quota(const tok_dev_t *d, gmt_call_t *call, double quota_ms)
{
  Gmt__TokenReply rep = GMT__TOKEN_REPLY__INIT;
  rep.quota_ms = quota_ms;
  if (d && !d->share.local)
    gmt_token_terms_put(&rep, d->terms);
  if (gmt_call_reply_body(call, GMT__ENVELOPE__BODY_TOKEN_REP, &rep) < 0)
    gmt_debug("a token reply could not be sent (the process has gone?)");
}

/* Answers a list of waiters with rc and why (0: with quota_ms) and frees
 * it. */
static void answer(const tok_dev_t *d, gmt_tshare_waiter_t *w, int rc, const char *why,
                   double quota_ms)
{
  while (w) {
    gmt_tshare_waiter_t *next = w->next;
    if (rc == 0)
      reply_quota(d, w->call, quota_ms);
    else
      gmt_call_reply_error(w->call, rc, "%s", why);
    free(w);
    w = next;
  }
}

static const char *outage_why(int outage, const char *err)
{
  switch (outage) {
  case GMT_TSHARE_OUTAGE_DOWN: return "it does not answer heartbeats";
  case GMT_TSHARE_OUTAGE_STOPPED: return "it stopped answering heartbeats";
  }
  return err;
}

/* Why the waiters are refused. The pod manager's own refusals (made while
 * gmt-schd is unreachable, from what it last heard) say so in words of
 * their own: they must not read as the scheduler's. */
static void refusal_why(const tok_dev_t *d, const gmt_tshare_act_t *a, const char *err, char *why,
                        size_t size)
{
  const gmt_pmgr_t *pm = d->t->pm;
  switch (a->refusal) {
  case GMT_TSHARE_REFUSED_DEVICE:
    snprintf(why, size,
             "gmt-pmgr of pod '%s': gmt-schd at %s is unreachable, and the pod's devices= as last "
             "heard from it does not name GPU %d",
             pm->name, pm->schd_url, d->device);
    break;
  case GMT_TSHARE_REFUSED_UNLISTED:
    snprintf(why, size,
             "gmt-pmgr of pod '%s': gmt-schd at %s is unreachable, and it no longer listed the pod "
             "when last heard: no GPU time",
             pm->name, pm->schd_url);
    break;
  case GMT_TSHARE_REFUSED_LIMIT:
    snprintf(why, size,
             "gmt-pmgr of pod '%s': gmt-schd at %s is unreachable, and the pod's LIMIT as last "
             "heard from it is 0: no GPU time until gmt-schd answers",
             pm->name, pm->schd_url);
    break;
  default: snprintf(why, size, "%s", err); break;
  }
}

/* Does what a says, in token_share.h's order. err is the failure of the
 * event's call, if any: it names an outage that began or a refusal by the
 * scheduler. */
static void apply(tok_dev_t *d, const gmt_tshare_in_t *in, gmt_tshare_act_t *a, const char *err)
{
  pmgr_tokens_t *t = d->t;
  if (a->unrecorded)
    gmt_warn("tokens: out of memory recording pid %u", a->unrecorded);
  if (a->dropped)
    gmt_info("tokens: %zu process%s of the pod did not finish with the grant on device %d within "
             "%d ms of its end; the pod goes on without waiting for %s",
             a->dropped, a->dropped == 1 ? "" : "es", d->device, GMT_TOKEN_DRAIN_MAX_MS,
             a->dropped == 1 ? "it" : "them");
  if (a->again == GMT_TSHARE_AGAIN_LATE)
    gmt_info("tokens: the scheduler granted device %d again", d->device);
  else if (a->again == GMT_TSHARE_AGAIN)
    gmt_info("tokens: the scheduler grants them again");
  if (a->outage)
    gmt_warn("tokens: the scheduler cannot grant one (%s); the pod's processes get local "
             "grants of %g ms within its limit %g until it can",
             outage_why(a->outage, err), (double)GMT_TOKEN_BASE_QUOTA_MS, t->pm->config.limit);
  if (a->esrch_retry)
    gmt_debug("tokens: the scheduler does not know the pod's processes yet (%s); asking again",
              err);
  if (a->refused) {
    char why[600];
    refusal_why(d, a, err, why, sizeof why);
    gmt_info("tokens: device %d refused: %s", d->device, why);
    answer(d, a->refused, a->refuse_rc, why, 0);
  }
  answer(d, a->granted, 0, NULL, a->quota_ms);
  if (a->hold == GMT_TSHARE_TIMER_START)
    uv_timer_start(&d->hold, on_hold, a->hold_ms, 0);
  if (a->drain == GMT_TSHARE_TIMER_START)
    uv_timer_start(&d->drain, on_drain, a->drain_ms, 0);
  else if (a->drain == GMT_TSHARE_TIMER_STOP)
    uv_timer_stop(&d->drain);
  if (a->send == GMT_TSHARE_SEND_NONE)
    return;
  uint64_t seq = 0;
  int rc = send_upstream(d, a, &seq);
  if (rc == 0) {
    gmt_tshare_sent(&d->share, a, seq);
    return;
  }
  if (a->send == GMT_TSHARE_SEND_RELEASE)
    gmt_debug("tokens: release of device %d not sent: %s", d->device, gmt_strerror(rc));
  gmt_tshare_act_t b;
  gmt_tshare_send_failed(&d->share, in, a, &b);
  apply(d, in, &b, gmt_strerror(rc));
}

/* ---- timers ---- */

static void on_hold(uv_timer_t *h)
{
  tok_dev_t *d = h->data;
  gmt_tshare_in_t in = in_of(d);
  gmt_tshare_act_t a;
  gmt_tshare_held(&d->share, &in, &a);
  apply(d, &in, &a, "");
}

static void on_drain(uv_timer_t *h)
{
  tok_dev_t *d = h->data;
  gmt_tshare_in_t in = in_of(d);
  gmt_tshare_act_t a;
  gmt_tshare_drained(&d->share, &in, &a);
  apply(d, &in, &a, "");
}

static tok_dev_t *find_dev(pmgr_tokens_t *t, int32_t device)
{
  for (tok_dev_t *d = t->devs; d; d = d->next)
    if (d->device == device)
      return d;
  return NULL;
}

/* On the loop: what the scheduler said to a Token call. */
static void upstream_done(tok_up_t *u)
{
  gmt_pmgr_t *pm = u->pm;
  Gmt__Envelope *rep = u->rep;
  int rc = u->rc;
  pmgr_tokens_t *t = pm->tokens;
  tok_dev_t *d = t && !t->closing ? find_dev(t, u->device) : NULL;
  if (!d) {
    gmt_wire_free(rep);
    return;
  }
  char err[512] = "";
  if (rc == 0)
    rc = gmt_wire_expect(rep, GMT__ENVELOPE__BODY_TOKEN_REP, err, sizeof err);
  double quota = rc == 0 ? rep->token_rep->quota_ms : 0;
  if (rc == 0 && !u->release)
    d->terms = gmt_token_terms_of(rep->token_rep);
  gmt_wire_free(rep);
  if (u->release && rc < 0)
    gmt_debug("tokens: release of device %d: %s", d->device, err[0] ? err : gmt_strerror(rc));

  char why[600];
  snprintf(why, sizeof why, "%s", rc < 0 ? (err[0] ? err : gmt_strerror(rc)) : "a grant of 0 ms");
  gmt_tshare_in_t in = in_of(d);
  gmt_tshare_act_t a;
  gmt_tshare_answered(&d->share, &in, u->release, u->seq, rc, quota, &a);
  apply(d, &in, &a, a.esrch_retry ? err : why);
}

/* While a call waits upstream: a scheduler that the heartbeat finds down
 * will not answer. */
static void on_watch(uv_timer_t *h)
{
  pmgr_tokens_t *t = h->data;
  bool waiting = false;
  for (tok_dev_t *d = t->devs; d; d = d->next) {
    if (!gmt_tshare_in_flight(&d->share))
      continue;
    if (t->pm->schd_down) {
      gmt_tshare_in_t in = in_of(d);
      gmt_tshare_act_t a;
      gmt_tshare_lost(&d->share, &in, &a);
      apply(d, &in, &a, "");
    } else {
      waiting = true;
    }
  }
  if (!waiting)
    uv_timer_stop(h);
}

/* ---- watching the pod's grant ---- */

static void reply_watch(gmt_call_t *call, bool revoked)
{
  Gmt__TokenWatchReply rep = GMT__TOKEN_WATCH_REPLY__INIT;
  rep.revoked = revoked;
  if (gmt_call_reply_body(call, GMT__ENVELOPE__BODY_TOKEN_WATCH_REP, &rep) < 0)
    gmt_debug("a token watch reply could not be sent (the process has gone?)");
}

/* Answers d's watches: revoked, or with rc and why when rc < 0. */
static void watches_answer(tok_dev_t *d, int rc, const char *why, bool revoked)
{
  while (d->watches) {
    pwatch_t *w = d->watches;
    d->watches = w->next;
    if (rc < 0)
      gmt_call_reply_error(w->call, rc, "%s", why);
    else
      reply_watch(w->call, revoked);
    free(w);
  }
}

static int send_watch(tok_dev_t *d)
{
  gmt_pmgr_t *pm = d->t->pm;
  tok_up_t *u = calloc(1, sizeof *u);
  if (!u)
    return -ENOMEM;
  u->pm = pm;
  u->device = d->device;
  u->watch = true;
  Gmt__TokenWatchRequest r = GMT__TOKEN_WATCH_REQUEST__INIT;
  Gmt__Envelope env = GMT__ENVELOPE__INIT;
  r.pod = (char *)pm->name;
  r.device = d->device;
  gmt_wire_set_body(&env, GMT__ENVELOPE__BODY_TOKEN_WATCH_REQ, &r);
  int rc = gmt__pmgr_schd_call(pm, &env, PMGR_TOKEN_WATCH_TIMEOUT_MS, on_upstream, u);
  if (rc < 0)
    free(u);
  return rc;
}

/* On the loop: what the scheduler said to the pod's TokenWatch. */
static void watch_done(tok_up_t *u)
{
  pmgr_tokens_t *t = u->pm->tokens;
  tok_dev_t *d = t && !t->closing ? find_dev(t, u->device) : NULL;
  char err[512] = "";
  int rc = u->rc;
  if (rc == 0)
    rc = gmt_wire_expect(u->rep, GMT__ENVELOPE__BODY_TOKEN_WATCH_REP, err, sizeof err);
  bool revoked = rc == 0 && u->rep->token_watch_rep->revoked;
  gmt_wire_free(u->rep);
  if (!d)
    return;
  d->watch_up = false;
  if (revoked) {
    gmt_tshare_in_t in = in_of(d);
    gmt_tshare_revoked(&d->share, &in);
    gmt_debug("tokens: the scheduler cut the pod's grant on device %d short", d->device);
  }
  /* An error goes to the processes as it is: one that says the scheduler
   * does not know TokenWatch (an older one) stops them asking. */
  watches_answer(d, rc, err[0] ? err : gmt_strerror(rc), revoked);
}

void gmt__pmgr_handle_token_watch(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__TokenWatchRequest *r)
{
  pmgr_tokens_t *t = pm->tokens;
  tok_dev_t *d = t ? find_dev(t, r->device) : NULL;
  if (!d || !gmt_tshare_watchable(&d->share)) {
    reply_watch(call, false); /* no grant of the scheduler's to watch */
    return;
  }
  pwatch_t *w = calloc(1, sizeof *w);
  if (!w) {
    gmt_call_reply_error(call, -ENOMEM, "pod manager out of memory");
    return;
  }
  w->call = call;
  w->next = d->watches;
  d->watches = w;
  if (d->watch_up)
    return;
  int rc = send_watch(d);
  if (rc < 0)
    watches_answer(d, 0, NULL, false);
  else
    d->watch_up = true;
}

/* ---- the pod's processes ---- */

static void on_closed(uv_handle_t *h)
{
  pmgr_tokens_t *t = h->data;
  if (--t->open_handles > 0)
    return;
  while (t->devs) {
    tok_dev_t *d = t->devs;
    t->devs = d->next;
    gmt_tshare_dev_free(&d->share);
    free(d);
  }
  free(t);
}

static pmgr_tokens_t *tokens(gmt_pmgr_t *pm)
{
  if (pm->tokens)
    return pm->tokens;
  pmgr_tokens_t *t = calloc(1, sizeof *t);
  if (!t)
    return NULL;
  t->pm = pm;
  if (uv_timer_init(pm->loop, &t->watch) < 0) {
    free(t);
    return NULL;
  }
  t->watch.data = t;
  t->open_handles = 1;
  pm->tokens = t;
  return t;
}

static tok_dev_t *dev_of(pmgr_tokens_t *t, int32_t device)
{
  tok_dev_t *d = find_dev(t, device);
  if (d)
    return d;
  d = calloc(1, sizeof *d);
  if (!d)
    return NULL;
  if (uv_timer_init(t->pm->loop, &d->hold) < 0) {
    free(d);
    return NULL;
  }
  d->hold.data = d;
  t->open_handles++;
  uv_timer_init(t->pm->loop, &d->drain); /* cannot fail for a timer */
  d->drain.data = d;
  t->open_handles++;
  d->t = t;
  d->device = device;
  gmt_tshare_dev_init(&d->share, &t->share);
  d->next = t->devs;
  t->devs = d;
  return d;
}

void gmt__pmgr_handle_token(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__TokenRequest *r)
{
  pmgr_tokens_t *t = tokens(pm);
  tok_dev_t *d = t ? dev_of(t, r->device) : NULL;
  if (!d) {
    gmt_call_reply_error(call, -ENOMEM, "pod manager out of memory");
    return;
  }
  if (r->pid == 0) {
    gmt_call_reply_error(call, -EINVAL, "a token request names its process's pid");
    return;
  }
  double overuse = r->overuse_ms > 0 ? r->overuse_ms : 0;
  if (!r->release) {
    d->bell = r->bell; /* a pod's processes share one bell, from this pod manager */
    d->turn_ms = isfinite(r->turn_ms) && r->turn_ms > 0 ? r->turn_ms : 0;
  }
  gmt_tshare_in_t in = in_of(d);
  gmt_tshare_act_t a;
  if (r->release) {
    gmt_tshare_release(&d->share, &in, r->pid, overuse, r->idle_ms, &a);
    apply(d, &in, &a, "");
    reply_quota(NULL, call, 0);
    return;
  }
  if (gmt_tshare_request(&d->share, &in, r->pid, r->burst_ms, overuse, call, &a) < 0) {
    gmt_call_reply_error(call, -ENOMEM, "pod manager out of memory");
    return;
  }
  if (a.share_ms > 0)
    reply_quota(d, call, a.share_ms);
  apply(d, &in, &a, "");
}

void gmt__pmgr_token_proc_gone(gmt_pmgr_t *pm, uint32_t pid)
{
  pmgr_tokens_t *t = pm->tokens;
  if (!t)
    return;
  for (tok_dev_t *d = t->devs; d; d = d->next) {
    /* A call of a process that has exited cannot be answered usefully,
     * but must be answered to be freed. */
    char why[64];
    snprintf(why, sizeof why, "pid %u exited", pid);
    answer(d, gmt_tshare_take(&d->share, pid), -ESRCH, why, 0);
    gmt_tshare_in_t in = in_of(d);
    gmt_tshare_act_t a;
    gmt_tshare_release(&d->share, &in, pid, 0, 0, &a);
    apply(d, &in, &a, "");
  }
}

void gmt__pmgr_tokens_close(gmt_pmgr_t *pm)
{
  pmgr_tokens_t *t = pm->tokens;
  if (!t)
    return;
  pm->tokens = NULL;
  t->closing = true;
  for (tok_dev_t *d = t->devs; d; d = d->next) {
    answer(d, gmt_tshare_take(&d->share, 0), -ESHUTDOWN, "pod manager is stopping", 0);
    watches_answer(d, -ESHUTDOWN, "pod manager is stopping", false);
    d->hold.data = t;
    uv_close((uv_handle_t *)&d->hold, on_closed);
    d->drain.data = t;
    uv_close((uv_handle_t *)&d->drain, on_closed);
  }
  uv_close((uv_handle_t *)&t->watch, on_closed);
}
