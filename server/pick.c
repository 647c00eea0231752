/* Best-GPU selection: the score, the decision and the cache rule
 * (pick.h). No I/O: rpc_pick.c samples the numbers and applies the
 * result. */
#include "pick.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_bytes.h"

uint64_t gmt_pick_free(const gmt_pick_dev_t *d)
{
  if (!d->mem_known)
    return 0;
  uint64_t left = d->total > d->reserved ? d->total - d->reserved : 0;
  return d->nvml_free < left ? d->nvml_free : left;
}

/* Scores the GPUs with mask[i] set (all when mask is NULL) against each
 * other; the others get score 0. */
static void score_some(gmt_pick_dev_t *devs, size_t n, const bool *mask)
{
  uint64_t most_free = 0;
  double least_delay = INFINITY;
  bool mem = false, delay = false, util = false;
  for (size_t i = 0; i < n; i++) {
    gmt_pick_dev_t *d = &devs[i];
    d->free = gmt_pick_free(d);
    d->score = 0;
    if (mask && !mask[i])
      continue;
    if (d->mem_known) {
      mem = true;
      if (d->free > most_free)
        most_free = d->free;
    }
    if (d->probe_failed) {
      delay = true;
    } else if (d->probe_ms >= 0) {
      delay = true;
      least_delay = fmin(least_delay, d->probe_ms);
    }
    util = util || d->utilization >= 0;
  }
  double wsum = GMT_PICK_W_WAIT + (mem ? GMT_PICK_W_FREE : 0) + (delay ? GMT_PICK_W_DELAY : 0) +
                (util ? GMT_PICK_W_UTIL : 0);
  for (size_t i = 0; i < n; i++) {
    gmt_pick_dev_t *d = &devs[i];
    if (mask && !mask[i])
      continue;
    double s = GMT_PICK_W_WAIT / (1.0 + d->tokens_waiting + (d->holder[0] ? 1 : 0));
    if (mem && most_free > 0)
      s += GMT_PICK_W_FREE * ((double)d->free / (double)most_free);
    /* A longer delay lowers the score; a GPU not measured (timed out, or
     * not probed while others were) counts as the slowest. */
    if (delay && !d->probe_failed && d->probe_ms >= 0 && isfinite(least_delay))
      s += GMT_PICK_W_DELAY * (least_delay + GMT_PICK_DELAY_FLOOR_MS) /
           (d->probe_ms + GMT_PICK_DELAY_FLOOR_MS);
    if (util)
      s += GMT_PICK_W_UTIL * (d->utilization >= 0 ? 1.0 - fmin(d->utilization, 1.0) : 0.5);
    d->score = fmin(s / wsum, 1.0); /* the best on every term: 1, not 1 + rounding */
  }
}

void gmt_pick_score(gmt_pick_dev_t *devs, size_t n)
{
  score_some(devs, n, NULL);
}

static bool allowed(const gmt_pick_ask_t *ask, int index)
{
  if (!ask->allowed || ask->nallowed == 0)
    return true;
  for (size_t i = 0; i < ask->nallowed; i++)
    if (ask->allowed[i] == index)
      return true;
  return false;
}

static const char *human(char *buf, size_t len, uint64_t b)
{
  if (b >= (1ull << 30))
    snprintf(buf, len, "%.1f GiB", (double)b / (double)(1ull << 30));
  else
    snprintf(buf, len, "%.1f MiB", (double)b / (double)(1ull << 20));
  return buf;
}

/* Best first: higher score, then lower index. */
static int by_score(const void *a, const void *b, void *arg)
{
  const gmt_pick_dev_t *devs = arg;
  const gmt_pick_dev_t *x = &devs[*(const size_t *)a], *y = &devs[*(const size_t *)b];
  if (x->score != y->score)
    return x->score > y->score ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

int gmt_pick_choose(gmt_pick_dev_t *devs, size_t n, const gmt_pick_ask_t *ask, bool *considered,
                    size_t *chosen, size_t *nchosen, char *why, size_t whylen)
{
  *nchosen = 0;
  why[0] = '\0';
  bool *mask = calloc(n ? n : 1, sizeof *mask);
  size_t *fit = calloc(n ? n : 1, sizeof *fit);
  if (!mask || !fit) {
    free(mask);
    free(fit);
    snprintf(why, whylen, "out of memory");
    return -ENOMEM;
  }
  size_t ncons = 0, nfit = 0;
  for (size_t i = 0; i < n; i++) {
    mask[i] = allowed(ask, devs[i].index);
    ncons += mask[i];
    if (considered)
      considered[i] = mask[i];
  }
  unsigned count = ask->count ? ask->count : 1;
  int rc = 0;
  if (ncons == 0) {
    if (n == 0)
      snprintf(why, whylen, "this node has no GPU that gmt-schd knows");
    else
      snprintf(why, whylen, "none of the node's %zu GPU%s is among the pod's devices=", n,
               n == 1 ? "" : "s");
    rc = -ENODEV;
    goto out;
  }
  if (count > GMT_PICK_MAX_COUNT || count > ncons) {
    snprintf(why, whylen, "asked for %u GPUs; %s %zu", count,
             ask->nallowed ? "the pod may use" : "this node has", ncons);
    rc = -EINVAL;
    goto out;
  }
  score_some(devs, n, mask);
  for (size_t i = 0; i < n; i++) {
    if (!mask[i])
      continue;
    if (ask->bytes > 0 && (!devs[i].mem_known || devs[i].free < ask->bytes))
      devs[i].score = 0; /* not a candidate */
    else
      fit[nfit++] = i;
  }
  if (nfit < count) {
    char need[32], have[32];
    int len = snprintf(
        why, whylen, "%zu of the %zu GPU%s considered ha%s %s free (%u wanted); free:", nfit, ncons,
        ncons == 1 ? "" : "s", nfit == 1 ? "s" : "ve", human(need, sizeof need, ask->bytes), count);
    bool first = true;
    for (size_t i = 0; i < n && len > 0 && (size_t)len < whylen; i++)
      if (mask[i]) {
        len += snprintf(why + len, whylen - (size_t)len, "%s GPU %d %s", first ? "" : ",",
                        devs[i].index,
                        devs[i].mem_known ? human(have, sizeof have, devs[i].free) : "unknown");
        first = false;
      }
    rc = -ENOSPC;
    goto out;
  }
  qsort_r(fit, nfit, sizeof *fit, by_score, devs);
  for (unsigned k = 0; k < count; k++)
    chosen[k] = fit[k];
  *nchosen = count;
out:
  free(mask);
  free(fit);
  return rc;
}

void gmt_pick_apply_pending(gmt_pick_dev_t *devs, size_t n, const gmt_pick_pending_t *p, size_t np,
                            uint64_t now_ms)
{
  for (size_t k = 0; k < np; k++) {
    if (p[k].until_ms <= now_ms)
      continue;
    for (size_t i = 0; i < n; i++)
      if (devs[i].index == p[k].index) {
        devs[i].tokens_waiting++;
        devs[i].reserved = gmt_bytes_add(devs[i].reserved, p[k].bytes);
      }
  }
}

bool gmt_pick_cache_stale(const gmt_pick_cache_t *c, uint64_t max_age_ms, uint64_t max_requests,
                          uint64_t now_ms)
{
  if (!c->valid || max_age_ms == 0)
    return true;
  uint64_t age = now_ms > c->taken_ms ? now_ms - c->taken_ms : 0;
  return age > max_age_ms || c->served >= max_requests;
}
