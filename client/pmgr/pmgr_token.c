/* gmt-pmgr: the pod's GPU time token, one per device, shared by the pod's
 * processes (Gemini's pod manager). Everything here runs on the loop.
 *
 * The scheduler grants a token to a pod, not to a process: a process that
 * asks while the pod's grant still has time left gets the rest of it at
 * once. A grant ends upstream only when every process that shared it is
 * done with it: it came back for more (its quota spent and its queued work
 * run), released it (idle), or exited. Then one call goes to the
 * scheduler: a request for all the processes waiting (burst the largest of
 * theirs, overuse their sum), which ends the grant and puts the pod among
 * the candidates for the next, or a release saying how long the grant went
 * unused. So the scheduler never starts the next grant behind this pod's
 * queued work, and a pod that goes idle early hands the GPU on at once. A
 * process that neither comes back nor releases (stalled) is waited for at
 * most PMGR_TOKEN_DRAIN_MAX_MS past the quota.
 *
 * When the scheduler cannot be reached (a failed call, or the heartbeat
 * saying it is down while a request waits), the pod keeps running within
 * its last shares: local grants of the base quota, each followed by a
 * pause that keeps the pod's duty cycle within its LIMIT. A process call
 * never waits on a dead scheduler for longer than the outage takes to
 * notice (about a second). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_error.h"
#include "gmt_log.h"
#include "pmgr_schd.h"
#include "pmgr_token.h"

/* A wait for the token may last a whole window (10 s by default). */
#define PMGR_TOKEN_TIMEOUT_MS 30000
#define PMGR_TOKEN_RELEASE_TIMEOUT_MS 2000
#define PMGR_TOKEN_MARGIN_NS 1000000ull /* less left than this: spent */
#define PMGR_TOKEN_LOCAL_MS 250.0       /* the scheduler's base quota */
#define PMGR_TOKEN_MIN_LIMIT 0.01       /* local pauses stay finite */
#define PMGR_TOKEN_WATCH_MS 100         /* how soon an outage frees waiters */
/* How long past a grant's quota its sharers are waited for (the
 * scheduler waits as long: GMT_TOKEN_DRAIN_MAX_MS). */
#define PMGR_TOKEN_DRAIN_MAX_MS 1000
/* The scheduler refuses a pod it thinks has no processes (ESRCH): right
 * after a process joins, its Token can overtake the heartbeat that lists
 * it. Asked again this often, for this long, before it counts as an
 * outage. */
#define PMGR_TOKEN_ESRCH_RETRY_MS 20
#define PMGR_TOKEN_ESRCH_FOR_NS 2000000000ull

typedef struct tok_waiter {
  struct tok_waiter *next;
  gmt_call_t *call;
  uint32_t pid;
  double burst_ms;
} tok_waiter_t;

typedef struct tok_dev {
  struct tok_dev *next;
  pmgr_tokens_t *t;
  int32_t device;
  uint64_t expiry_ns; /* the pod's grant, gmt_now_ns(); 0: none */
  bool local;         /* granted here during an outage */
  bool owed;          /* a grant of the scheduler's, not yet ended by a call upstream */
  uint64_t up_seq;    /* the Token request upstream, 0: none in flight */
  uint64_t rel_seq;   /* the release upstream, 0: none in flight */
  tok_waiter_t *waiters, **wtail;
  uint32_t *sharers; /* processes answered from the current grant */
  size_t nsharers, capsharers;
  double overuse_ms;      /* to charge the pod with the next upstream call */
  uint64_t busy_until_ns; /* released sharers' work was done by then, 0: none released */
  uint64_t local_next_ns; /* outage: no local grant before this */
  double burst_ms;        /* the largest of the last waiters' */
  uint64_t esrch_ns;      /* since when the scheduler says ESRCH, 0: it does not */
  uv_timer_t hold;        /* outage: the pause before the next local grant */
  uv_timer_t drain;       /* a grant's sharers are waited for this long past its quota */
} tok_dev_t;

struct pmgr_tokens {
  gmt_pmgr_t *pm;
  tok_dev_t *devs;
  uint64_t seq;
  bool outage; /* said once per outage */
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
  int rc;
  Gmt__Envelope *rep;
} tok_up_t;

static void kick(tok_dev_t *d);
static void on_drain(uv_timer_t *h);

/* ---- replies to processes ---- */

static void reply_quota(gmt_call_t *call, double quota_ms)
{
  Gmt__TokenReply rep = GMT__TOKEN_REPLY__INIT;
  rep.quota_ms = quota_ms;
  if (gmt_call_reply_body(call, GMT__ENVELOPE__BODY_TOKEN_REP, &rep) < 0)
    gmt_debug("a token reply could not be sent (the process has gone?)");
}

/* ---- the set of sharers ---- */

static void sharer_add(tok_dev_t *d, uint32_t pid)
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
      gmt_warn("tokens: out of memory recording pid %u", pid);
      return;
    }
    d->sharers = s;
    d->capsharers = cap;
  }
  d->sharers[d->nsharers++] = pid;
}

static bool sharer_remove(tok_dev_t *d, uint32_t pid)
{
  for (size_t i = 0; i < d->nsharers; i++) {
    if (d->sharers[i] == pid) {
      d->sharers[i] = d->sharers[--d->nsharers];
      return true;
    }
  }
  return false;
}

/* ---- the scheduler ---- */

static void upstream_done(tok_up_t *u);
static void on_watch(uv_timer_t *h);

/* On the loop, or handed back when the inbox closes. */
static void on_landed(gmt_inbox_item_t *item, int status)
{
  tok_up_t *u = (tok_up_t *)item;
  if (status == 0)
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

/* Sends a Token request (or release) for the pod; *seq names it. */
static int send_upstream(tok_dev_t *d, bool release, uint32_t pid, double burst_ms,
                         double overuse_ms, double idle_ms, uint64_t *seq)
{
  gmt_pmgr_t *pm = d->t->pm;
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
  r.pid = pid;
  r.device = d->device;
  r.burst_ms = burst_ms;
  r.overuse_ms = overuse_ms;
  r.release = release;
  r.idle_ms = idle_ms;
  gmt_wire_set_body(&env, GMT__ENVELOPE__BODY_TOKEN_REQ, &r);

  pmgr_tokens_t *t = d->t;
  int rc = gmt__pmgr_schd_call(
      pm, &env, release ? PMGR_TOKEN_RELEASE_TIMEOUT_MS : PMGR_TOKEN_TIMEOUT_MS, on_upstream, u);
  if (rc < 0) {
    free(u);
    return rc;
  }
  *seq = u->seq;
  d->owed = false; /* a request or a release: either ends the grant upstream */
  if (!uv_is_active((uv_handle_t *)&t->watch))
    uv_timer_start(&t->watch, on_watch, PMGR_TOKEN_WATCH_MS, PMGR_TOKEN_WATCH_MS);
  return 0;
}

/* No process holds a share of the grant any more: back to the scheduler
 * (with the overuse still to charge), unless a request is on its way or
 * will be (waiters: kick's request ends the grant). A grant whose quota ran
 * out is released too: the scheduler waits for it, its work being done. */
static void maybe_release(tok_dev_t *d, uint32_t pid)
{
  if (d->nsharers > 0 || d->waiters || d->up_seq || d->rel_seq)
    return;
  uint64_t now = gmt_now_ns();
  /* The pod's grant went unused since the last of its processes was done. */
  double idle_ms =
      d->busy_until_ns && now > d->busy_until_ns ? (double)(now - d->busy_until_ns) / 1e6 : 0;
  bool owed = d->owed && !d->local;
  d->expiry_ns = 0;
  d->busy_until_ns = 0;
  uv_timer_stop(&d->drain);
  if (!(owed || d->overuse_ms > 0) || d->t->outage || d->t->pm->schd_down)
    return;
  int rc = send_upstream(d, true, pid, 0, d->overuse_ms, owed ? idle_ms : 0, &d->rel_seq);
  if (rc < 0)
    gmt_debug("tokens: release of device %d not sent: %s", d->device, gmt_strerror(rc));
  else
    d->overuse_ms = 0;
}

static void outage(tok_dev_t *d, const char *why)
{
  pmgr_tokens_t *t = d->t;
  if (t->outage)
    return;
  t->outage = true;
  gmt_warn("tokens: the scheduler cannot grant one (%s); the pod's processes get local "
           "grants of %g ms within its limit %g until it can",
           why, PMGR_TOKEN_LOCAL_MS, t->pm->config.limit);
}

/* Answers every waiting call from the grant that runs until expiry. The
 * sharers stay: a process that held a share and has not given it back is
 * still busy, and asks again at its own expiry. */
static void grant(tok_dev_t *d, uint64_t now, double quota_ms, bool local)
{
  d->expiry_ns = now + (uint64_t)(quota_ms * 1e6);
  d->local = local;
  d->owed = !local;
  d->busy_until_ns = 0;
  if (!local)
    uv_timer_start(&d->drain, on_drain, (uint64_t)quota_ms + PMGR_TOKEN_DRAIN_MAX_MS, 0);
  tok_waiter_t *w = d->waiters;
  d->waiters = NULL;
  d->wtail = &d->waiters;
  uint32_t pid = 0;
  while (w) {
    tok_waiter_t *next = w->next;
    sharer_add(d, w->pid);
    pid = w->pid;
    reply_quota(w->call, quota_ms);
    free(w);
    w = next;
  }
  /* Everyone who asked has exited meanwhile. */
  if (d->nsharers == 0)
    maybe_release(d, pid);
}

/* The scheduler's answer for the pod is no (a pod it does not list, LIMIT
 * 0): every waiting process gets it. An answer, not an outage: no local
 * grant follows. */
static void refuse(tok_dev_t *d, int rc, const char *why)
{
  gmt_info("tokens: device %d refused: %s", d->device, why);
  while (d->waiters) {
    tok_waiter_t *w = d->waiters;
    d->waiters = w->next;
    gmt_call_reply_error(w->call, rc, "%s", why);
    free(w);
  }
  d->wtail = &d->waiters;
}

static bool is_refusal(int rc)
{
  return rc == GMT_ENOPOD || rc == -EPERM || rc == GMT_EDEVICE;
}

static void on_hold(uv_timer_t *h);

/* The outage path: the base quota, then a pause of quota x (1 - LIMIT) /
 * LIMIT, so that the pod's GPU time stays within its LIMIT. */
static void local_grant(tok_dev_t *d)
{
  if (!d->waiters)
    return;
  const Gmt__PodConfig *c = &d->t->pm->config;
  if (!gmt_podcfg_devices_allow(c->devices, c->n_devices, d->device)) {
    char why[160];
    snprintf(why, sizeof why, "pod '%s' may not use GPU %d (devices= in its config)",
             d->t->pm->name, d->device);
    refuse(d, GMT_EDEVICE, why);
    return;
  }
  if (d->t->pm->pod_unlisted || c->limit <= 0) {
    refuse(d, d->t->pm->pod_unlisted ? GMT_ENOPOD : -EPERM,
           d->t->pm->pod_unlisted ? "the scheduler no longer lists the pod: no GPU time"
                                  : "the pod has LIMIT 0: no GPU time");
    return;
  }
  uint64_t now = gmt_now_ns();
  if (now < d->local_next_ns) {
    if (!uv_is_active((uv_handle_t *)&d->hold))
      uv_timer_start(&d->hold, on_hold, (d->local_next_ns - now + 999999) / 1000000, 0);
    return;
  }
  double limit = d->t->pm->config.limit;
  if (limit < PMGR_TOKEN_MIN_LIMIT)
    limit = PMGR_TOKEN_MIN_LIMIT;
  if (limit > 1)
    limit = 1;
  double pause_ms = PMGR_TOKEN_LOCAL_MS * (1 - limit) / limit;
  d->local_next_ns = now + (uint64_t)((PMGR_TOKEN_LOCAL_MS + pause_ms) * 1e6);
  grant(d, now, PMGR_TOKEN_LOCAL_MS, true);
}

static void on_hold(uv_timer_t *h)
{
  tok_dev_t *d = h->data;
  if (!d->up_seq)
    kick(d);
}

/* Asks for the token for the waiting processes, if nothing is on its way. */
static void kick(tok_dev_t *d)
{
  if (!d->waiters || d->up_seq || d->rel_seq || d->t->closing ||
      uv_is_active((uv_handle_t *)&d->hold))
    return;
  /* The request ends the pod's grant upstream: not while a process still
   * runs under it (its queued work would delay the next pod's grant). */
  if (d->owed && d->nsharers > 0)
    return;
  if (d->t->pm->schd_down) {
    outage(d, "it does not answer heartbeats");
    local_grant(d);
    return;
  }
  double burst = 0;
  for (tok_waiter_t *w = d->waiters; w; w = w->next)
    if (w->burst_ms > burst)
      burst = w->burst_ms;
  d->burst_ms = burst;
  int rc = send_upstream(d, false, d->waiters->pid, burst, d->overuse_ms, 0, &d->up_seq);
  if (rc < 0) {
    outage(d, gmt_strerror(rc));
    local_grant(d);
    return;
  }
  d->overuse_ms = 0;
}

/* A grant's quota ran out PMGR_TOKEN_DRAIN_MAX_MS ago and some of its
 * sharers have neither come back nor released it (stalled, or a release
 * lost): they are done with it as far as the pod is concerned. */
static void on_drain(uv_timer_t *h)
{
  tok_dev_t *d = h->data;
  if (!d->owed || d->nsharers == 0)
    return;
  gmt_info("tokens: %zu process%s of the pod did not finish with the grant on device %d within "
           "%d ms of its end; the pod goes on without waiting for %s",
           d->nsharers, d->nsharers == 1 ? "" : "es", d->device, PMGR_TOKEN_DRAIN_MAX_MS,
           d->nsharers == 1 ? "it" : "them");
  d->nsharers = 0;
  if (d->waiters)
    kick(d);
  else
    maybe_release(d, 0);
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
  gmt_wire_free(rep);

  if (u->release) {
    if (u->seq == d->rel_seq)
      d->rel_seq = 0;
    if (rc < 0)
      gmt_debug("tokens: release of device %d: %s", d->device, err[0] ? err : gmt_strerror(rc));
    kick(d);
    return;
  }

  uint64_t now = gmt_now_ns();
  if (u->seq != d->up_seq) {
    /* Given up on during an outage. A grant that comes anyway is used if
     * the pod has none from the scheduler, else handed back. */
    if (rc < 0 || quota <= 0)
      return;
    if (!d->local && d->expiry_ns && now < d->expiry_ns)
      return;
    gmt_info("tokens: the scheduler granted device %d again", d->device);
    t->outage = false;
    if (d->waiters) {
      grant(d, now, quota, false);
    } else {
      d->expiry_ns = now + (uint64_t)(quota * 1e6);
      d->local = false;
      d->owed = true;
      maybe_release(d, 0);
    }
    return;
  }
  d->up_seq = 0;
  if (rc == -ESRCH && (!d->esrch_ns || now - d->esrch_ns < PMGR_TOKEN_ESRCH_FOR_NS)) {
    if (!d->esrch_ns)
      d->esrch_ns = now;
    gmt_debug("tokens: the scheduler does not know the pod's processes yet (%s); asking again",
              err);
    uv_timer_start(&d->hold, on_hold, PMGR_TOKEN_ESRCH_RETRY_MS, 0);
    return;
  }
  d->esrch_ns = 0;
  if (is_refusal(rc)) {
    refuse(d, rc, err[0] ? err : gmt_strerror(rc));
    return;
  }
  if (rc < 0 || quota <= 0) {
    char why[600];
    snprintf(why, sizeof why, "%s", rc < 0 ? (err[0] ? err : gmt_strerror(rc)) : "a grant of 0 ms");
    outage(d, why);
    local_grant(d);
    return;
  }
  if (t->outage) {
    t->outage = false;
    gmt_info("tokens: the scheduler grants them again");
  }
  grant(d, now, quota, false);
}

/* While a request waits upstream: a scheduler that the heartbeat finds
 * down will not answer, so the waiting processes get a local grant. */
static void on_watch(uv_timer_t *h)
{
  pmgr_tokens_t *t = h->data;
  bool waiting = false;
  for (tok_dev_t *d = t->devs; d; d = d->next) {
    if (!d->up_seq && !d->rel_seq)
      continue;
    if (t->pm->schd_down) {
      outage(d, "it stopped answering heartbeats");
      d->up_seq = 0; /* a late answer is handled as given up on */
      d->rel_seq = 0;
      local_grant(d);
    } else {
      waiting = true;
    }
  }
  if (!waiting)
    uv_timer_stop(h);
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
    free(d->sharers);
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
  d->wtail = &d->waiters;
  d->next = t->devs;
  t->devs = d;
  return d;
}

/* pid gives its share back; its work was done idle_ms ago. */
static void release(tok_dev_t *d, uint32_t pid, double overuse_ms, double idle_ms)
{
  if (overuse_ms > 0)
    d->overuse_ms += overuse_ms;
  uint64_t now = gmt_now_ns();
  uint64_t idle_ns = idle_ms > 0 && idle_ms < 1e6 ? (uint64_t)(idle_ms * 1e6) : 0;
  uint64_t done = idle_ns < now ? now - idle_ns : now;
  if (done > d->busy_until_ns)
    d->busy_until_ns = done;
  sharer_remove(d, pid);
  if (d->waiters)
    kick(d); /* the last sharer done: the waiting processes' request may go */
  else
    maybe_release(d, pid);
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
  if (r->release) {
    release(d, r->pid, overuse, r->idle_ms);
    reply_quota(call, 0);
    return;
  }

  uint64_t now = gmt_now_ns();
  if (d->expiry_ns && now + PMGR_TOKEN_MARGIN_NS < d->expiry_ns) {
    /* The pod holds the token: this process shares what is left. */
    d->overuse_ms += overuse;
    sharer_add(d, r->pid);
    reply_quota(call, (double)(d->expiry_ns - now) / 1e6);
    return;
  }
  tok_waiter_t *w = calloc(1, sizeof *w);
  if (!w) {
    gmt_call_reply_error(call, -ENOMEM, "pod manager out of memory");
    return;
  }
  w->call = call;
  w->pid = r->pid;
  w->burst_ms = r->burst_ms > 0 ? r->burst_ms : 0;
  d->overuse_ms += overuse;
  sharer_remove(d, r->pid); /* its share of the spent grant is over */
  *d->wtail = w;
  d->wtail = &w->next;
  kick(d);
}

void gmt__pmgr_token_proc_gone(gmt_pmgr_t *pm, uint32_t pid)
{
  pmgr_tokens_t *t = pm->tokens;
  if (!t)
    return;
  for (tok_dev_t *d = t->devs; d; d = d->next) {
    /* A call of a process that has exited cannot be answered usefully,
     * but must be answered to be freed. */
    for (tok_waiter_t **pw = &d->waiters; *pw;) {
      tok_waiter_t *w = *pw;
      if (w->pid != pid) {
        pw = &w->next;
        continue;
      }
      *pw = w->next;
      gmt_call_reply_error(w->call, -ESRCH, "pid %u exited", pid);
      free(w);
    }
    d->wtail = &d->waiters;
    while (*d->wtail)
      d->wtail = &(*d->wtail)->next;
    release(d, pid, 0, 0);
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
    while (d->waiters) {
      tok_waiter_t *w = d->waiters;
      d->waiters = w->next;
      gmt_call_reply_error(w->call, -ESHUTDOWN, "pod manager is stopping");
      free(w);
    }
    d->wtail = &d->waiters;
    d->hold.data = t;
    uv_close((uv_handle_t *)&d->hold, on_closed);
    d->drain.data = t;
    uv_close((uv_handle_t *)&d->drain, on_closed);
  }
  uv_close((uv_handle_t *)&t->watch, on_closed);
}
