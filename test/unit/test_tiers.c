/* Memory tiers (server/tiers.c): the table of spaces (defaults, bad and
 * duplicate spaces, lookup), the room and pressure that what occupies a
 * space leaves, up to and past its limit and capacity, and the GPU spaces
 * planned from NVML's cards and --gpu-capacity. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tiers.h"

static int setup(void **state)
{
  gmt_tiers_t *t;
  if (gmt_tiers_new(&t) < 0)
    return -1;
  *state = t;
  return 0;
}

static int teardown(void **state)
{
  gmt_tiers_free(*state);
  return 0;
}

static void test_space_defaults_and_bad_spaces_are_refused(void **state)
{
  gmt_tiers_t *t = *state;
  assert_int_equal(gmt_tiers_add_space(t, GMT_TIER_GPU, 0, 1000, 0, 0, 0), 0);
  const gmt_tier_space_t *s = gmt_tiers_space(t, 0);
  assert_non_null(s);
  assert_int_equal(s->limit, 1000);
  assert_true(s->trigger == GMT_TIERS_TRIGGER && s->stop == GMT_TIERS_STOP);
  assert_int_equal(s->trigger_bytes, 850);
  assert_int_equal(s->stop_bytes, 650);
  assert_int_equal(gmt_tiers_add_space(t, GMT_TIER_GPU, 0, 5, 0, 0, 0), -EEXIST);
  /* The same index in another tier is another space. */
  assert_int_equal(gmt_tiers_add_space(t, GMT_TIER_HOST, 0, 2000, 1500, 0.9, 0.5), 0);
  s = gmt_tiers_space(t, 1);
  assert_non_null(s);
  assert_int_equal(s->tier, GMT_TIER_HOST);
  assert_int_equal(s->limit, 1500);
  assert_true(s->trigger == 0.9 && s->stop == 0.5);
  assert_int_equal(gmt_tiers_add_space(t, GMT_TIER_DISK, 0, 0, 0, 0, 0), -EINVAL);
  assert_int_equal(gmt_tiers_add_space(t, GMT_TIER_DISK, 0, 10, 11, 0, 0), -EINVAL);
  assert_int_equal(gmt_tiers_add_space(t, GMT_TIER_DISK, -1, 10, 0, 0, 0), -EINVAL);
  assert_int_equal(gmt_tiers_add_space(t, (gmt_tier_t)3, 0, 10, 0, 0, 0), -EINVAL);
  assert_int_equal(gmt_tiers_add_space(t, GMT_TIER_DISK, 0, 10, 0, 0.5, 0.5), -EINVAL);
  assert_int_equal(gmt_tiers_add_space(t, GMT_TIER_DISK, 0, 10, 0, 0.5, 0.6), -EINVAL);
  assert_int_equal(gmt_tiers_add_space(t, GMT_TIER_DISK, 0, 10, 0, 1.1, 0.6), -EINVAL);
  assert_int_equal(gmt_tiers_add_space(t, GMT_TIER_DISK, 0, 10, 0, 0.5, -0.1), -EINVAL);
  assert_int_equal(gmt_tiers_add_space(t, GMT_TIER_DISK, 0, 10, 0, NAN, 0.5), -EINVAL);
  assert_int_equal(gmt_tiers_nspaces(t), 2);
  assert_null(gmt_tiers_space(t, 2));
  assert_string_equal(gmt_tier_name(GMT_TIER_DISK), "disk");
  assert_string_equal(gmt_tier_name((gmt_tier_t)7), "?");
}

static void test_spaces_are_found_by_tier_and_index(void **state)
{
  gmt_tiers_t *t = *state;
  assert_int_equal(gmt_tiers_add_space(t, GMT_TIER_GPU, 0, 1000, 0, 0, 0), 0);
  assert_int_equal(gmt_tiers_add_space(t, GMT_TIER_GPU, 3, 3000, 0, 0, 0), 0);
  assert_int_equal(gmt_tiers_add_space(t, GMT_TIER_DISK, 0, 500, 0, 0, 0), 0);
  const gmt_tier_space_t *s = gmt_tiers_find(t, GMT_TIER_GPU, 3);
  assert_non_null(s);
  assert_int_equal(s->capacity, 3000);
  assert_ptr_equal(s, gmt_tiers_space(t, 1));
  assert_int_equal(gmt_tiers_find(t, GMT_TIER_DISK, 0)->capacity, 500);
  assert_null(gmt_tiers_find(t, GMT_TIER_GPU, 1));
  assert_null(gmt_tiers_find(t, GMT_TIER_HOST, 0));
}

/* What occupies a space takes its room: up to its limit, below its
 * capacity, and nothing once past either (a report adopted after a
 * restart may say more than the capacity). */
static void test_occupied_bytes_take_room_up_to_the_limit(void **state)
{
  gmt_tiers_t *t = *state;
  assert_int_equal(gmt_tiers_add_space(t, GMT_TIER_GPU, 0, 1000, 800, 0, 0), 0);
  const gmt_tier_space_t *s = gmt_tiers_find(t, GMT_TIER_GPU, 0);
  assert_int_equal(gmt_tier_room(s, 0), 800);
  assert_int_equal(gmt_tier_room(s, 700), 100);
  assert_int_equal(gmt_tier_room(s, 799), 1);
  assert_int_equal(gmt_tier_room(s, 800), 0);
  assert_int_equal(gmt_tier_room(s, 900), 0);
  assert_int_equal(gmt_tier_room(s, UINT64_MAX), 0);
}

/* Pressure is 0 below the trigger, then what brings the space down to its
 * stop; each space has its own thresholds. */
static void test_pressure_is_what_brings_the_space_down_to_stop(void **state)
{
  gmt_tiers_t *t = *state;
  assert_int_equal(gmt_tiers_add_space(t, GMT_TIER_GPU, 0, 1000, 0, 0, 0), 0);
  assert_int_equal(gmt_tiers_add_space(t, GMT_TIER_GPU, 1, 1000, 0, 0.5, 0.25), 0);
  const gmt_tier_space_t *d0 = gmt_tiers_find(t, GMT_TIER_GPU, 0);
  const gmt_tier_space_t *d1 = gmt_tiers_find(t, GMT_TIER_GPU, 1);
  assert_int_equal(gmt_tier_pressure(d0, 0), 0);
  assert_int_equal(gmt_tier_pressure(d0, 849), 0);   /* below 850 */
  assert_int_equal(gmt_tier_pressure(d0, 850), 200); /* 850 - 650 */
  assert_int_equal(gmt_tier_pressure(d0, 1000), 350);
  assert_int_equal(gmt_tier_pressure(d1, 499), 0);
  assert_int_equal(gmt_tier_pressure(d1, 500), 250);
  assert_int_equal(gmt_tier_pressure(d1, 1400), 1150); /* past the capacity too */
  assert_int_equal(gmt_tier_pressure(d1, UINT64_MAX), UINT64_MAX - 250);
}

#define GIB (1ull << 30)
#define RESERVE GMT_TIERS_GPU_CONTEXT_RESERVE

/* Every card NVML knows gets a space of its memory less the context
 * reserve, by device; a card with no more than the reserve, or whose
 * memory NVML does not say, gets none. */
static void test_each_card_defaults_to_its_memory_less_the_context_reserve(void **state)
{
  (void)state;
  const gmt_gpu_capacity_t cards[] = {
      {.dev = 2, .card = 80 * GIB}, {.dev = 0, .card = 141 * GIB},   {.dev = 1, .card = RESERVE},
      {.dev = 3, .card = 0},        {.dev = 4, .card = RESERVE + 1},
  };
  gmt_gpu_capacity_t out[8];
  assert_int_equal(gmt_tiers_gpu_plan(cards, 5, NULL, 0, out), 5);
  const uint64_t want[] = {141 * GIB - RESERVE, 0, 80 * GIB - RESERVE, 0, 1};
  for (int i = 0; i < 5; i++) {
    assert_int_equal(out[i].dev, i);
    assert_int_equal(out[i].bytes, want[i]);
    assert_int_equal(out[i].from, GMT_GPU_FROM_NVML);
  }
  assert_int_equal(out[0].card, 141 * GIB);
  /* The H200's context, about 500 MiB, fits the reserve. */
  assert_true(RESERVE >= 500ull << 20);
}

/* --gpu-capacity overrides one card, 'off' (0 bytes) takes its space
 * away, and a device NVML does not know still gets the flag's. */
static void test_a_flag_overrides_one_device_and_off_removes_its_space(void **state)
{
  (void)state;
  const gmt_gpu_capacity_t cards[] = {
      {.dev = 0, .card = 8 * GIB}, {.dev = 1, .card = 8 * GIB}, {.dev = 2, .card = 8 * GIB}};
  const gmt_gpu_capacity_t flags[] = {
      {.dev = 5, .bytes = GIB}, {.dev = 1, .bytes = 2 * GIB}, {.dev = 2, .bytes = 0}};
  gmt_gpu_capacity_t out[6];
  assert_int_equal(gmt_tiers_gpu_plan(cards, 3, flags, 3, out), 4);
  const struct {
    int dev;
    uint64_t bytes, card;
    gmt_gpu_from_t from;
  } want[] = {
      {0, 8 * GIB - RESERVE, 8 * GIB, GMT_GPU_FROM_NVML},
      {1, 2 * GIB, 8 * GIB, GMT_GPU_FROM_FLAG},
      {2, 0, 8 * GIB, GMT_GPU_FROM_FLAG},
      {5, GIB, 0, GMT_GPU_FROM_FLAG},
  };
  for (int i = 0; i < 4; i++) {
    assert_int_equal(out[i].dev, want[i].dev);
    assert_int_equal(out[i].bytes, want[i].bytes);
    assert_int_equal(out[i].card, want[i].card);
    assert_int_equal(out[i].from, want[i].from);
  }
  /* Without NVML only the flags declare spaces. */
  assert_int_equal(gmt_tiers_gpu_plan(NULL, 0, flags, 3, out), 3);
  assert_int_equal(out[0].dev, 1);
  assert_int_equal(out[2].dev, 5);
  assert_int_equal(gmt_tiers_gpu_plan(NULL, 0, NULL, 0, out), 0);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_space_defaults_and_bad_spaces_are_refused),
      T(test_spaces_are_found_by_tier_and_index),
      T(test_occupied_bytes_take_room_up_to_the_limit),
      T(test_pressure_is_what_brings_the_space_down_to_stop),
      T(test_each_card_defaults_to_its_memory_less_the_context_reserve),
      T(test_a_flag_overrides_one_device_and_off_removes_its_space),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
