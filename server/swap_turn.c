/* A mode=swap pod's turn: its cost and length (swap_turn.h). */
#include "swap_turn.h"

#include <math.h>

#include "gmt_bytes.h"

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

uint64_t gmt_swap_turn_grow(uint64_t peak, uint64_t resident, uint64_t in_bytes)
{
  uint64_t now = gmt_bytes_add(resident, in_bytes);
  return peak > now ? peak - now : 0;
}

/* Rates and a share a turn can be priced at (0 < share < 1). */
static bool priceable(gmt_swap_rates_t r, double share)
{
  return r.in_bps > 0 && r.out_bps > 0 && share > 0 && share < 1;
}

/* t's moves take cost_ms, in_bytes in and the rest out; the turn is long
 * enough that they are share of it: cost / (turn + cost) = share. */
static void price(gmt_swap_turn_t *t, gmt_swap_rates_t r, double share)
{
  uint64_t out = t->moved_bytes > t->in_bytes ? t->moved_bytes - t->in_bytes : 0;
  t->cost_ms = ((double)t->in_bytes / r.in_bps + (double)out / r.out_bps) * 1000.0;
  t->turn_ms = t->cost_ms * (1 - share) / share;
}

gmt_swap_turn_t gmt_swap_turn_plan(uint64_t in_bytes, uint64_t grow_bytes, uint64_t occupied,
                                   uint64_t limit, gmt_swap_rates_t rates, double share)
{
  gmt_swap_turn_t t = {0};
  t.in_bytes = in_bytes;
  if (!t.in_bytes || !priceable(rates, share))
    return t;
  /* Fits beside what is there, grown too: it comes in once and may stay. */
  uint64_t turn_bytes = gmt_bytes_add(t.in_bytes, grow_bytes);
  bool contested = occupied > limit || turn_bytes > limit - occupied;
  /* Contested: out again at the next turn, with what it grew. */
  t.moved_bytes = contested ? gmt_bytes_add(t.in_bytes, turn_bytes) : t.in_bytes;
  price(&t, rates, share);
  if (!contested)
    t.turn_ms = 0;
  return t;
}

gmt_swap_turn_t gmt_swap_turn_start(gmt_swap_turn_t plan, uint64_t resident, uint64_t expect_bytes,
                                    uint64_t occupied, uint64_t limit, gmt_swap_rates_t rates,
                                    double share)
{
  if (plan.turn_ms > 0 || !expect_bytes || !priceable(rates, share))
    return plan;
  uint64_t may = gmt_bytes_add(plan.in_bytes, expect_bytes);
  if (occupied <= limit && may <= limit - occupied)
    return plan; /* fits even grown to its quota */
  /* In now (if anything), and out again at the next turn grown as it may:
   * within the card's space, so that a generous quota does not price a
   * turn past what could ever move. */
  gmt_swap_turn_t t = plan;
  uint64_t hold = gmt_bytes_add(resident, may);
  t.moved_bytes = gmt_bytes_add(plan.in_bytes, hold < limit ? hold : limit);
  if (!t.moved_bytes)
    return plan;
  price(&t, rates, share);
  return t;
}
