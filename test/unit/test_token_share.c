/* The pod's token shared by its processes (client/pmgr/token_share.c), on a
 * fake clock: processes waiting together are granted together, the next
 * request waits for every sharer (so they alternate), an idle holder hands
 * the grant back with its idle time, an exited process's share and waits
 * are dropped, a stalled one is waited for at most the drain bound, and
 * outages, ESRCH and refusals end every wait. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "gmt_error.h"
#include "token_share.h"

#define MS 1000000ull

typedef struct {
  gmt_tshare_t pod;
  gmt_tshare_dev_t d;
  gmt_tshare_in_t in;
  uint64_t seq;
} fx_t;

static int setup(void **state)
{
  fx_t *f = calloc(1, sizeof *f);
  if (!f)
    return -1;
  gmt_tshare_dev_init(&f->d, &f->pod);
  f->in = (gmt_tshare_in_t){.now_ns = 1000 * MS, .limit = 0.5, .allowed = true};
  *state = f;
  return 0;
}

static void free_list(gmt_tshare_waiter_t *w)
{
  while (w) {
    gmt_tshare_waiter_t *next = w->next;
    free(w);
    w = next;
  }
}

static int teardown(void **state)
{
  fx_t *f = *state;
  free_list(gmt_tshare_take(&f->d, 0));
  gmt_tshare_dev_free(&f->d);
  free(f);
  return 0;
}

static void later(fx_t *f, uint64_t ms)
{
  f->in.now_ns += ms * MS;
}

/* A process's Token call; its call is its pid. */
static gmt_tshare_act_t ask(fx_t *f, uint32_t pid, double burst_ms, double overuse_ms)
{
  gmt_tshare_act_t a;
  assert_int_equal(
      gmt_tshare_request(&f->d, &f->in, pid, burst_ms, overuse_ms, (void *)(uintptr_t)pid, &a), 0);
  return a;
}

static gmt_tshare_act_t give_back(fx_t *f, uint32_t pid, double overuse_ms, double idle_ms)
{
  gmt_tshare_act_t a;
  gmt_tshare_release(&f->d, &f->in, pid, overuse_ms, idle_ms, &a);
  return a;
}

/* The call a decided on went out: its seq. */
static uint64_t sent(fx_t *f, const gmt_tshare_act_t *a, int kind)
{
  assert_int_equal(a->send, kind);
  gmt_tshare_sent(&f->d, a, ++f->seq);
  return f->seq;
}

static gmt_tshare_act_t answer(fx_t *f, uint64_t seq, int rc, double quota_ms)
{
  gmt_tshare_act_t a;
  gmt_tshare_answered(&f->d, &f->in, false, seq, rc, quota_ms, &a);
  return a;
}

static size_t count(const gmt_tshare_waiter_t *w)
{
  size_t n = 0;
  for (; w; w = w->next)
    n++;
  return n;
}

static bool has(const gmt_tshare_waiter_t *w, uint32_t pid)
{
  for (; w; w = w->next)
    if (w->pid == pid && w->call == (void *)(uintptr_t)pid)
      return true;
  return false;
}

/* Grants 100 ms from the scheduler to pids a and b (b 0: a alone). */
static void granted_to(fx_t *f, uint32_t a, uint32_t b)
{
  gmt_tshare_act_t x = ask(f, a, 0, 0);
  uint64_t seq = sent(f, &x, GMT_TSHARE_SEND_REQUEST);
  if (b)
    assert_int_equal(ask(f, b, 0, 0).send, GMT_TSHARE_SEND_NONE);
  x = answer(f, seq, 0, 100);
  assert_int_equal(count(x.granted), b ? 2 : 1);
  free_list(x.granted);
}

static void
test_waiting_processes_are_granted_together_and_a_latecomer_shares_the_rest(void **state)
{
  fx_t *f = *state;
  gmt_tshare_act_t a = ask(f, 1, 50, 0);
  assert_int_equal(a.send, GMT_TSHARE_SEND_REQUEST);
  assert_int_equal(a.pid, 1);
  assert_true(a.burst_ms == 50);
  assert_true(a.share_ms == 0);
  uint64_t seq = sent(f, &a, GMT_TSHARE_SEND_REQUEST);
  /* One request at a time: the second process waits with the first. */
  a = ask(f, 2, 80, 0);
  assert_int_equal(a.send, GMT_TSHARE_SEND_NONE);
  assert_null(a.granted);

  a = answer(f, seq, 0, 100);
  assert_int_equal(count(a.granted), 2);
  assert_int_equal(a.granted->pid, 1); /* in the order they asked */
  assert_true(has(a.granted, 2));
  assert_true(a.quota_ms == 100);
  assert_int_equal(a.drain, GMT_TSHARE_TIMER_START);
  assert_int_equal(a.drain_ms, 100 + GMT_TOKEN_DRAIN_MAX_MS);
  assert_int_equal(a.send, GMT_TSHARE_SEND_NONE);
  free_list(a.granted);

  /* 40 ms in, a third gets the 60 left at once, without a call upstream. */
  later(f, 40);
  a = ask(f, 3, 0, 0);
  assert_true(a.share_ms > 59.99 && a.share_ms < 60.01);
  assert_int_equal(a.send, GMT_TSHARE_SEND_NONE);
  /* Under a millisecond left: spent, so it waits for the next grant. */
  later(f, 59);
  a = ask(f, 4, 0, 0);
  assert_true(a.share_ms == 0);
  assert_int_equal(a.send, GMT_TSHARE_SEND_NONE); /* 1, 2 and 3 still run under it */
}

/* The next request ends the grant upstream, so it waits until every
 * process that shared it came back or let go: then one request for all
 * of them (the largest burst, every overuse), and both are answered. */
static void test_processes_alternate_the_next_request_waits_for_every_sharer(void **state)
{
  fx_t *f = *state;
  granted_to(f, 1, 2);
  later(f, 100);
  gmt_tshare_act_t a = ask(f, 1, 30, 5);
  assert_int_equal(a.send, GMT_TSHARE_SEND_NONE);
  a = ask(f, 2, 70, 3);
  assert_int_equal(a.send, GMT_TSHARE_SEND_REQUEST);
  assert_int_equal(a.pid, 1);
  assert_true(a.burst_ms == 70);
  assert_true(a.overuse_ms == 8);
  uint64_t seq = sent(f, &a, GMT_TSHARE_SEND_REQUEST);
  a = answer(f, seq, 0, 100);
  assert_int_equal(count(a.granted), 2);
  free_list(a.granted);

  /* 1 alone holds the next; 2, back for more, waits until 1 lets go. */
  later(f, 100);
  a = ask(f, 2, 0, 0);
  assert_int_equal(a.send, GMT_TSHARE_SEND_NONE);
  later(f, 5);
  a = give_back(f, 1, 0, 0);
  assert_int_equal(a.send, GMT_TSHARE_SEND_REQUEST);
  assert_int_equal(a.pid, 2);
  /* The overuse was charged once, with the request before. */
  assert_true(a.overuse_ms == 0);
}

/* A grant of the scheduler's can be watched (TokenWatch) while a process
 * shares it; once the scheduler cut it short, a latecomer is not answered
 * from what was left, and the next request goes upstream. */
static void test_a_grant_cut_short_is_not_shared_any_more(void **state)
{
  fx_t *f = *state;
  assert_false(gmt_tshare_watchable(&f->d)); /* nothing to watch */
  granted_to(f, 1, 0);
  assert_true(gmt_tshare_watchable(&f->d));
  later(f, 10);
  gmt_tshare_revoked(&f->d, &f->in);
  gmt_tshare_act_t a = ask(f, 2, 0, 0);
  assert_true(a.share_ms == 0);
  assert_int_equal(a.send, GMT_TSHARE_SEND_NONE); /* 1 still has work queued */
  a = give_back(f, 1, 0, 0);
  assert_int_equal(a.send, GMT_TSHARE_SEND_REQUEST); /* for 2 */
  assert_int_equal(a.pid, 2);
  assert_false(gmt_tshare_watchable(&f->d)); /* the grant ended upstream */
}

/* An outage's local grants have no scheduler to cut them: not watchable. */
static void test_a_local_grant_is_not_watchable(void **state)
{
  fx_t *f = *state;
  f->in.schd_down = true;
  gmt_tshare_act_t a = ask(f, 1, 0, 0);
  assert_int_equal(count(a.granted), 1);
  free_list(a.granted);
  assert_false(gmt_tshare_watchable(&f->d));
}

/* An idle holder hands the grant back at once, saying how long it went
 * unused: since the last of its sharers was done. */
static void test_an_idle_holder_releases_the_grant_with_its_idle_time(void **state)
{
  fx_t *f = *state;
  granted_to(f, 1, 2);
  later(f, 30);
  gmt_tshare_act_t a = give_back(f, 1, 0, 10);    /* done 10 ms ago */
  assert_int_equal(a.send, GMT_TSHARE_SEND_NONE); /* 2 still holds it */
  later(f, 20);
  a = give_back(f, 2, 2, 40); /* done before 1 was */
  assert_int_equal(a.drain, GMT_TSHARE_TIMER_STOP);
  assert_int_equal(a.pid, 2);
  assert_true(a.overuse_ms == 2);
  assert_true(a.idle_ms > 29.99 && a.idle_ms < 30.01);
  uint64_t rel = sent(f, &a, GMT_TSHARE_SEND_RELEASE);
  assert_true(gmt_tshare_in_flight(&f->d));

  /* The grant is gone: the next process waits, and asks once the release
   * is answered. */
  a = ask(f, 3, 0, 0);
  assert_true(a.share_ms == 0);
  assert_int_equal(a.send, GMT_TSHARE_SEND_NONE);
  gmt_tshare_answered(&f->d, &f->in, true, rel, 0, 0, &a);
  assert_int_equal(a.send, GMT_TSHARE_SEND_REQUEST);
  assert_int_equal(a.pid, 3);
  assert_true(a.overuse_ms == 0);
}

/* An exited process's waits are taken off the queue, and its share no
 * longer holds back the others' request. */
static void test_an_exited_processes_share_and_waits_are_dropped(void **state)
{
  fx_t *f = *state;
  granted_to(f, 1, 2);
  later(f, 100);
  assert_int_equal(ask(f, 2, 0, 0).send, GMT_TSHARE_SEND_NONE);
  assert_int_equal(ask(f, 3, 0, 0).send, GMT_TSHARE_SEND_NONE);
  assert_int_equal(ask(f, 2, 0, 0).send, GMT_TSHARE_SEND_NONE); /* a second thread of 2 */
  gmt_tshare_waiter_t *gone = gmt_tshare_take(&f->d, 2);
  assert_int_equal(count(gone), 2);
  free_list(gone);
  gmt_tshare_act_t a;
  gmt_tshare_release(&f->d, &f->in, 2, 0, 0, &a);
  assert_int_equal(a.send, GMT_TSHARE_SEND_NONE); /* 1 still runs */
  gmt_tshare_release(&f->d, &f->in, 1, 0, 0, &a); /* 1 exits too */
  assert_int_equal(a.send, GMT_TSHARE_SEND_REQUEST);
  assert_int_equal(a.pid, 3);
  uint64_t seq = sent(f, &a, GMT_TSHARE_SEND_REQUEST);
  a = answer(f, seq, 0, 100);
  assert_int_equal(count(a.granted), 1);
  assert_true(has(a.granted, 3));
  free_list(a.granted);
}

/* A sharer that neither comes back nor lets go is waited for until the
 * drain timer, quota + GMT_TOKEN_DRAIN_MAX_MS, and no longer. */
static void test_a_stalled_sharer_is_waited_for_at_most_the_drain_bound(void **state)
{
  fx_t *f = *state;
  granted_to(f, 1, 2);
  later(f, 100);
  assert_int_equal(ask(f, 2, 0, 0).send, GMT_TSHARE_SEND_NONE);
  later(f, GMT_TOKEN_DRAIN_MAX_MS);
  gmt_tshare_act_t a;
  gmt_tshare_drained(&f->d, &f->in, &a);
  assert_int_equal(a.dropped, 1);
  assert_int_equal(a.send, GMT_TSHARE_SEND_REQUEST);
  assert_int_equal(a.pid, 2);
  uint64_t seq = sent(f, &a, GMT_TSHARE_SEND_REQUEST);

  /* With no one waiting, the grant goes back. */
  a = answer(f, seq, 0, 100);
  free_list(a.granted);
  later(f, 100 + GMT_TOKEN_DRAIN_MAX_MS);
  gmt_tshare_drained(&f->d, &f->in, &a);
  assert_int_equal(a.dropped, 1);
  assert_int_equal(a.send, GMT_TSHARE_SEND_RELEASE);
  /* A drain timer after the sharers let go changes nothing. */
  sent(f, &a, GMT_TSHARE_SEND_RELEASE);
  gmt_tshare_drained(&f->d, &f->in, &a);
  assert_int_equal(a.dropped, 0);
  assert_int_equal(a.send, GMT_TSHARE_SEND_NONE);
}

/* The scheduler down: local grants of the base quota, each followed by a
 * pause that keeps the pod within its LIMIT; it is said once. */
static void test_an_outage_grants_locally_within_the_limit(void **state)
{
  fx_t *f = *state;
  f->in.schd_down = true;
  gmt_tshare_act_t a = ask(f, 1, 0, 0);
  assert_int_equal(a.outage, GMT_TSHARE_OUTAGE_DOWN);
  assert_int_equal(a.send, GMT_TSHARE_SEND_NONE);
  assert_int_equal(count(a.granted), 1);
  assert_true(a.quota_ms == GMT_TOKEN_BASE_QUOTA_MS);
  assert_int_equal(a.drain, GMT_TSHARE_TIMER_KEEP); /* nothing owed upstream */
  free_list(a.granted);

  /* LIMIT 0.5: 250 ms on, 250 ms off. */
  later(f, 250);
  a = ask(f, 1, 0, 0);
  assert_int_equal(a.outage, 0);
  assert_null(a.granted);
  assert_int_equal(a.hold, GMT_TSHARE_TIMER_START);
  assert_int_equal(a.hold_ms, 250);
  a = ask(f, 2, 0, 0);
  assert_int_equal(a.hold, GMT_TSHARE_TIMER_KEEP); /* one timer */
  later(f, 250);
  gmt_tshare_held(&f->d, &f->in, &a);
  assert_int_equal(count(a.granted), 2);
  free_list(a.granted);

  /* A local grant owes nothing: letting go sends nothing. */
  a = give_back(f, 1, 0, 0);
  assert_int_equal(a.send, GMT_TSHARE_SEND_NONE);

  /* LIMIT 0.2: 1000 ms off after 250 on. */
  f->in.limit = 0.2;
  later(f, 500);
  a = ask(f, 3, 0, 0);
  assert_int_equal(count(a.granted), 1);
  free_list(a.granted);
  later(f, 250);
  a = ask(f, 3, 0, 0);
  assert_int_equal(a.hold_ms, 1000);

  /* Back: the next request goes upstream, and its grant ends the outage. */
  f->in.schd_down = false;
  later(f, 1000);
  gmt_tshare_held(&f->d, &f->in, &a);
  uint64_t seq = sent(f, &a, GMT_TSHARE_SEND_REQUEST);
  a = answer(f, seq, 0, 100);
  assert_int_equal(a.again, GMT_TSHARE_AGAIN);
  assert_int_equal(count(a.granted), 1);
  assert_true(has(a.granted, 3));
  free_list(a.granted);
}

/* What the pod may not have, an outage does not give it. */
static void test_an_outage_refuses_what_the_pod_may_not_have(void **state)
{
  fx_t *f = *state;
  f->in.schd_down = true;
  f->in.limit = 0;
  gmt_tshare_act_t a = ask(f, 1, 0, 0);
  assert_int_equal(count(a.refused), 1);
  assert_int_equal(a.refuse_rc, -EPERM);
  assert_int_equal(a.refusal, GMT_TSHARE_REFUSED_LIMIT);
  free_list(a.refused);
  f->in.limit = 1;
  f->in.unlisted = true;
  a = ask(f, 1, 0, 0);
  assert_int_equal(a.refuse_rc, GMT_ENOPOD);
  assert_int_equal(a.refusal, GMT_TSHARE_REFUSED_UNLISTED);
  free_list(a.refused);
  f->in.allowed = false;
  a = ask(f, 1, 0, 0);
  assert_int_equal(a.refuse_rc, GMT_EDEVICE);
  assert_int_equal(a.refusal, GMT_TSHARE_REFUSED_DEVICE);
  free_list(a.refused);
}

/* A call that fails, times out or grants nothing: the waiters get a local
 * grant at once, not a wait on a dead scheduler. */
static void test_a_failed_call_ends_in_a_local_grant(void **state)
{
  fx_t *f = *state;
  gmt_tshare_act_t a = ask(f, 1, 0, 0), b;
  gmt_tshare_send_failed(&f->d, &f->in, &a, &b);
  assert_int_equal(b.outage, GMT_TSHARE_OUTAGE_FAILED);
  assert_int_equal(count(b.granted), 1);
  free_list(b.granted);
  assert_false(gmt_tshare_in_flight(&f->d));

  f->pod.outage = false;
  later(f, 500);
  a = ask(f, 1, 0, 0);
  uint64_t seq = sent(f, &a, GMT_TSHARE_SEND_REQUEST);
  a = answer(f, seq, -ETIMEDOUT, 0);
  assert_int_equal(a.outage, GMT_TSHARE_OUTAGE_FAILED);
  assert_int_equal(count(a.granted), 1);
  free_list(a.granted);

  f->pod.outage = false;
  later(f, 500);
  a = ask(f, 1, 0, 0);
  seq = sent(f, &a, GMT_TSHARE_SEND_REQUEST);
  a = answer(f, seq, 0, 0); /* a grant of 0 ms */
  assert_int_equal(a.outage, GMT_TSHARE_OUTAGE_FAILED);
  assert_int_equal(count(a.granted), 1);
  free_list(a.granted);
}

/* The heartbeat finds the scheduler down while a request waits: a local
 * grant; its late answer is handed back, not used twice. */
static void test_a_scheduler_lost_mid_request_frees_the_waiters(void **state)
{
  fx_t *f = *state;
  gmt_tshare_act_t a = ask(f, 1, 0, 0);
  uint64_t seq = sent(f, &a, GMT_TSHARE_SEND_REQUEST);
  assert_true(gmt_tshare_in_flight(&f->d));
  f->in.schd_down = true;
  gmt_tshare_lost(&f->d, &f->in, &a);
  assert_int_equal(a.outage, GMT_TSHARE_OUTAGE_STOPPED);
  assert_int_equal(count(a.granted), 1);
  free_list(a.granted);
  assert_false(gmt_tshare_in_flight(&f->d));

  /* The pod holds a local grant and nobody waits: the late grant is the
   * scheduler's to have back. */
  f->in.schd_down = false;
  later(f, 10);
  a = answer(f, seq, 0, 100);
  assert_int_equal(a.again, GMT_TSHARE_AGAIN_LATE);
  assert_false(f->pod.outage);
  assert_null(a.granted);
  assert_int_equal(a.send, GMT_TSHARE_SEND_NONE); /* 1 still holds a share */
  a = give_back(f, 1, 0, 0);
  assert_int_equal(a.send, GMT_TSHARE_SEND_RELEASE);
  /* A late failure changes nothing. */
  a = answer(f, seq, -ETIMEDOUT, 0);
  assert_int_equal(a.outage, 0);
  assert_int_equal(a.send, GMT_TSHARE_SEND_NONE);
}

/* ESRCH (the scheduler does not list the pod's processes yet) is asked
 * again every GMT_TSHARE_ESRCH_RETRY_MS for GMT_TSHARE_ESRCH_FOR_NS, then
 * counts as an outage. */
static void test_esrch_is_asked_again_for_a_bounded_time(void **state)
{
  fx_t *f = *state;
  gmt_tshare_act_t a = ask(f, 1, 0, 0);
  uint64_t seq = sent(f, &a, GMT_TSHARE_SEND_REQUEST);
  a = answer(f, seq, -ESRCH, 0);
  assert_true(a.esrch_retry);
  assert_int_equal(a.hold, GMT_TSHARE_TIMER_START);
  assert_int_equal(a.hold_ms, GMT_TSHARE_ESRCH_RETRY_MS);
  assert_null(a.granted);
  assert_int_equal(a.outage, 0);
  /* Nothing else goes up before the timer. */
  assert_int_equal(ask(f, 2, 0, 0).send, GMT_TSHARE_SEND_NONE);
  later(f, GMT_TSHARE_ESRCH_RETRY_MS);
  gmt_tshare_held(&f->d, &f->in, &a);
  seq = sent(f, &a, GMT_TSHARE_SEND_REQUEST);
  f->in.now_ns += GMT_TSHARE_ESRCH_FOR_NS - GMT_TSHARE_ESRCH_RETRY_MS * MS - 1;
  a = answer(f, seq, -ESRCH, 0);
  assert_true(a.esrch_retry);
  gmt_tshare_held(&f->d, &f->in, &a);
  seq = sent(f, &a, GMT_TSHARE_SEND_REQUEST);
  f->in.now_ns += 1;
  a = answer(f, seq, -ESRCH, 0);
  assert_false(a.esrch_retry);
  assert_int_equal(a.outage, GMT_TSHARE_OUTAGE_FAILED);
  assert_int_equal(count(a.granted), 2);
  free_list(a.granted);
}

/* The scheduler's no (a pod it does not list, LIMIT 0, a device not
 * allowed) goes to every waiter, and is no outage. */
static void test_a_refusal_answers_every_waiter_and_is_no_outage(void **state)
{
  fx_t *f = *state;
  gmt_tshare_act_t a = ask(f, 1, 0, 0);
  uint64_t seq = sent(f, &a, GMT_TSHARE_SEND_REQUEST);
  ask(f, 2, 0, 0);
  a = answer(f, seq, -EPERM, 0);
  assert_int_equal(count(a.refused), 2);
  assert_int_equal(a.refuse_rc, -EPERM);
  assert_int_equal(a.refusal, GMT_TSHARE_REFUSED_BY_SCHD);
  assert_int_equal(a.outage, 0);
  assert_null(a.granted);
  free_list(a.refused);
  assert_false(f->pod.outage);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_waiting_processes_are_granted_together_and_a_latecomer_shares_the_rest),
      T(test_processes_alternate_the_next_request_waits_for_every_sharer),
      T(test_an_idle_holder_releases_the_grant_with_its_idle_time),
      T(test_a_grant_cut_short_is_not_shared_any_more),
      T(test_a_local_grant_is_not_watchable),
      T(test_an_exited_processes_share_and_waits_are_dropped),
      T(test_a_stalled_sharer_is_waited_for_at_most_the_drain_bound),
      T(test_an_outage_grants_locally_within_the_limit),
      T(test_an_outage_refuses_what_the_pod_may_not_have),
      T(test_a_failed_call_ends_in_a_local_grant),
      T(test_a_scheduler_lost_mid_request_frees_the_waiters),
      T(test_esrch_is_asked_again_for_a_bounded_time),
      T(test_a_refusal_answers_every_waiter_and_is_no_outage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
