/* When a grant is busy and when it is idle (hook/token/busy.c), on a fake clock:
 * a process that waits for its own queued work is busy; the grant is idle
 * only after its work is done and nothing came for the idle time; overuse,
 * the unused tail and the burst estimate are measured from when the work
 * ended, not from when it was launched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "busy.h"

#define MS 1000000LL

/* A grant of quota_ms at t = 1000 ms (times are ns on an arbitrary clock). */
static gmt_busy_t granted(double quota_ms)
{
  gmt_busy_t b = {0};
  gmt__busy_grant(&b, 1000 * MS, quota_ms, 0);
  return b;
}

static void test_a_launching_process_is_busy(void **state)
{
  (void)state;
  gmt_busy_t b = granted(100);
  /* The counter moved 1 ms ago. */
  assert_int_equal(gmt__busy_next(&b, 7, 1010 * MS, 1011 * MS), GMT_BUSY_WAIT);
}

static void test_waiting_for_its_own_queued_work_is_busy_not_idle(void **state)
{
  (void)state;
  gmt_busy_t b = granted(100);
  /* 10 kernels launched by t = 1001 ms, 27 ms of work; the process then
   * waits in a synchronize. Quiet for a tick: find out. */
  assert_int_equal(gmt__busy_next(&b, 10, 1001 * MS, 1006 * MS), GMT_BUSY_DRAIN);
  /* The wait for the work ran from 1006 to 1028 ms. */
  gmt__busy_drained(&b, 10, 10, 1001 * MS, 1006 * MS, 1028 * MS);
  assert_int_equal(b.drained_ns, 1028 * MS);
  /* 30 ms after the last launch (the old rule gave the token back at 20),
   * but the work ended only 3 ms ago: busy. */
  assert_int_equal(gmt__busy_next(&b, 10, 1001 * MS, 1031 * MS), GMT_BUSY_WAIT);
  assert_int_equal(gmt__busy_next(&b, 10, 1001 * MS, 1047 * MS), GMT_BUSY_WAIT);
  /* 20 ms after the work ended, with nothing launched since: idle. */
  assert_int_equal(gmt__busy_next(&b, 10, 1001 * MS, 1048 * MS), GMT_BUSY_IDLE);
}

static void test_the_next_step_after_a_synchronize_keeps_the_grant(void **state)
{
  (void)state;
  gmt_busy_t b = granted(100);
  gmt__busy_drained(&b, 10, 10, 1001 * MS, 1006 * MS, 1028 * MS);
  /* The process launched its next step at 1029 ms: the drain is stale and
   * it is busy again. */
  assert_int_equal(gmt__busy_next(&b, 20, 1029 * MS, 1030 * MS), GMT_BUSY_WAIT);
  assert_int_equal(gmt__busy_next(&b, 20, 1029 * MS, 1052 * MS), GMT_BUSY_DRAIN);
}

/* A latency grant (TokenReply.idle_us): looked at every
 * GMT_BUSY_LATENCY_TICK_NS, and idle idle_us after its work is done. */
static void test_a_latency_grant_is_idle_soon_after_its_work(void **state)
{
  (void)state;
  const int64_t tick = GMT_BUSY_LATENCY_TICK_NS, idle = 300 * 1000;
  gmt_busy_t b = {0};
  gmt__busy_grant(&b, 1000 * MS, 250, 300);
  assert_int_equal(b.tick_ns, tick);
  assert_true(tick < MS); /* a batch grant waits GMT_BUSY_TICK_NS */
  assert_int_equal(gmt__busy_next(&b, 10, 1001 * MS, 1001 * MS + tick - 1), GMT_BUSY_WAIT);
  assert_int_equal(gmt__busy_next(&b, 10, 1001 * MS, 1001 * MS + tick), GMT_BUSY_DRAIN);
  gmt__busy_drained(&b, 10, 10, 1001 * MS, 1001 * MS + tick, 1002 * MS);
  assert_int_equal(gmt__busy_next(&b, 10, 1001 * MS, 1002 * MS + idle - 1), GMT_BUSY_WAIT);
  assert_int_equal(gmt__busy_next(&b, 10, 1001 * MS, 1002 * MS + idle), GMT_BUSY_IDLE);
  /* The next grant of a batch pod's keeps the batch rule. */
  gmt__busy_grant(&b, 2000 * MS, 250, 0);
  assert_int_equal(gmt__busy_next(&b, 10, 2000 * MS, 2002 * MS), GMT_BUSY_WAIT);
  assert_int_equal(b.idle_ns, GMT_BUSY_IDLE_NS);
}

static void test_a_launch_during_the_wait_means_not_drained(void **state)
{
  (void)state;
  gmt_busy_t b = granted(100);
  gmt__busy_drained(&b, 10, 11, 1001 * MS, 1006 * MS, 1028 * MS);
  assert_int_equal(b.drained_ns, 0);
  assert_int_equal(gmt__busy_next(&b, 11, 1020 * MS, 1040 * MS), GMT_BUSY_DRAIN);
}

static void test_work_done_before_the_wait_ended_at_the_last_launch(void **state)
{
  (void)state;
  gmt_busy_t b = granted(100);
  /* The wait returned at once: the work was done before 1030 ms, and no
   * earlier than the last launch seen (1010 ms). */
  gmt__busy_drained(&b, 10, 10, 1010 * MS, 1030 * MS, 1030 * MS + 10000);
  assert_int_equal(b.drained_ns, 1010 * MS);
  assert_int_equal(gmt__busy_next(&b, 10, 1010 * MS, 1029 * MS), GMT_BUSY_WAIT);
  assert_int_equal(gmt__busy_next(&b, 10, 1010 * MS, 1030 * MS), GMT_BUSY_IDLE);
  /* Never before the grant: a counter last seen moving earlier says
   * nothing about this grant's work. */
  gmt_busy_t c = granted(100);
  gmt__busy_drained(&c, 3, 3, 900 * MS, 1010 * MS, 1010 * MS);
  assert_int_equal(c.drained_ns, 1000 * MS);
}

static void test_an_idle_end_reports_the_unused_tail_and_a_natural_burst(void **state)
{
  (void)state;
  gmt_busy_t b = granted(100);
  gmt__busy_drained(&b, 10, 10, 1001 * MS, 1006 * MS, 1040 * MS);
  gmt_busy_end_t e = gmt__busy_end(&b, 1060 * MS, 1);
  assert_true(e.overuse_ms == 0);
  assert_true(e.idle_ms > 19.999 && e.idle_ms < 20.001);
  /* The burst is the busy period up to when the work ended: 40 ms. */
  assert_true(b.burst_ema_ms > 39.999 && b.burst_ema_ms < 40.001);
  assert_int_equal(b.busy_start_ns, 0);
  /* The next natural burst moves the estimate by its weight. */
  gmt__busy_grant(&b, 2000 * MS, 100, 0);
  gmt__busy_drained(&b, 20, 20, 2001 * MS, 2006 * MS, 2020 * MS);
  gmt__busy_end(&b, 2040 * MS, 1);
  double want = (1 - GMT_BUSY_EMA_WEIGHT) * 40 + GMT_BUSY_EMA_WEIGHT * 20;
  assert_true(b.burst_ema_ms > want - 1e-6 && b.burst_ema_ms < want + 1e-6);
}

static void test_work_past_the_quota_is_overuse_and_no_burst(void **state)
{
  (void)state;
  gmt_busy_t b = granted(100);
  /* The work queued under the grant ran until 1130 ms: 30 ms past it. */
  gmt__busy_drained(&b, 10, 10, 1090 * MS, 1095 * MS, 1130 * MS);
  gmt_busy_end_t e = gmt__busy_end(&b, 1150 * MS, 1);
  assert_true(e.overuse_ms > 29.999 && e.overuse_ms < 30.001);
  assert_true(e.idle_ms > 19.999 && e.idle_ms < 20.001);
  assert_true(b.burst_ema_ms == 0); /* not a natural burst: it wanted more */
}

static void test_a_quota_that_runs_out_cuts_the_busy_period(void **state)
{
  (void)state;
  gmt_busy_t b = granted(100);
  /* A launch at 1105 ms found the quota spent; it waited for the queue
   * until 1112 ms. */
  gmt__busy_drained(&b, 50, 50, 1104 * MS, 1105 * MS, 1112 * MS);
  gmt_busy_end_t e = gmt__busy_end(&b, 1112 * MS, 0);
  assert_true(e.overuse_ms > 11.999 && e.overuse_ms < 12.001);
  assert_true(e.idle_ms == 0);
  /* The busy period goes on into the next grant, marked cut: when it ends
   * it measures no burst. */
  assert_int_equal(b.busy_start_ns, 1000 * MS);
  assert_int_equal(b.busy_cut, 1);
  gmt__busy_grant(&b, 1120 * MS, 100, 0);
  assert_int_equal(b.busy_start_ns, 1000 * MS);
  gmt__busy_drained(&b, 60, 60, 1150 * MS, 1155 * MS, 1160 * MS);
  gmt__busy_end(&b, 1180 * MS, 1);
  assert_true(b.burst_ema_ms == 0);
  assert_int_equal(b.busy_cut, 0); /* the next busy period starts clean */
}

static void test_a_new_grant_forgets_the_last_drain(void **state)
{
  (void)state;
  gmt_busy_t b = granted(100);
  gmt__busy_drained(&b, 10, 10, 1001 * MS, 1006 * MS, 1028 * MS);
  gmt__busy_grant(&b, 1200 * MS, 50, 0);
  assert_int_equal(b.drained_ns, 0);
  assert_int_equal(b.expiry_ns, 1250 * MS);
  assert_int_equal(gmt__busy_next(&b, 10, 1001 * MS, 1210 * MS), GMT_BUSY_DRAIN);
}

/* The bell's stay after a latency process's work: after a quick return,
 * twice the gap; after a long one, half the last stay; never past the
 * most (GMT_BELL_STAY_MAX_US, or 0: off). */
static void test_the_bell_stays_after_a_quick_return_and_forgets_slowly(void **state)
{
  (void)state;
  int64_t max = (int64_t)GMT_BELL_STAY_MAX_US * 1000, nap = GMT_BELL_NAP_NS;
  assert_int_equal(gmt__busy_stay_ns(-1, 0, max), 0); /* never hushed before */
  assert_int_equal(gmt__busy_stay_ns(0, 0, max), nap);
  assert_int_equal(gmt__busy_stay_ns(60000, 0, max), 2 * 60000 + nap); /* queued requests */
  assert_int_equal(gmt__busy_stay_ns(max - 1, 0, max), max);           /* capped */
  assert_int_equal(gmt__busy_stay_ns(max, 0, max), 0); /* a gap: nothing says more follow */
  /* A burst after an idle spell: its first request still stays half of
   * what the last burst needed, and a run of lone requests forgets it. */
  int64_t stay = gmt__busy_stay_ns(60000, 0, max);
  int64_t first = gmt__busy_stay_ns(10 * max, stay, max);
  assert_int_equal(first, stay / 2);
  assert_true(first > 60000);
  for (int i = 0; i < 20; i++)
    first = gmt__busy_stay_ns(10 * max, first, max);
  assert_int_equal(first, 0);
  /* A shorter gap than the last burst's keeps half the last stay. */
  assert_int_equal(gmt__busy_stay_ns(1000, 400000, max), 200000);
  assert_int_equal(gmt__busy_stay_ns(0, 0, 0), 0); /* GMT_BELL_STAY_US=0: off */
  assert_int_equal(gmt__busy_stay_ns(10, max, 0), 0);
}

/* A swap process's turn: quiet with its work done, the grant is still
 * not idle before the turn has run, and is after; quiet for
 * GMT_BUSY_TURN_IDLE_NS it is idle within the turn too (the job ended). */
static void test_a_swap_turn_is_not_idle_before_it_has_run(void **state)
{
  (void)state;
  gmt_busy_t b = {0};
  int64_t ms = 1000000;
  gmt__busy_grant(&b, 0, 500, 0);
  gmt__busy_turn(&b, 300);
  gmt__busy_drained(&b, 7, 7, 1 * ms, 2 * ms, 2 * ms);
  assert_int_equal(gmt__busy_next(&b, 7, 1 * ms, 100 * ms), GMT_BUSY_WAIT); /* quiet 98 ms */
  assert_int_equal(gmt__busy_next(&b, 7, 1 * ms, 249 * ms), GMT_BUSY_WAIT);
  assert_int_equal(gmt__busy_next(&b, 7, 1 * ms, 300 * ms), GMT_BUSY_IDLE);
  /* A long turn: quiet 248 ms is not idle, 250 ms is. */
  gmt__busy_grant(&b, 0, 5000, 0);
  gmt__busy_turn(&b, 4000);
  gmt__busy_drained(&b, 7, 7, 1 * ms, 2 * ms, 2 * ms);
  assert_int_equal(gmt__busy_next(&b, 7, 1 * ms, 249 * ms), GMT_BUSY_WAIT);
  assert_int_equal(gmt__busy_next(&b, 7, 1 * ms, 2 * ms + GMT_BUSY_TURN_IDLE_NS), GMT_BUSY_IDLE);
  /* Never past the grant's own end, and a new grant forgets the turn. */
  gmt__busy_grant(&b, 1000 * ms, 100, 0);
  gmt__busy_turn(&b, 300);
  assert_int_equal(b.keep_until_ns, 1100 * ms);
  gmt__busy_grant(&b, 2000 * ms, 100, 0);
  assert_int_equal(b.keep_until_ns, 0);
  gmt__busy_turn(&b, 0);
  assert_int_equal(b.keep_until_ns, 0);
}

/* A turn's rule holds while the process holds memory that would move,
 * and ends once it holds less than an eighth of the most it held in the
 * turn (a finished job that freed its memory): then a short quiet is
 * idle. */
static void test_a_turn_ends_when_its_memory_is_freed(void **state)
{
  (void)state;
  gmt_busy_t b = {0};
  int64_t ms = 1000000;
  uint64_t gib = 1ull << 30;
  gmt__busy_grant(&b, 0, 10000, 0);
  gmt__busy_turn(&b, 10000);
  gmt__busy_held(&b, 4 * gib);
  gmt__busy_held(&b, 6 * gib); /* grew in the turn: the most counts */
  gmt__busy_drained(&b, 7, 7, 1 * ms, 2 * ms, 2 * ms);
  assert_int_equal(gmt__busy_next(&b, 7, 1 * ms, 100 * ms), GMT_BUSY_WAIT);
  gmt__busy_held(&b, 1 * gib); /* a sixth of 6 GiB: still a turn */
  assert_int_equal(gmt__busy_next(&b, 7, 1 * ms, 100 * ms), GMT_BUSY_WAIT);
  assert_int_not_equal(b.keep_until_ns, 0);
  gmt__busy_held(&b, 512ull << 20); /* a twelfth: the turn's rule ends */
  assert_int_equal(b.keep_until_ns, 0);
  assert_int_equal(gmt__busy_next(&b, 7, 1 * ms, 100 * ms), GMT_BUSY_IDLE);
  /* Memory that comes back does not bring the rule back in this grant. */
  gmt__busy_held(&b, 6 * gib);
  assert_int_equal(b.keep_until_ns, 0);
  /* A process that held nothing when its turn began keeps the rule. */
  gmt__busy_grant(&b, 200 * ms, 10000, 0);
  gmt__busy_turn(&b, 10000);
  gmt__busy_held(&b, 0);
  assert_int_not_equal(b.keep_until_ns, 0);
}

/* The idle thread's sleep: a grant with the device to itself that keeps
 * launching is looked at every GMT_BUSY_ALONE_TICK_NS (20 times a second,
 * not 200); once a look finds it quiet, or for any other grant, every
 * tick; a latency grant always at its own tick. */
static void test_a_grant_alone_that_keeps_launching_is_looked_at_less_often(void **state)
{
  (void)state;
  assert_int_equal(gmt__busy_sleep_ns(0, 1, 1), GMT_BUSY_ALONE_TICK_NS);
  assert_true(GMT_BUSY_ALONE_TICK_NS >= 10 * GMT_BUSY_TICK_NS);
  assert_int_equal(gmt__busy_sleep_ns(0, 1, 0), GMT_BUSY_TICK_NS);
  assert_int_equal(gmt__busy_sleep_ns(0, 0, 1), GMT_BUSY_TICK_NS);
  assert_int_equal(gmt__busy_sleep_ns(1, 1, 1), GMT_BUSY_LATENCY_TICK_NS);
  assert_int_equal(gmt__busy_sleep_ns(1, 0, 0), GMT_BUSY_LATENCY_TICK_NS);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_launching_process_is_busy),
      cmocka_unit_test(test_waiting_for_its_own_queued_work_is_busy_not_idle),
      cmocka_unit_test(test_the_next_step_after_a_synchronize_keeps_the_grant),
      cmocka_unit_test(test_a_launch_during_the_wait_means_not_drained),
      cmocka_unit_test(test_a_latency_grant_is_idle_soon_after_its_work),
      cmocka_unit_test(test_work_done_before_the_wait_ended_at_the_last_launch),
      cmocka_unit_test(test_an_idle_end_reports_the_unused_tail_and_a_natural_burst),
      cmocka_unit_test(test_work_past_the_quota_is_overuse_and_no_burst),
      cmocka_unit_test(test_a_quota_that_runs_out_cuts_the_busy_period),
      cmocka_unit_test(test_a_new_grant_forgets_the_last_drain),
      cmocka_unit_test(test_the_bell_stays_after_a_quick_return_and_forgets_slowly),
      cmocka_unit_test(test_a_swap_turn_is_not_idle_before_it_has_run),
      cmocka_unit_test(test_a_turn_ends_when_its_memory_is_freed),
      cmocka_unit_test(test_a_grant_alone_that_keeps_launching_is_looked_at_less_often),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
