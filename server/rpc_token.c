/* GPU time tokens: the glue between the wire and the token policy
 * (token.c). A Token call waits here until its pod is granted the device's
 * token, and is answered then with the grant's quota; every waiting call of
 * that pod gets the same grant. One uv timer per device ends the running
 * grant, or, when every waiting pod is at its limit, wakes the scheduler
 * when one of them may run again. Loop thread only.
 *
 * A TokenWatch call of the holder's pod waits here until its grant ends,
 * and says whether it was cut short (revoked): when a pod that was not
 * waiting at the grant's start asks and the policy would choose it before
 * the holder (gmt_token_should_revoke), the grant is revoked, so that an
 * idle pod that launches again, or a latency pod, waits for the holder's
 * queued work, not for the rest of its grant. Only a holder that watches
 * is cut short: one that does not (an older hook) would not hear of it.
 *
 * Pods are looked up by name each time: gmt_pods_reload() may move the
 * gmt_pod_t structs, and a reload may drop a pod altogether. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_error.h"
#include "gmt_log.h"
#include "reply.h"
#include "schd.h"
#include "token.h"

/* Device indexes a request may name. */
#define MAX_DEVICE 255

typedef struct waiter {
  struct waiter *next;
  gmt_call_t *call;
  char pod[GMT_POD_NAME_MAX + 1];
  uint32_t pid;
  double burst_ms;
  double arrival_ms;
  bool bell; /* its process heeds the bell (TokenRequest.bell) */
} waiter_t;

/* A TokenWatch call of a pod, answered when its grant ends. */
typedef struct watch {
  struct watch *next;
  gmt_call_t *call;
  char pod[GMT_POD_NAME_MAX + 1];
} watch_t;

typedef struct tdev {
  struct tdev *next;
  struct gmt_tokens *t;
  int device;
  gmt_token_dev_t *pol;
  uv_timer_t timer;  /* the grant's end, or the next look when nobody can run */
  waiter_t *waiters; /* in arrival order */
  watch_t *watches;
  bool grant_bounded; /* the running grant bounds its holder's queued work */
  bool grant_heeds;   /* ... and its holder heeds the bell: a latency pod may go beside */
  /* The pod whose grant was last cut short, and when (clock_ms; 0: none
   * since its next grant): gmt__tokens_cut. */
  char cut_pod[GMT_POD_NAME_MAX + 1];
  double cut_ms;
  /* Pods waiting here while held back at their LIMIT, since when (the
   * policy's clock): gmt_pod_t.limit_wait_ms grows by each such spell. */
  struct limwait {
    char pod[GMT_POD_NAME_MAX + 1];
    double since;
  } * lim;
  size_t nlim, caplim;
} tdev_t;

struct gmt_tokens {
  gmt_schd_t *s;
  gmt_token_params_t p;
  tdev_t *devs;
  /* Pods refused at LIMIT 0 and when that was last logged (gmt__say_now):
   * a job asks again every second on each device, one line a period per
   * pod is enough. Dropped once the pod's LIMIT is raised or it leaves. */
  struct said0 {
    char pod[GMT_POD_NAME_MAX + 1];
    uint64_t ms;
  } * said0;
  size_t nsaid0, capsaid0;
};

/* The policy's clock: finer than uv_now(), so grants are charged to the
 * microsecond. */
static double clock_ms(void)
{
  return gmt_now_ms_f();
}

static void reply_grant(gmt_call_t *call, double quota_ms, gmt_token_terms_t g)
{
  Gmt__TokenReply body = GMT__TOKEN_REPLY__INIT;
  body.quota_ms = quota_ms;
  gmt_token_terms_put(&body, g);
  gmt_call_reply_body(call, GMT__ENVELOPE__BODY_TOKEN_REP, &body);
}

static void reply_quota(gmt_call_t *call, double quota_ms)
{
  reply_grant(call, quota_ms, (gmt_token_terms_t){0});
}

/* The tokens as a swap turn's plan asks about them (schd.h). */
static const gmt__turns_tokens_t g_turns_tokens = {
    .waits = gmt__tokens_waits, .holds = gmt__tokens_holds, .last_run = gmt__tokens_last_run};

/* Whether pod is class=latency. */
static bool is_latency(const gmt_schd_t *s, const char *pod)
{
  const gmt_pod_t *p = gmt_pods_find(s->pods, pod);
  return p && p->cfg.klass == GMT__POD_CLASS__CLASS_LATENCY;
}

/* How much of a device latency pods may take: the sum of the LIMITs of
 * those listed for it that have processes (0: none may need it soon). */
static double latency_limit_on(const gmt_schd_t *s, int device)
{
  double sum = 0;
  for (size_t i = 0; i < s->pods->npods; i++) {
    const gmt_pod_t *p = &s->pods->pods[i];
    if (p->cfg.klass == GMT__POD_CLASS__CLASS_LATENCY && p->connected && p->nprocs > 0 &&
        gmt_pod_config_allows(&p->cfg, device))
      sum += p->cfg.limit;
  }
  return sum;
}

/* A latency pod gives its grant back soon after it goes quiet, and
 * launches again without waiting for the next; a batch pod keeps little
 * queued while a latency pod may need the GPU, and heeds the bell for at
 * most the part of its grant the latency pods' LIMITs allow (a false ring
 * then costs it no more than they could take); it keeps a little more
 * queued while an idle swap pod may wake (gmt__turns_may_wake). */
static gmt_token_terms_t terms_of(const struct gmt_tokens *t, const char *pod, int device,
                                  double quota_ms)
{
  gmt_token_terms_t g = {0};
  double lat;
  if (is_latency(t->s, pod)) {
    g.idle_us = (uint32_t)(t->p.latency_idle_ms * 1000 + 0.5);
    g.ahead_us = GMT_TOKEN_LATENCY_AHEAD_US;
  } else if ((lat = latency_limit_on(t->s, device)) > 0) {
    g.queue_bound_us = GMT_TOKEN_QUEUE_BOUND_US;
    g.bell_max_us = (uint32_t)fmin(quota_ms * 1000 * fmin(lat, 1.0), UINT32_MAX);
  } else if (t->p.wake_queue_ms > 0 &&
             gmt__turns_may_wake(t->s, &g_turns_tokens, pod, device, quota_ms)) {
    g.queue_bound_us = (uint32_t)(t->p.wake_queue_ms * 1000 + 0.5);
  }
  return g;
}

/* device's token, or NULL when nobody has asked for it yet (t may be
 * NULL: before the tokens are up). */
static tdev_t *dev_find(struct gmt_tokens *t, int device)
{
  for (tdev_t *d = t ? t->devs : NULL; d; d = d->next)
    if (d->device == device)
      return d;
  return NULL;
}

static tdev_t *dev_get(struct gmt_tokens *t, int device)
{
  tdev_t *d = dev_find(t, device);
  if (d)
    return d;
  d = calloc(1, sizeof *d);
  if (!d)
    return NULL;
  if (gmt_token_dev_new(&d->pol) < 0) {
    free(d);
    return NULL;
  }
  d->t = t;
  d->device = device;
  uv_timer_init(t->s->loop, &d->timer);
  d->timer.data = d;
  d->next = t->devs;
  t->devs = d;
  return d;
}

static void timer_in(tdev_t *d, double ms, uv_timer_cb cb)
{
  /* The loop's cached time may be behind: count from the real now. */
  uv_update_time(d->t->s->loop);
  uv_timer_start(&d->timer, cb, ms < 1 ? 1 : (uint64_t)ceil(ms), 0);
}

/* Unlinks and frees *wp, returning the next waiter. */
static waiter_t *waiter_drop(waiter_t **wp)
{
  waiter_t *w = *wp;
  *wp = w->next;
  free(w);
  return *wp;
}

static void on_timer(uv_timer_t *h);

static void reply_watch(gmt_call_t *call, bool revoked)
{
  Gmt__TokenWatchReply body = GMT__TOKEN_WATCH_REPLY__INIT;
  body.revoked = revoked;
  gmt_call_reply_body(call, GMT__ENVELOPE__BODY_TOKEN_WATCH_REP, &body);
}

/* Answers the watches of pod (every pod but the holder when pod is NULL),
 * with revoked. */
static void watches_answer(tdev_t *d, const char *pod, bool revoked)
{
  const char *holder = gmt_token_holder(d->pol);
  for (watch_t **wp = &d->watches; *wp;) {
    watch_t *w = *wp;
    bool mine = pod ? strcmp(w->pod, pod) == 0 : !(holder && strcmp(w->pod, holder) == 0);
    if (!mine) {
      wp = &w->next;
      continue;
    }
    reply_watch(w->call, revoked);
    *wp = w->next;
    free(w);
  }
}

static bool watched(const tdev_t *d, const char *pod)
{
  for (const watch_t *w = d->watches; w; w = w->next)
    if (strcmp(w->pod, pod) == 0)
      return true;
  return false;
}

/* The policy's candidate for a listed pod. */
static gmt_token_cand_t cand_of(const gmt_pod_t *pod, const char *name, double arrival_ms)
{
  return (gmt_token_cand_t){.pod = name,
                            .request = pod->cfg.request,
                            .limit = pod->cfg.limit,
                            .arrival_ms = arrival_ms,
                            .latency = pod->cfg.klass == GMT__POD_CLASS__CLASS_LATENCY};
}

/* The waiting pods as the policy's candidates, one per pod: its calls
 * merged (the largest burst, the earliest arrival). Pods no longer listed
 * are left out (gmt__tokens_pod_changed answers their calls). The names
 * point into the waiters. NULL when out of memory. */
static gmt_token_cand_t *candidates(tdev_t *d, size_t *count)
{
  gmt_schd_t *s = d->t->s;
  size_t nw = 0, n = 0;
  for (waiter_t *w = d->waiters; w; w = w->next)
    nw++;
  gmt_token_cand_t *c = calloc(nw ? nw : 1, sizeof *c);
  if (!c)
    return NULL;
  for (waiter_t *w = d->waiters; w; w = w->next) {
    size_t i;
    for (i = 0; i < n && strcmp(c[i].pod, w->pod) != 0; i++)
      ;
    if (i == n) {
      const gmt_pod_t *pod = gmt_pods_find(s->pods, w->pod);
      if (!pod)
        continue;
      c[n] = cand_of(pod, w->pod, w->arrival_ms);
      c[n].turn_ms = gmt__turns_plan(s, &g_turns_tokens, w->pod, d->device);
      /* Only a grant that is watched can be cut short, so only such a pod
       * gets a long one alone. A watch is the holder's, and schedule()
       * answers it after the next decision: one that waits now carries
       * over to this pod's next grant. */
      c[n++].watched = watched(d, w->pod);
    }
    c[i].burst_ms = fmax(c[i].burst_ms, w->burst_ms);
    c[i].arrival_ms = fmin(c[i].arrival_ms, w->arrival_ms);
  }
  *count = n;
  return c;
}

/* After a decision that ranked c[0..n) (their allowances filled): the
 * spells of pods held back at their LIMIT open and close, so that status
 * can say how long a pod waited for its LIMIT rather than for others. A
 * spell is seen at decisions only: it starts at the first one that finds
 * the pod limited. */
static void limits_note(tdev_t *d, const gmt_token_cand_t *c, size_t n, double now)
{
  const gmt_token_params_t *p = &d->t->p;
  for (size_t i = 0; i < d->nlim;) {
    bool still = false;
    for (size_t j = 0; j < n && !still; j++)
      still = !strcmp(c[j].pod, d->lim[i].pod) && !gmt_token_can_take(p, &c[j]);
    if (still) {
      i++;
      continue;
    }
    gmt_pod_t *pod = gmt_pods_find(d->t->s->pods, d->lim[i].pod);
    if (pod && now > d->lim[i].since)
      pod->limit_wait_ms += now - d->lim[i].since;
    d->lim[i] = d->lim[--d->nlim];
  }
  for (size_t j = 0; j < n; j++) {
    if (gmt_token_can_take(p, &c[j]))
      continue;
    size_t i = 0;
    while (i < d->nlim && strcmp(d->lim[i].pod, c[j].pod) != 0)
      i++;
    if (i < d->nlim)
      continue;
    if (d->nlim == d->caplim) {
      size_t cap = d->caplim ? 2 * d->caplim : 8;
      struct limwait *nl = realloc(d->lim, cap * sizeof *nl);
      if (!nl)
        return; /* not counted: status only */
      d->lim = nl;
      d->caplim = cap;
    }
    snprintf(d->lim[d->nlim].pod, sizeof d->lim[d->nlim].pod, "%s", c[j].pod);
    d->lim[d->nlim++].since = now;
  }
}

/* Asks the policy what to do with the device's token and does it: answer
 * the winner's calls and time its grant, or time the next look, or stop. */
static void decide(tdev_t *d);

/* A side grant whose pod neither came back nor released within the drain
 * bound past its end (a process that died or stalled) ends there. */
static void side_tidy(tdev_t *d, double now)
{
  const char *side = gmt_token_side(d->pol);
  double end = gmt_token_side_end_planned(d->pol);
  if (side && now > end + GMT_TOKEN_DRAIN_MAX_MS) {
    gmt_debug("token device %d: pod '%s' beside the holder did not come back; its grant ends",
              d->device, side);
    if (gmt_token_side_end(d->pol, end) < 0)
      gmt_warn("token device %d: out of memory recording a grant; its usage is lost", d->device);
  }
}

/* A latency pod holding the token while a batch pod waits steps aside
 * (token.h): its grant goes on beside, the batch pod gets the token and
 * heeds the bell. Only where gmt-schd has a bell. */
static void step_aside(tdev_t *d)
{
  struct gmt_tokens *t = d->t;
  const char *holder = gmt_token_holder(d->pol);
  if (t->s->bell_fd < 0 || !holder || !is_latency(t->s, holder) || gmt_token_side(d->pol) ||
      gmt_token_draining(d->pol))
    return;
  bool batch_waits = false; /* one that heeds the bell */
  for (const waiter_t *w = d->waiters; w && !batch_waits; w = w->next)
    batch_waits = w->bell && !is_latency(t->s, w->pod);
  if (!batch_waits)
    return;
  char name[GMT_POD_NAME_MAX + 1];
  snprintf(name, sizeof name, "%s", holder);
  if (gmt_token_step_aside(d->pol) < 0)
    return;
  gmt_debug("token device %d: latency pod '%s' steps aside for a batch pod; its grant goes on",
            d->device, name);
  uv_timer_stop(&d->timer);
  watches_answer(d, name, false);
}

/* pod (class=latency) asks while a batch pod holds the token with a grant
 * that heeds the bell: granted beside at once (token.h). Returns whether
 * it was; false leaves the call to wait as any other. */
static bool grant_beside(tdev_t *d, gmt_call_t *call, const gmt_pod_t *pod, double burst_ms,
                         double now)
{
  struct gmt_tokens *t = d->t;
  const char *holder = gmt_token_holder(d->pol);
  if (t->s->bell_fd < 0 || pod->cfg.klass != GMT__POD_CLASS__CLASS_LATENCY || !holder ||
      !d->grant_heeds || gmt_token_draining(d->pol) || gmt_token_side(d->pol) ||
      strcmp(holder, pod->cfg.name) == 0)
    return false;
  gmt_token_cand_t c = cand_of(pod, pod->cfg.name, now);
  if (gmt_token_choose(&t->p, d->pol, &c, 1, now) < 0)
    return false; /* at its LIMIT: it waits as any pod */
  double quota = gmt_token_quota(&t->p, burst_ms, c.limit, c.allowance_ms);
  if (gmt_token_side_grant(d->pol, pod->cfg.name, now, quota) < 0)
    return false;
  gmt_debug("token device %d: grant to latency pod '%s' for %.1f ms beside pod '%s' (the bell)",
            d->device, pod->cfg.name, quota, holder);
  reply_grant(call, quota, terms_of(t, pod->cfg.name, d->device, quota));
  return true;
}

static void schedule(tdev_t *d)
{
  decide(d);
  /* A grant that ended, however it ended, ends its pod's watches. */
  watches_answer(d, NULL, false);
}

static void decide(tdev_t *d)
{
  struct gmt_tokens *t = d->t;
  side_tidy(d, clock_ms());
  step_aside(d);
  size_t n = 0;
  gmt_token_cand_t *c = candidates(d, &n);
  if (!c) {
    gmt_error("token device %d: out of memory choosing a pod; trying again", d->device);
    if (!gmt_token_holder(d->pol)) /* else the timer is the grant's end */
      timer_in(d, 1, on_timer);
    return;
  }
  double now = clock_ms();
  gmt_token_decision_t dec;
  int rc = gmt_token_schedule(&t->p, d->pol, c, n, now, &dec);
  if (dec.action != GMT_TOKEN_KEEP) /* KEEP ranks nobody: allowances unknown */
    limits_note(d, c, n, now);
  switch (dec.action) {
  case GMT_TOKEN_KEEP: free(c); return;
  case GMT_TOKEN_IDLE:
    free(c);
    uv_timer_stop(&d->timer);
    return;
  case GMT_TOKEN_WAKE:
    gmt_debug("token device %d: none of %zu waiting pod%s may run now; next look in %.1f ms",
              d->device, n, n == 1 ? "" : "s", dec.wake_ms - now);
    free(c);
    timer_in(d, dec.wake_ms - now, on_timer);
    return;
  case GMT_TOKEN_GRANT: break;
  }

  const gmt_token_cand_t *win = &c[dec.winner];
  char pod[GMT_POD_NAME_MAX + 1];
  snprintf(pod, sizeof pod, "%s", win->pod); /* win->pod is a waiter's, freed below */
  if (rc == 0)
    gmt_debug("token device %d: grant to pod '%s' for %.1f ms (usage %.1f ms of %.0f in the "
              "window, request %.2f limit %.2f, burst %.1f ms)",
              d->device, pod, dec.quota_ms, win->usage_ms, t->p.window_ms, win->request, win->limit,
              win->burst_ms);
  double turn = fmin(win->turn_ms, dec.quota_ms);
  free(c);
  if (rc == 0)
    gmt__turns_granted(t->s, &g_turns_tokens, pod, d->device);
  gmt_token_terms_t terms = terms_of(t, pod, d->device, dec.quota_ms);
  terms.turn_ms = (uint32_t)fmin(turn, UINT32_MAX);
  terms.alone = dec.alone;
  d->grant_bounded = rc == 0 && terms.queue_bound_us > 0;
  if (rc == 0 && strcmp(d->cut_pod, pod) == 0)
    d->cut_ms = 0;
  d->grant_heeds = false;
  for (waiter_t **wp = &d->waiters; *wp;) {
    if (strcmp((*wp)->pod, pod) != 0) {
      wp = &(*wp)->next;
      continue;
    }
    d->grant_heeds = d->grant_heeds || (d->grant_bounded && terms.bell_max_us > 0 && (*wp)->bell);
    if (rc == 0)
      reply_grant((*wp)->call, dec.quota_ms, terms);
    else
      gmt_call_reply_error((*wp)->call, rc, "scheduler cannot record a grant: %s",
                           gmt_strerror(rc));
    waiter_drop(wp);
  }
  if (rc == 0)
    timer_in(d, dec.quota_ms, on_timer);
  else
    schedule(d);
}

static void on_timer(uv_timer_t *h)
{
  tdev_t *d = h->data;
  const char *holder = gmt_token_holder(d->pol);
  if (holder) {
    double now = clock_ms(), end = gmt_token_grant_end(d->pol);
    if (!gmt_token_draining(d->pol)) {
      if (now < end - 0.5) { /* the loop's clock ran ahead of ours */
        timer_in(d, end - now, on_timer);
        return;
      }
      /* The quota is spent, but what the pod queued under it still runs:
       * the next grant must not start behind it. Its processes say when
       * it is done (they come back or release); a pod that cannot (dead,
       * stalled) is waited for a bounded time. */
      gmt_debug("token device %d: pod '%s' quota spent; waiting for its queued work", d->device,
                holder);
      gmt_token_drain(d->pol);
      timer_in(d, GMT_TOKEN_DRAIN_MAX_MS, on_timer);
      return;
    }
    gmt_info("token device %d: pod '%s' did not say its work was done %d ms after its quota "
             "ran out; the token moves on",
             d->device, holder, GMT_TOKEN_DRAIN_MAX_MS);
    if (gmt_token_release(d->pol, now) < 0)
      gmt_warn("token device %d: out of memory recording a grant; its usage is lost", d->device);
  }
  schedule(d);
}

int gmt__tokens_init(gmt_schd_t *s)
{
  struct gmt_tokens *t = calloc(1, sizeof *t);
  if (!t)
    return -ENOMEM;
  t->s = s;
  t->p = s->token_params;
  if (t->p.window_ms == 0)
    gmt_token_params_default(&t->p);
  s->tokens = t;
  gmt_debug("tokens: window %.0f ms, base quota %.0f ms, min quota %.0f ms", t->p.window_ms,
            t->p.base_quota_ms, t->p.min_quota_ms);
  return 0;
}

static void on_dev_closed(uv_handle_t *h)
{
  tdev_t *d = h->data;
  free(d->lim);
  gmt_token_dev_free(d->pol);
  free(d);
}

void gmt__tokens_close(gmt_schd_t *s)
{
  struct gmt_tokens *t = s->tokens;
  if (!t)
    return;
  /* The calls belonged to the server, which is gone: free, never answer. */
  for (tdev_t *d = t->devs, *next; d; d = next) {
    next = d->next;
    while (d->waiters)
      waiter_drop(&d->waiters);
    while (d->watches) {
      watch_t *w = d->watches;
      d->watches = w->next;
      free(w);
    }
    uv_close((uv_handle_t *)&d->timer, on_dev_closed);
  }
  free(t->said0);
  free(t);
  s->tokens = NULL;
}

/* pod has just asked: cut the holder's grant short if the policy says so
 * and the holder will hear of it (a watch of its pod waits). */
static void maybe_revoke(struct gmt_tokens *t, tdev_t *d, const gmt_pod_t *pod, double now)
{
  const char *holder = gmt_token_holder(d->pol);
  if (!holder || !watched(d, holder))
    return;
  const gmt_pod_t *hp = gmt_pods_find(t->s->pods, holder);
  if (!hp)
    return;
  double arrival = now;
  for (const waiter_t *w = d->waiters; w; w = w->next)
    if (strcmp(w->pod, pod->cfg.name) == 0)
      arrival = fmin(arrival, w->arrival_ms);
  gmt_token_cand_t c = cand_of(pod, pod->cfg.name, arrival), h = cand_of(hp, holder, 0);
  /* Only a pod that did not wait already: one held back by the turn
   * waits for it, idle or not. */
  c.waking = arrival >= now && gmt__turns_waking(t->s, &g_turns_tokens, pod->cfg.name, d->device);
  if (!gmt_token_should_revoke(&t->p, d->pol, &c, &h, now))
    return;
  gmt_debug("token device %d: pod '%s' (%s%s, usage %.1f ms) asks while pod '%s' (usage %.1f ms) "
            "holds the token, %.1f ms before its grant's end: the grant is cut short",
            d->device, pod->cfg.name, gmt_pod_class_name(pod->cfg.klass),
            c.waking ? ", waking" : "", c.usage_ms, holder, h.usage_ms,
            gmt_token_grant_end(d->pol) - now);
  /* holder is the policy's, gone with the grant: the name kept here serves. */
  snprintf(d->cut_pod, sizeof d->cut_pod, "%s", holder);
  d->cut_ms = now;
  if (d->grant_bounded) {
    /* What it still has queued is bounded (a few hundred microseconds):
     * the next pod need not wait for it, nor for the round trips of its
     * release. Its grant ends now; the caller decides who is next. */
    if (gmt_token_release(d->pol, now) < 0)
      gmt_warn("token device %d: out of memory recording a grant; its usage is lost", d->device);
    uv_timer_stop(&d->timer);
    watches_answer(d, d->cut_pod, true);
    return;
  }
  gmt_token_revoke(d->pol, now);
  watches_answer(d, d->cut_pod, true);
  /* It is waited for as after its quota (on_timer: draining). */
  timer_in(d, GMT_TOKEN_DRAIN_MAX_MS, on_timer);
}

/* The holder's watch has just come: a pod that asked before it (right
 * after the grant began, before the holder could watch) may cut the grant
 * short now. */
static void revoke_for_waiters(struct gmt_tokens *t, tdev_t *d, double now)
{
  const char *holder = gmt_token_holder(d->pol);
  for (const waiter_t *w = d->waiters; w && holder && !gmt_token_draining(d->pol); w = w->next) {
    const gmt_pod_t *pod = gmt_pods_find(t->s->pods, w->pod);
    if (pod)
      maybe_revoke(t, d, pod, now);
    holder = gmt_token_holder(d->pol);
  }
  if (!holder)
    schedule(d); /* the grant ended at once: the next pod's turn */
}

/* When pod's LIMIT 0 refusal was last logged, NULL without memory to
 * note it (then it is logged each time). */
static uint64_t *said0_of(struct gmt_tokens *t, const char *pod)
{
  for (size_t i = 0; i < t->nsaid0; i++)
    if (strcmp(t->said0[i].pod, pod) == 0)
      return &t->said0[i].ms;
  if (t->nsaid0 == t->capsaid0) {
    size_t cap = t->capsaid0 ? 2 * t->capsaid0 : 4;
    struct said0 *n = realloc(t->said0, cap * sizeof *n);
    if (!n)
      return NULL;
    t->said0 = n;
    t->capsaid0 = cap;
  }
  struct said0 *e = &t->said0[t->nsaid0++];
  snprintf(e->pod, sizeof e->pod, "%s", pod);
  e->ms = 0;
  return &e->ms;
}

/* A token refused because pod's LIMIT is 0: the job prints these words
 * on its stderr (hook/token/token.c), so they say which pod, why and
 * what to change; counted as the pod's refusal for GMT_REFUSED_LIMIT
 * (status) and logged at info level once a period per pod. */
static void refuse_limit0(struct gmt_tokens *t, gmt_call_t *call, gmt_pod_t *pod, uint32_t pid,
                          int device)
{
  gmt_schd_t *s = t->s;
  uint64_t *said = said0_of(t, pod->cfg.name);
  uint64_t unsaid = 0;
  if (gmt__say_now(said ? said : &unsaid, uv_now(s->loop)))
    gmt_info("pod '%s' pid %u: a token on GPU %d refused: its LIMIT is 0 in %s (said once "
             "every %d s per pod)",
             pod->cfg.name, pid, device, s->cfg->path, GMT_SAY_PERIOD_MS / 1000);
  char words[sizeof pod->last_refusal];
  snprintf(words, sizeof words,
           "pod '%s' gets no GPU time: its LIMIT is 0 in %s; give it a LIMIT above 0 there "
           "(gmt-schd rereads the file when it changes, or on SIGHUP)",
           pod->cfg.name, s->cfg->path);
  gmt_pods_refused(pod, GMT_REFUSED_LIMIT, words);
  gmt_call_reply_error(call, -EPERM, "%s", words);
}

/* The listed pod a call names and the device's token state, or NULL with
 * the call answered (a pod the config does not list, a device out of
 * range, no memory). */
static tdev_t *call_dev(gmt_schd_t *s, gmt_call_t *call, const char *name, int32_t device,
                        gmt_pod_t **pod)
{
  *pod = gmt_pods_find(s->pods, name);
  if (!*pod) {
    gmt__reply_nopod(call, s->cfg, name);
    return NULL;
  }
  if (device < 0 || device > MAX_DEVICE) {
    gmt_call_reply_error(call, -EINVAL, "device %d is out of range (0 to %d)", device, MAX_DEVICE);
    return NULL;
  }
  tdev_t *d = dev_get(s->tokens, device);
  if (!d)
    gmt_call_reply_error(call, -ENOMEM, "scheduler out of memory");
  return d;
}

void gmt__rpc_token_watch(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req)
{
  const Gmt__TokenWatchRequest *r = req->token_watch_req;
  gmt_pod_t *pod;
  tdev_t *d = call_dev(s, call, r->pod, r->device, &pod);
  if (!d)
    return;
  const char *holder = gmt_token_holder(d->pol);
  if (!holder || strcmp(holder, pod->cfg.name) != 0 || gmt_token_draining(d->pol)) {
    gmt_debug("TokenWatch pod '%s' device %d: no grant of its to watch", pod->cfg.name, r->device);
    reply_watch(call, false); /* no grant to watch (any more) */
    return;
  }
  gmt_debug("TokenWatch pod '%s' device %d: watching its grant", pod->cfg.name, r->device);
  watch_t *w = calloc(1, sizeof *w);
  if (!w) {
    gmt_call_reply_error(call, -ENOMEM, "scheduler out of memory");
    return;
  }
  w->call = call;
  snprintf(w->pod, sizeof w->pod, "%s", pod->cfg.name);
  w->next = d->watches;
  d->watches = w;
  revoke_for_waiters(s->tokens, d, clock_ms());
}

void gmt__rpc_token(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req)
{
  const Gmt__TokenRequest *r = req->token_req;
  struct gmt_tokens *t = s->tokens;
  gmt_pod_t *pod;
  tdev_t *d = call_dev(s, call, r->pod, r->device, &pod);
  if (!d)
    return;
  gmt_debug("Token pod '%s' pid %u device %d burst %.1f ms overuse %.1f ms%s (unused %.1f ms)",
            pod->cfg.name, r->pid, r->device, r->burst_ms, r->overuse_ms,
            r->release ? " release" : "", r->idle_ms);
  /* What the call says about the pod's last grant is charged (token.h's
   * rule): the holder asking again or releasing ends its grant and
   * competes for the next one like everybody else (Gemini). */
  double now = clock_ms();
  const char *holder = gmt_token_holder(d->pol);
  bool came_back = holder && strcmp(holder, pod->cfg.name) == 0;
  if (came_back)
    gmt_debug("token device %d: pod '%s' %s %.1f ms before its grant's end", d->device,
              pod->cfg.name, r->release ? "released it" : "came back",
              gmt_token_grant_end(d->pol) - now);
  if (gmt_token_report(d->pol, pod->cfg.name, now, r->release, r->idle_ms, r->overuse_ms,
                       t->p.window_ms) < 0)
    gmt_warn("token device %d: out of memory charging pod '%s'; its usage is lost", d->device,
             pod->cfg.name);
  if (came_back)
    uv_timer_stop(&d->timer);

  if (r->release) {
    reply_quota(call, 0);
  } else if (!gmt_pod_config_allows(&pod->cfg, r->device)) {
    gmt__reply_device_refused(call, s->cfg, pod, r->pid, r->device, "a token");
  } else if (!(pod->cfg.limit > 0)) {
    refuse_limit0(t, call, pod, r->pid, r->device);
  } else if (grant_beside(d, call, pod, isfinite(r->burst_ms) ? r->burst_ms : 0, now)) {
    /* answered: the holder keeps its grant */
  } else {
    waiter_t *w = calloc(1, sizeof *w);
    if (!w) {
      gmt_call_reply_error(call, -ENOMEM, "scheduler out of memory");
    } else {
      w->call = call;
      snprintf(w->pod, sizeof w->pod, "%s", pod->cfg.name);
      w->pid = r->pid;
      w->burst_ms = isfinite(r->burst_ms) && r->burst_ms > 0 ? r->burst_ms : 0;
      w->arrival_ms = now;
      w->bell = r->bell;
      waiter_t **tail = &d->waiters;
      while (*tail)
        tail = &(*tail)->next;
      *tail = w;
      maybe_revoke(t, d, pod, now);
    }
  }
  schedule(d);
}

/* Whether the pod named name is not to be served on device any more,
 * and why. */
static const char *gone_why(gmt_schd_t *s, const char *name, int device)
{
  const gmt_pod_t *pod = gmt_pods_find(s->pods, name);
  if (!pod)
    return "is no longer in the config";
  if (!gmt_pod_config_allows(&pod->cfg, device))
    return "may no longer use this GPU (devices=)";
  if (!pod->connected)
    return "is gone (its pod manager is disconnected)";
  if (pod->nprocs == 0)
    return "is gone (it has no processes)";
  if (!(pod->cfg.limit > 0))
    return "has LIMIT 0 now";
  return NULL;
}

void gmt__tokens_pod_changed(gmt_schd_t *s, const gmt_pod_t *pod)
{
  struct gmt_tokens *t = s->tokens;
  if (!t)
    return;
  /* Every pod in the token state is checked, not only this one: a reload
   * reports the pods it kept, never those it dropped. */
  (void)pod;
  for (size_t i = 0; i < t->nsaid0;) {
    const gmt_pod_t *p = gmt_pods_find(s->pods, t->said0[i].pod);
    if (p && !(p->cfg.limit > 0))
      i++;
    else
      t->said0[i] = t->said0[--t->nsaid0]; /* raised or gone: a new LIMIT 0 is said at once */
  }
  for (tdev_t *d = t->devs; d; d = d->next) {
    bool changed = false;
    const char *side = gmt_token_side(d->pol);
    const char *why = side ? gone_why(s, side, d->device) : NULL;
    if (why) {
      gmt_debug("token device %d: pod '%s' beside the holder %s; its grant ends", d->device, side,
                why);
      if (gmt_token_side_end(d->pol, clock_ms()) < 0)
        gmt_warn("token device %d: out of memory recording a grant; its usage is lost", d->device);
    }
    const char *holder = gmt_token_holder(d->pol);
    why = holder ? gone_why(s, holder, d->device) : NULL;
    if (why) {
      gmt_debug("token device %d: pod '%s' %s; its grant ends", d->device, holder, why);
      if (gmt_token_release(d->pol, clock_ms()) < 0)
        gmt_warn("token device %d: out of memory recording a grant; its usage is lost", d->device);
      uv_timer_stop(&d->timer);
      changed = true;
    }
    for (waiter_t **wp = &d->waiters; *wp;) {
      waiter_t *w = *wp;
      if (!(why = gone_why(s, w->pod, d->device))) {
        wp = &w->next;
        continue;
      }
      gmt_debug("token device %d: pod '%s' %s; its call (pid %u) is answered", d->device, w->pod,
                why, w->pid);
      gmt_pod_t *listed = gmt_pods_find(s->pods, w->pod);
      if (!listed)
        gmt__reply_nopod(w->call, s->cfg, w->pod);
      else if (!gmt_pod_config_allows(&listed->cfg, d->device))
        gmt__reply_device_refused(w->call, s->cfg, listed, w->pid, d->device, "a token");
      else if (!(listed->cfg.limit > 0))
        refuse_limit0(t, w->call, listed, w->pid, d->device);
      else
        gmt_call_reply_error(w->call, -ESRCH, "pod '%s' %s", w->pod, why);
      waiter_drop(wp);
      changed = true;
    }
    /* New shares apply from the next decision; with the token free that
     * is now (a raised limit may let a waiting pod run). */
    if (changed || (!gmt_token_holder(d->pol) && d->waiters))
      schedule(d);
  }
}

void gmt__tokens_status(gmt_schd_t *s, const gmt_pod_t *pod, Gmt__PodStatus *ps)
{
  struct gmt_tokens *t = s->tokens;
  if (!t)
    return;
  double now = clock_ms(), share = 0;
  bool holds = false;
  for (tdev_t *d = t->devs; d; d = d->next) {
    const char *holder = gmt_token_holder(d->pol);
    share += gmt_token_usage(d->pol, pod->cfg.name, t->p.window_ms, now) / t->p.window_ms;
    holds = holds || (holder && strcmp(holder, pod->cfg.name) == 0);
  }
  ps->gpu_time_share = share;
  ps->holds_token = holds;
  /* Held back at its LIMIT: the spells that ended, and those going on. */
  double limited = pod->limit_wait_ms;
  for (tdev_t *d = t->devs; d; d = d->next)
    for (size_t i = 0; i < d->nlim; i++)
      if (!strcmp(d->lim[i].pod, pod->cfg.name) && now > d->lim[i].since)
        limited += now - d->lim[i].since;
  ps->limit_wait_us = (uint64_t)(limited * 1000);
}

void gmt__tokens_pod_devices(gmt_schd_t *s, const char *pod, gmt__tokens_dev_fn fn, void *arg)
{
  struct gmt_tokens *t = s->tokens;
  if (!t || !pod)
    return;
  double now = clock_ms();
  for (tdev_t *d = t->devs; d; d = d->next) {
    const char *holder = gmt_token_holder(d->pol);
    fn(arg, d->device, holder && strcmp(holder, pod) == 0,
       gmt_token_usage(d->pol, pod, t->p.window_ms, now) / t->p.window_ms);
  }
}

double gmt__tokens_last_run(gmt_schd_t *s, const char *pod, int device)
{
  const tdev_t *d = dev_find(s->tokens, device);
  return d ? gmt_token_last_end(d->pol, pod) : -INFINITY;
}

bool gmt__tokens_waits(gmt_schd_t *s, const char *pod, int device)
{
  const tdev_t *d = dev_find(s->tokens, device);
  for (const waiter_t *w = d ? d->waiters : NULL; w; w = w->next)
    if (pod && strcmp(w->pod, pod) == 0)
      return true;
  return false;
}

bool gmt__tokens_cut(gmt_schd_t *s, const char *pod, int device)
{
  const tdev_t *d = dev_find(s->tokens, device);
  return d && pod && d->cut_ms > 0 && strcmp(d->cut_pod, pod) == 0 &&
         clock_ms() - d->cut_ms < GMT_TOKEN_DRAIN_MAX_MS;
}

bool gmt__tokens_holds(gmt_schd_t *s, const char *pod, int device)
{
  const tdev_t *d = dev_find(s->tokens, device);
  const char *holder = d ? gmt_token_holder(d->pol) : NULL;
  return holder && pod && strcmp(holder, pod) == 0;
}

unsigned gmt__tokens_device(gmt_schd_t *s, int device, const char **holder)
{
  const tdev_t *d = dev_find(s->tokens, device);
  *holder = d ? gmt_token_holder(d->pol) : NULL;
  unsigned n = 0;
  for (const waiter_t *w = d ? d->waiters : NULL; w; w = w->next)
    n++;
  return n;
}
