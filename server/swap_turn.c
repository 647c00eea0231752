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

gmt_swap_turn_t gmt_swap_turn_plan(uint64_t in_bytes, uint64_t occupied, uint64_t limit,
                                   double rate_bps, double share)
{
  gmt_swap_turn_t t = {0};
  t.in_bytes = in_bytes;
  if (!t.in_bytes || !(rate_bps > 0) || !(share > 0 && share < 1))
    return t;
  /* Fits beside what is there: it comes in once and may stay. */
  bool contested = occupied > limit || t.in_bytes > limit - occupied;
  t.moved_bytes = !contested                    ? t.in_bytes
                  : t.in_bytes > UINT64_MAX / 2 ? UINT64_MAX
                                                : 2 * t.in_bytes;
  t.cost_ms = (double)t.moved_bytes / rate_bps * 1000.0;
  /* cost / (turn + cost) <= share */
  t.turn_ms = contested ? t.cost_ms * (1 - share) / share : 0;
  return t;
}
