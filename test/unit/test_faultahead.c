/* hook/swap/faultahead.c: a move out's new copies faulted in ahead of it.
 * What matters: each copy taken is a mapping of its size that can be
 * written, in order or with some passed over; none is taken twice; the
 * threads stay within the window; what is not taken is unmapped at the
 * end; and with no thread at all each copy is made where it is taken. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <cmocka.h>

#include "faultahead.h"

#define MIB ((uint64_t)1 << 20)

/* Every page of p written and read back: a mapping of n bytes. */
static void assert_usable(void *p, uint64_t n)
{
  assert_non_null(p);
  for (uint64_t o = 0; o < n; o += 4096)
    ((volatile char *)p)[o] = (char)(o >> 12);
  for (uint64_t o = 0; o < n; o += 4096)
    assert_int_equal(((volatile char *)p)[o], (char)(o >> 12));
  ((volatile char *)p)[n - 1] = 1;
}

static int g_placed[16];

static void place(void *p, uint64_t size, size_t i, void *arg)
{
  (void)p;
  (void)size;
  assert_ptr_equal(arg, g_placed);
  g_placed[i]++;
}

static void nap_ms(long ms)
{
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void test_faultahead_copies_taken_in_order_each_placed_once(void **state)
{
  (void)state;
  memset(g_placed, 0, sizeof g_placed);
  uint64_t sizes[6] = {2 * MIB, 0, 3 * MIB, 2 * MIB, 0, 1 * MIB};
  gmt_fault_ahead_t *a = gmt__fault_ahead_start(sizes, 6, 3, 64 * MIB, place, g_placed);
  assert_non_null(a);
  for (size_t i = 0; i < 6; i++) {
    void *p = gmt__fault_ahead_take(a, i);
    if (!sizes[i]) {
      assert_null(p);
      continue;
    }
    assert_usable(p, sizes[i]);
    assert_int_equal(munmap(p, sizes[i]), 0);
    assert_null(gmt__fault_ahead_take(a, i)); /* never twice */
  }
  assert_int_equal(gmt__fault_ahead_faulted(a), 4);
  assert_int_equal(gmt__fault_ahead_end(a), 0);
  for (size_t i = 0; i < 6; i++)
    assert_int_equal(g_placed[i], sizes[i] ? 1 : 0);
}

static void test_faultahead_passed_over_and_left_are_unmapped(void **state)
{
  (void)state;
  uint64_t sizes[5] = {MIB, MIB, MIB, MIB, MIB};
  gmt_fault_ahead_t *a = gmt__fault_ahead_start(sizes, 5, 2, 64 * MIB, NULL, NULL);
  for (int tries = 0; gmt__fault_ahead_faulted(a) < 5 && tries < 5000; tries++)
    nap_ms(1);
  assert_int_equal(gmt__fault_ahead_faulted(a), 5);
  /* Copy 0 had a prepared copy: taking 1 passes over it. */
  void *p = gmt__fault_ahead_take(a, 1);
  assert_usable(p, MIB);
  munmap(p, MIB);
  assert_null(gmt__fault_ahead_take(a, 0)); /* passed: gone */
  /* The move stopped (a grant): 2, 3 and 4 were faulted and not taken. */
  assert_int_equal(gmt__fault_ahead_end(a), 3);
}

static void test_faultahead_threads_stay_within_the_window(void **state)
{
  (void)state;
  uint64_t sizes[8] = {MIB, MIB, MIB, MIB, MIB, MIB, MIB, MIB};
  gmt_fault_ahead_t *a = gmt__fault_ahead_start(sizes, 8, 4, 3 * MIB, NULL, NULL);
  for (int tries = 0; gmt__fault_ahead_faulted(a) < 3 && tries < 5000; tries++)
    nap_ms(1);
  nap_ms(50); /* a thread past the window would have gone on */
  assert_int_equal(gmt__fault_ahead_faulted(a), 3);
  void *p = gmt__fault_ahead_take(a, 0);
  munmap(p, MIB);
  for (int tries = 0; gmt__fault_ahead_faulted(a) < 4 && tries < 5000; tries++)
    nap_ms(1);
  nap_ms(50);
  assert_int_equal(gmt__fault_ahead_faulted(a), 4); /* one more, no further */
  for (size_t i = 1; i < 8; i++) {
    p = gmt__fault_ahead_take(a, i);
    assert_usable(p, MIB);
    munmap(p, MIB);
  }
  assert_int_equal(gmt__fault_ahead_faulted(a), 8);
  assert_int_equal(gmt__fault_ahead_end(a), 0);
}

static void test_faultahead_without_threads_each_is_made_where_taken(void **state)
{
  (void)state;
  uint64_t sizes[3] = {MIB, 2 * MIB, MIB};
  gmt_fault_ahead_t *a = gmt__fault_ahead_start(sizes, 3, 0, 64 * MIB, NULL, NULL);
  nap_ms(20);
  assert_int_equal(gmt__fault_ahead_faulted(a), 0); /* no thread ran ahead */
  void *p = gmt__fault_ahead_take(a, 1);
  assert_usable(p, 2 * MIB);
  munmap(p, 2 * MIB);
  assert_int_equal(gmt__fault_ahead_faulted(a), 1); /* 0 was passed over, never made */
  assert_int_equal(gmt__fault_ahead_end(a), 0);
}

static void test_faultahead_nothing_wanted_starts_nothing(void **state)
{
  (void)state;
  uint64_t sizes[2] = {0, 0};
  assert_null(gmt__fault_ahead_start(sizes, 2, 2, MIB, NULL, NULL));
  assert_null(gmt__fault_ahead_take(NULL, 0));
  assert_int_equal(gmt__fault_ahead_end(NULL), 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_faultahead_copies_taken_in_order_each_placed_once),
      cmocka_unit_test(test_faultahead_passed_over_and_left_are_unmapped),
      cmocka_unit_test(test_faultahead_threads_stay_within_the_window),
      cmocka_unit_test(test_faultahead_without_threads_each_is_made_where_taken),
      cmocka_unit_test(test_faultahead_nothing_wanted_starts_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
