/* A pod manager's memory while gmt-schd is away, and its held Reserves'
 * timer (client/pmgr/outage_policy.c), on a fake clock: the count holds the
 * pod's quota for its processes together; a pod the scheduler no longer
 * lists (its limit unknown) gets nothing; a Reserve never overtakes those
 * held before it; waits are bounded by the slack policy's hold; a try
 * gives up GMT_HELD_LAST_TRY_MS after the hold ends. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gmt_rpc_kinds.h"
#include "outage_policy.h"

#define MIB (1024ull * 1024ull)
#define T0 1000000ull /* the fake clock's start, ms */

/* A 100 MiB pod whose processes reported 60 MiB, then got 10 more here and
 * gave 5 back: 65 MiB counted. */
static const gmt_outage_count_t pod = {100 * MIB, 60 * MIB, 10 * MIB, 5 * MIB};
/* Its reports: 60 MiB used, 20 MiB of others' slack. */
static const gmt_slack_pod_t slack = {100 * MIB, 60 * MIB, 20 * MIB};

static gmt_outage_reserve_t reserve(uint64_t bytes, uint64_t waited_ms)
{
  gmt_outage_reserve_t r = {
      .count = pod,
      .slack = slack,
      .bytes = bytes,
      .since_ms = T0,
      .now_ms = T0 + waited_ms,
      .device_allowed = true,
  };
  return r;
}

static void test_count_sums_reports_and_local_grants_and_releases(void **state)
{
  (void)state;
  assert_int_equal(gmt_outage_used(&pod), 65 * MIB);
  assert_true(gmt_outage_fits(&pod, 35 * MIB));
  assert_false(gmt_outage_fits(&pod, 35 * MIB + 1));
  /* More given back than counted (a release of bytes reported before):
   * never below 0. */
  gmt_outage_count_t over = {100 * MIB, 1 * MIB, 0, 5 * MIB};
  assert_int_equal(gmt_outage_used(&over), 0);
  /* Already past the limit (it was lowered): nothing fits, not even 0. */
  gmt_outage_count_t past = {10 * MIB, 11 * MIB, 0, 0};
  assert_false(gmt_outage_fits(&past, 0));
  assert_false(gmt_outage_fits(&past, UINT64_MAX));
}

static void test_reserve_with_a_known_limit_is_granted_while_it_fits(void **state)
{
  (void)state;
  gmt_outage_reserve_t r = reserve(35 * MIB, 0);
  assert_int_equal(gmt_outage_reserve(&r), GMT_OUTAGE_GRANT);
  /* One byte more: the others' slack could make room: held. */
  r.bytes = 35 * MIB + 1;
  assert_int_equal(gmt_outage_reserve(&r), GMT_OUTAGE_HOLD);
  /* Past what the live allocations leave: refused at once. */
  r.bytes = 40 * MIB + 1;
  assert_int_equal(gmt_outage_reserve(&r), GMT_OUTAGE_REFUSE);
}

static void test_unlisted_pod_gets_nothing_whatever_fits(void **state)
{
  (void)state;
  gmt_outage_reserve_t r = reserve(1, 0);
  r.unlisted = true;
  r.device_allowed = false;
  assert_int_equal(gmt_outage_reserve(&r), GMT_OUTAGE_NOPOD);
  r.bytes = 0;
  assert_int_equal(gmt_outage_reserve(&r), GMT_OUTAGE_NOPOD);
}

static void test_gpu_outside_devices_is_refused_before_the_count(void **state)
{
  (void)state;
  gmt_outage_reserve_t r = reserve(1, 0);
  r.device_allowed = false;
  r.others_held = true;
  assert_int_equal(gmt_outage_reserve(&r), GMT_OUTAGE_DEVICE);
}

static void test_reserve_waits_behind_held_ones_even_when_it_fits(void **state)
{
  (void)state;
  gmt_outage_reserve_t r = reserve(1 * MIB, 0);
  r.others_held = true;
  assert_int_equal(gmt_outage_reserve(&r), GMT_OUTAGE_HOLD_BEHIND);
  /* No room among the held: decided now, by the count. */
  r.held_full = true;
  assert_int_equal(gmt_outage_reserve(&r), GMT_OUTAGE_GRANT);
  r.bytes = 36 * MIB;
  assert_int_equal(gmt_outage_reserve(&r), GMT_OUTAGE_REFUSE);
  /* The hold over (it came GMT_SLACK_HOLD_MS ago): not held behind. */
  r = reserve(1 * MIB, GMT_SLACK_HOLD_MS);
  r.others_held = true;
  assert_int_equal(gmt_outage_reserve(&r), GMT_OUTAGE_GRANT);
}

static void test_hold_is_bounded_by_the_time_waited(void **state)
{
  (void)state;
  gmt_outage_reserve_t r = reserve(36 * MIB, GMT_SLACK_HOLD_MS - 1);
  assert_int_equal(gmt_outage_reserve(&r), GMT_OUTAGE_HOLD);
  r.now_ms = T0 + GMT_SLACK_HOLD_MS;
  assert_int_equal(gmt_outage_reserve(&r), GMT_OUTAGE_REFUSE);
  /* No slack to wait for: only until the reports settle. */
  r = reserve(36 * MIB, GMT_SLACK_SETTLE_MS - 1);
  r.slack.others_slack = 0;
  assert_int_equal(gmt_outage_reserve(&r), GMT_OUTAGE_HOLD);
  r.now_ms = T0 + GMT_SLACK_SETTLE_MS;
  assert_int_equal(gmt_outage_reserve(&r), GMT_OUTAGE_REFUSE);
  /* A clock read before the arrival counts as no wait. */
  assert_true(gmt_held_admit(&slack, 36 * MIB, T0, T0 - 5, false));
  assert_false(gmt_held_admit(&slack, 36 * MIB, T0, T0, true));
}

/* ---- the held Reserves' timer ---- */

static gmt_held_view_t held(uint64_t bytes, uint64_t tried_ms)
{
  gmt_held_view_t h = {
      .bytes = bytes, .since_ms = T0, .tried_ms = tried_ms, .slack = slack, .count = pod};
  return h;
}

static void test_tick_answers_each_when_its_hold_ends(void **state)
{
  (void)state;
  int timeout = -1;
  gmt_held_pass_t pass = {.now_ms = T0 + GMT_SLACK_HOLD_MS, .room = 100 * MIB};
  gmt_held_view_t tried = held(36 * MIB, T0 + 10), untried = held(36 * MIB, 0);
  assert_int_equal(gmt_held_step(&pass, &tried, &timeout), GMT_HELD_REFUSE);
  assert_int_equal(gmt_held_step(&pass, &untried, &timeout), GMT_HELD_ASK);
  /* A moment before, both are still held and tried. */
  pass.now_ms = T0 + GMT_SLACK_HOLD_MS - 1;
  assert_int_equal(gmt_held_step(&pass, &tried, &timeout), GMT_HELD_TRY);
  assert_int_equal(timeout, 1 + GMT_HELD_LAST_TRY_MS);
  /* A caller that has gone is dropped before anything else. */
  tried.caller_gone = true;
  assert_int_equal(gmt_held_step(&pass, &tried, &timeout), GMT_HELD_CANCEL);
}

static void
test_try_gives_up_last_try_ms_after_the_hold_and_waits_at_most_the_forward_wait(void **state)
{
  (void)state;
  int timeout = -1;
  gmt_held_pass_t pass = {.now_ms = T0, .room = 100 * MIB};
  gmt_held_view_t h = held(1 * MIB, 0);
  assert_int_equal(gmt_held_step(&pass, &h, &timeout), GMT_HELD_TRY);
  assert_int_equal(timeout, GMT_RPC_PMGR_WAIT_MS);
  /* Near the hold's end: until GMT_HELD_LAST_TRY_MS after it. */
  pass.now_ms = T0 + 900;
  assert_int_equal(gmt_held_step(&pass, &h, &timeout), GMT_HELD_TRY);
  assert_int_equal(timeout, GMT_SLACK_HOLD_MS + GMT_HELD_LAST_TRY_MS - 900);
}

static void test_tick_in_an_outage_grants_in_turn_from_the_count(void **state)
{
  (void)state;
  int timeout = -1;
  gmt_held_pass_t pass = {.now_ms = T0 + 50, .outage = true};
  gmt_held_view_t first = held(36 * MIB, T0), second = held(1 * MIB, 0);
  /* The first does not fit: it stays, and the second, which would, waits
   * behind it. */
  assert_int_equal(gmt_held_step(&pass, &first, &timeout), GMT_HELD_WAIT);
  assert_true(pass.blocked);
  assert_int_equal(gmt_held_step(&pass, &second, &timeout), GMT_HELD_WAIT);
  /* Slack came back (a release counted here): granted in order. */
  pass.blocked = false;
  first.count.down += 10 * MIB;
  second.count = first.count;
  assert_int_equal(gmt_held_step(&pass, &first, &timeout), GMT_HELD_GRANT);
  second.count.up += 36 * MIB;
  assert_int_equal(gmt_held_step(&pass, &second, &timeout), GMT_HELD_GRANT);
  assert_int_equal(timeout, -1);
}

static void test_tick_tries_when_the_replies_show_room_or_the_retry_is_due(void **state)
{
  (void)state;
  int timeout = -1;
  uint64_t tried = T0 + 10;
  gmt_held_pass_t pass = {.now_ms = tried + 50, .room = 8 * MIB, .news = 3};
  gmt_held_view_t h = held(8 * MIB, tried);
  h.tried_news = 3;
  /* Room, but nothing new since its try, and not due: waits (and blocks). */
  assert_int_equal(gmt_held_step(&pass, &h, &timeout), GMT_HELD_WAIT);
  assert_true(pass.blocked);
  /* A reply came since: tried, and the room is spoken for. */
  pass.blocked = false;
  pass.news = 4;
  assert_int_equal(gmt_held_step(&pass, &h, &timeout), GMT_HELD_TRY);
  assert_false(pass.blocked);
  gmt_held_took(&pass, h.bytes);
  assert_int_equal(pass.room, 0);
  /* No room: tried blind once GMT_HELD_RETRY_MS have passed, and those
   * behind it wait either way. */
  gmt_held_view_t behind = held(1, 0);
  pass.now_ms = tried + GMT_HELD_RETRY_MS - 1;
  assert_int_equal(gmt_held_step(&pass, &h, &timeout), GMT_HELD_WAIT);
  assert_int_equal(gmt_held_step(&pass, &behind, &timeout), GMT_HELD_WAIT);
  pass.blocked = false;
  pass.now_ms = tried + GMT_HELD_RETRY_MS;
  assert_int_equal(gmt_held_step(&pass, &h, &timeout), GMT_HELD_TRY);
  assert_true(pass.blocked);
  assert_int_equal(gmt_held_step(&pass, &behind, &timeout), GMT_HELD_WAIT);
}

static void test_tick_counts_tries_in_flight_against_the_room(void **state)
{
  (void)state;
  int timeout = -1;
  gmt_held_pass_t pass = {.now_ms = T0 + 20, .room = 10 * MIB, .news = 1};
  gmt_held_view_t flying = held(6 * MIB, T0 + 10), next = held(6 * MIB, 0);
  flying.in_flight = true;
  flying.caller_gone = true; /* its try answers it: not dropped here */
  assert_int_equal(gmt_held_step(&pass, &flying, &timeout), GMT_HELD_WAIT);
  assert_int_equal(pass.room, 4 * MIB);
  /* Untried, so due: tried blind, and blocks those behind. */
  assert_int_equal(gmt_held_step(&pass, &next, &timeout), GMT_HELD_TRY);
  assert_true(pass.blocked);
  gmt_held_took(&pass, 6 * MIB);
  assert_int_equal(pass.room, 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_count_sums_reports_and_local_grants_and_releases),
      cmocka_unit_test(test_reserve_with_a_known_limit_is_granted_while_it_fits),
      cmocka_unit_test(test_unlisted_pod_gets_nothing_whatever_fits),
      cmocka_unit_test(test_gpu_outside_devices_is_refused_before_the_count),
      cmocka_unit_test(test_reserve_waits_behind_held_ones_even_when_it_fits),
      cmocka_unit_test(test_hold_is_bounded_by_the_time_waited),
      cmocka_unit_test(test_tick_answers_each_when_its_hold_ends),
      cmocka_unit_test(
          test_try_gives_up_last_try_ms_after_the_hold_and_waits_at_most_the_forward_wait),
      cmocka_unit_test(test_tick_in_an_outage_grants_in_turn_from_the_count),
      cmocka_unit_test(test_tick_tries_when_the_replies_show_room_or_the_retry_is_due),
      cmocka_unit_test(test_tick_counts_tries_in_flight_against_the_room),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
