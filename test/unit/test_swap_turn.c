/* mode=swap's turns (server/swap_turn.c): what a turn moves and costs, the
 * turn that pays for it, and the card's measured switch rate. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "swap_turn.h"

#define MIB (1024ull * 1024ull)
#define GIB (1024ull * MIB)
#define RATE 10e9                              /* bytes per second */
#define RATES ((gmt_swap_rates_t){RATE, RATE}) /* in and out */
/* What a pod reserved and has resident, its reports saying all the rest
 * is out. */
#define IN(reserved, resident) gmt_swap_turn_in(UINT64_MAX, reserved, resident)

static void assert_near(double got, double want, double tol)
{
  if (fabs(got - want) > tol)
    fail_msg("%g, want %g (within %g)", got, want, tol);
}

static void test_a_pod_whose_bytes_fit_beside_the_others_needs_no_turn(void **state)
{
  (void)state;
  /* 2 GiB to bring back, 5 GiB of an 8 GiB card occupied. */
  gmt_swap_turn_t t = gmt_swap_turn_plan(IN(3 * GIB, 1 * GIB), 0, 5 * GIB, 8 * GIB, RATES, 0.1);
  assert_int_equal(t.in_bytes, 2 * GIB);
  assert_int_equal(t.moved_bytes, 2 * GIB); /* in once; it may stay */
  assert_near(t.cost_ms, 2.0 * GIB / RATE * 1000, 1e-6);
  assert_near(t.turn_ms, 0, 0);
  /* Exactly full once it is in: still fits. */
  t = gmt_swap_turn_plan(IN(3 * GIB, 0), 0, 5 * GIB, 8 * GIB, RATES, 0.1);
  assert_near(t.turn_ms, 0, 0);
}

static void test_nothing_to_bring_back_is_no_turn(void **state)
{
  (void)state;
  gmt_swap_turn_t t = gmt_swap_turn_plan(IN(3 * GIB, 3 * GIB), 0, 9 * GIB, 8 * GIB, RATES, 0.1);
  assert_int_equal(t.in_bytes, 0);
  assert_int_equal(t.moved_bytes, 0);
  assert_near(t.turn_ms, 0, 0);
  /* Reported above what was reserved (a lie, or a race): nothing either. */
  t = gmt_swap_turn_plan(IN(1 * GIB, 3 * GIB), 0, 9 * GIB, 8 * GIB, RATES, 0.1);
  assert_int_equal(t.in_bytes, 0);
  /* Reserved but not reported out (a new allocation on its way): not
   * brought back; what the reports say is, within what is missing. */
  assert_int_equal(gmt_swap_turn_in(0, 3 * GIB, 1 * GIB), 0);
  assert_int_equal(gmt_swap_turn_in(1 * GIB, 3 * GIB, 1 * GIB), 1 * GIB);
  assert_int_equal(gmt_swap_turn_in(5 * GIB, 3 * GIB, 1 * GIB), 2 * GIB);
}

static void test_on_a_contested_card_moving_is_the_share_of_the_turn(void **state)
{
  (void)state;
  /* 4 GiB out, the card full: in now, and out again at the next turn. */
  gmt_swap_turn_t t = gmt_swap_turn_plan(IN(4 * GIB, 0), 0, 8 * GIB, 8 * GIB, RATES, 0.1);
  assert_int_equal(t.moved_bytes, 8 * GIB);
  assert_near(t.cost_ms, 8.0 * GIB / RATE * 1000, 1e-6);
  assert_near(t.cost_ms / (t.turn_ms + t.cost_ms), 0.1, 1e-9);
  t = gmt_swap_turn_plan(IN(4 * GIB, 0), 0, 8 * GIB, 8 * GIB, RATES, 0.25);
  assert_near(t.cost_ms / (t.turn_ms + t.cost_ms), 0.25, 1e-9);
  /* Occupied past the limit (a reload shrank it): contested too. */
  t = gmt_swap_turn_plan(IN(1 * MIB, 0), 0, 9 * GIB, 8 * GIB, RATES, 0.1);
  assert_true(t.turn_ms > 0);
}

static void test_a_pod_with_four_times_the_bytes_gets_four_times_the_turn(void **state)
{
  (void)state;
  gmt_swap_turn_t small = gmt_swap_turn_plan(IN(1 * GIB, 0), 0, 8 * GIB, 8 * GIB, RATES, 0.1);
  gmt_swap_turn_t big = gmt_swap_turn_plan(IN(4 * GIB, 0), 0, 8 * GIB, 8 * GIB, RATES, 0.1);
  assert_true(small.turn_ms > 0);
  assert_near(big.turn_ms / small.turn_ms, 4, 1e-9);
  /* And half the rate, twice the turn. */
  gmt_swap_turn_t slow = gmt_swap_turn_plan(IN(1 * GIB, 0), 0, 8 * GIB, 8 * GIB,
                                            ((gmt_swap_rates_t){RATE / 2, RATE / 2}), 0.1);
  assert_near(slow.turn_ms / small.turn_ms, 2, 1e-9);
}

/* The way in is priced at the card's switch rate, the way out at the
 * pod's own rate out: a job's first move out, making its host copies as
 * it goes, ran at 5-9 GB/s where switches in ran at 40-60 (H200). */
static void test_moves_out_are_priced_at_the_pods_rate_out(void **state)
{
  (void)state;
  gmt_swap_rates_t slow_out = {RATE, RATE / 4};
  gmt_swap_turn_t t = gmt_swap_turn_plan(IN(4 * GIB, 0), 0, 8 * GIB, 8 * GIB, slow_out, 0.1);
  assert_int_equal(t.moved_bytes, 8 * GIB);
  assert_near(t.cost_ms, (4.0 * GIB / RATE + 4.0 * GIB / (RATE / 4)) * 1000, 1e-6);
  assert_near(t.cost_ms / (t.turn_ms + t.cost_ms), 0.1, 1e-9);
  /* 2.5x the cost of pricing all at the rate in. */
  gmt_swap_turn_t even = gmt_swap_turn_plan(IN(4 * GIB, 0), 0, 8 * GIB, 8 * GIB, RATES, 0.1);
  assert_near(t.turn_ms / even.turn_ms, 2.5, 1e-9);
  /* Fitting, nothing goes out again: the rate out does not enter. */
  t = gmt_swap_turn_plan(IN(3 * GIB, 1 * GIB), 0, 5 * GIB, 8 * GIB, slow_out, 0.1);
  assert_near(t.cost_ms, 2.0 * GIB / RATE * 1000, 1e-6);
  /* A pod's rate out is its own measured moves, the default before. */
  gmt_swap_rate_t out = {0};
  assert_near(gmt_swap_rate_bps(&out), GMT_SWAP_RATE_DEFAULT_BPS, 0);
  assert_true(gmt_swap_rate_add(&out, 7 * GIB, 1000));
  assert_near(gmt_swap_rate_bps(&out), 7.0 * GIB, 1e-3);
}

/* A pod that held more at its peak than it has resident and to bring
 * back grows to it in its turn: contested when that does not fit, and
 * what it grew goes out again too. */
static void test_a_pod_that_will_grow_to_its_peak_is_planned_a_turn(void **state)
{
  (void)state;
  /* 1 GiB to bring back beside 6 GiB of others on an 8 GiB card: fits,
   * unless the pod grows to its peak of 7 GiB (1 resident + 1 in + 5). */
  gmt_swap_turn_t t = gmt_swap_turn_plan(1 * GIB, 0, 7 * GIB, 8 * GIB, RATES, 0.1);
  assert_near(t.turn_ms, 0, 0);
  uint64_t grow = gmt_swap_turn_grow(7 * GIB, 1 * GIB, 1 * GIB);
  assert_int_equal(grow, 5 * GIB);
  t = gmt_swap_turn_plan(1 * GIB, grow, 7 * GIB, 8 * GIB, RATES, 0.1);
  assert_int_equal(t.moved_bytes, 7 * GIB); /* 1 in, then 1 + 5 out */
  assert_near(t.cost_ms / (t.turn_ms + t.cost_ms), 0.1, 1e-9);
  /* A peak below what it has and brings back: no growth. */
  assert_int_equal(gmt_swap_turn_grow(1 * GIB, 1 * GIB, 1 * GIB), 0);
  assert_int_equal(gmt_swap_turn_grow(UINT64_MAX, UINT64_MAX, 1), 0);
  /* Growth that still fits: no turn. */
  t = gmt_swap_turn_plan(1 * GIB, 1 * GIB, 5 * GIB, 8 * GIB, RATES, 0.1);
  assert_near(t.turn_ms, 0, 0);
  assert_int_equal(t.moved_bytes, 1 * GIB);
}

/* A job starting (or pushed out before it grew) that may grow to its
 * quota past the room beside the others is planned a turn, costed by what
 * it holds and brings back, never by its quota; one whose quota fits, or
 * that has a turn already, is planned as it was. */
static void test_a_starting_pod_that_will_not_fit_is_planned_a_turn(void **state)
{
  (void)state;
  /* 1.5 GiB resident of a 7.5 GiB quota beside 3 GiB of others on a
   * 10 GiB card: nothing to bring back, so no turn from the plan... */
  uint64_t res = (uint64_t)(1.5 * GIB), occ = (uint64_t)(4.5 * GIB);
  gmt_swap_turn_t plan = gmt_swap_turn_plan(0, 0, occ, 10 * GIB, RATES, 0.1);
  assert_near(plan.turn_ms, 0, 0);
  /* ...but 6 GiB more do not fit in the 5.5 free: a turn, its cost the
   * 1.5 GiB it holds going out again. */
  uint64_t may = gmt_swap_turn_grow((uint64_t)(7.5 * GIB), res, 0);
  assert_int_equal(may, 6 * GIB);
  gmt_swap_turn_t t = gmt_swap_turn_start(plan, res, may, occ, 10 * GIB, RATES, 0.1);
  assert_int_equal(t.in_bytes, 0);
  /* Out again grown to its quota: the 1.5 GiB it holds and 6 more. */
  assert_int_equal(t.moved_bytes, res + may);
  assert_true(t.turn_ms > 0);
  assert_near(t.cost_ms / (t.turn_ms + t.cost_ms), 0.1, 1e-9);
  /* A 1 GiB quota of which it holds nothing beside 20 MiB on a 36 MiB
   * card, 8 MiB to bring back that fit now: in, and out again grown to
   * the card's 36 MiB, not to the quota's 1 GiB. */
  plan = gmt_swap_turn_plan(8 * MIB, 0, 20 * MIB, 36 * MIB, RATES, 0.1);
  assert_near(plan.turn_ms, 0, 0);
  t = gmt_swap_turn_start(plan, 0, gmt_swap_turn_grow(1 * GIB, 0, 8 * MIB), 20 * MIB, 36 * MIB,
                          RATES, 0.1);
  assert_int_equal(t.moved_bytes, 8 * MIB + 36 * MIB);
  /* Alone on the card its quota fits: planned as it was. */
  t = gmt_swap_turn_start(plan, res, may, res, 10 * GIB, RATES, 0.1);
  assert_near(t.turn_ms, 0, 0);
  /* A turn planned already stays as it was. */
  gmt_swap_turn_t contested = gmt_swap_turn_plan(4 * GIB, 0, 8 * GIB, 8 * GIB, RATES, 0.1);
  t = gmt_swap_turn_start(contested, res, may, 8 * GIB, 8 * GIB, RATES, 0.1);
  assert_int_equal(t.moved_bytes, contested.moved_bytes);
  assert_near(t.turn_ms, contested.turn_ms, 0);
  /* Nothing held, brought back or to grow by: none. */
  t = gmt_swap_turn_start(gmt_swap_turn_plan(0, 0, 12 * GIB, 10 * GIB, RATES, 0.1), 0, 0, 12 * GIB,
                          10 * GIB, RATES, 0.1);
  assert_near(t.turn_ms, 0, 0);
  /* Nothing held yet but 1 GiB to grow by on a full card: what it grows
   * goes out again, priced at the rate out. */
  gmt_swap_rates_t slow_out = {RATE, RATE / 4};
  t = gmt_swap_turn_start(gmt_swap_turn_plan(0, 0, 12 * GIB, 10 * GIB, slow_out, 0.1), 0, 1 * GIB,
                          12 * GIB, 10 * GIB, slow_out, 0.1);
  assert_int_equal(t.moved_bytes, 1 * GIB);
  assert_near(t.cost_ms, 1.0 * GIB / (RATE / 4) * 1000, 1e-6);
}

static void test_bad_inputs_plan_no_turn(void **state)
{
  (void)state;
  const double shares[] = {0, 1, -0.1, NAN};
  for (size_t i = 0; i < sizeof shares / sizeof shares[0]; i++)
    assert_near(gmt_swap_turn_plan(IN(4 * GIB, 0), 0, 8 * GIB, 8 * GIB, RATES, shares[i]).turn_ms,
                0, 0);
  const gmt_swap_rates_t rates[] = {{0, RATE}, {RATE, 0}, {NAN, RATE}, {RATE, NAN}, {-RATE, RATE}};
  for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++)
    assert_near(gmt_swap_turn_plan(IN(4 * GIB, 0), 0, 8 * GIB, 8 * GIB, rates[i], 0.1).turn_ms, 0,
                0);
  /* The largest reservation does not wrap. */
  gmt_swap_turn_t t = gmt_swap_turn_plan(IN(UINT64_MAX, 0), 0, 8 * GIB, 8 * GIB, RATES, 0.1);
  assert_int_equal(t.moved_bytes, UINT64_MAX);
}

static void test_the_rate_is_assumed_until_a_switch_is_measured(void **state)
{
  (void)state;
  gmt_swap_rate_t r = {0};
  assert_near(gmt_swap_rate_bps(&r), GMT_SWAP_RATE_DEFAULT_BPS, 0);
  /* Too small or too quick to say anything: not counted. */
  assert_false(gmt_swap_rate_add(&r, 1000, 50));
  assert_false(gmt_swap_rate_add(&r, 1 * GIB, 0.5));
  assert_false(gmt_swap_rate_add(&r, 1 * GIB, NAN));
  assert_int_equal(r.switches, 0);
  assert_true(gmt_swap_rate_add(&r, 2 * GIB, 100));
  assert_int_equal(r.switches, 1);
  assert_near(gmt_swap_rate_bps(&r), 2.0 * GIB * 10, 1);
}

static void test_the_rate_follows_the_recent_switches(void **state)
{
  (void)state;
  gmt_swap_rate_t r = {0};
  assert_true(gmt_swap_rate_add(&r, 2 * GIB, 100)); /* 21 GB/s */
  for (int i = 0; i < 20; i++)
    assert_true(gmt_swap_rate_add(&r, 1 * GIB, 100)); /* then 10.7 */
  assert_near(gmt_swap_rate_bps(&r), 1.0 * GIB * 10, 0.001 * GIB * 10);
  /* Sums, not a mean of rates: one switch ten times as slow as the
   * others (a stalled copy) pulls the rate below half at once. */
  gmt_swap_rate_t a = r;
  assert_true(gmt_swap_rate_add(&a, 1 * GIB, 1000));
  assert_true(gmt_swap_rate_bps(&a) < gmt_swap_rate_bps(&r) / 2);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_pod_whose_bytes_fit_beside_the_others_needs_no_turn),
      cmocka_unit_test(test_nothing_to_bring_back_is_no_turn),
      cmocka_unit_test(test_on_a_contested_card_moving_is_the_share_of_the_turn),
      cmocka_unit_test(test_a_pod_with_four_times_the_bytes_gets_four_times_the_turn),
      cmocka_unit_test(test_moves_out_are_priced_at_the_pods_rate_out),
      cmocka_unit_test(test_a_pod_that_will_grow_to_its_peak_is_planned_a_turn),
      cmocka_unit_test(test_a_starting_pod_that_will_not_fit_is_planned_a_turn),
      cmocka_unit_test(test_bad_inputs_plan_no_turn),
      cmocka_unit_test(test_the_rate_is_assumed_until_a_switch_is_measured),
      cmocka_unit_test(test_the_rate_follows_the_recent_switches),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
