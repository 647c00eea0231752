/* hook/callfmt.c: the text of metrics.log and timeline.log as Alnair's
 * profiler hook writes it (README of alnair-profiler/profiler-hook-lib),
 * timeline.log's size bound and the files' names. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "callfmt.h"

static void test_callfmt_metric_line_is_alnairs_with_total_microseconds(void **state)
{
  (void)state;
  char buf[128];
  size_t n = gmt__callfmt_metric(buf, sizeof(buf), "cuLaunchKernel", 186804, 1414970999);
  assert_string_equal(buf, "name:cuLaunchKernel,count:186804,burst:1414970\n");
  assert_int_equal(n, strlen(buf));
}

static void test_callfmt_timeline_line_has_epoch_ns_start_and_microsecond_burst(void **state)
{
  (void)state;
  char buf[128];
  size_t n =
      gmt__callfmt_timeline(buf, sizeof(buf), "cuMemAlloc_v2", 1663174512512732618ull, 1192999);
  assert_string_equal(buf, "name:cuMemAlloc_v2, start:1663174512512732618, burst:1192\n");
  assert_int_equal(n, strlen(buf));
  /* A call under a microsecond is a burst of 0, as in Alnair's. */
  gmt__callfmt_timeline(buf, sizeof(buf), "cuLaunchKernel", 5, 999);
  assert_string_equal(buf, "name:cuLaunchKernel, start:5, burst:0\n");
}

static void test_callfmt_dropped_line_follows_alnairs_non_api_line(void **state)
{
  (void)state;
  char buf[64];
  size_t n = gmt__callfmt_dropped(buf, sizeof(buf), 42);
  assert_string_equal(buf, "name:timeline_dropped,count:42\n");
  assert_int_equal(n, strlen(buf));
}

static void test_callfmt_line_that_does_not_fit_gives_zero(void **state)
{
  (void)state;
  char buf[16];
  assert_int_equal(gmt__callfmt_metric(buf, sizeof(buf), "cuLaunchKernel", 1, 1), 0);
  assert_int_equal(gmt__callfmt_timeline(buf, sizeof(buf), "cuInit", 1, 1), 0);
  /* Exactly full (the line and its NUL) fits; one character more does not. */
  char b2[sizeof("name:timeline_dropped,count:1\n")];
  assert_int_equal(gmt__callfmt_dropped(b2, sizeof(b2), 1), sizeof(b2) - 1);
  assert_int_equal(gmt__callfmt_dropped(b2, sizeof(b2), 10), 0);
}

static void test_callfmt_rotates_only_when_the_next_line_would_pass_the_bound(void **state)
{
  (void)state;
  assert_false(gmt__callfmt_must_rotate(0, 50, 100));
  assert_false(gmt__callfmt_must_rotate(50, 50, 100)); /* exactly at the bound */
  assert_true(gmt__callfmt_must_rotate(51, 50, 100));
  /* An empty file takes a line longer than the bound, alone. */
  assert_false(gmt__callfmt_must_rotate(0, 500, 100));
  assert_true(gmt__callfmt_must_rotate(500, 1, 100));
  /* No overflow near the top. */
  assert_true(gmt__callfmt_must_rotate(UINT64_MAX - 1, 10, UINT64_MAX));
  assert_false(gmt__callfmt_must_rotate(UINT64_MAX - 10, 10, UINT64_MAX));
}

static void test_callfmt_plain_names_are_alnairs_and_others_carry_the_pid(void **state)
{
  (void)state;
  static gmt_callpaths_t p;
  assert_int_equal(gmt__callfmt_paths(&p, "/var/log/gmt", 4242, 1), 0);
  assert_string_equal(p.metrics, "/var/log/gmt/metrics.log");
  assert_string_equal(p.timeline, "/var/log/gmt/timeline.log");
  assert_string_equal(p.rotated, "/var/log/gmt/timeline.log.1");
  assert_string_equal(p.lock, "/var/log/gmt/.gmt-calllog.lock");
  assert_string_equal(p.tmp, "/var/log/gmt/.metrics.4242.log.tmp");
  assert_int_equal(gmt__callfmt_paths(&p, "/var/log/gmt", 4242, 0), 0);
  assert_string_equal(p.metrics, "/var/log/gmt/metrics.4242.log");
  assert_string_equal(p.timeline, "/var/log/gmt/timeline.4242.log");
  assert_string_equal(p.rotated, "/var/log/gmt/timeline.4242.log.1");
  assert_string_equal(p.lock, "/var/log/gmt/.gmt-calllog.lock");
  assert_string_equal(p.tmp, "/var/log/gmt/.metrics.4242.log.tmp");
}

static void test_callfmt_too_long_a_folder_is_refused(void **state)
{
  (void)state;
  static gmt_callpaths_t p;
  static char dir[4100];
  memset(dir, 'a', sizeof(dir) - 1);
  dir[0] = '/';
  assert_int_equal(gmt__callfmt_paths(&p, dir, 1, 1), -ENAMETOOLONG);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_callfmt_metric_line_is_alnairs_with_total_microseconds),
      cmocka_unit_test(test_callfmt_timeline_line_has_epoch_ns_start_and_microsecond_burst),
      cmocka_unit_test(test_callfmt_dropped_line_follows_alnairs_non_api_line),
      cmocka_unit_test(test_callfmt_line_that_does_not_fit_gives_zero),
      cmocka_unit_test(test_callfmt_rotates_only_when_the_next_line_would_pass_the_bound),
      cmocka_unit_test(test_callfmt_plain_names_are_alnairs_and_others_carry_the_pid),
      cmocka_unit_test(test_callfmt_too_long_a_folder_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
