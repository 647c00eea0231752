/* Held Reserves (client/pmgr/slack_policy.c): a refused Reserve that the pod's
 * live allocations leave room for waits while other processes' slack comes
 * back; one past the quota is refused at once; the wait is bounded; and
 * only processes that hold slack are asked for it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "slack_policy.h"

#define MIB (1024ull * 1024ull)

/* The pod: 160 MiB, 19 processes allocated 8 MiB each, 5 of them
 * from 32 MiB chunks (24 MiB of slack each). */
static const gmt_slack_pod_t busy = {160 * MIB, 152 * MIB, 5 * 24 * MIB};

static void test_reserve_that_live_use_leaves_room_for_is_held(void **state)
{
  (void)state;
  assert_true(gmt_slack_hold(&busy, 8 * MIB, 0));
  assert_true(gmt_slack_hold(&busy, 8 * MIB, GMT_SLACK_HOLD_MS - 1));
}

static void test_reserve_that_fits_exactly_is_held_and_one_byte_more_is_refused(void **state)
{
  (void)state;
  assert_true(gmt_slack_hold(&busy, 8 * MIB, 0));
  assert_false(gmt_slack_hold(&busy, 8 * MIB + 1, 0));
}

static void test_reserve_past_the_quota_is_refused_at_once_whatever_the_slack(void **state)
{
  (void)state;
  gmt_slack_pod_t rich = {160 * MIB, 0, 160 * MIB};
  assert_false(gmt_slack_hold(&rich, 160 * MIB + 1, 0));
  assert_false(gmt_slack_hold(&rich, UINT64_MAX, 0));
  /* Live use already past the limit (a reload lowered it). */
  gmt_slack_pod_t over = {64 * MIB, 96 * MIB, 32 * MIB};
  assert_false(gmt_slack_hold(&over, 1, 0));
  gmt_slack_pod_t full = {160 * MIB, 160 * MIB, 0};
  assert_false(gmt_slack_hold(&full, 1, 0));
}

static void test_hold_ends_at_its_bound(void **state)
{
  (void)state;
  assert_false(gmt_slack_hold(&busy, 8 * MIB, GMT_SLACK_HOLD_MS));
  assert_false(gmt_slack_hold(&busy, MIB, 10 * GMT_SLACK_HOLD_MS));
}

/* A chunk granted to another process shows in its next report: without
 * slack seen, a Reserve waits for reports to catch up, then not longer. */
static void test_without_others_slack_reserve_waits_only_for_reports_to_settle(void **state)
{
  (void)state;
  gmt_slack_pod_t none = {160 * MIB, 40 * MIB, 0};
  assert_true(gmt_slack_hold(&none, 8 * MIB, 0));
  assert_true(gmt_slack_hold(&none, 8 * MIB, GMT_SLACK_SETTLE_MS - 1));
  assert_false(gmt_slack_hold(&none, 8 * MIB, GMT_SLACK_SETTLE_MS));
  /* With slack to come back, the whole bound. */
  gmt_slack_pod_t some = {160 * MIB, 40 * MIB, 1};
  assert_true(gmt_slack_hold(&some, 8 * MIB, GMT_SLACK_SETTLE_MS));
}

static void test_only_processes_holding_slack_are_asked_while_a_reserve_waits(void **state)
{
  (void)state;
  assert_true(gmt_slack_ask(true, 8 * MIB, 32 * MIB));
  assert_true(gmt_slack_ask(true, 0, 1));
  assert_false(gmt_slack_ask(true, 8 * MIB, 8 * MIB));
  /* Charged more than reserved (reports of a pool's growth race). */
  assert_false(gmt_slack_ask(true, 9 * MIB, 8 * MIB));
  /* Nothing waits: nobody is asked. */
  assert_false(gmt_slack_ask(false, 8 * MIB, 32 * MIB));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reserve_that_live_use_leaves_room_for_is_held),
      cmocka_unit_test(test_reserve_that_fits_exactly_is_held_and_one_byte_more_is_refused),
      cmocka_unit_test(test_reserve_past_the_quota_is_refused_at_once_whatever_the_slack),
      cmocka_unit_test(test_hold_ends_at_its_bound),
      cmocka_unit_test(test_without_others_slack_reserve_waits_only_for_reports_to_settle),
      cmocka_unit_test(test_only_processes_holding_slack_are_asked_while_a_reserve_waits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
