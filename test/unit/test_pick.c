/* Best-GPU selection (server/pick.c): the score as meant (a longer probe
 * delay lowers it, more free memory raises it), the pod's devices= and the
 * bytes filter, count, and the cache rule (stale by age OR by requests). */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pick.h"

#define GIB (1ull << 30)

/* An idle 80 GiB GPU with index i, probed at 0.02 ms. */
static gmt_pick_dev_t idle(int i)
{
  gmt_pick_dev_t d = {.index = i,
                      .mem_known = true,
                      .total = 80 * GIB,
                      .nvml_free = 79 * GIB,
                      .utilization = 0,
                      .probe_ms = 0.02};
  return d;
}

static int choose(gmt_pick_dev_t *devs, size_t n, const gmt_pick_ask_t *ask, size_t *chosen,
                  size_t *nchosen)
{
  char why[512];
  return gmt_pick_choose(devs, n, ask, NULL, chosen, nchosen, why, sizeof why);
}

static void test_pick_longer_probe_delay_lowers_the_score(void **state)
{
  (void)state;
  gmt_pick_dev_t d[2] = {idle(0), idle(1)};
  d[0].probe_ms = 5.0; /* busy: another job's kernels run first */
  gmt_pick_score(d, 2);
  assert_true(d[0].score < d[1].score);
  assert_true(d[1].score <= 1.0 && d[0].score > 0);
  /* The paper's formula would have preferred device 0: not here. */
  size_t chosen[1], n;
  gmt_pick_ask_t ask = {0};
  assert_int_equal(choose(d, 2, &ask, chosen, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(d[chosen[0]].index, 1);
}

static void test_pick_more_free_memory_raises_the_score(void **state)
{
  (void)state;
  gmt_pick_dev_t d[3] = {idle(0), idle(1), idle(2)};
  d[0].nvml_free = 10 * GIB;
  d[1].nvml_free = 40 * GIB;
  gmt_pick_score(d, 3);
  assert_true(d[0].score < d[1].score);
  assert_true(d[1].score < d[2].score);
  assert_true(fabs(d[2].score - 1.0) < 1e-9); /* the best on every term */
}

static void test_pick_free_is_the_card_less_reservations_not_yet_allocated(void **state)
{
  (void)state;
  gmt_pick_dev_t d = idle(0);
  /* Reserved through gmt but not allocated yet: the card still shows it free. */
  d.reserved = 30 * GIB;
  assert_int_equal(gmt_pick_free(&d), 50 * GIB);
  /* Allocated: the card shows it used, and the reservation is not counted twice. */
  d.nvml_free = 49 * GIB;
  assert_int_equal(gmt_pick_free(&d), 49 * GIB);
  d.reserved = 100 * GIB;
  assert_int_equal(gmt_pick_free(&d), 0);
  d.mem_known = false;
  assert_int_equal(gmt_pick_free(&d), 0);
}

static void test_pick_reservations_steer_away_from_a_gpu(void **state)
{
  (void)state;
  gmt_pick_dev_t d[2] = {idle(0), idle(1)};
  d[0].reserved = 60 * GIB;
  size_t chosen[1], n;
  gmt_pick_ask_t ask = {0};
  assert_int_equal(choose(d, 2, &ask, chosen, &n), 0);
  assert_int_equal(d[chosen[0]].index, 1);
}

static void test_pick_idle_jitter_does_not_outweigh_free_memory(void **state)
{
  (void)state;
  gmt_pick_dev_t d[2] = {idle(0), idle(1)};
  /* Two idle GPUs a few microseconds apart; the slower has more memory. */
  d[0].probe_ms = 0.010;
  d[0].nvml_free = 40 * GIB;
  d[1].probe_ms = 0.014;
  d[1].nvml_free = 79 * GIB;
  gmt_pick_score(d, 2);
  assert_true(d[1].score > d[0].score);
}

static void test_pick_a_probe_that_timed_out_counts_as_the_slowest(void **state)
{
  (void)state;
  gmt_pick_dev_t d[3] = {idle(0), idle(1), idle(2)};
  d[0].probe_failed = true;
  d[0].probe_ms = 3000;
  d[1].probe_ms = 50;
  gmt_pick_score(d, 3);
  assert_true(d[0].score < d[1].score);
  assert_true(d[1].score < d[2].score);
}

static void test_pick_without_a_probe_scores_on_memory(void **state)
{
  (void)state;
  gmt_pick_dev_t d[2] = {idle(0), idle(1)};
  d[0].probe_ms = d[1].probe_ms = -1;
  d[0].nvml_free = 20 * GIB;
  gmt_pick_score(d, 2);
  assert_true(d[0].score < d[1].score);
  /* The delay's weight is left out: an equal best still scores 1. */
  assert_true(fabs(d[1].score - 1.0) < 1e-9);
}

static void test_pick_utilization_and_waiting_tokens_are_smaller_terms(void **state)
{
  (void)state;
  gmt_pick_dev_t d[2] = {idle(0), idle(1)};
  d[0].utilization = 1.0;
  d[0].tokens_waiting = 3;
  strcpy(d[0].holder, "train");
  gmt_pick_score(d, 2);
  assert_true(d[0].score < d[1].score);
  /* ... smaller than free memory: a busy but empty GPU beats an idle full one. */
  d[1].nvml_free = 8 * GIB;
  gmt_pick_score(d, 2);
  assert_true(d[0].score > d[1].score);
}

static void test_pick_only_among_the_pods_devices(void **state)
{
  (void)state;
  gmt_pick_dev_t d[4] = {idle(0), idle(1), idle(2), idle(3)};
  d[1].nvml_free = 1 * GIB; /* the pod's worse GPU */
  const int32_t allowed[] = {1, 2};
  gmt_pick_ask_t ask = {.allowed = allowed, .nallowed = 2, .count = 2};
  bool considered[4];
  size_t chosen[2], n;
  char why[256];
  assert_int_equal(gmt_pick_choose(d, 4, &ask, considered, chosen, &n, why, sizeof why), 0);
  assert_int_equal(n, 2);
  assert_int_equal(d[chosen[0]].index, 2);
  assert_int_equal(d[chosen[1]].index, 1);
  assert_false(considered[0]);
  assert_true(considered[1] && considered[2]);
  assert_false(considered[3]);
  assert_true(d[0].score == 0 && d[3].score == 0);
  /* A devices= that names no GPU of the node. */
  const int32_t none[] = {7};
  gmt_pick_ask_t ask2 = {.allowed = none, .nallowed = 1};
  assert_int_equal(gmt_pick_choose(d, 4, &ask2, NULL, chosen, &n, why, sizeof why), -ENODEV);
  assert_non_null(strstr(why, "devices="));
}

static void test_pick_gpus_without_the_bytes_free_are_not_given(void **state)
{
  (void)state;
  gmt_pick_dev_t d[3] = {idle(0), idle(1), idle(2)};
  d[0].nvml_free = 4 * GIB;
  d[0].probe_ms = 0.001; /* otherwise the best */
  d[1].nvml_free = 40 * GIB;
  d[1].probe_ms = 9;
  d[2].nvml_free = 2 * GIB;
  gmt_pick_ask_t ask = {.bytes = 10 * GIB};
  size_t chosen[2], n;
  char why[512];
  assert_int_equal(gmt_pick_choose(d, 3, &ask, NULL, chosen, &n, why, sizeof why), 0);
  assert_int_equal(n, 1);
  assert_int_equal(d[chosen[0]].index, 1);
  assert_true(d[0].score == 0 && d[2].score == 0 && d[1].score > 0);
  /* None fits: a clear error naming what each has. */
  ask.bytes = 50 * GIB;
  assert_int_equal(gmt_pick_choose(d, 3, &ask, NULL, chosen, &n, why, sizeof why), -ENOSPC);
  assert_int_equal(n, 0);
  assert_non_null(strstr(why, "0 of the 3 GPUs considered have 50.0 GiB free (1 wanted); free: GPU "
                              "0 4.0 GiB, GPU 1 40.0 GiB"));
  /* Two wanted, one fits. */
  ask.bytes = 10 * GIB;
  ask.count = 2;
  assert_int_equal(gmt_pick_choose(d, 3, &ask, NULL, chosen, &n, why, sizeof why), -ENOSPC);
  /* Memory unknown (no NVML): a byte count cannot be promised. */
  d[1].mem_known = false;
  ask.count = 1;
  assert_int_equal(gmt_pick_choose(d, 3, &ask, NULL, chosen, &n, why, sizeof why), -ENOSPC);
  assert_non_null(strstr(why, "GPU 1 unknown"));
}

static void test_pick_count_gives_the_best_first(void **state)
{
  (void)state;
  gmt_pick_dev_t d[4] = {idle(0), idle(1), idle(2), idle(3)};
  d[0].nvml_free = 10 * GIB;
  d[1].nvml_free = 70 * GIB;
  d[2].nvml_free = 30 * GIB;
  gmt_pick_ask_t ask = {.count = 3};
  size_t chosen[4], n;
  assert_int_equal(choose(d, 4, &ask, chosen, &n), 0);
  assert_int_equal(n, 3);
  assert_int_equal(d[chosen[0]].index, 3);
  assert_int_equal(d[chosen[1]].index, 1);
  assert_int_equal(d[chosen[2]].index, 2);
  /* Ties go to the lower index. */
  gmt_pick_dev_t t[3] = {idle(0), idle(1), idle(2)};
  ask.count = 3;
  assert_int_equal(choose(t, 3, &ask, chosen, &n), 0);
  assert_int_equal(chosen[0], 0);
  assert_int_equal(chosen[1], 1);
  assert_int_equal(chosen[2], 2);
  /* More than there are. */
  ask.count = 5;
  assert_int_equal(choose(d, 4, &ask, chosen, &n), -EINVAL);
  /* count 0 means one. */
  ask.count = 0;
  assert_int_equal(choose(d, 4, &ask, chosen, &n), 0);
  assert_int_equal(n, 1);
}

/* Jobs started together are spread: each GPU given counts as one more job
 * on it, with its bytes reserved, until its hold ends. */
static void test_pick_pending_picks_spread_jobs_started_together(void **state)
{
  (void)state;
  gmt_pick_ask_t ask = {.count = 1};
  size_t chosen[2], n;
  gmt_pick_pending_t pend[4];
  size_t np = 0;
  int got[4];
  for (int job = 0; job < 4; job++) {
    gmt_pick_dev_t d[2] = {idle(0), idle(1)};
    gmt_pick_apply_pending(d, 2, pend, np, 1000);
    assert_int_equal(choose(d, 2, &ask, chosen, &n), 0);
    got[job] = d[chosen[0]].index;
    pend[np++] = (gmt_pick_pending_t){.index = got[job], .until_ms = 5000};
  }
  assert_int_equal(got[0], 0);
  assert_int_equal(got[1], 1);
  assert_int_equal(got[2], 0);
  assert_int_equal(got[3], 1);

  /* Past its hold a pick counts no more. */
  gmt_pick_dev_t d[2] = {idle(0), idle(1)};
  gmt_pick_apply_pending(d, 2, pend, np, 5000);
  assert_int_equal(d[0].tokens_waiting + d[1].tokens_waiting, 0);

  /* Its bytes count as reserved: a job of 50 GiB given GPU 0 leaves 29
   * free there, so a second one that needs 50 GiB gets GPU 1, and a third
   * none. */
  gmt_pick_pending_t big = {.index = 0, .bytes = 50 * GIB, .until_ms = 5000};
  gmt_pick_dev_t e[2] = {idle(0), idle(1)};
  e[1].nvml_free = 60 * GIB;
  gmt_pick_apply_pending(e, 2, &big, 1, 1000);
  assert_int_equal(gmt_pick_free(&e[0]), 30 * GIB);
  ask.bytes = 50 * GIB;
  assert_int_equal(choose(e, 2, &ask, chosen, &n), 0);
  assert_int_equal(e[chosen[0]].index, 1);
  gmt_pick_pending_t both[2] = {big, {.index = 1, .bytes = 50 * GIB, .until_ms = 5000}};
  gmt_pick_dev_t f[2] = {idle(0), idle(1)};
  f[1].nvml_free = 60 * GIB;
  gmt_pick_apply_pending(f, 2, both, 2, 1000);
  assert_int_equal(choose(f, 2, &ask, chosen, &n), -ENOSPC);
}

static void test_pick_no_gpus_is_an_error(void **state)
{
  (void)state;
  gmt_pick_ask_t ask = {0};
  size_t chosen[1], n;
  char why[128];
  assert_int_equal(gmt_pick_choose(NULL, 0, &ask, NULL, chosen, &n, why, sizeof why), -ENODEV);
  assert_non_null(strstr(why, "no GPU"));
}

static void test_pick_cache_is_stale_by_age_or_by_requests(void **state)
{
  (void)state;
  gmt_pick_cache_t c = {0};
  assert_true(gmt_pick_cache_stale(&c, 1000, 10, 0)); /* none yet */
  c = (gmt_pick_cache_t){.valid = true, .taken_ms = 5000, .served = 1};
  assert_false(gmt_pick_cache_stale(&c, 1000, 10, 5500));
  assert_false(gmt_pick_cache_stale(&c, 1000, 10, 6000)); /* not older than 1 s yet */
  assert_true(gmt_pick_cache_stale(&c, 1000, 10, 6001));  /* older: stale */
  c.served = 9;
  assert_false(gmt_pick_cache_stale(&c, 1000, 10, 5100));
  c.served = 10; /* served its 10: stale however young */
  assert_true(gmt_pick_cache_stale(&c, 1000, 10, 5100));
  c.served = 1;
  assert_true(gmt_pick_cache_stale(&c, 1000, 1, 5100)); /* 1: never reused */
  assert_true(gmt_pick_cache_stale(&c, 0, 10, 5000));   /* interval 0: never reused */
  /* A clock that went backwards does not make old numbers look young forever. */
  assert_false(gmt_pick_cache_stale(&c, 1000, 10, 4000));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pick_longer_probe_delay_lowers_the_score),
      cmocka_unit_test(test_pick_more_free_memory_raises_the_score),
      cmocka_unit_test(test_pick_free_is_the_card_less_reservations_not_yet_allocated),
      cmocka_unit_test(test_pick_reservations_steer_away_from_a_gpu),
      cmocka_unit_test(test_pick_idle_jitter_does_not_outweigh_free_memory),
      cmocka_unit_test(test_pick_a_probe_that_timed_out_counts_as_the_slowest),
      cmocka_unit_test(test_pick_without_a_probe_scores_on_memory),
      cmocka_unit_test(test_pick_utilization_and_waiting_tokens_are_smaller_terms),
      cmocka_unit_test(test_pick_only_among_the_pods_devices),
      cmocka_unit_test(test_pick_gpus_without_the_bytes_free_are_not_given),
      cmocka_unit_test(test_pick_count_gives_the_best_first),
      cmocka_unit_test(test_pick_pending_picks_spread_jobs_started_together),
      cmocka_unit_test(test_pick_no_gpus_is_an_error),
      cmocka_unit_test(test_pick_cache_is_stale_by_age_or_by_requests),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
