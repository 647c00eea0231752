/* Pin advice's decisions (see pin_policy.h). */
#include "pin_policy.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "gmt.pb-c.h"

static gmt_pin_advice_t advice(bool pin, Gmt__PinReason reason)
{
  return (gmt_pin_advice_t){.pin = pin, .reason = (int)reason};
}

/* A grant when it fits the room left, else the budget's refusal. */
static gmt_pin_advice_t if_fits(uint64_t bytes, uint64_t room, Gmt__PinReason reason)
{
  return bytes <= room ? advice(true, reason) : advice(false, GMT__PIN_REASON__PIN_REASON_BUDGET);
}

gmt_pin_advice_t gmt_pin_decide(int mode, uint64_t bytes, bool pays_back, uint64_t room,
                                gmt_pin_site_t site)
{
  if (bytes == 0)
    return advice(false, GMT__PIN_REASON__PIN_REASON_OFF);
  switch (mode) {
  case GMT__PIN_MODE__PIN_PROFILE: return if_fits(bytes, room, GMT__PIN_REASON__PIN_REASON_PROFILE);
  case GMT__PIN_MODE__PIN_USE:
    if (site == GMT_PIN_SITE_UNKNOWN)
      return advice(false, GMT__PIN_REASON__PIN_REASON_UNPROFILED);
    if (site == GMT_PIN_SITE_COLD)
      return advice(false, GMT__PIN_REASON__PIN_REASON_COLD);
    return if_fits(bytes, room, GMT__PIN_REASON__PIN_REASON_HOT);
  case GMT__PIN_MODE__PIN_ADAPTIVE:
    /* The hook counts a buffer's copies; until they have paid for pinning
     * it, the buffer is as good as cold. */
    if (!pays_back)
      return advice(false, GMT__PIN_REASON__PIN_REASON_COLD);
    return if_fits(bytes, room, GMT__PIN_REASON__PIN_REASON_PAYS_BACK);
  default: return advice(false, GMT__PIN_REASON__PIN_REASON_OFF);
  }
}

uint64_t gmt_pin_share(uint64_t limit, size_t pods)
{
  return limit / (pods ? pods : 1);
}

static uint64_t left(uint64_t whole, uint64_t used)
{
  return whole > used ? whole - used : 0;
}

uint64_t gmt_pin_room(uint64_t limit, uint64_t node_used, uint64_t share, uint64_t pod_used)
{
  uint64_t node = left(limit, node_used), pod = left(share, pod_used);
  return node < pod ? node : pod;
}

double gmt_pin_reuse(const gmt_pin_usage_t *u)
{
  if (u->size == 0)
    return 0;
  return ((double)u->h2d_bytes + (double)u->d2h_bytes) / (double)u->size;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int gmt_pin_classify(const gmt_pin_usage_t *rows, size_t n, bool *hot, double *threshold)
{
  double *r = malloc((n ? n : 1) * sizeof *r);
  if (!r)
    return -ENOMEM;
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    double v = gmt_pin_reuse(&rows[i]);
    if (v > 0)
      r[m++] = v;
  }
  qsort(r, m, sizeof *r, cmp_double);

  /* The natural break: the widest step between neighbours on a log
   * scale, where reuse 2 and 4 are as far apart as 100 and 200. */
  double best_gap = 0, cut = GMT_PIN_REUSE_FLOOR;
  for (size_t i = 0; i + 1 < m; i++) {
    double gap = log(r[i + 1] / r[i]);
    if (gap >= best_gap) {
      best_gap = gap;
      cut = r[i + 1];
    }
  }
  /* A gap narrower than a factor of two is no break: one group. */
  if (best_gap < log(2.0) || cut < GMT_PIN_REUSE_FLOOR)
    cut = GMT_PIN_REUSE_FLOOR;
  free(r);

  for (size_t i = 0; i < n; i++)
    hot[i] = gmt_pin_reuse(&rows[i]) >= cut;
  if (threshold)
    *threshold = cut;
  return 0;
}
