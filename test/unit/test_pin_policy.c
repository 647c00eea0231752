/* Pin advice (server/pin_policy.c): the order of the decision in each pin
 * mode, the exact fit of the node's budget, and the hot/cold threshold
 * learned from a program's own buffers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gmt.pb-c.h"
#include "pin_policy.h"

#define MIB (1024ull * 1024ull)

enum {
  OFF = GMT__PIN_MODE__PIN_OFF,
  PROFILE = GMT__PIN_MODE__PIN_PROFILE,
  USE = GMT__PIN_MODE__PIN_USE,
  ADAPTIVE = GMT__PIN_MODE__PIN_ADAPTIVE,
};

#define UNKNOWN GMT_PIN_SITE_UNKNOWN
#define COLD GMT_PIN_SITE_COLD
#define HOT GMT_PIN_SITE_HOT

static void expect(gmt_pin_advice_t a, bool pin, Gmt__PinReason reason)
{
  assert_int_equal(a.pin, pin);
  assert_int_equal(a.reason, reason);
}

static void test_off_never_pins_whatever_the_room_or_the_case(void **state)
{
  (void)state;
  expect(gmt_pin_decide(OFF, MIB, true, UINT64_MAX, HOT), false, GMT__PIN_REASON__PIN_REASON_OFF);
  expect(gmt_pin_decide(OFF, MIB, false, 0, UNKNOWN), false, GMT__PIN_REASON__PIN_REASON_OFF);
  /* A mode this gmt does not know is off. */
  expect(gmt_pin_decide(42, MIB, true, UINT64_MAX, HOT), false, GMT__PIN_REASON__PIN_REASON_OFF);
}

static void test_asking_for_nothing_is_never_a_pin(void **state)
{
  (void)state;
  for (int mode = OFF; mode <= ADAPTIVE; mode++)
    expect(gmt_pin_decide(mode, 0, true, UINT64_MAX, HOT), false, GMT__PIN_REASON__PIN_REASON_OFF);
}

static void test_profile_pins_what_fits_exactly_and_not_a_byte_more(void **state)
{
  (void)state;
  uint64_t room = 16 * MIB;
  expect(gmt_pin_decide(PROFILE, room, false, room, UNKNOWN), true,
         GMT__PIN_REASON__PIN_REASON_PROFILE);
  expect(gmt_pin_decide(PROFILE, room + 1, false, room, UNKNOWN), false,
         GMT__PIN_REASON__PIN_REASON_BUDGET);
  expect(gmt_pin_decide(PROFILE, 1, false, 0, HOT), false, GMT__PIN_REASON__PIN_REASON_BUDGET);
}

static void test_use_asks_the_profile_before_the_budget(void **state)
{
  (void)state;
  uint64_t room = 16 * MIB;
  /* Unknown and cold sites are refused for what they are, even with no
   * room: the budget is not why. */
  expect(gmt_pin_decide(USE, MIB, true, 0, UNKNOWN), false, GMT__PIN_REASON__PIN_REASON_UNPROFILED);
  expect(gmt_pin_decide(USE, MIB, true, 0, COLD), false, GMT__PIN_REASON__PIN_REASON_COLD);
  expect(gmt_pin_decide(USE, room, false, room, HOT), true, GMT__PIN_REASON__PIN_REASON_HOT);
  expect(gmt_pin_decide(USE, room + 1, false, room, HOT), false,
         GMT__PIN_REASON__PIN_REASON_BUDGET);
}

static void test_adaptive_pins_only_what_pays_back_and_fits(void **state)
{
  (void)state;
  uint64_t room = 64 * MIB;
  expect(gmt_pin_decide(ADAPTIVE, MIB, false, room, HOT), false, GMT__PIN_REASON__PIN_REASON_COLD);
  expect(gmt_pin_decide(ADAPTIVE, MIB, false, 0, UNKNOWN), false, GMT__PIN_REASON__PIN_REASON_COLD);
  expect(gmt_pin_decide(ADAPTIVE, room, true, room, UNKNOWN), true,
         GMT__PIN_REASON__PIN_REASON_PAYS_BACK);
  expect(gmt_pin_decide(ADAPTIVE, room + 1, true, room, UNKNOWN), false,
         GMT__PIN_REASON__PIN_REASON_BUDGET);
}

/* The budget split evenly, its remainder left to nobody; no pods is one. */
static void test_pin_share_splits_the_limit_evenly_over_the_pods(void **state)
{
  (void)state;
  assert_int_equal(gmt_pin_share(64 * MIB, 1), 64 * MIB);
  assert_int_equal(gmt_pin_share(64 * MIB, 2), 32 * MIB);
  assert_int_equal(gmt_pin_share(64 * MIB, 0), 64 * MIB);
  assert_int_equal(gmt_pin_share(100, 3), 33);
  assert_int_equal(gmt_pin_share(UINT64_MAX, 1), UINT64_MAX);
  assert_int_equal(gmt_pin_share(0, 4), 0);
}

/* The room is the smaller of the node's and the pod's; a pod alone with
 * the budget may take all of it, one of two only its half, whatever the
 * node has left; what is used past either (a reload lowered the limit)
 * leaves none. */
static void test_pin_room_is_the_smaller_of_the_nodes_and_the_pods_share(void **state)
{
  (void)state;
  uint64_t limit = 64 * MIB;
  assert_int_equal(gmt_pin_room(limit, 0, gmt_pin_share(limit, 1), 0), 64 * MIB);
  assert_int_equal(gmt_pin_room(limit, 0, gmt_pin_share(limit, 2), 0), 32 * MIB);
  assert_int_equal(gmt_pin_room(limit, 48 * MIB, 32 * MIB, 8 * MIB), 16 * MIB);
  assert_int_equal(gmt_pin_room(limit, 40 * MIB, 32 * MIB, 20 * MIB), 12 * MIB);
  assert_int_equal(gmt_pin_room(limit, 64 * MIB, 32 * MIB, 0), 0);
  assert_int_equal(gmt_pin_room(limit, 0, 32 * MIB, 32 * MIB), 0);
  assert_int_equal(gmt_pin_room(limit, UINT64_MAX, 32 * MIB, 0), 0);
  assert_int_equal(gmt_pin_room(limit, 0, 32 * MIB, UINT64_MAX), 0);
  /* Fed to the decision: one byte past the pod's room is the budget's no. */
  uint64_t room = gmt_pin_room(limit, 16 * MIB, 32 * MIB, 16 * MIB);
  expect(gmt_pin_decide(ADAPTIVE, room, true, room, UNKNOWN), true,
         GMT__PIN_REASON__PIN_REASON_PAYS_BACK);
  expect(gmt_pin_decide(ADAPTIVE, room + 1, true, room, UNKNOWN), false,
         GMT__PIN_REASON__PIN_REASON_BUDGET);
}

/* size, and copies each of the whole buffer. */
static gmt_pin_usage_t buf(uint64_t size, uint64_t h2d, uint64_t d2h)
{
  return (gmt_pin_usage_t){.size = size, .h2d_bytes = h2d * size, .d2h_bytes = d2h * size};
}

static size_t count_hot(const bool *hot, size_t n)
{
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    k += hot[i];
  return k;
}

/* Issue 11's workload: 2 buffers copied 175 times each way, 25 copied
 * once each way (reuse 2: at the floor, yet far below the break). */
static void test_issue_workload_has_exactly_its_two_hot_buffers(void **state)
{
  (void)state;
  gmt_pin_usage_t rows[27];
  bool hot[27];
  double cut = 0;
  for (size_t i = 0; i < 27; i++)
    rows[i] = i == 3 || i == 20 ? buf(4 * MIB, 175, 175) : buf(4 * MIB, 1, 1);
  assert_int_equal(gmt_pin_classify(rows, 27, hot, &cut), 0);
  assert_int_equal(count_hot(hot, 27), 2);
  assert_true(hot[3] && hot[20]);
  assert_true(cut > 2.0 && cut <= 350.0);
}

static void test_two_hot_among_five_cold(void **state)
{
  (void)state;
  gmt_pin_usage_t rows[7];
  bool hot[7];
  for (size_t i = 0; i < 7; i++)
    rows[i] = i < 2 ? buf(MIB, 50, 50) : buf(MIB + i, 1, 1);
  assert_int_equal(gmt_pin_classify(rows, 7, hot, NULL), 0);
  assert_int_equal(count_hot(hot, 7), 2);
  assert_true(hot[0] && hot[1]);
}

static void test_one_group_is_all_hot_at_the_floor_and_none_below(void **state)
{
  (void)state;
  gmt_pin_usage_t rows[5];
  bool hot[5];
  double cut = 0;
  for (size_t i = 0; i < 5; i++)
    rows[i] = buf(MIB, 1, 1); /* reuse exactly 2 */
  assert_int_equal(gmt_pin_classify(rows, 5, hot, &cut), 0);
  assert_int_equal(count_hot(hot, 5), 5);
  assert_true(cut == GMT_PIN_REUSE_FLOOR);
  for (size_t i = 0; i < 5; i++)
    rows[i] = (gmt_pin_usage_t){.size = MIB, .h2d_bytes = MIB, .d2h_bytes = MIB - 1};
  assert_int_equal(gmt_pin_classify(rows, 5, hot, NULL), 0);
  assert_int_equal(count_hot(hot, 5), 0);
  /* Close together (less than a factor of two apart): one group too. */
  for (size_t i = 0; i < 5; i++)
    rows[i] = buf(MIB, 2 + i / 2, 2);
  assert_int_equal(gmt_pin_classify(rows, 5, hot, NULL), 0);
  assert_int_equal(count_hot(hot, 5), 5);
}

static void test_empty_and_single_profiles(void **state)
{
  (void)state;
  bool hot[1] = {true};
  double cut = 0;
  assert_int_equal(gmt_pin_classify(NULL, 0, hot, &cut), 0);
  assert_true(cut == GMT_PIN_REUSE_FLOOR);
  gmt_pin_usage_t one = buf(MIB, 3, 0);
  assert_int_equal(gmt_pin_classify(&one, 1, hot, NULL), 0);
  assert_true(hot[0]);
  one = buf(MIB, 1, 0);
  assert_int_equal(gmt_pin_classify(&one, 1, hot, NULL), 0);
  assert_false(hot[0]);
}

/* A buffer never copied (or of size 0) has no log(reuse): it is cold and
 * does not hide the break between the others. */
static void test_uncopied_buffers_are_cold_and_do_not_move_the_break(void **state)
{
  (void)state;
  gmt_pin_usage_t rows[] = {
      buf(MIB, 0, 0), {0}, buf(MIB, 100, 100), buf(MIB, 2, 2), buf(MIB, 2, 2)};
  bool hot[5];
  assert_int_equal(gmt_pin_classify(rows, 5, hot, NULL), 0);
  assert_false(hot[0] || hot[1] || hot[3] || hot[4]);
  assert_true(hot[2]);
}

/* Two breaks as wide: the higher one is taken (fewer buffers hot). */
static void test_equal_breaks_take_the_higher(void **state)
{
  (void)state;
  gmt_pin_usage_t rows[] = {buf(MIB, 2, 2), buf(MIB, 16, 16), buf(MIB, 128, 128)};
  bool hot[3];
  double cut = 0;
  assert_int_equal(gmt_pin_classify(rows, 3, hot, &cut), 0);
  assert_false(hot[0] || hot[1]);
  assert_true(hot[2]);
  assert_true(cut == 256.0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_off_never_pins_whatever_the_room_or_the_case),
      cmocka_unit_test(test_pin_share_splits_the_limit_evenly_over_the_pods),
      cmocka_unit_test(test_pin_room_is_the_smaller_of_the_nodes_and_the_pods_share),
      cmocka_unit_test(test_asking_for_nothing_is_never_a_pin),
      cmocka_unit_test(test_profile_pins_what_fits_exactly_and_not_a_byte_more),
      cmocka_unit_test(test_use_asks_the_profile_before_the_budget),
      cmocka_unit_test(test_adaptive_pins_only_what_pays_back_and_fits),
      cmocka_unit_test(test_issue_workload_has_exactly_its_two_hot_buffers),
      cmocka_unit_test(test_two_hot_among_five_cold),
      cmocka_unit_test(test_one_group_is_all_hot_at_the_floor_and_none_below),
      cmocka_unit_test(test_empty_and_single_profiles),
      cmocka_unit_test(test_uncopied_buffers_are_cold_and_do_not_move_the_break),
      cmocka_unit_test(test_equal_breaks_take_the_higher),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
