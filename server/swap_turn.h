/* A mode=swap pod's turn on a GPU: what giving it the card moves, what
 * that costs at the rates its moves were measured at, and how long the
 * turn must then run so that moving is at most a share of it
 * (docs/tiers.md, "The turn's length").
 *
 * A turn on a contested card moves the pod's bytes twice: in at its start
 * and out again when another pod's turn needs the room. Every byte that
 * crosses the bus is so charged to the pod that owns it, once, and a pod
 * with 4x the bytes gets 4x the turn. The way in is priced at the card's
 * switch rate, measured by the scheduler itself from a grant to the moment
 * the pod has all it reserved back on the card. The way out is priced at
 * the pod's own rate out, from its processes' reports (swap_out_bytes over
 * swap_out_us): a job's first move out makes its host copies as it goes,
 * 5-9 GB/s against the 40-60 of a switch in on an H200, and turns priced
 * at the switch rate were a third of what they had to be. A report that
 * lies can only lengthen the pod's own turns, within its allowance.
 *
 * Pure: no loop, no wire. test/unit/test_swap_turn.c checks it. */
#ifndef GMT_SERVER_SWAP_TURN_H
#define GMT_SERVER_SWAP_TURN_H

#include <stdbool.h>
#include <stdint.h>

/* The rate assumed until a switch was measured on the card, or a pod's
 * moves out were: low, so that the first turns are long rather than all
 * moves (a job's first move out ran at 4.6-9 GB/s on an H200). */
#define GMT_SWAP_RATE_DEFAULT_BPS 4e9
/* A switch shorter than this, or moving fewer bytes, is not measured:
 * the clock's and the wire's own times would be most of it. */
#define GMT_SWAP_RATE_MIN_MS 1.0
#define GMT_SWAP_RATE_MIN_BYTES (1u << 20)
/* Each new switch weighs this much against what was measured before. */
#define GMT_SWAP_RATE_KEEP 0.7
/* --swap-move-share: moving at most this share of a turn (default), and
 * the bounds the flag accepts. The switch the scheduler times (grant to
 * bytes on the card) is about half of what a switch costs the jobs (their
 * first steps after it, the grants between turns): three AdamW jobs at
 * 2.0x an H200 took 1.20-1.21x of one after the other planned at 0.10,
 * 1.14x at 0.05, and 1.08-1.10x / 1.05x at 1.5x (bench/makespan.py). */
#define GMT_SWAP_MOVE_SHARE 0.05
#define GMT_SWAP_MOVE_SHARE_MIN 0.01
#define GMT_SWAP_MOVE_SHARE_MAX 0.5

/* A card's measured switches, or a pod's moves out: decayed sums of
 * bytes and milliseconds. */
typedef struct gmt_swap_rate {
  double bytes, ms;
  uint64_t switches; /* how many were measured */
} gmt_swap_rate_t;

/* A switch that moved bytes in ms; too small to measure: ignored.
 * Returns whether it counted. */
bool gmt_swap_rate_add(gmt_swap_rate_t *r, uint64_t bytes, double ms);

/* Bytes per second: the measured rate, GMT_SWAP_RATE_DEFAULT_BPS before
 * any switch was. */
double gmt_swap_rate_bps(const gmt_swap_rate_t *r);

/* One turn's plan. */
typedef struct gmt_swap_turn {
  uint64_t in_bytes;    /* what the pod has to bring back to the card */
  uint64_t moved_bytes; /* what the turn moves: in, and out again when contested */
  double cost_ms;       /* in_bytes at the rate in, the rest at the rate out */
  double turn_ms;       /* the grant that pays for it; 0: nothing moves */
} gmt_swap_turn_t;

/* What a pod has to bring back to a card: what its processes reported
 * moved off it (host and disk), no more than it reserved there less what
 * is resident. An allocation reserved but not yet resident (a new one on
 * its way) has not moved and is not brought back; a report that lies can
 * only lengthen the pod's own turns, within its allowance. */
uint64_t gmt_swap_turn_in(uint64_t reported_out, uint64_t reserved, uint64_t resident);

/* The rates a turn's moves are priced at, bytes per second: in (the
 * card's switches) and out (the pod's moves out). */
typedef struct gmt_swap_rates {
  double in_bps, out_bps;
} gmt_swap_rates_t;

/* A turn that brings in_bytes back (gmt_swap_turn_in), in which the pod
 * is expected to grow by grow_bytes more (to the most it held on the card
 * before: gmt_swap_turn_grow); occupied is what the card holds now (every
 * pod's), limit its space. The card is contested when those bytes do not
 * fit beside what is there: then they will have to go out again, with
 * what it grew (three AdamW jobs at 2.0x an H200: a pod with 1 GiB off
 * and 7 GiB at its peak was planned no turn, as 1 GiB fitted, and pushed
 * the other out within its grant). share: the most of the turn moving
 * may take (0 < share < 1). */
gmt_swap_turn_t gmt_swap_turn_plan(uint64_t in_bytes, uint64_t grow_bytes, uint64_t occupied,
                                   uint64_t limit, gmt_swap_rates_t rates, double share);

/* What a pod with resident bytes on a card and in_bytes to bring back
 * will grow by to reach peak, the most it held there. */
uint64_t gmt_swap_turn_grow(uint64_t peak, uint64_t resident, uint64_t in_bytes);

/* plan (gmt_swap_turn_plan) for a pod whose peak is not yet known (a job
 * starting, or pushed out before it grew; the scheduler knows it once
 * its grants ran 500 ms without its peak rising): it may grow by
 * expect_bytes (to its quota). When that would not fit beside what the
 * card holds (occupied) and plan has no turn, a turn all the same, its
 * cost what the pod brings back in now and, grown as it may, out again
 * at the next turn: what it holds (resident) and brings back and
 * expect_bytes more, no more than the card's space (limit). Three AdamW
 * jobs starting together at 2.0x an H200 otherwise spent their first
 * second in 100 ms grants, each pushing the others out as it grew; priced
 * by what it held alone (682 MiB), a transformer job that grew to 10.75
 * GiB was given 3.4 s and had to move out again, where growing to the
 * card's 11.8 GiB would have paid for a turn it finished in. */
gmt_swap_turn_t gmt_swap_turn_start(gmt_swap_turn_t plan, uint64_t resident, uint64_t expect_bytes,
                                    uint64_t occupied, uint64_t limit, gmt_swap_rates_t rates,
                                    double share);

#endif
