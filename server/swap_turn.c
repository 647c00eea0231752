/* A mode=swap pod's turn: its cost and length (swap_turn.h). */
#include "swap_turn.h"

#include <math.h>

bool gmt_swap_rate_add(gmt_swap_rate_t *r, uint64_t bytes, double ms)
{
  if (!(ms >= GMT_SWAP_RATE_MIN_MS) || !isfinite(ms) || bytes < GMT_SWAP_RATE_MIN_BYTES)
    return false;
  r->bytes = GMT_SWAP_RATE_KEEP * r->bytes + (double)bytes;
  r->ms = GMT_SWAP_RATE_KEEP * r->ms + ms;
  r->switches++;
  return true;
}

double gmt_swap_rate_bps(const gmt_swap_rate_t *r)
{
  if (!r->switches || !(r->ms > 0) || !(r->bytes > 0))
    return GMT_SWAP_RATE_DEFAULT_BPS;
  return r->bytes / r->ms * 1000.0;
}

uint64_t gmt_swap_turn_in(uint64_t reported_out, uint64_t reserved, uint64_t resident)
{
  uint64_t missing = reserved > resident ? reserved - resident : 0;
  return reported_out < missing ? reported_out : missing;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

uint64_t gmt_swap_turn_grow(uint64_t peak, uint64_t resident, uint64_t in_bytes)
{
  uint64_t now = sat_add(resident, in_bytes);
  return peak > now ? peak - now : 0;
}

gmt_swap_turn_t gmt_swap_turn_plan(uint64_t in_bytes, uint64_t grow_bytes, uint64_t occupied,
                                   uint64_t limit, double rate_bps, double share)
{
  gmt_swap_turn_t t = {0};
  t.in_bytes = in_bytes;
  if (!t.in_bytes || !(rate_bps > 0) || !(share > 0 && share < 1))
    return t;
  /* Fits beside what is there, grown too: it comes in once and may stay. */
  uint64_t turn_bytes = sat_add(t.in_bytes, grow_bytes);
  bool contested = occupied > limit || turn_bytes > limit - occupied;
  /* Contested: out again at the next turn, with what it grew. */
  t.moved_bytes = contested ? sat_add(t.in_bytes, turn_bytes) : t.in_bytes;
  t.cost_ms = (double)t.moved_bytes / rate_bps * 1000.0;
  /* cost / (turn + cost) <= share */
  t.turn_ms = contested ? t.cost_ms * (1 - share) / share : 0;
  return t;
}

gmt_swap_turn_t gmt_swap_turn_start(gmt_swap_turn_t plan, uint64_t resident, uint64_t expect_bytes,
                                    uint64_t occupied, uint64_t limit, double rate_bps,
                                    double share)
{
  if (plan.turn_ms > 0 || !expect_bytes || !(rate_bps > 0) || !(share > 0 && share < 1))
    return plan;
  uint64_t may = sat_add(plan.in_bytes, expect_bytes);
  if (occupied <= limit && may <= limit - occupied)
    return plan; /* fits even grown to its quota */
  /* In now (if anything), and out again at the next turn with what it
   * holds. Not its quota: a generous quota would plan turns of seconds
   * for a pod of a few MiB. */
  gmt_swap_turn_t t = plan;
  t.moved_bytes = sat_add(plan.in_bytes, sat_add(resident, plan.in_bytes));
  if (!t.moved_bytes)
    return plan;
  t.cost_ms = (double)t.moved_bytes / rate_bps * 1000.0;
  t.turn_ms = t.cost_ms * (1 - share) / share;
  return t;
}
