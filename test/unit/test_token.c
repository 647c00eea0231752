/* The GPU time token policy (server/token.c) on a fake clock: usage with
 * overlaps split, eligibility, ranking, quotas, when to look again, the
 * order in which one decision takes those steps, and whole minutes of
 * always-busy pods simulated decision by decision. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "token.h"

#define W 10000.0

static gmt_token_params_t params(void)
{
  gmt_token_params_t p;
  gmt_token_params_default(&p);
  return p;
}

static gmt_token_dev_t *dev(void)
{
  gmt_token_dev_t *d;
  assert_int_equal(gmt_token_dev_new(&d), 0);
  return d;
}

/* pod holds the token over [start, end) and it runs out. */
static void granted(gmt_token_dev_t *d, const char *pod, double start, double end)
{
  assert_int_equal(gmt_token_grant(d, pod, start, end - start), 0);
  assert_string_equal(gmt_token_holder(d), pod);
  assert_int_equal(gmt_token_expire(d), 0);
  assert_null(gmt_token_holder(d));
}

static void assert_near(double got, double want, double tol)
{
  if (fabs(got - want) > tol)
    fail_msg("got %.6f, want %.6f +- %g", got, want, tol);
}

/* ---- usage ---- */

static void test_usage_splits_overlapping_grants_evenly(void **state)
{
  (void)state;
  gmt_token_dev_t *d = dev();
  granted(d, "a", 0, 100);
  granted(d, "b", 100, 200);
  /* a ran 50 ms past its grant, over b's: [100, 150) is shared. */
  assert_int_equal(gmt_token_overuse(d, "a", 50, W, 200), 0);
  assert_near(gmt_token_usage(d, "a", W, 200), 100 + 25, 1e-9);
  assert_near(gmt_token_usage(d, "b", W, 200), 25 + 50, 1e-9);
  /* Three at once: each pays a third. */
  granted(d, "c", 120, 130);
  assert_near(gmt_token_usage(d, "c", W, 200), 10.0 / 3, 1e-9);
  assert_near(gmt_token_usage(d, "a", W, 200) + gmt_token_usage(d, "b", W, 200) +
                  gmt_token_usage(d, "c", W, 200),
              200, 1e-9); /* the GPU's 200 ms, charged once */
  gmt_token_dev_free(d);
}

static void test_usage_counts_only_the_window_and_the_running_grant_up_to_now(void **state)
{
  (void)state;
  gmt_token_dev_t *d = dev();
  granted(d, "a", 0, 1000);
  assert_near(gmt_token_usage(d, "a", W, 10400), 600, 1e-9); /* [400, 1000) */
  assert_near(gmt_token_usage(d, "a", W, 11000), 0, 1e-9);
  assert_int_equal(gmt_token_grant(d, "b", 11000, 250), 0);
  assert_near(gmt_token_usage(d, "b", W, 11100), 100, 1e-9);
  assert_near(gmt_token_usage(d, "b", W, 12000), 250, 1e-9); /* not past its end */
  assert_near(gmt_token_usage(d, "nobody", W, 12000), 0, 0);
  gmt_token_dev_free(d);
}

static void test_prune_keeps_what_the_window_needs(void **state)
{
  (void)state;
  gmt_token_dev_t *d = dev();
  granted(d, "a", 0, 1000);
  granted(d, "a", 5000, 6000);
  gmt_token_prune(d, W, 10500);
  assert_int_equal(gmt_token_history(d), 2);
  assert_near(gmt_token_usage(d, "a", W, 10500), 500 + 1000, 1e-9);
  gmt_token_prune(d, W, 11000);
  assert_int_equal(gmt_token_history(d), 1);
  assert_near(gmt_token_usage(d, "a", W, 11000), 1000, 1e-9);
  gmt_token_dev_free(d);
}

/* ---- eligibility ---- */

static void test_pod_at_its_limit_is_not_eligible(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  assert_false(gmt_token_eligible(5000, 0.5, W));
  assert_false(gmt_token_eligible(5001, 0.5, W));
  assert_true(gmt_token_eligible(4999, 0.5, W));
  assert_false(gmt_token_eligible(0, 0, W));

  gmt_token_dev_t *d = dev();
  granted(d, "a", 5000, 10000);
  gmt_token_cand_t c = {.pod = "a", .request = 0.5, .limit = 0.5};
  /* At 12000 its 5 s are all in the window and none is leaving yet. */
  assert_int_equal(gmt_token_choose(&p, d, &c, 1, 12000), -1);
  assert_near(c.usage_ms, 5000, 1e-9);
  assert_near(c.allowance_ms, 0, 1e-9);
  /* At 15000 its old grant leaves the window as fast as a new one would
   * fill it: it may run, and never has more than 5 s in any window. */
  assert_int_equal(gmt_token_choose(&p, d, &c, 1, 15000), 0);
  assert_near(c.allowance_ms, 5000, 1e-6);
  gmt_token_dev_free(d);
}

static void test_pod_below_its_limit_may_take_the_rest(void **state)
{
  (void)state;
  gmt_token_dev_t *d = dev();
  granted(d, "a", 7000, 9000);
  assert_true(gmt_token_eligible(gmt_token_usage(d, "a", W, 9000), 0.5, W));
  assert_near(gmt_token_allowance(d, "a", 0.5, W, 9000), 3000, 1e-6);
  gmt_token_dev_free(d);
}

static void test_limit_one_alone_at_full_use_stays_eligible(void **state)
{
  (void)state;
  gmt_token_dev_t *d = dev();
  for (int i = 0; i < 40; i++)
    granted(d, "a", i * 250.0, (i + 1) * 250.0);
  assert_near(gmt_token_usage(d, "a", W, 10000), W, 1e-6);
  assert_near(gmt_token_allowance(d, "a", 1.0, W, 10000), W, 1e-6);
  gmt_token_dev_free(d);
}

/* ---- ranking ---- */

static gmt_token_cand_t cand(const char *pod, double request, double usage, double arrival)
{
  return (gmt_token_cand_t){.pod = pod,
                            .request = request,
                            .limit = 1.0,
                            .arrival_ms = arrival,
                            .usage_ms = usage,
                            .allowance_ms = W - usage};
}

static void test_pods_below_request_go_first_most_missing_first(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  gmt_token_cand_t c[] = {
      cand("over", 0.0, 0, 0),      /* no request: never below it */
      cand("a", 0.5, 4000, 1),      /* missing 1000 of 5000: 0.2 */
      cand("b", 0.2, 1000, 2),      /* missing 1000 of 2000: 0.5 */
      cand("c", 0.3, 2100, 3),      /* missing 900 of 3000: 0.3 */
      cand("at-req", 0.3, 3000, 4), /* exactly at its request: not below */
  };
  assert_string_equal(c[gmt_token_pick(&p, c, 5)].pod, "b");
  c[2].allowance_ms = 0; /* b at its limit: out */
  assert_string_equal(c[gmt_token_pick(&p, c, 5)].pod, "c");
  c[3].allowance_ms = 0;
  assert_string_equal(c[gmt_token_pick(&p, c, 5)].pod, "a");
  c[1].allowance_ms = 0;
  assert_string_equal(c[gmt_token_pick(&p, c, 5)].pod, "over"); /* lowest usage */
  c[0].allowance_ms = 0;
  assert_string_equal(c[gmt_token_pick(&p, c, 5)].pod, "at-req");
  c[4].allowance_ms = 0;
  assert_int_equal(gmt_token_pick(&p, c, 5), -1);
}

static void test_others_go_by_lowest_usage_then_earliest_arrival(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  gmt_token_cand_t c[] = {
      cand("x", 0.1, 3000, 5),
      cand("y", 0.1, 2000, 9),
      cand("z", 0.1, 2000, 3),
  };
  assert_string_equal(c[gmt_token_pick(&p, c, 3)].pod, "z");
  c[2].arrival_ms = 10;
  assert_string_equal(c[gmt_token_pick(&p, c, 3)].pod, "y");
  c[1].usage_ms = 3500;
  c[2].usage_ms = 3500;
  assert_string_equal(c[gmt_token_pick(&p, c, 3)].pod, "x");
}

static void test_equal_neediness_goes_by_earliest_arrival(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  gmt_token_cand_t c[] = {cand("late", 0.5, 0, 7), cand("early", 0.2, 0, 2)};
  assert_string_equal(c[gmt_token_pick(&p, c, 2)].pod, "early");
}

/* ---- quotas ---- */

static void test_quota_is_base_without_burst_and_clamped_with_one(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  assert_near(gmt_token_quota(&p, 0, 1.0, W), 250, 0);   /* no estimate */
  assert_near(gmt_token_quota(&p, NAN, 1.0, W), 250, 0); /* nonsense: none */
  assert_near(gmt_token_quota(&p, 30, 1.0, W), 100, 0);  /* at least min */
  assert_near(gmt_token_quota(&p, 420, 1.0, W), 420, 0);
  assert_near(gmt_token_quota(&p, 1e9, 0.5, 5000), 5000, 0); /* at most LIMIT x W */
  assert_near(gmt_token_quota(&p, 1e9, 0.3, W), 3000, 0);
}

static void test_quota_never_exceeds_the_remaining_allowance(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  assert_near(gmt_token_quota(&p, 420, 1.0, 180), 180, 0);
  assert_near(gmt_token_quota(&p, 0, 1.0, 180), 180, 0);
  assert_near(gmt_token_quota(&p, 0, 1.0, 100), 100, 0);
  /* Less than the min quota left: the rest, no more. */
  assert_near(gmt_token_quota(&p, 0, 1.0, 60), 60, 0);
  assert_near(gmt_token_quota(&p, 400, 0.005, 50), 50, 0); /* LIMIT x W is 50 */
}

static void test_params_are_checked(void **state)
{
  (void)state;
  char err[160];
  gmt_token_params_t p = params();
  assert_int_equal(gmt_token_params_check(&p, err, sizeof err), 0);
  p.window_ms = 50;
  assert_int_equal(gmt_token_params_check(&p, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "--window-ms"));
  p = params();
  p.min_quota_ms = 300; /* above the base quota */
  assert_int_equal(gmt_token_params_check(&p, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "--base-quota-ms"));
  p = params();
  p.min_quota_ms = 20000;
  assert_int_equal(gmt_token_params_check(&p, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "--min-quota-ms"));
  p = params();
  p.base_quota_ms = 20000;
  assert_int_equal(gmt_token_params_check(&p, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "--base-quota-ms"));
  p = params();
  p.latency_idle_ms = 2000;
  assert_int_equal(gmt_token_params_check(&p, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "--latency-idle-ms"));
  p.latency_idle_ms = 0.01;
  assert_int_equal(gmt_token_params_check(&p, err, sizeof err), -EINVAL);
  p = params();
  p.wake_queue_ms = 0; /* off */
  assert_int_equal(gmt_token_params_check(&p, err, sizeof err), 0);
  p.wake_queue_ms = 1001;
  assert_int_equal(gmt_token_params_check(&p, err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "--wake-queue-ms"));
}

/* ---- waking ---- */

static void test_wake_is_when_the_oldest_grant_starts_leaving(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  gmt_token_dev_t *d = dev();
  granted(d, "a", 0, 5000);
  gmt_token_cand_t c = {.pod = "a", .request = 0, .limit = 0.5};
  assert_int_equal(gmt_token_choose(&p, d, &c, 1, 8000), -1);
  assert_near(gmt_token_wake(&p, d, &c, 1, 8000), 10000, 0.02);
  assert_int_equal(gmt_token_choose(&p, d, &c, 1, 10000.02), 0);
  gmt_token_dev_free(d);
}

static void test_wake_waits_for_room_for_a_min_quota(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  gmt_token_dev_t *d = dev();
  granted(d, "a", 0, 50);
  granted(d, "b", 50, 5000);
  granted(d, "a", 5000, 9950);
  gmt_token_cand_t c = {.pod = "a", .request = 0, .limit = 0.5};
  /* At 10050 its first 50 ms have left: eligible by Gemini's rule, but a
   * 50 ms sliver is not worth a grant; at 14950 its big grant starts
   * leaving and it may run on. */
  assert_true(gmt_token_eligible(gmt_token_usage(d, "a", W, 10050), 0.5, W));
  assert_int_equal(gmt_token_choose(&p, d, &c, 1, 10050), -1);
  assert_near(c.allowance_ms, 50, 1e-6);
  assert_near(gmt_token_wake(&p, d, &c, 1, 10050), 14950, 0.02);
  /* b has 4950 ms in [50, 5000) and may have 4900: from 10100 on. With
   * both waiting, the earlier of the two. */
  gmt_token_cand_t two[] = {c, {.pod = "b", .request = 0, .limit = 0.49}};
  assert_near(gmt_token_wake(&p, d, two + 1, 1, 10050), 10100, 0.02);
  assert_near(gmt_token_wake(&p, d, two, 2, 10050), 10100, 0.02);
  gmt_token_dev_free(d);
}

static void test_wake_is_never_for_limit_zero(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  gmt_token_dev_t *d = dev();
  gmt_token_cand_t c = {.pod = "a", .request = 0, .limit = 0};
  assert_int_equal(gmt_token_choose(&p, d, &c, 1, 0), -1);
  assert_true(isinf(gmt_token_wake(&p, d, &c, 1, 0)));
  gmt_token_dev_free(d);
}

/* ---- release and overuse ---- */

static void test_release_ends_a_grant_early(void **state)
{
  (void)state;
  gmt_token_dev_t *d = dev();
  assert_int_equal(gmt_token_grant(d, "a", 1000, 250), 0);
  assert_int_equal(gmt_token_grant(d, "b", 1000, 250), -EBUSY);
  assert_near(gmt_token_grant_end(d), 1250, 0);
  assert_int_equal(gmt_token_release(d, 1100), 0);
  assert_null(gmt_token_holder(d));
  assert_near(gmt_token_usage(d, "a", W, 2000), 100, 1e-9); /* stopped growing */
  assert_int_equal(gmt_token_grant(d, "b", 1100, 250), 0);
  assert_int_equal(gmt_token_release(d, 1100), 0); /* at once: nothing charged */
  assert_near(gmt_token_usage(d, "b", W, 2000), 0, 0);
  assert_int_equal(gmt_token_release(d, 1200), 0); /* free already: no-op */
  gmt_token_dev_free(d);
}

static void test_a_draining_holder_keeps_the_token_and_is_charged_as_its_work_runs(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  gmt_token_dev_t *d = dev();
  assert_int_equal(gmt_token_grant(d, "a", 1000, 100), 0);
  assert_false(gmt_token_draining(d));
  /* Its quota ran out at 1100, its queued work still runs. */
  gmt_token_drain(d);
  assert_true(gmt_token_draining(d));
  assert_string_equal(gmt_token_holder(d), "a");
  assert_near(gmt_token_usage(d, "a", W, 1150), 150, 1e-9); /* past the planned end */
  /* Nobody else gets the token meanwhile, however needy. */
  gmt_token_cand_t c = {.pod = "b", .request = 1, .limit = 1, .arrival_ms = 1100};
  gmt_token_decision_t dec;
  assert_int_equal(gmt_token_schedule(&p, d, &c, 1, 1150, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_KEEP);
  /* Its work was done at 1180 (the release came later): charged to then. */
  assert_int_equal(gmt_token_release(d, 1180), 0);
  assert_null(gmt_token_holder(d));
  assert_false(gmt_token_draining(d));
  assert_near(gmt_token_usage(d, "a", W, 2000), 180, 1e-9);
  assert_int_equal(gmt_token_schedule(&p, d, &c, 1, 1181, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_GRANT);
  /* A new grant starts clean: a release before its end is capped there. */
  assert_false(gmt_token_draining(d));
  assert_int_equal(gmt_token_release(d, 5000), 0);
  assert_near(gmt_token_usage(d, "b", W, 5000), dec.quota_ms, 1e-9);
  gmt_token_dev_free(d);
}

/* ---- what a call charges ---- */

static void test_a_report_charges_the_holder_to_when_its_work_was_done(void **state)
{
  (void)state;
  gmt_token_dev_t *d = dev();
  /* Comes back for more at 1080: charged to then. */
  assert_int_equal(gmt_token_grant(d, "a", 1000, 100), 0);
  assert_int_equal(gmt_token_report(d, "a", 1080, false, 30, 5, W), 0);
  assert_null(gmt_token_holder(d));
  assert_near(gmt_token_usage(d, "a", W, 2000), 80, 1e-9); /* its idle and overuse: nothing */
  /* Releases at 2090, its work done 30 ms before: charged to 2060. */
  assert_int_equal(gmt_token_grant(d, "a", 2000, 100), 0);
  assert_int_equal(gmt_token_report(d, "a", 2090, true, 30, 0, W), 0);
  assert_near(gmt_token_usage(d, "a", W, 3000), 140, 1e-9);
  /* An idle time past the grant's start is charged from the start only;
   * a nonsense one counts as none. */
  assert_int_equal(gmt_token_grant(d, "a", 3000, 100), 0);
  assert_int_equal(gmt_token_report(d, "a", 3010, true, 500, 0, W), 0);
  assert_near(gmt_token_usage(d, "a", W, 3500), 140, 1e-9);
  assert_int_equal(gmt_token_grant(d, "a", 4000, 100), 0);
  assert_int_equal(gmt_token_report(d, "a", 4010, true, NAN, 0, W), 0);
  assert_near(gmt_token_usage(d, "a", W, 4500), 150, 1e-9);
  /* Past the planned end, a holder that was not draining is charged to
   * the end: the drain is what charges work past a quota. */
  assert_int_equal(gmt_token_grant(d, "a", 5000, 100), 0);
  assert_int_equal(gmt_token_report(d, "a", 5300, false, 0, 0, W), 0);
  assert_near(gmt_token_usage(d, "a", W, 6000), 250, 1e-9);
  gmt_token_dev_free(d);
}

static void test_a_report_charges_another_pods_overuse_after_its_last_grant(void **state)
{
  (void)state;
  gmt_token_dev_t *d = dev();
  granted(d, "b", 0, 100);
  assert_int_equal(gmt_token_grant(d, "a", 200, 100), 0);
  /* b's work ran 20 ms past its grant, which did not wait for it. */
  assert_int_equal(gmt_token_report(d, "b", 250, false, 0, 20, W), 0);
  assert_near(gmt_token_usage(d, "b", W, 250), 120, 1e-9);
  assert_string_equal(gmt_token_holder(d), "a"); /* a's grant goes on */
  /* No overuse, or a nonsense one, charges nothing. */
  assert_int_equal(gmt_token_report(d, "b", 260, true, 0, 0, W), 0);
  assert_int_equal(gmt_token_report(d, "b", 260, false, 0, -5, W), 0);
  assert_int_equal(gmt_token_report(d, "b", 260, false, 0, INFINITY, W), 0);
  assert_near(gmt_token_usage(d, "b", W, 260), 120, 1e-9);
  gmt_token_dev_free(d);
}

/* ---- cutting a grant short ---- */

static void test_latency_pods_go_before_batch_pods_that_can_run(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  gmt_token_cand_t c[] = {
      cand("needy", 0.9, 0, 1),   /* a batch pod that had nothing */
      cand("lat", 0.1, 3000, 2),  /* a latency pod far over its request */
      cand("lat2", 0.2, 1000, 3), /* another, below its request */
  };
  c[1].latency = c[2].latency = true;
  /* Between latency pods the usual order: lat2 is below its request. */
  assert_string_equal(c[gmt_token_pick(&p, c, 3)].pod, "lat2");
  c[2].allowance_ms = 0; /* at its LIMIT: a latency pod is capped too */
  assert_string_equal(c[gmt_token_pick(&p, c, 3)].pod, "lat");
  c[1].allowance_ms = 0;
  assert_string_equal(c[gmt_token_pick(&p, c, 3)].pod, "needy");
}

/* A swap pod's grant made with a turn is not cut short before the turn
 * has run (its moves would be wasted, and made again the other way);
 * after it, as any grant. */
static void test_a_swap_turn_is_not_cut_short_before_it_has_run(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  gmt_token_dev_t *d = dev();
  granted(d, "a", 0, 3000);
  granted(d, "b", 3000, 3200);
  gmt_token_cand_t a = {.pod = "a",
                        .request = 0.5,
                        .limit = 1,
                        .burst_ms = 2000,
                        .turn_ms = 1500,
                        .arrival_ms = 3990};
  gmt_token_decision_t dec;
  assert_int_equal(gmt_token_schedule(&p, d, &a, 1, 4000, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_GRANT);
  assert_near(dec.quota_ms, 2000, 1e-9);
  gmt_token_cand_t holder = {.pod = "a", .request = 0.5, .limit = 1};
  gmt_token_cand_t b = {.pod = "b", .request = 0.5, .limit = 1, .arrival_ms = 4010};
  /* b is back from idle and below its share: it would cut a plain grant. */
  assert_false(gmt_token_should_revoke(&p, d, &b, &holder, 4010));
  assert_false(gmt_token_should_revoke(&p, d, &b, &holder, 5499));
  /* A latency pod still cuts it: its requests must not wait out a turn. */
  gmt_token_cand_t lat = b;
  lat.latency = true;
  assert_true(gmt_token_should_revoke(&p, d, &lat, &holder, 4010));
  assert_true(gmt_token_should_revoke(&p, d, &b, &holder, 5500));
  gmt_token_dev_free(d);
}

/* The scheduler plans a swap pod's turn (swap_turn.h): its grant runs at
 * least that long, whatever its bursts, but never past its allowance. */
static void test_a_swap_turn_lengthens_the_grant_within_the_allowance(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  gmt_token_dev_t *d = dev();
  granted(d, "b", 0, 3000);
  gmt_token_cand_t a = {
      .pod = "a", .request = 0.5, .limit = 1, .burst_ms = 20, .turn_ms = 4000, .arrival_ms = 10};
  gmt_token_decision_t dec;
  assert_int_equal(gmt_token_schedule(&p, d, &a, 1, 3000, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_GRANT);
  assert_near(dec.quota_ms, 4000, 1e-9);
  assert_int_equal(gmt_token_release(d, 7000), 0);
  /* At LIMIT 0.5 it may have half the window: the turn is cut to that. */
  a.limit = 0.5;
  a.turn_ms = 9000;
  assert_int_equal(gmt_token_schedule(&p, d, &a, 1, 7000, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_GRANT);
  assert_true(dec.quota_ms < 9000);
  assert_near(dec.quota_ms, a.allowance_ms, 1e-9);
  gmt_token_dev_free(d);
}

/* A swap pod's turn is not cut short by a batch pod that comes back,
 * but is by one waking (moved out while idle: its first launch waits for
 * no turn). */
static void test_a_waking_pod_cuts_a_swap_turn_short(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  gmt_token_dev_t *d = dev();
  granted(d, "inf", 0, 100);
  gmt_token_cand_t train = {.pod = "train", .request = 0.5, .limit = 1, .turn_ms = 8000};
  gmt_token_decision_t dec;
  assert_int_equal(gmt_token_schedule(&p, d, &train, 1, 1000, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_GRANT);
  gmt_token_cand_t holder = {.pod = "train", .request = 0.5, .limit = 1};
  gmt_token_cand_t inf = {.pod = "inf", .request = 0.5, .limit = 1, .arrival_ms = 3000};
  assert_false(gmt_token_should_revoke(&p, d, &inf, &holder, 3000));
  inf.waking = true;
  assert_true(gmt_token_should_revoke(&p, d, &inf, &holder, 3000));
  gmt_token_dev_free(d);
}

static void test_a_pod_back_from_idle_cuts_the_grant_short(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  gmt_token_dev_t *d = dev();
  /* a had the GPU for a while; b had little. */
  granted(d, "a", 0, 3000);
  granted(d, "b", 3000, 3200);
  assert_int_equal(gmt_token_grant(d, "a", 4000, 250), 0);
  gmt_token_cand_t holder = {.pod = "a", .request = 0.5, .limit = 1};
  gmt_token_cand_t b = {.pod = "b", .request = 0.5, .limit = 1, .arrival_ms = 4010};
  assert_true(gmt_token_should_revoke(&p, d, &b, &holder, 4010));
  /* One that waited when the grant was made had its turn. */
  b.arrival_ms = 3999;
  assert_false(gmt_token_should_revoke(&p, d, &b, &holder, 4010));
  /* Nor does the holder cut itself, or one that would not be chosen. */
  b.arrival_ms = 4010;
  gmt_token_cand_t a2 = holder;
  a2.arrival_ms = 4010;
  assert_false(gmt_token_should_revoke(&p, d, &a2, &holder, 4010));
  /* A pod with no REQUEST ranks after a holder below its own. */
  gmt_token_cand_t greedy = {.pod = "c", .request = 0.0, .limit = 1, .arrival_ms = 4010};
  assert_false(gmt_token_should_revoke(&p, d, &greedy, &holder, 4010));
  /* Cut: it drains, charged as its work runs, and nobody else gets the
   * token until it comes back. */
  assert_true(gmt_token_should_revoke(&p, d, &b, &holder, 4010));
  gmt_token_revoke(d, 4010);
  assert_true(gmt_token_draining(d));
  assert_string_equal(gmt_token_holder(d), "a");
  assert_near(gmt_token_grant_end(d), 4010, 1e-9);
  assert_false(gmt_token_should_revoke(&p, d, &b, &holder, 4012)); /* once */
  gmt_token_decision_t dec;
  assert_int_equal(gmt_token_schedule(&p, d, &b, 1, 4015, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_KEEP);
  assert_int_equal(gmt_token_release(d, 4030), 0);
  assert_near(gmt_token_usage(d, "a", W, 4030), 3030, 1e-9);
  assert_int_equal(gmt_token_schedule(&p, d, &b, 1, 4031, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_GRANT);
  gmt_token_dev_free(d);
}

static void test_a_latency_pod_cuts_a_batch_grant_and_not_the_other_way(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  gmt_token_dev_t *d = dev();
  /* The latency pod is far over its request, the batch pod far under. */
  granted(d, "lat", 0, 4000);
  assert_int_equal(gmt_token_grant(d, "train", 5000, 250), 0);
  gmt_token_cand_t train = {.pod = "train", .request = 0.8, .limit = 1};
  gmt_token_cand_t lat = {
      .pod = "lat", .request = 0.1, .limit = 1, .arrival_ms = 5001, .latency = true};
  assert_true(gmt_token_should_revoke(&p, d, &lat, &train, 5001));
  /* At its LIMIT it cannot: a latency pod's LIMIT still caps it. */
  lat.limit = 0.4;
  assert_false(gmt_token_should_revoke(&p, d, &lat, &train, 5001));
  assert_int_equal(gmt_token_release(d, 5100), 0);
  /* A batch pod back from idle does not cut a latency pod's grant short. */
  lat.limit = 1;
  assert_int_equal(gmt_token_grant(d, "lat", 5100, 250), 0);
  train.arrival_ms = 5101;
  assert_false(gmt_token_should_revoke(&p, d, &train, &lat, 5101));
  gmt_token_dev_free(d);
}

static void test_drain_without_a_holder_does_nothing(void **state)
{
  (void)state;
  gmt_token_dev_t *d = dev();
  gmt_token_drain(d);
  assert_false(gmt_token_draining(d));
  assert_int_equal(gmt_token_grant(d, "a", 0, 100), 0);
  assert_false(gmt_token_draining(d));
  gmt_token_dev_free(d);
}

static void test_overuse_is_charged_after_the_last_grant(void **state)
{
  (void)state;
  gmt_token_dev_t *d = dev();
  granted(d, "a", 0, 250);
  granted(d, "b", 250, 500);
  /* From the end of a's grant, shared with b's grant over it. */
  assert_int_equal(gmt_token_overuse(d, "a", 40, W, 600), 0);
  assert_near(gmt_token_usage(d, "a", W, 600), 250 + 20, 1e-9);
  assert_near(gmt_token_usage(d, "b", W, 600), 20 + 210, 1e-9);
  /* A second report for the same grant follows the first. */
  assert_int_equal(gmt_token_overuse(d, "a", 20, W, 600), 0);
  assert_near(gmt_token_usage(d, "a", W, 600), 250 + 20 + 10, 1e-9);
  /* Never past now: it cannot have run in the future. */
  granted(d, "a", 1000, 1100);
  assert_int_equal(gmt_token_overuse(d, "a", 500, W, 1200), 0);
  assert_near(gmt_token_usage(d, "a", W, 5000), 280 + 100 + 100, 1e-9);
  /* No grant known (a restarted scheduler): the time just before now. */
  assert_int_equal(gmt_token_overuse(d, "c", 100, W, 1000), 0);
  assert_near(gmt_token_usage(d, "c", W, 1000), 100, 1e-9);
  /* Nonsense is ignored or clamped to the window. */
  assert_int_equal(gmt_token_overuse(d, "d", -5, W, 1000), 0);
  assert_int_equal(gmt_token_overuse(d, "d", NAN, W, 1000), 0);
  assert_near(gmt_token_usage(d, "d", W, 1000), 0, 0);
  assert_int_equal(gmt_token_overuse(d, "d", 1e12, W, 20000), 0);
  assert_near(gmt_token_usage(d, "d", W, 20000), W, 1e-6);
  gmt_token_dev_free(d);
}

/* ---- one decision: the steps in their order ---- */

static gmt_token_cand_t waiting(const char *pod, double request, double limit, double burst,
                                double arrival)
{
  return (gmt_token_cand_t){.pod = pod,
                            .request = request,
                            .limit = limit,
                            .burst_ms = burst,
                            .arrival_ms = arrival,
                            .usage_ms = -1, /* not filled yet */
                            .allowance_ms = -1};
}

static void test_schedule_with_the_token_held_decides_nothing(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  gmt_token_dev_t *d = dev();
  gmt_token_decision_t dec;
  granted(d, "old", 0, 100); /* out of the window by 20000 */
  assert_int_equal(gmt_token_grant(d, "a", 20000, 250), 0);
  gmt_token_cand_t c[] = {waiting("b", 1.0, 1.0, 0, 19000)};
  assert_int_equal(gmt_token_schedule(&p, d, c, 1, 20100, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_KEEP);
  assert_string_equal(gmt_token_holder(d), "a");
  assert_near(gmt_token_grant_end(d), 20250, 0);
  /* Checked before anything else: nothing pruned, no candidate judged. */
  assert_int_equal(gmt_token_history(d), 1);
  assert_near(c[0].usage_ms, -1, 0);
  gmt_token_dev_free(d);
}

/* Grants that left the window are forgotten before the choice, and with
 * them where a pod's last grant ended: a late overuse report is then
 * charged to now, inside the window, instead of after that old grant. */
static void test_schedule_prunes_first_so_a_forgotten_grant_changes_who_wins(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  gmt_token_dev_t *pruned = dev(), *kept = dev();
  gmt_token_decision_t dec;
  granted(pruned, "a", 0, 100);
  granted(kept, "a", 0, 100);
  /* Nobody waits at 20000, but the decision prunes all the same. */
  assert_int_equal(gmt_token_schedule(&p, pruned, NULL, 0, 20000, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_IDLE);
  assert_int_equal(gmt_token_history(pruned), 0);
  assert_int_equal(gmt_token_history(kept), 1);

  assert_int_equal(gmt_token_overuse(pruned, "a", 100, W, 20000), 0);
  assert_int_equal(gmt_token_overuse(kept, "a", 100, W, 20000), 0);
  gmt_token_cand_t c[] = {waiting("a", 0.5, 1.0, 0, 1), waiting("b", 0.5, 1.0, 0, 2)};
  assert_int_equal(gmt_token_schedule(&p, pruned, c, 2, 20000, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_GRANT);
  assert_string_equal(c[dec.winner].pod, "b"); /* a's 100 ms count now */
  assert_near(c[0].usage_ms, 100, 1e-9);

  /* The same history decided without the prune before the report: a's
   * overuse went to [100, 200), long out of the window, and a, the
   * earlier of two equally needy pods, wins. */
  gmt_token_cand_t k[] = {waiting("a", 0.5, 1.0, 0, 1), waiting("b", 0.5, 1.0, 0, 2)};
  assert_int_equal(gmt_token_schedule(&p, kept, k, 2, 20000, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_GRANT);
  assert_string_equal(k[dec.winner].pod, "a");
  gmt_token_dev_free(pruned);
  gmt_token_dev_free(kept);
}

static void test_schedule_records_the_grant_before_the_next_decision(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  gmt_token_dev_t *d = dev();
  gmt_token_decision_t dec;
  gmt_token_cand_t c[] = {waiting("a", 0.5, 1.0, 0, 1), waiting("b", 0.5, 1.0, 0, 2)};
  assert_int_equal(gmt_token_schedule(&p, d, c, 2, 0, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_GRANT);
  assert_int_equal(dec.winner, 0);   /* equally needy: the earlier */
  assert_near(dec.quota_ms, 250, 0); /* no burst: the base quota */
  assert_string_equal(gmt_token_holder(d), "a");
  assert_near(gmt_token_grant_end(d), 250, 0);
  /* Asked again at once: the grant stands. */
  assert_int_equal(gmt_token_schedule(&p, d, c + 1, 1, 10, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_KEEP);
  /* Once it ran out, a's 250 ms count against it: b goes next. */
  assert_int_equal(gmt_token_expire(d), 0);
  assert_int_equal(gmt_token_schedule(&p, d, c, 2, 250, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_GRANT);
  assert_int_equal(dec.winner, 1);
  assert_near(c[0].usage_ms, 250, 1e-9);
  assert_string_equal(gmt_token_holder(d), "b");
  gmt_token_dev_free(d);
}

static void test_schedule_wakes_when_everyone_is_at_the_limit(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  gmt_token_dev_t *d = dev();
  gmt_token_decision_t dec;
  granted(d, "a", 3000, 6000); /* LIMIT 0.3: 3 s, all of it */
  granted(d, "b", 6000, 8000); /* LIMIT 0.2: 2 s, all of it */
  gmt_token_cand_t c[] = {waiting("a", 0.3, 0.3, 0, 1), waiting("b", 0.2, 0.2, 0, 2)};
  assert_int_equal(gmt_token_schedule(&p, d, c, 2, 9000, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_WAKE);
  /* a's grant starts leaving the window at 13000, b's at 16000. */
  assert_near(dec.wake_ms, 13000, 0.02);
  assert_null(gmt_token_holder(d));
  assert_int_equal(gmt_token_history(d), 2);
  /* At the wake time a may run. */
  assert_int_equal(gmt_token_schedule(&p, d, c, 2, dec.wake_ms, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_GRANT);
  assert_string_equal(c[dec.winner].pod, "a");
  gmt_token_dev_free(d);
}

static void test_schedule_is_idle_with_nobody_or_only_limit_zero(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  gmt_token_dev_t *d = dev();
  gmt_token_decision_t dec;
  assert_int_equal(gmt_token_schedule(&p, d, NULL, 0, 0, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_IDLE);
  gmt_token_cand_t c[] = {waiting("zero", 0, 0, 0, 1)};
  assert_int_equal(gmt_token_schedule(&p, d, c, 1, 0, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_IDLE);
  assert_null(gmt_token_holder(d));
  gmt_token_dev_free(d);
}

static void test_schedule_sizes_the_quota_of_the_winner(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  gmt_token_dev_t *d = dev();
  gmt_token_decision_t dec;
  /* The winner's own burst, not the largest of the waiting pods'. */
  gmt_token_cand_t c[] = {waiting("a", 0.5, 1.0, 420, 2), waiting("b", 0.1, 1.0, 30, 1)};
  assert_int_equal(gmt_token_schedule(&p, d, c, 2, 0, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_GRANT);
  assert_string_equal(c[dec.winner].pod, "b");
  assert_near(dec.quota_ms, 100, 0); /* 30 ms: raised to the min quota */
  assert_near(gmt_token_grant_end(d), 100, 0);
  assert_int_equal(gmt_token_expire(d), 0);
  assert_int_equal(gmt_token_schedule(&p, d, c, 2, 100, &dec), 0);
  assert_string_equal(c[dec.winner].pod, "a");
  assert_near(dec.quota_ms, 420, 0);
  assert_near(gmt_token_grant_end(d), 520, 0);
  assert_int_equal(gmt_token_expire(d), 0);
  /* At most what its limit leaves: LIMIT 0.05 is 500 ms, 400 are used. */
  granted(d, "c", 600, 1000);
  gmt_token_cand_t l[] = {waiting("c", 0.05, 0.05, 420, 1)};
  assert_int_equal(gmt_token_schedule(&p, d, l, 1, 1100, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_GRANT);
  assert_near(l[0].allowance_ms, 100, 1e-6);
  assert_near(dec.quota_ms, 100, 1e-6);
  gmt_token_dev_free(d);
}

/* ---- simulation: always-busy pods on a fake clock ---- */

typedef struct {
  const char *name;
  double request, limit;
  bool busy;
  double got;     /* GPU time granted inside [from, until) */
  double arrival; /* its call waits since */
} simpod_t;

/* The daemon decides when its timer fires, a little after a grant's end:
 * 0.2 ms here. (With none at all, two busy pods are at their requests
 * exactly at once, and the tie rule's bias of half a quantum shows.) */
#define LATENCY_MS 0.2

/* Runs the daemon's decisions from 0 to until: every busy pod asks again as
 * soon as its grant runs out, and the next decision comes latency ms after
 * a grant's end. Checks on the way that no pod ever holds more than its
 * LIMIT x W in a window. Returns the GPU's idle time in [from, until). */
static double simulate_with(const gmt_token_params_t *p, simpod_t *pods, size_t n, double from,
                            double until, double latency)
{
  gmt_token_dev_t *d = dev();
  gmt_token_cand_t c[8];
  size_t map[8];
  double now = 0, idle = 0;
  assert_true(n <= 8);
  while (now < until) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
      if (!pods[i].busy)
        continue;
      c[k] = (gmt_token_cand_t){.pod = pods[i].name,
                                .request = pods[i].request,
                                .limit = pods[i].limit,
                                .arrival_ms = pods[i].arrival};
      map[k++] = i;
    }
    gmt_token_decision_t dec;
    assert_int_equal(gmt_token_schedule(p, d, c, k, now, &dec), 0);
    if (dec.action != GMT_TOKEN_GRANT) {
      assert_int_equal(dec.action, GMT_TOKEN_WAKE);
      double wake = dec.wake_ms;
      assert_true(wake > now && isfinite(wake));
      idle += fmax(0, fmin(wake, until) - fmax(now, from));
      now = wake;
      continue;
    }
    simpod_t *pod = &pods[map[dec.winner]];
    double q = dec.quota_ms;
    assert_true(q > 0);
    assert_string_equal(gmt_token_holder(d), pod->name);
    pod->got += fmax(0, fmin(now + q, until) - fmax(now, from));
    now += q;
    assert_int_equal(gmt_token_expire(d), 0);
    pod->arrival = now;
    double used = gmt_token_usage(d, pod->name, p->window_ms, now);
    if (used > pod->limit * p->window_ms + 1e-3)
      fail_msg("%s used %.3f ms in the window ending at %.3f, over its limit %.2f", pod->name, used,
               now, pod->limit);
    idle += fmax(0, fmin(now + latency, until) - fmax(now, from));
    now += latency;
  }
  gmt_token_dev_free(d);
  return idle;
}

static double simulate(const gmt_token_params_t *p, simpod_t *pods, size_t n, double from,
                       double until)
{
  return simulate_with(p, pods, n, from, until, LATENCY_MS);
}

static void test_busy_pods_at_request_0_3_and_0_7_get_their_shares(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  simpod_t pods[] = {{"a", 0.3, 1.0, true, 0, 0}, {"b", 0.7, 1.0, true, 0, 0}};
  double idle = simulate(&p, pods, 2, 0, 60000);
  assert_near(pods[0].got / 60000, 0.3, 0.01);
  assert_near(pods[1].got / 60000, 0.7, 0.01);
  assert_true(idle < 0.002 * 60000); /* only the decision latency */
}

static void test_busy_pods_without_latency_are_off_by_at_most_a_quantum(void **state)
{
  (void)state;
  /* Grants back to back to the microsecond: both pods sit exactly at their
   * requests at every other decision, a tie the smaller pod wins. Bounded
   * by one quantum (250 ms of 10 s). */
  gmt_token_params_t p = params();
  simpod_t pods[] = {{"a", 0.3, 1.0, true, 0, 0}, {"b", 0.7, 1.0, true, 0, 0}};
  double idle = simulate_with(&p, pods, 2, 0, 60000, 0);
  assert_near(pods[0].got / 60000, 0.3, 0.025);
  assert_near(pods[1].got / 60000, 0.7, 0.025);
  assert_near(idle, 0, 1e-6);
}

static void test_three_equal_busy_pods_are_fair(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  simpod_t pods[] = {
      {"a", 0.2, 1.0, true, 0, 0}, {"b", 0.2, 1.0, true, 0, 0}, {"c", 0.2, 1.0, true, 0, 0}};
  double idle = simulate(&p, pods, 3, 0, 60000);
  double sum = 0, sq = 0;
  for (int i = 0; i < 3; i++) {
    sum += pods[i].got;
    sq += pods[i].got * pods[i].got;
  }
  double jain = sum * sum / (3 * sq);
  if (jain < 0.99)
    fail_msg("Jain's index %.4f (%.0f %.0f %.0f ms)", jain, pods[0].got, pods[1].got, pods[2].got);
  assert_near(sum + idle, 60000, 1e-3); /* idle only between grants */
  assert_true(idle < 0.002 * 60000);
}

static void test_pod_alone_gets_its_limit_of_0_5(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  simpod_t pods[] = {{"a", 0.2, 0.5, true, 0, 0}};
  simulate(&p, pods, 1, W, W + 60000);
  assert_near(pods[0].got / 60000, 0.5, 0.02);
}

static void test_busy_pod_beside_an_idle_one_gets_the_whole_gpu(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  simpod_t pods[] = {{"busy", 0.5, 1.0, true, 0, 0}, {"idle", 0.5, 1.0, false, 0, 0}};
  simulate(&p, pods, 2, 0, 60000);
  if (pods[0].got / 60000 < 0.98)
    fail_msg("busy pod got %.4f of the GPU", pods[0].got / 60000);
  assert_near(pods[1].got, 0, 0);
}

static void test_limits_hold_beside_busy_peers(void **state)
{
  (void)state;
  /* a may take at most 0.4 although it asks for 0.4 and b for 0.2: the
   * rest goes to b, and no window of either is over its limit (the
   * simulation checks that at every grant). */
  gmt_token_params_t p = params();
  simpod_t pods[] = {{"a", 0.4, 0.4, true, 0, 0}, {"b", 0.2, 1.0, true, 0, 0}};
  simulate(&p, pods, 2, W, W + 60000);
  assert_near(pods[0].got / 60000, 0.4, 0.02);
  assert_near(pods[1].got / 60000, 0.6, 0.02);
}

/* With the device to itself (nobody else waits or ran in the window) and
 * its last grant watched, a pod gets a long grant: each grant's end costs
 * it a stall. Anything else, and the quota is its burst's as before. */
static void test_a_watched_pod_alone_gets_a_long_grant(void **state)
{
  (void)state;
  gmt_token_params_t p = params();
  gmt_token_dev_t *d = dev();
  gmt_token_cand_t a = {.pod = "a", .request = 1, .limit = 1, .arrival_ms = 1000};
  gmt_token_decision_t dec;
  /* Not watched (an older hook): the base quota. */
  assert_int_equal(gmt_token_schedule(&p, d, &a, 1, 1000, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_GRANT);
  assert_near(dec.quota_ms, p.base_quota_ms, 1e-9);
  assert_false(dec.alone);
  assert_int_equal(gmt_token_release(d, 1250), 0);
  /* Watched and alone: the alone quota, and the grant says so. */
  a.watched = true;
  assert_true(gmt_token_alone(d, "a", W, 1250));
  assert_int_equal(gmt_token_schedule(&p, d, &a, 1, 1250, &dec), 0);
  assert_near(dec.quota_ms, p.alone_quota_ms, 1e-9);
  assert_true(dec.alone);
  assert_true(gmt_token_alone(d, "a", W, 1300)); /* its own grant held */
  assert_false(gmt_token_alone(d, "b", W, 1300));
  assert_int_equal(gmt_token_release(d, 3250), 0);
  /* Another pod ran in the window: not alone, its burst's quota. */
  granted(d, "b", 3250, 3300);
  assert_int_equal(gmt_token_expire(d), 0);
  assert_false(gmt_token_alone(d, "a", W, 3300));
  assert_int_equal(gmt_token_schedule(&p, d, &a, 1, 3300, &dec), 0);
  assert_near(dec.quota_ms, p.base_quota_ms, 1e-9);
  assert_false(dec.alone);
  assert_int_equal(gmt_token_release(d, 3550), 0);
  /* Once b's grant has left the window, a is alone again. */
  assert_true(gmt_token_alone(d, "a", W, 3300 + W + 1));
  /* Two waiting: never the alone quota. */
  gmt_token_cand_t two[2] = {a, {.pod = "b", .request = 1, .limit = 1, .arrival_ms = 20000}};
  assert_int_equal(gmt_token_schedule(&p, d, two, 2, 3300 + W + 1, &dec), 0);
  assert_int_equal(dec.action, GMT_TOKEN_GRANT);
  assert_near(dec.quota_ms, p.base_quota_ms, 1e-9);
  assert_false(dec.alone);
  gmt_token_dev_free(d);

  /* Within its LIMIT: at 0.1 alone it may have 1000 ms of the window. */
  d = dev();
  gmt_token_cand_t lim = {
      .pod = "c", .request = 0.1, .limit = 0.1, .arrival_ms = 0, .watched = true};
  assert_int_equal(gmt_token_schedule(&p, d, &lim, 1, 0, &dec), 0);
  assert_near(dec.quota_ms, 0.1 * W, 1e-9);
  gmt_token_dev_free(d);
}

/* The sweep that splits overlaps (pod_pieces) against the definition:
 * at every point each of the k intervals covering it is charged 1/k. Grants
 * back to back, and overuse charges after each pod's last grant that
 * overlap them, at random; the expected charge by brute force over every
 * stretch between two interval ends. */
static void test_usage_matches_the_even_split_on_random_overlaps(void **state)
{
  (void)state;
  enum { N = 150 };
  static const char *const pods[] = {"a", "b", "c"};
  struct {
    int pod;
    double a, b;
  } iv[2 * N];
  size_t m = 0;
  double last_end[3] = {-1, -1, -1};
  unsigned seed = 12345;
  gmt_token_dev_t *d = dev();
  double t = 0;
  for (int i = 0; i < N; i++) {
    seed = seed * 1103515245u + 12345u;
    int p = (int)(seed >> 16) % 3;
    double len = 1 + (double)((seed >> 8) % 50);
    granted(d, pods[p], t, t + len);
    iv[m].pod = p, iv[m].a = t, iv[m++].b = t + len;
    last_end[p] = t + len;
    t += len;
    if ((seed >> 4) % 3 == 0) { /* another pod reports overuse after its last grant */
      int q = (p + 1 + (int)((seed >> 20) % 2)) % 3;
      double over = 1 + (double)((seed >> 12) % 20);
      if (last_end[q] >= 0) {
        assert_int_equal(gmt_token_overuse(d, pods[q], over, W, t), 0);
        double a = last_end[q], b = fmin(a + over, t);
        if (b > a) {
          iv[m].pod = q, iv[m].a = a, iv[m++].b = b;
          last_end[q] = b;
        }
      }
    }
  }
  double want[3] = {0, 0, 0};
  double cuts[4 * N];
  size_t nc = 0;
  for (size_t i = 0; i < m; i++)
    cuts[nc++] = iv[i].a, cuts[nc++] = iv[i].b;
  for (size_t i = 0; i < nc; i++) /* insertion sort: small */
    for (size_t j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
      double x = cuts[j];
      cuts[j] = cuts[j - 1];
      cuts[j - 1] = x;
    }
  for (size_t s = 0; s + 1 < nc; s++) {
    double a = cuts[s], b = cuts[s + 1], mid = (a + b) / 2;
    if (!(b > a))
      continue;
    int k = 0, j[3] = {0, 0, 0};
    for (size_t i = 0; i < m; i++)
      if (iv[i].a <= mid && mid < iv[i].b)
        k++, j[iv[i].pod]++;
    for (int p = 0; p < 3 && k; p++)
      want[p] += (b - a) * j[p] / k;
  }
  for (int p = 0; p < 3; p++)
    assert_near(gmt_token_usage(d, pods[p], W, t), want[p], 1e-6);
  gmt_token_dev_free(d);
}

/* ---- a latency pod beside the holder ---- */

static void test_a_grant_beside_the_holder_is_charged_half_where_they_overlap(void **state)
{
  (void)state;
  gmt_token_dev_t *d = dev();
  assert_int_equal(gmt_token_grant(d, "train", 0, 100), 0);
  assert_int_equal(gmt_token_side_grant(d, "serve", 20, 100), 0);
  assert_string_equal(gmt_token_side(d), "serve");
  assert_string_equal(gmt_token_holder(d), "train");                  /* nothing cut */
  assert_int_equal(gmt_token_side_grant(d, "other", 25, 10), -EBUSY); /* one at a time */
  assert_false(gmt_token_alone(d, "train", W, 30));
  /* At 40: train alone over [0, 20), both over [20, 40). */
  assert_near(gmt_token_usage(d, "train", W, 40), 20 + 10, 1e-9);
  assert_near(gmt_token_usage(d, "serve", W, 40), 10, 1e-9);
  /* serve releases at 50, its work done 5 ms before: charged to 45. */
  assert_int_equal(gmt_token_report(d, "serve", 50, true, 5, 0, W), 0);
  assert_null(gmt_token_side(d));
  assert_near(gmt_token_usage(d, "serve", W, 60), 12.5, 1e-9);
  assert_near(gmt_token_usage(d, "train", W, 60), 60 - 12.5, 1e-9);
  /* The GPU's 60 ms charged once. */
  gmt_token_dev_free(d);
}

static void test_a_latency_holder_steps_aside_and_keeps_being_charged(void **state)
{
  (void)state;
  gmt_token_dev_t *d = dev();
  assert_int_equal(gmt_token_grant(d, "serve", 0, 100), 0);
  assert_int_equal(gmt_token_step_aside(d), 0);
  assert_null(gmt_token_holder(d)); /* the token is free for a batch pod */
  assert_string_equal(gmt_token_side(d), "serve");
  assert_int_equal(gmt_token_step_aside(d), -EBUSY);
  assert_int_equal(gmt_token_grant(d, "train", 10, 50), 0);
  assert_int_equal(gmt_token_step_aside(d), -EBUSY); /* a side grant is held */
  /* serve comes back at 30 (asks again): its side grant ends there. */
  assert_int_equal(gmt_token_report(d, "serve", 30, false, 0, 0, W), 0);
  assert_null(gmt_token_side(d));
  assert_near(gmt_token_usage(d, "serve", W, 30), 10 + 10, 1e-9);
  assert_near(gmt_token_usage(d, "train", W, 30), 10, 1e-9);
  /* A side grant never charges past its planned end. */
  assert_int_equal(gmt_token_side_grant(d, "serve", 30, 5), 0);
  assert_int_equal(gmt_token_side_end(d, 1000), 0);
  assert_near(gmt_token_usage(d, "serve", W, 40), 20 + 2.5, 1e-9);
  gmt_token_dev_free(d);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test(f)
      T(test_usage_splits_overlapping_grants_evenly),
      T(test_usage_matches_the_even_split_on_random_overlaps),
      T(test_a_grant_beside_the_holder_is_charged_half_where_they_overlap),
      T(test_a_latency_holder_steps_aside_and_keeps_being_charged),
      T(test_usage_counts_only_the_window_and_the_running_grant_up_to_now),
      T(test_prune_keeps_what_the_window_needs),
      T(test_pod_at_its_limit_is_not_eligible),
      T(test_pod_below_its_limit_may_take_the_rest),
      T(test_limit_one_alone_at_full_use_stays_eligible),
      T(test_pods_below_request_go_first_most_missing_first),
      T(test_others_go_by_lowest_usage_then_earliest_arrival),
      T(test_equal_neediness_goes_by_earliest_arrival),
      T(test_quota_is_base_without_burst_and_clamped_with_one),
      T(test_quota_never_exceeds_the_remaining_allowance),
      T(test_params_are_checked),
      T(test_wake_is_when_the_oldest_grant_starts_leaving),
      T(test_wake_waits_for_room_for_a_min_quota),
      T(test_wake_is_never_for_limit_zero),
      T(test_release_ends_a_grant_early),
      T(test_overuse_is_charged_after_the_last_grant),
      T(test_a_draining_holder_keeps_the_token_and_is_charged_as_its_work_runs),
      T(test_a_swap_turn_lengthens_the_grant_within_the_allowance),
      T(test_drain_without_a_holder_does_nothing),
      T(test_a_report_charges_the_holder_to_when_its_work_was_done),
      T(test_a_report_charges_another_pods_overuse_after_its_last_grant),
      T(test_latency_pods_go_before_batch_pods_that_can_run),
      T(test_a_waking_pod_cuts_a_swap_turn_short),
      T(test_a_pod_back_from_idle_cuts_the_grant_short),
      T(test_a_swap_turn_is_not_cut_short_before_it_has_run),
      T(test_a_latency_pod_cuts_a_batch_grant_and_not_the_other_way),
      T(test_schedule_with_the_token_held_decides_nothing),
      T(test_schedule_prunes_first_so_a_forgotten_grant_changes_who_wins),
      T(test_schedule_records_the_grant_before_the_next_decision),
      T(test_schedule_wakes_when_everyone_is_at_the_limit),
      T(test_schedule_is_idle_with_nobody_or_only_limit_zero),
      T(test_schedule_sizes_the_quota_of_the_winner),
      T(test_a_watched_pod_alone_gets_a_long_grant),
      T(test_busy_pods_at_request_0_3_and_0_7_get_their_shares),
      T(test_busy_pods_without_latency_are_off_by_at_most_a_quantum),
      T(test_three_equal_busy_pods_are_fair),
      T(test_pod_alone_gets_its_limit_of_0_5),
      T(test_busy_pod_beside_an_idle_one_gets_the_whole_gpu),
      T(test_limits_hold_beside_busy_peers),
#undef T
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
