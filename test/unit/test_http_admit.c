/* Which connection to gmt-schd's metrics port gives way when one more
 * comes (server/http_admit.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "http_admit.h"

#define ROOT 0
#define NOBODY 65534
#define ALICE 1000

static gmt_http_conn_t idle(int64_t uid)
{
  return (gmt_http_conn_t){.uid = uid, .limited = uid != ROOT};
}

static gmt_http_conn_t busy(int64_t uid)
{
  return (gmt_http_conn_t){.uid = uid, .limited = uid != ROOT, .busy = true};
}

static void test_http_admit_keeps_everyone_while_there_is_room(void **state)
{
  (void)state;
  gmt_http_conn_t c[] = {idle(ALICE), idle(NOBODY), idle(NOBODY), idle(ROOT)};
  assert_int_equal(gmt_http_admit(c, 4, 4, 2), -1);
  assert_int_equal(gmt_http_admit(c, 0, 4, 2), -1);
}

static void test_http_admit_user_past_its_cap_loses_its_own_oldest_idle_one(void **state)
{
  (void)state;
  /* Alice's first is busy, so her second goes; Bob's older one stays. */
  gmt_http_conn_t c[] = {busy(ALICE), idle(NOBODY), idle(ALICE), idle(ALICE), idle(ALICE)};
  assert_int_equal(gmt_http_admit(c, 5, 64, 3), 2);
}

static void test_http_admit_user_whose_others_are_busy_loses_the_newest(void **state)
{
  (void)state;
  gmt_http_conn_t c[] = {idle(NOBODY), busy(ALICE), busy(ALICE), idle(ALICE)};
  assert_int_equal(gmt_http_admit(c, 4, 64, 2), 3);
}

static void test_http_admit_root_and_the_daemons_user_are_not_capped(void **state)
{
  (void)state;
  gmt_http_conn_t c[10];
  for (int i = 0; i < 10; i++)
    c[i] = (gmt_http_conn_t){.uid = i % 2 ? ROOT : 123, .limited = false};
  assert_int_equal(gmt_http_admit(c, 10, 64, 2), -1);
}

static void test_http_admit_unknown_owners_share_one_cap(void **state)
{
  (void)state;
  gmt_http_conn_t c[] = {idle(-1), idle(ALICE), idle(-1), idle(-1)};
  assert_int_equal(gmt_http_admit(c, 4, 64, 2), 0);
}

static void test_http_admit_full_port_takes_from_whoever_holds_most(void **state)
{
  (void)state;
  /* Root holds three, Bob two: root's oldest idle one goes, not Alice's
   * older one. */
  gmt_http_conn_t c[] = {idle(ALICE), busy(ROOT),   idle(NOBODY),
                         idle(ROOT),  idle(NOBODY), idle(ROOT)};
  assert_int_equal(gmt_http_admit(c, 6, 5, 8), 3);
  /* A tie: the oldest of the tied. */
  gmt_http_conn_t t[] = {idle(ALICE), idle(NOBODY), idle(NOBODY), idle(ALICE), idle(ROOT)};
  assert_int_equal(gmt_http_admit(t, 5, 4, 8), 0);
}

static void test_http_admit_full_port_never_cuts_an_answer(void **state)
{
  (void)state;
  gmt_http_conn_t c[] = {busy(NOBODY), busy(NOBODY), busy(ALICE), idle(ALICE)};
  assert_int_equal(gmt_http_admit(c, 4, 3, 8), 3);
}

/* A user reconnecting in a loop, never sending a request, beside another
 * user's scrapes and root's: after each of its connections the decision
 * is applied, and nobody else's connection ever gives way. */
static void test_http_admit_one_users_flood_never_pushes_out_another_users_scrape(void **state)
{
  (void)state;
  enum { MAX = 64, PER_USER = 8 };
  gmt_http_conn_t c[MAX + 1];
  size_t n = 0;
  c[n++] = idle(ALICE); /* connected, its request not read yet */
  c[n++] = busy(ALICE); /* being answered */
  c[n++] = idle(ROOT);
  for (int i = 0; i < 10000; i++) {
    c[n++] = idle(NOBODY);
    int gone = gmt_http_admit(c, n, MAX, PER_USER);
    if (gone < 0)
      continue;
    assert_int_equal(c[gone].uid, NOBODY);
    memmove(&c[gone], &c[gone + 1], (n - (size_t)gone - 1) * sizeof c[0]);
    n--;
  }
  assert_int_equal(n, 3 + PER_USER);
  assert_int_equal(c[0].uid, ALICE);
  assert_int_equal(c[1].uid, ALICE);
  assert_int_equal(c[2].uid, ROOT);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_http_admit_keeps_everyone_while_there_is_room),
      cmocka_unit_test(test_http_admit_user_past_its_cap_loses_its_own_oldest_idle_one),
      cmocka_unit_test(test_http_admit_user_whose_others_are_busy_loses_the_newest),
      cmocka_unit_test(test_http_admit_root_and_the_daemons_user_are_not_capped),
      cmocka_unit_test(test_http_admit_unknown_owners_share_one_cap),
      cmocka_unit_test(test_http_admit_full_port_takes_from_whoever_holds_most),
      cmocka_unit_test(test_http_admit_full_port_never_cuts_an_answer),
      cmocka_unit_test(test_http_admit_one_users_flood_never_pushes_out_another_users_scrape),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
