/* gmt top's column fitting (client/cli/top_columns.c): what a table keeps
 * at 80 cells and what a wide terminal adds, in priority order; the
 * bars growing last; and the width of a terminal curses does not draw. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "top_columns.h"

/* A pods table in miniature: a name, a bar that grows, numbers, and
 * three optional columns (prio 1, 2, 3). */
static const gmt_top_col_t cols[] = {
    {.title = "POD", .min = 5, .want = 10, .prio = 0},
    {.title = "SHARE", .min = 10, .want = 12, .max = 30, .prio = 0},
    {.title = "SHARE/REQ", .min = 9, .want = 9, .prio = 0},
    {.title = "MODE", .min = 6, .want = 6, .prio = 3},
    {.title = "PROCS", .min = 5, .want = 5, .prio = 1},
    {.title = "TOKEN", .min = 5, .want = 5, .prio = 2},
};
#define N (sizeof cols / sizeof *cols)

static int sum(const int *w, int gap)
{
  int used = 0, shown = 0;
  for (size_t i = 0; i < N; i++)
    if (w[i]) {
      used += w[i] + (shown ? gap : 0);
      shown++;
    }
  return used;
}

static void test_top_fit_wide_shows_all_and_grows_the_bar(void **state)
{
  (void)state;
  int w[N];
  int used = gmt_top_fit(cols, N, 200, 2, w);
  assert_int_equal(w[0], 10);
  assert_int_equal(w[1], 30); /* grown to its max */
  assert_int_equal(w[2], 9);
  assert_int_equal(w[3], 6);
  assert_int_equal(w[4], 5);
  assert_int_equal(w[5], 5);
  assert_int_equal(used, sum(w, 2));
  assert_int_equal(used, 10 + 30 + 9 + 6 + 5 + 5 + 5 * 2);
}

/* The required columns reach their want before an optional column comes
 * in; then the optional ones by prio, the highest left out first, and
 * the row never passes the width. */
static void test_top_fit_narrow_leaves_out_the_highest_prio_first(void **state)
{
  (void)state;
  int w[N];
  /* wants: 10+12+9 = 31, +2 gaps = 35; PROCS +7 = 42; TOKEN +7 = 49;
   * MODE +8 = 57. */
  int used = gmt_top_fit(cols, N, 52, 2, w);
  assert_int_equal(w[0], 10);
  assert_int_equal(w[2], 9);
  assert_int_equal(w[4], 5);  /* PROCS, prio 1 */
  assert_int_equal(w[5], 5);  /* TOKEN, prio 2 */
  assert_int_equal(w[3], 0);  /* MODE, prio 3: out */
  assert_int_equal(w[1], 15); /* the bar takes the 3 cells left */
  assert_int_equal(used, 52);
  assert_int_equal(used, sum(w, 2));
  used = gmt_top_fit(cols, N, 45, 2, w);
  assert_int_equal(w[4], 5);
  assert_int_equal(w[3] + w[5], 0);
  assert_int_equal(used, 45);
  /* Below the wants: the name first, in order. */
  used = gmt_top_fit(cols, N, 30, 2, w);
  assert_int_equal(w[3] + w[4] + w[5], 0);
  assert_int_equal(used, 30);
  assert_int_equal(w[0], 7);
  assert_int_equal(w[1], 10);
}

/* Too narrow even for the required ones: they stay at their min (the
 * screen cuts the row), nothing else is shown. */
static void test_top_fit_keeps_required_columns_at_any_width(void **state)
{
  (void)state;
  int w[N];
  int used = gmt_top_fit(cols, N, 10, 2, w);
  assert_int_equal(w[0], 5);
  assert_int_equal(w[1], 10);
  assert_int_equal(w[2], 9);
  assert_int_equal(w[3] + w[4] + w[5], 0);
  assert_int_equal(used, 28);
}

/* An optional column that does not fit stops the others, even narrower
 * ones of a higher prio: a wider terminal only ever adds columns. */
static void test_top_fit_stops_at_the_first_optional_that_does_not_fit(void **state)
{
  (void)state;
  const gmt_top_col_t c[] = {
      {.title = "A", .min = 10, .want = 10},
      {.title = "WIDE", .min = 20, .want = 20, .prio = 1},
      {.title = "B", .min = 1, .want = 1, .prio = 2},
  };
  int w[3];
  gmt_top_fit(c, 3, 25, 2, w);
  assert_int_equal(w[0], 10);
  assert_int_equal(w[1], 0);
  assert_int_equal(w[2], 0);
}

/* Two bars share what is left a cell at a time. */
static void test_top_fit_grows_bars_alike(void **state)
{
  (void)state;
  const gmt_top_col_t c[] = {
      {.title = "A", .min = 10, .want = 10, .max = 40},
      {.title = "B", .min = 10, .want = 10, .max = 40},
  };
  int w[2];
  int used = gmt_top_fit(c, 2, 27, 1, w);
  assert_int_equal(used, 27);
  assert_int_equal(w[0], 13);
  assert_int_equal(w[1], 13);
}

/* A text with a longer form takes it whole or keeps its short one; the
 * bars grow with what is left. */
static void test_top_fit_jumps_to_a_long_form_only_whole(void **state)
{
  (void)state;
  const gmt_top_col_t c[] = {
      {.title = "MEM", .min = 10, .want = 10, .max = 18, .jump = true},
      {.title = "BAR", .min = 10, .want = 10, .max = 40},
  };
  int w[2];
  int used = gmt_top_fit(c, 2, 26, 2, w);
  assert_int_equal(w[0], 10); /* 8 more would not fit: the short form */
  assert_int_equal(w[1], 14);
  assert_int_equal(used, 26);
  used = gmt_top_fit(c, 2, 40, 2, w);
  assert_int_equal(w[0], 18);
  assert_int_equal(w[1], 20);
  assert_int_equal(used, 40);
}

static void test_top_width_from_columns_then_the_terminal(void **state)
{
  (void)state;
  assert_int_equal(gmt_top_width("120", 200), 120);
  assert_int_equal(gmt_top_width(NULL, 200), 200);
  assert_int_equal(gmt_top_width("", 0), 80);
  assert_int_equal(gmt_top_width("wide", 0), 80);
  assert_int_equal(gmt_top_width("0", 100), 100);
  assert_int_equal(gmt_top_width("100000", 0), 80);
  assert_int_equal(gmt_top_width("80x", 0), 80);
  assert_int_equal(gmt_top_width("40", 0), 40);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_top_fit_wide_shows_all_and_grows_the_bar),
      cmocka_unit_test(test_top_fit_narrow_leaves_out_the_highest_prio_first),
      cmocka_unit_test(test_top_fit_keeps_required_columns_at_any_width),
      cmocka_unit_test(test_top_fit_stops_at_the_first_optional_that_does_not_fit),
      cmocka_unit_test(test_top_fit_grows_bars_alike),
      cmocka_unit_test(test_top_fit_jumps_to_a_long_form_only_whole),
      cmocka_unit_test(test_top_width_from_columns_then_the_terminal),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
