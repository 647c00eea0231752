/* gmt top's per-pod history (client/cli/top_history.c): the last depth
 * shares of each pod, oldest first, kept by name across refreshes; a pod
 * a refresh leaves out is forgotten. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "top_history.h"

static void refresh(gmt_top_history_t *h, const char *a, double va, const char *b, double vb)
{
  gmt_top_history_begin(h);
  if (a)
    assert_int_equal(gmt_top_history_add(h, a, va), 0);
  if (b)
    assert_int_equal(gmt_top_history_add(h, b, vb), 0);
  gmt_top_history_end(h);
}

static void test_top_history_keeps_the_last_depth_oldest_first(void **state)
{
  (void)state;
  gmt_top_history_t *h;
  assert_int_equal(gmt_top_history_new(&h, 4), 0);
  assert_int_equal(gmt_top_history_depth(h), 4);
  double out[8];
  for (int i = 1; i <= 6; i++)
    refresh(h, "train", i / 10.0, "infer", i / 100.0);
  assert_int_equal(gmt_top_history_get(h, "train", out, 8), 4);
  assert_true(out[0] == 0.3 && out[1] == 0.4 && out[2] == 0.5 && out[3] == 0.6);
  assert_int_equal(gmt_top_history_get(h, "infer", out, 8), 4);
  assert_true(out[0] == 0.03 && out[3] == 0.06);
  /* Fewer wanted: the newest. */
  assert_int_equal(gmt_top_history_get(h, "train", out, 2), 2);
  assert_true(out[0] == 0.5 && out[1] == 0.6);
  assert_int_equal(gmt_top_history_get(h, "nobody", out, 8), 0);
  gmt_top_history_free(h);
}

/* Before the ring is full: only what was added. */
static void test_top_history_before_full(void **state)
{
  (void)state;
  gmt_top_history_t *h;
  assert_int_equal(gmt_top_history_new(&h, 60), 0);
  double out[60];
  refresh(h, "a", 0.5, NULL, 0);
  refresh(h, "a", 0.25, NULL, 0);
  assert_int_equal(gmt_top_history_get(h, "a", out, 60), 2);
  assert_true(out[0] == 0.5 && out[1] == 0.25);
  gmt_top_history_free(h);
}

/* A pod gone from a refresh (a config reload took it) loses its history,
 * and starts afresh if it comes back; the others keep theirs. */
static void test_top_history_forgets_a_pod_a_refresh_left_out(void **state)
{
  (void)state;
  gmt_top_history_t *h;
  assert_int_equal(gmt_top_history_new(&h, 8), 0);
  double out[8];
  refresh(h, "a", 0.1, "b", 0.2);
  refresh(h, "a", 0.3, "b", 0.4);
  refresh(h, "a", 0.5, NULL, 0);
  assert_int_equal(gmt_top_history_get(h, "b", out, 8), 0);
  assert_int_equal(gmt_top_history_get(h, "a", out, 8), 3);
  refresh(h, "a", 0.7, "b", 0.9);
  assert_int_equal(gmt_top_history_get(h, "b", out, 8), 1);
  assert_true(out[0] == 0.9);
  assert_int_equal(gmt_top_history_get(h, "a", out, 8), 4);
  assert_true(out[3] == 0.7);
  gmt_top_history_free(h);
}

/* One name twice in one refresh (two pods of one name cannot be, but a
 * reply is outside input): one value, the last. */
static void test_top_history_one_value_per_refresh(void **state)
{
  (void)state;
  gmt_top_history_t *h;
  assert_int_equal(gmt_top_history_new(&h, 8), 0);
  double out[8];
  refresh(h, "a", 0.1, "a", 0.2);
  assert_int_equal(gmt_top_history_get(h, "a", out, 8), 1);
  assert_true(out[0] == 0.2);
  gmt_top_history_free(h);
}

static void test_top_history_wants_a_depth(void **state)
{
  (void)state;
  gmt_top_history_t *h = (gmt_top_history_t *)&h;
  assert_int_equal(gmt_top_history_new(&h, 0), -EINVAL);
  assert_null(h);
  gmt_top_history_free(NULL);
  double out[1];
  assert_int_equal(gmt_top_history_get(NULL, "a", out, 1), 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_top_history_keeps_the_last_depth_oldest_first),
      cmocka_unit_test(test_top_history_before_full),
      cmocka_unit_test(test_top_history_forgets_a_pod_a_refresh_left_out),
      cmocka_unit_test(test_top_history_one_value_per_refresh),
      cmocka_unit_test(test_top_history_wants_a_depth),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
