/* The GPU time token policy (Gemini): usage over a sliding window with
 * overlaps split evenly, eligibility, ranking, quotas, when to look again,
 * and one decision made of those steps in order. See token.h; rpc_token.c
 * gathers the waiting pods, asks for a decision and applies it.
 *
 * Every question is answered from the grants themselves rather than from
 * running totals: a window of 10 s holds at most a few hundred grants, and
 * recomputing keeps the 1/k split exact however grants and overuse charges
 * overlap. */
#include "token.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Below a microsecond, times are the same: doubles summed over a window
 * must not make a pod at its limit look a hair under or over it. */
#define EPS_MS 1e-6

typedef struct span {
  char pod[GMT_POD_NAME_MAX + 1];
  double start, end;
} span_t;

/* What a pod's overuse report needs to know about its last grant. */
typedef struct podrec {
  char pod[GMT_POD_NAME_MAX + 1];
  double last_end; /* end of its last finished grant (and overuse charged after it) */
} podrec_t;

struct gmt_token_dev {
  bool held;
  bool draining;     /* the holder's quota ran out; its queued work still runs */
  span_t cur;        /* the holder's grant: start and planned end */
  double keep_until; /* not cut short before then (a swap pod's turn, gmt_token_schedule) */
  bool side_held;
  span_t side;   /* a latency pod's grant beside the holder's (token.h) */
  span_t *spans; /* finished grants and overuse charges, in no order */
  size_t nspans, capspans;
  podrec_t *recs;
  size_t nrecs, caprecs;
};

/* One piece of a pod's charge: over [a, b) it is charged r seconds per
 * second (j of the k grants there are its own: r = j/k). */
typedef struct piece {
  double a, b, r;
} piece_t;

void gmt_token_params_default(gmt_token_params_t *p)
{
  p->window_ms = GMT_TOKEN_WINDOW_MS;
  p->base_quota_ms = GMT_TOKEN_BASE_QUOTA_MS;
  p->min_quota_ms = GMT_TOKEN_MIN_QUOTA_MS;
  p->latency_idle_ms = GMT_TOKEN_LATENCY_IDLE_US / 1000.0;
  p->wake_queue_ms = GMT_TOKEN_WAKE_QUEUE_US / 1000.0;
  p->alone_quota_ms = GMT_TOKEN_ALONE_QUOTA_MS;
  p->swap_move_share = GMT_SWAP_MOVE_SHARE;
}

int gmt_token_params_check(const gmt_token_params_t *p, char *err, size_t errlen)
{
  if (!(p->window_ms >= GMT_TOKEN_WINDOW_MIN_MS && p->window_ms <= GMT_TOKEN_WINDOW_MAX_MS)) {
    snprintf(err, errlen, "--window-ms %g: want %d to %d milliseconds", p->window_ms,
             GMT_TOKEN_WINDOW_MIN_MS, GMT_TOKEN_WINDOW_MAX_MS);
    return -EINVAL;
  }
  if (!(p->min_quota_ms >= 1 && p->min_quota_ms <= p->window_ms)) {
    snprintf(err, errlen, "--min-quota-ms %g: want 1 to the window (%g ms)", p->min_quota_ms,
             p->window_ms);
    return -EINVAL;
  }
  if (!(p->base_quota_ms >= p->min_quota_ms)) {
    snprintf(err, errlen, "--base-quota-ms %g is below --min-quota-ms %g", p->base_quota_ms,
             p->min_quota_ms);
    return -EINVAL;
  }
  if (!(p->swap_move_share >= GMT_SWAP_MOVE_SHARE_MIN &&
        p->swap_move_share <= GMT_SWAP_MOVE_SHARE_MAX)) {
    snprintf(err, errlen, "--swap-move-share %g: want %g to %g", p->swap_move_share,
             GMT_SWAP_MOVE_SHARE_MIN, GMT_SWAP_MOVE_SHARE_MAX);
    return -EINVAL;
  }
  if (!(p->latency_idle_ms >= 0.05 && p->latency_idle_ms <= GMT_TOKEN_LATENCY_IDLE_MAX_MS)) {
    snprintf(err, errlen, "--latency-idle-ms %g: want 0.05 to %d milliseconds", p->latency_idle_ms,
             GMT_TOKEN_LATENCY_IDLE_MAX_MS);
    return -EINVAL;
  }
  if (!(p->wake_queue_ms >= 0 && p->wake_queue_ms <= GMT_TOKEN_WAKE_QUEUE_MAX_MS)) {
    snprintf(err, errlen, "--wake-queue-ms %g: want 0 (off) to %d milliseconds", p->wake_queue_ms,
             GMT_TOKEN_WAKE_QUEUE_MAX_MS);
    return -EINVAL;
  }
  if (!(p->base_quota_ms <= p->window_ms)) {
    snprintf(err, errlen, "--base-quota-ms %g: want at most the window (%g ms)", p->base_quota_ms,
             p->window_ms);
    return -EINVAL;
  }
  return 0;
}

int gmt_token_dev_new(gmt_token_dev_t **out)
{
  *out = calloc(1, sizeof **out);
  return *out ? 0 : -ENOMEM;
}

void gmt_token_dev_free(gmt_token_dev_t *d)
{
  if (!d)
    return;
  free(d->spans);
  free(d->recs);
  free(d);
}

const char *gmt_token_holder(const gmt_token_dev_t *d)
{
  return d->held ? d->cur.pod : NULL;
}

double gmt_token_grant_end(const gmt_token_dev_t *d)
{
  return d->held ? d->cur.end : 0;
}

size_t gmt_token_history(const gmt_token_dev_t *d)
{
  return d->nspans;
}

bool gmt_token_eligible(double usage_ms, double limit, double window_ms)
{
  return limit * window_ms - usage_ms > EPS_MS;
}

/* ---- the charge of one pod ---- */

/* The i-th interval as of now: the kept spans, then the holder's running
 * grant up to now. */
static size_t nintervals(const gmt_token_dev_t *d)
{
  return d->nspans + (d->held ? 1 : 0) + (d->side_held ? 1 : 0);
}

static const char *interval(const gmt_token_dev_t *d, size_t i, double now, double *a, double *b)
{
  if (i < d->nspans) {
    *a = d->spans[i].start;
    *b = d->spans[i].end;
    return d->spans[i].pod;
  }
  if (!d->held || i > d->nspans) { /* the side grant, up to now */
    *a = d->side.start;
    *b = fmin(d->side.end, now);
    return d->side.pod;
  }
  *a = d->cur.start;
  *b = d->draining ? now : fmin(d->cur.end, now);
  return d->cur.pod;
}

/* An interval's start (+1) or end (-1) in the sweep below; mine: the
 * pod's own. */
typedef struct edge {
  double t;
  int delta;
  bool mine;
} edge_t;

static int cmp_edge(const void *x, const void *y)
{
  double a = ((const edge_t *)x)->t, b = ((const edge_t *)y)->t;
  return (a > b) - (a < b);
}

/* The pieces of [lo, hi] where pod is charged, in time order. On -ENOMEM
 * the split cannot be computed and nothing is returned. One sweep over the
 * intervals' ends, sorted: a window of a latency pod at 1000 requests/s
 * holds thousands of grants and charges, and gmt-schd asks this several
 * times a decision (a pass over every interval for every piece took 5 ms
 * a decision there, and each decision waited for it). */
static int pod_pieces(const gmt_token_dev_t *d, const char *pod, double lo, double hi, double now,
                      piece_t **out, size_t *nout)
{
  size_t m = nintervals(d), ne = 0, np = 0;
  *out = NULL;
  *nout = 0;
  if (m == 0 || hi <= lo)
    return 0;
  edge_t *e = malloc(2 * m * sizeof *e);
  piece_t *pieces = malloc((2 * m + 1) * sizeof *pieces);
  if (!e || !pieces) {
    free(e);
    free(pieces);
    return -ENOMEM;
  }
  bool any = false;
  for (size_t i = 0; i < m; i++) {
    double a, b;
    const char *who = interval(d, i, now, &a, &b);
    if (b <= lo || a >= hi || b <= a)
      continue;
    bool mine = strcmp(who, pod) == 0;
    any = any || mine;
    e[ne++] = (edge_t){fmax(a, lo), 1, mine};
    e[ne++] = (edge_t){fmin(b, hi), -1, mine};
  }
  if (!any) {
    free(e);
    free(pieces);
    return 0;
  }
  qsort(e, ne, sizeof *e, cmp_edge);
  /* Between two consecutive times every interval covers all of the
   * stretch or none of it (intervals are [start, end)): k of them, j the
   * pod's. */
  int k = 0, j = 0;
  for (size_t i = 0; i < ne;) {
    double a = e[i].t;
    for (; i < ne && e[i].t == a; i++) {
      k += e[i].delta;
      j += e[i].mine ? e[i].delta : 0;
    }
    if (i == ne || j <= 0)
      continue;
    double b = e[i].t, r = (double)j / k;
    if (np > 0 && pieces[np - 1].b == a && pieces[np - 1].r == r)
      pieces[np - 1].b = b;
    else
      pieces[np++] = (piece_t){a, b, r};
  }
  free(e);
  *out = pieces;
  *nout = np;
  return 0;
}

/* Without memory for the split: each interval charged in full, which
 * errs against the pod, never for it. */
static double usage_unsplit(const gmt_token_dev_t *d, const char *pod, double lo, double hi)
{
  double u = 0;
  for (size_t i = 0; i < nintervals(d); i++) {
    double a, b;
    if (strcmp(interval(d, i, hi, &a, &b), pod) == 0)
      u += fmax(0, fmin(b, hi) - fmax(a, lo));
  }
  return u;
}

double gmt_token_usage(const gmt_token_dev_t *d, const char *pod, double window_ms, double now)
{
  piece_t *pc;
  size_t n;
  double lo = now - window_ms, u = 0;
  if (pod_pieces(d, pod, lo, now, now, &pc, &n) < 0)
    return usage_unsplit(d, pod, lo, now);
  for (size_t i = 0; i < n; i++)
    u += (pc[i].b - pc[i].a) * pc[i].r;
  free(pc);
  return u;
}

/* A grant of q from now adds q at the front of the window while the charge
 * in [now - W, now - W + q) leaves at the back, so the window's total
 * f(q) = usage + q - (what left) grows at 1 - r where the leaving charge is
 * r. f never shrinks (r <= 1); walk it until it reaches LIMIT x W. */
double gmt_token_allowance(const gmt_token_dev_t *d, const char *pod, double limit,
                           double window_ms, double now)
{
  double cap = limit * window_ms, lo = now - window_ms;
  if (!(cap > EPS_MS))
    return 0;
  piece_t *pc;
  size_t n;
  if (pod_pieces(d, pod, lo, now, now, &pc, &n) < 0)
    return fmax(0, cap - usage_unsplit(d, pod, lo, now)); /* Gemini's plain rule */
  double budget = cap;
  for (size_t i = 0; i < n; i++)
    budget -= (pc[i].b - pc[i].a) * pc[i].r;
  if (budget < -EPS_MS) {
    free(pc);
    return 0;
  }
  budget = fmax(budget, 0);

  double q = 0, y = lo;
  size_t i = 0;
  while (q < cap) {
    double r = 0, y1;
    if (i < n && pc[i].a <= y) {
      r = pc[i].r;
      y1 = pc[i].b;
    } else {
      y1 = i < n ? pc[i].a : INFINITY;
    }
    double len = y1 - y, rate = 1 - r;
    if (rate > EPS_MS && budget / rate <= len) {
      q += budget / rate;
      break;
    }
    budget -= len * rate;
    q += len;
    y = y1;
    if (i < n && y >= pc[i].b)
      i++;
  }
  free(pc);
  return fmin(q, cap);
}

/* ---- choosing ---- */

/* The least allowance worth a grant: a sliver would cost the pod a round
 * trip per sliver while its old grants leave the window. */
static double grant_floor(const gmt_token_params_t *p, double limit)
{
  return fmin(p->min_quota_ms, limit * p->window_ms);
}

bool gmt_token_can_take(const gmt_token_params_t *p, const gmt_token_cand_t *c)
{
  return c->limit * p->window_ms > EPS_MS && c->allowance_ms > EPS_MS &&
         c->allowance_ms >= grant_floor(p, c->limit) - EPS_MS;
}

static bool below_request(const gmt_token_params_t *p, const gmt_token_cand_t *c)
{
  return c->usage_ms < c->request * p->window_ms - EPS_MS;
}

/* missing / (missing + usage), with missing = REQUEST x W - usage. */
static double neediness(const gmt_token_params_t *p, const gmt_token_cand_t *c)
{
  double missing = c->request * p->window_ms - c->usage_ms;
  return missing / (missing + c->usage_ms);
}

/* Whether a goes before b. */
static bool before(const gmt_token_params_t *p, const gmt_token_cand_t *a,
                   const gmt_token_cand_t *b)
{
  if (a->latency != b->latency)
    return a->latency;
  bool ba = below_request(p, a), bb = below_request(p, b);
  if (ba != bb)
    return ba;
  if (ba) {
    double na = neediness(p, a), nb = neediness(p, b);
    if (fabs(na - nb) > 1e-12)
      return na > nb;
  } else if (fabs(a->usage_ms - b->usage_ms) > EPS_MS) {
    return a->usage_ms < b->usage_ms;
  }
  return a->arrival_ms < b->arrival_ms;
}

int gmt_token_pick(const gmt_token_params_t *p, const gmt_token_cand_t *c, size_t n)
{
  int best = -1;
  for (size_t i = 0; i < n; i++) {
    if (!gmt_token_can_take(p, &c[i]))
      continue;
    if (best < 0 || before(p, &c[i], &c[best]))
      best = (int)i;
  }
  return best;
}

int gmt_token_choose(const gmt_token_params_t *p, const gmt_token_dev_t *d, gmt_token_cand_t *c,
                     size_t n, double now)
{
  for (size_t i = 0; i < n; i++) {
    c[i].usage_ms = gmt_token_usage(d, c[i].pod, p->window_ms, now);
    c[i].allowance_ms = gmt_token_allowance(d, c[i].pod, c[i].limit, p->window_ms, now);
  }
  return gmt_token_pick(p, c, n);
}

double gmt_token_quota(const gmt_token_params_t *p, double burst_ms, double limit,
                       double allowance_ms)
{
  double cap = limit * p->window_ms, q;
  if (isfinite(burst_ms) && burst_ms > 0)
    q = fmin(fmax(burst_ms, p->min_quota_ms), cap);
  else
    q = p->base_quota_ms;
  q = fmin(q, allowance_ms);
  if (q < p->min_quota_ms)
    q = fmin(p->min_quota_ms, allowance_ms);
  return fmax(q, 0);
}

double gmt_token_wake(const gmt_token_params_t *p, const gmt_token_dev_t *d,
                      const gmt_token_cand_t *c, size_t n, double now)
{
  /* Past the last end plus a window nothing of today is charged: every
   * pod with a LIMIT can take a grant by then. */
  double last = now;
  for (size_t i = 0; i < nintervals(d); i++) {
    double a, b;
    interval(d, i, INFINITY, &a, &b);
    last = fmax(last, b);
  }
  double best = INFINITY;
  for (size_t k = 0; k < n; k++) {
    double cap = c[k].limit * p->window_ms, need = grant_floor(p, c[k].limit) - EPS_MS;
    if (!(cap > EPS_MS))
      continue;
    double lo = now, hi = last + p->window_ms;
    if (gmt_token_allowance(d, c[k].pod, c[k].limit, p->window_ms, lo) >= need) {
      best = fmin(best, lo);
      continue;
    }
    /* The allowance grows as old grants leave: bisect to 10 us. */
    while (hi - lo > 0.01) {
      double mid = lo + (hi - lo) / 2;
      if (gmt_token_allowance(d, c[k].pod, c[k].limit, p->window_ms, mid) >= need)
        hi = mid;
      else
        lo = mid;
    }
    best = fmin(best, hi);
  }
  return best;
}

/* ---- changes ---- */

static podrec_t *rec_find(gmt_token_dev_t *d, const char *pod)
{
  for (size_t i = 0; i < d->nrecs; i++)
    if (strcmp(d->recs[i].pod, pod) == 0)
      return &d->recs[i];
  return NULL;
}

double gmt_token_last_end(const gmt_token_dev_t *d, const char *pod)
{
  for (size_t i = 0; pod && i < d->nrecs; i++)
    if (strcmp(d->recs[i].pod, pod) == 0)
      return d->recs[i].last_end;
  return -INFINITY;
}

static podrec_t *rec_get(gmt_token_dev_t *d, const char *pod)
{
  podrec_t *r = rec_find(d, pod);
  if (r)
    return r;
  if (d->nrecs == d->caprecs) {
    size_t cap = d->caprecs ? 2 * d->caprecs : 8;
    podrec_t *n = realloc(d->recs, cap * sizeof *n);
    if (!n)
      return NULL;
    d->recs = n;
    d->caprecs = cap;
  }
  r = &d->recs[d->nrecs++];
  memset(r, 0, sizeof *r);
  snprintf(r->pod, sizeof r->pod, "%s", pod);
  r->last_end = -INFINITY;
  return r;
}

static int span_add(gmt_token_dev_t *d, const char *pod, double start, double end)
{
  if (!(end > start))
    return 0;
  if (d->nspans == d->capspans) {
    size_t cap = d->capspans ? 2 * d->capspans : 32;
    span_t *n = realloc(d->spans, cap * sizeof *n);
    if (!n)
      return -ENOMEM;
    d->spans = n;
    d->capspans = cap;
  }
  span_t *s = &d->spans[d->nspans++];
  snprintf(s->pod, sizeof s->pod, "%s", pod);
  s->start = start;
  s->end = end;
  return 0;
}

/* A grant (the holder's or the side one) of pod opens as g at now. The
 * record is made now so that closing the grant cannot fail for it. */
static int grant_open(gmt_token_dev_t *d, span_t *g, const char *pod, double now, double quota_ms)
{
  if (!rec_get(d, pod))
    return -ENOMEM;
  snprintf(g->pod, sizeof g->pod, "%s", pod);
  g->start = now;
  g->end = now + fmax(quota_ms, 0);
  return 0;
}

/* ... and closes at end (no earlier than its start): charged, and its
 * pod's last grant ends there. */
static int grant_close(gmt_token_dev_t *d, const span_t *g, double end)
{
  end = fmax(end, g->start);
  int rc = span_add(d, g->pod, g->start, end);
  podrec_t *r = rec_get(d, g->pod);
  if (r)
    r->last_end = end;
  return rc;
}

int gmt_token_grant(gmt_token_dev_t *d, const char *pod, double now, double quota_ms)
{
  if (d->held)
    return -EBUSY;
  int rc = grant_open(d, &d->cur, pod, now, quota_ms);
  if (rc == 0) {
    d->held = true;
    d->draining = false;
    d->keep_until = 0;
  }
  return rc;
}

static int end_grant(gmt_token_dev_t *d, double end)
{
  if (!d->held)
    return 0;
  d->held = false;
  d->draining = false;
  return grant_close(d, &d->cur, end);
}

int gmt_token_release(gmt_token_dev_t *d, double now)
{
  return end_grant(d, d->draining ? now : fmin(now, d->cur.end));
}

/* ---- a latency pod beside the holder ---- */

const char *gmt_token_side(const gmt_token_dev_t *d)
{
  return d->side_held ? d->side.pod : NULL;
}

double gmt_token_side_end_planned(const gmt_token_dev_t *d)
{
  return d->side_held ? d->side.end : 0;
}

int gmt_token_side_grant(gmt_token_dev_t *d, const char *pod, double now, double quota_ms)
{
  if (d->side_held || (d->held && strcmp(d->cur.pod, pod) == 0))
    return -EBUSY;
  int rc = grant_open(d, &d->side, pod, now, quota_ms);
  d->side_held = rc == 0;
  return rc;
}

int gmt_token_step_aside(gmt_token_dev_t *d)
{
  if (!d->held || d->side_held || d->draining)
    return -EBUSY;
  d->side = d->cur;
  d->side_held = true;
  d->held = false;
  return 0;
}

int gmt_token_side_end(gmt_token_dev_t *d, double now)
{
  if (!d->side_held)
    return 0;
  d->side_held = false;
  return grant_close(d, &d->side, fmin(now, d->side.end));
}

void gmt_token_drain(gmt_token_dev_t *d)
{
  if (d->held)
    d->draining = true;
}

bool gmt_token_draining(const gmt_token_dev_t *d)
{
  return d->held && d->draining;
}

int gmt_token_expire(gmt_token_dev_t *d)
{
  return end_grant(d, d->cur.end);
}

int gmt_token_overuse(gmt_token_dev_t *d, const char *pod, double overuse_ms, double window_ms,
                      double now)
{
  if (!(overuse_ms > 0))
    return 0;
  overuse_ms = fmin(overuse_ms, window_ms);
  podrec_t *r = rec_get(d, pod);
  if (!r)
    return -ENOMEM;
  /* It ran before it said so: nothing is charged past now. A second
   * report for the same grant follows the first. */
  double start = isfinite(r->last_end) ? r->last_end : now - overuse_ms;
  double end = fmin(start + overuse_ms, now);
  if (!(end > start))
    return 0;
  int rc = span_add(d, pod, start, end);
  if (rc == 0)
    r->last_end = end;
  return rc;
}

int gmt_token_report(gmt_token_dev_t *d, const char *pod, double now, bool release, double idle_ms,
                     double overuse_ms, double window_ms)
{
  double idle = release && isfinite(idle_ms) && idle_ms > 0 ? idle_ms : 0;
  if (d->held && strcmp(d->cur.pod, pod) == 0)
    return gmt_token_release(d, now - idle);
  if (d->side_held && strcmp(d->side.pod, pod) == 0)
    return gmt_token_side_end(d, now - idle);
  if (!isfinite(overuse_ms) || !(overuse_ms > 0))
    return 0;
  return gmt_token_overuse(d, pod, overuse_ms, window_ms, now);
}

void gmt_token_prune(gmt_token_dev_t *d, double window_ms, double now)
{
  double lo = now - window_ms;
  size_t k = 0;
  for (size_t i = 0; i < d->nspans; i++)
    if (d->spans[i].end > lo)
      d->spans[k++] = d->spans[i];
  d->nspans = k;
  k = 0;
  for (size_t i = 0; i < d->nrecs; i++) {
    const podrec_t *r = &d->recs[i];
    bool holder = (d->held && strcmp(d->cur.pod, r->pod) == 0) ||
                  (d->side_held && strcmp(d->side.pod, r->pod) == 0);
    if (holder || r->last_end > lo)
      d->recs[k++] = *r;
  }
  d->nrecs = k;
}

/* ---- cutting a grant short ---- */

bool gmt_token_should_revoke(const gmt_token_params_t *p, const gmt_token_dev_t *d,
                             gmt_token_cand_t *c, gmt_token_cand_t *holder, double now)
{
  if (!d->held || d->draining || strcmp(c->pod, d->cur.pod) == 0 ||
      !(c->arrival_ms > d->cur.start) || (now < d->keep_until && !c->latency && !c->waking))
    return false;
  c->usage_ms = gmt_token_usage(d, c->pod, p->window_ms, now);
  c->allowance_ms = gmt_token_allowance(d, c->pod, c->limit, p->window_ms, now);
  holder->usage_ms = gmt_token_usage(d, holder->pod, p->window_ms, now);
  holder->allowance_ms = gmt_token_allowance(d, holder->pod, holder->limit, p->window_ms, now);
  /* The holder as a candidate may have spent its allowance on this very
   * grant: it still ranks as one that could run, or every pod at its
   * limit would be cut short by anybody. */
  gmt_token_cand_t h = *holder;
  h.allowance_ms = fmax(h.allowance_ms, grant_floor(p, h.limit));
  return gmt_token_can_take(p, c) && before(p, c, &h);
}

void gmt_token_revoke(gmt_token_dev_t *d, double now)
{
  if (!d->held)
    return;
  d->cur.end = fmax(d->cur.start, fmin(d->cur.end, now));
  d->draining = true;
}

/* ---- the decision ---- */

bool gmt_token_alone(const gmt_token_dev_t *d, const char *pod, double window_ms, double now)
{
  if ((d->held && strcmp(d->cur.pod, pod) != 0) || (d->side_held && strcmp(d->side.pod, pod) != 0))
    return false;
  for (size_t i = 0; i < d->nspans; i++)
    if (d->spans[i].end > now - window_ms && strcmp(d->spans[i].pod, pod) != 0)
      return false;
  return true;
}

int gmt_token_schedule(const gmt_token_params_t *p, gmt_token_dev_t *d, gmt_token_cand_t *c,
                       size_t n, double now, gmt_token_decision_t *out)
{
  *out = (gmt_token_decision_t){.action = GMT_TOKEN_KEEP, .winner = -1};
  if (d->held)
    return 0;
  gmt_token_prune(d, p->window_ms, now);
  int k = gmt_token_choose(p, d, c, n, now);
  if (k < 0) {
    double wake = gmt_token_wake(p, d, c, n, now);
    if (isinf(wake)) {
      out->action = GMT_TOKEN_IDLE;
    } else {
      out->action = GMT_TOKEN_WAKE;
      out->wake_ms = wake;
    }
    return 0;
  }
  out->action = GMT_TOKEN_GRANT;
  out->winner = k;
  out->quota_ms = gmt_token_quota(p, c[k].burst_ms, c[k].limit, c[k].allowance_ms);
  out->alone = n == 1 && c[k].watched && gmt_token_alone(d, c[k].pod, p->window_ms, now);
  if (out->alone)
    out->quota_ms = fmax(out->quota_ms, fmin(p->alone_quota_ms, c[k].allowance_ms));
  if (c[k].turn_ms > 0)
    out->quota_ms = fmax(out->quota_ms, fmin(c[k].turn_ms, c[k].allowance_ms));
  int rc = gmt_token_grant(d, c[k].pod, now, out->quota_ms);
  if (rc == 0 && c[k].turn_ms > 0)
    d->keep_until = now + fmin(c[k].turn_ms, out->quota_ms);
  return rc;
}
