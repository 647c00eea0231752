/* hook/logs/callfmt.c: the text of metrics.log and timeline.log as Alnair's
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

/* The seed's format (cuda_metrics.cpp, Alnair's first hook): a field a
 * line in metrics.log, spaces in timeline.log. */
static void test_callfmt_seed_lines_are_the_first_hooks(void **state)
{
  (void)state;
  char buf[128];
  size_t n = gmt__callfmt_seed_metric(buf, sizeof(buf), "cuMemAlloc", 124, 174295999);
  assert_string_equal(buf, "name:cuMemAlloc\ncount:124\nburst:174295\n");
  assert_int_equal(n, strlen(buf));
  n = gmt__callfmt_seed_timeline(buf, sizeof(buf), "cuInit", 1663174503143895116ull, 4336641999);
  assert_string_equal(buf, "name:cuInit start:1663174503143895116 burst:4336641\n");
  assert_int_equal(n, strlen(buf));
  gmt__callfmt_seed_dropped(buf, sizeof(buf), 42);
  assert_string_equal(buf, "name:timeline_dropped\ncount:42\nburst:0\n");
}

/* Each entry point counts under the seed's name of its base, with its
 * version and per-thread-stream variants; the others are not the seed's. */
/* The token gate's holds: the pseudo-API tokenWait in both formats, not
 * one of the seed's seven (a parser of those skips it), and taken out of
 * the held call's own burst. */
static void test_callfmt_token_wait_is_a_pseudo_api_apart_from_the_call(void **state)
{
  (void)state;
  char buf[128];
  assert_int_equal(gmt__callfmt_seed_name(GMT_CALLFMT_WAIT_NAME), -1);
  gmt__callfmt_seed_metric(buf, sizeof(buf), GMT_CALLFMT_WAIT_NAME, 3, 250000999);
  assert_string_equal(buf, "name:tokenWait\ncount:3\nburst:250000\n");
  gmt__callfmt_metric(buf, sizeof(buf), GMT_CALLFMT_WAIT_NAME, 3, 250000999);
  assert_string_equal(buf, "name:tokenWait,count:3,burst:250000\n");
  gmt__callfmt_seed_timeline(buf, sizeof(buf), GMT_CALLFMT_WAIT_NAME, 1663174512512732618ull,
                             80000000);
  assert_string_equal(buf, "name:tokenWait start:1663174512512732618 burst:80000\n");
  gmt__callfmt_timeline(buf, sizeof(buf), GMT_CALLFMT_WAIT_NAME, 7, 80000000);
  assert_string_equal(buf, "name:tokenWait, start:7, burst:80000\n");
  /* A launch of 80.012 ms of which the gate held 80 ms: 12 us its own. */
  assert_int_equal(gmt__callfmt_own_ns(80012000, 80000000), 12000);
  assert_int_equal(gmt__callfmt_own_ns(5000, 0), 5000);
  /* Never below 0 (a hold's clock read after the call's start read). */
  assert_int_equal(gmt__callfmt_own_ns(5000, 6000), 0);
}

static void test_callfmt_seed_names_take_every_variant_of_an_entry_point(void **state)
{
  (void)state;
  static const struct {
    const char *entry, *seed;
  } want[] = {
      {"cuInit", "cuInit"},
      {"cuMemAlloc", "cuMemAlloc"},
      {"cuMemAlloc_v2", "cuMemAlloc"},
      {"cuMemFree_v2", "cuMemFree"},
      {"cuLaunchKernel", "cuLaunchKernel"},
      {"cuLaunchKernel_ptsz", "cuLaunchKernel"},
      {"cuMemcpyHtoD_v2", "cuMemcpyH2D"},
      {"cuMemcpyHtoDAsync_v2_ptsz", "cuMemcpyH2D"},
      {"cuMemcpyDtoH_v2_ptds", "cuMemcpyD2H"},
      {"cuMemcpyDtoHAsync", "cuMemcpyD2H"},
      {"cuGetProcAddress_v2", "cuGetProcAddress"},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    int k = gmt__callfmt_seed_name(want[i].entry);
    assert_true(k >= 0 && k < GMT_CALLFMT_SEED_NAMES);
    assert_string_equal(gmt__callfmt_seed_names[k], want[i].seed);
  }
  static const char *const not_seed[] = {
      "cuMemAllocHost_v2", "cuMemAllocManaged", "cuMemAllocAsync", "cuMemFreeHost",
      "cuMemcpyDtoD_v2",   "cuLaunchKernelEx",  "cuMemAlloc_x",    "cuInit_v"};
  for (size_t i = 0; i < sizeof not_seed / sizeof not_seed[0]; i++)
    assert_int_equal(gmt__callfmt_seed_name(not_seed[i]), -1);
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
  gmt__callfmt_paths(&p, 4242, 1);
  assert_string_equal(p.metrics, "metrics.log");
  assert_string_equal(p.timeline, "timeline.log");
  assert_string_equal(p.rotated, "timeline.log.1");
  assert_string_equal(p.lock, ".gmt-calllog.lock");
  gmt__callfmt_paths(&p, 2147483647, 0);
  assert_string_equal(p.metrics, "metrics.2147483647.log");
  assert_string_equal(p.timeline, "timeline.2147483647.log");
  assert_string_equal(p.rotated, "timeline.2147483647.log.1");
  assert_string_equal(p.lock, ".gmt-calllog.lock");
}

static void test_callfmt_temporary_name_carries_the_random_bits_whole(void **state)
{
  (void)state;
  char a[64], b[64];
  gmt__callfmt_tmp_name(a, sizeof a, 4242, 0x0123456789abcdefull);
  assert_string_equal(a, ".metrics.4242.0123456789abcdef.tmp");
  gmt__callfmt_tmp_name(b, sizeof b, 4242, 0x0123456789abcdeeull);
  assert_string_not_equal(a, b);
  gmt__callfmt_tmp_name(a, sizeof a, 2147483647, UINT64_MAX);
  assert_string_equal(a, ".metrics.2147483647.ffffffffffffffff.tmp");
}

static void test_callfmt_log_mode_takes_only_reads_and_writes_beyond_the_owners(void **state)
{
  (void)state;
  unsigned m = 1;
  assert_int_equal(gmt__callfmt_mode("0644", &m), 0);
  assert_int_equal(m, 0644);
  assert_int_equal(gmt__callfmt_mode("640", &m), 0);
  assert_int_equal(m, 0640);
  assert_int_equal(gmt__callfmt_mode("0600", &m), 0);
  assert_int_equal(m, 0600);
  assert_int_equal(gmt__callfmt_mode("0666", &m), 0);
  assert_int_equal(m, 0666);
  m = 1;
  static const char *const bad[] = {"",     "0777",  "0700", "0400",      "0200",  "0044", "4644",
                                    "1644", "0o644", "644 ", "rw-r--r--", "00644", "-644", "8"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(gmt__callfmt_mode(bad[i], &m), -EINVAL);
    assert_int_equal(m, 1); /* untouched */
  }
}

static void test_callfmt_made_folder_lets_in_whoever_may_read_and_lets_nobody_write(void **state)
{
  (void)state;
  assert_int_equal(gmt__callfmt_dir_mode(0600), 0700);
  assert_int_equal(gmt__callfmt_dir_mode(0640), 0750);
  assert_int_equal(gmt__callfmt_dir_mode(0644), 0755);
  assert_int_equal(gmt__callfmt_dir_mode(0604), 0705);
  assert_int_equal(gmt__callfmt_dir_mode(0666), 0755);
  assert_int_equal(gmt__callfmt_dir_mode(0660), 0750);
  /* Whatever GMT_LOG_MODE allows, the folder made is not one the hook
   * would refuse. */
  for (unsigned f = 0600; f <= 0666; f++)
    if ((f & ~0666u) == 0)
      assert_null(gmt__callfmt_dir_open_to(040000 | gmt__callfmt_dir_mode(f)));
}

static void test_callfmt_folder_others_may_write_is_refused_unless_sticky(void **state)
{
  (void)state;
  assert_string_equal(gmt__callfmt_dir_open_to(040777), "others");
  assert_string_equal(gmt__callfmt_dir_open_to(040703), "others");
  assert_string_equal(gmt__callfmt_dir_open_to(040770), "its group");
  assert_string_equal(gmt__callfmt_dir_open_to(042775), "its group"); /* setgid alone */
  assert_null(gmt__callfmt_dir_open_to(041777));                      /* /tmp */
  assert_null(gmt__callfmt_dir_open_to(041770));
  assert_null(gmt__callfmt_dir_open_to(040755));
  assert_null(gmt__callfmt_dir_open_to(040700));
}

static void test_callfmt_only_a_regular_file_of_ours_with_one_name_is_written(void **state)
{
  (void)state;
  char why[64] = "";
  assert_int_equal(gmt__callfmt_file_ours(0100600, 0, 1, 0, why, sizeof why), 1);
  assert_int_equal(gmt__callfmt_file_ours(0100644, 1000, 1, 1000, why, sizeof why), 1);
  assert_int_equal(gmt__callfmt_file_ours(0100666, 65534, 1, 0, why, sizeof why), 0);
  assert_string_equal(why, "belongs to uid 65534");
  assert_int_equal(gmt__callfmt_file_ours(0100600, 0, 2, 0, why, sizeof why), 0);
  assert_string_equal(why, "has 2 names (hard links)");
  assert_int_equal(gmt__callfmt_file_ours(010600, 0, 1, 0, why, sizeof why), 0); /* a FIFO */
  assert_string_equal(why, "is not a regular file");
  assert_int_equal(gmt__callfmt_file_ours(0120777, 0, 1, 0, why, sizeof why), 0); /* a link */
  assert_string_equal(why, "is not a regular file");
  assert_int_equal(gmt__callfmt_file_ours(020600, 0, 1, 0, why, sizeof why), 0); /* a device */
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_callfmt_metric_line_is_alnairs_with_total_microseconds),
      cmocka_unit_test(test_callfmt_timeline_line_has_epoch_ns_start_and_microsecond_burst),
      cmocka_unit_test(test_callfmt_dropped_line_follows_alnairs_non_api_line),
      cmocka_unit_test(test_callfmt_seed_lines_are_the_first_hooks),
      cmocka_unit_test(test_callfmt_token_wait_is_a_pseudo_api_apart_from_the_call),
      cmocka_unit_test(test_callfmt_seed_names_take_every_variant_of_an_entry_point),
      cmocka_unit_test(test_callfmt_line_that_does_not_fit_gives_zero),
      cmocka_unit_test(test_callfmt_rotates_only_when_the_next_line_would_pass_the_bound),
      cmocka_unit_test(test_callfmt_plain_names_are_alnairs_and_others_carry_the_pid),
      cmocka_unit_test(test_callfmt_temporary_name_carries_the_random_bits_whole),
      cmocka_unit_test(test_callfmt_log_mode_takes_only_reads_and_writes_beyond_the_owners),
      cmocka_unit_test(test_callfmt_made_folder_lets_in_whoever_may_read_and_lets_nobody_write),
      cmocka_unit_test(test_callfmt_folder_others_may_write_is_refused_unless_sticky),
      cmocka_unit_test(test_callfmt_only_a_regular_file_of_ours_with_one_name_is_written),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
