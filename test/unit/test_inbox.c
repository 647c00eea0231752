/* The inbox (proto/inbox.c): items pushed from other threads run on the
 * loop in order, and closing is a gate that refuses new items and hands
 * the queued ones back, so that every item is dealt with exactly once. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "gmt_error.h"
#include "gmt_inbox.h"

typedef struct {
  gmt_inbox_item_t item; /* first: the callback finds the rest from it */
  int seq;
  int status; /* as its callback got it; 1: not called */
  int calls;
  uv_thread_t thread;
} job_t;

typedef struct {
  gmt_inbox_t inbox;
  uv_loop_t loop;
  int ran[64]; /* seq of each item run with status 0, in order */
  int nran;
} fixture_t;

static void on_job(gmt_inbox_item_t *item, int status)
{
  job_t *j = (job_t *)item;
  fixture_t *f = item->data;
  j->status = status;
  j->calls++;
  j->thread = uv_thread_self();
  if (status == 0 && f->nran < 64)
    f->ran[f->nran++] = j->seq;
}

static void push(fixture_t *f, job_t *j, int seq)
{
  *j = (job_t){.seq = seq, .status = 1};
  j->item.data = f;
  assert_int_equal(gmt_inbox_push(&f->inbox, &j->item, on_job), 0);
}

static void pusher(void *arg)
{
  job_t *jobs = arg;
  fixture_t *f = jobs[0].item.data;
  for (int i = 0; i < 8; i++)
    push(f, &jobs[i], i);
}

static void test_items_from_another_thread_run_on_the_loop_in_order(void **state)
{
  (void)state;
  fixture_t f = {0};
  job_t jobs[8];
  uv_thread_t t;
  assert_int_equal(uv_loop_init(&f.loop), 0);
  assert_int_equal(gmt_inbox_init(&f.inbox, &f.loop), 0);
  jobs[0].item.data = &f;
  assert_int_equal(uv_thread_create(&t, pusher, jobs), 0);
  assert_int_equal(uv_thread_join(&t), 0);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  uv_thread_t self = uv_thread_self();
  assert_int_equal(f.nran, 8);
  for (int i = 0; i < 8; i++) {
    assert_int_equal(f.ran[i], i);
    assert_int_equal(jobs[i].calls, 1);
    assert_true(uv_thread_equal(&jobs[i].thread, &self));
  }
  gmt_inbox_close(&f.inbox);
  uv_run(&f.loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&f.loop), 0);
}

static void test_close_hands_back_what_is_queued_and_refuses_more(void **state)
{
  (void)state;
  fixture_t f = {0};
  job_t a, b, late;
  assert_int_equal(uv_loop_init(&f.loop), 0);
  assert_int_equal(gmt_inbox_init(&f.inbox, &f.loop), 0);
  push(&f, &a, 1);
  push(&f, &b, 2);
  gmt_inbox_close(&f.inbox); /* before the loop ran them */
  assert_int_equal(a.calls, 1);
  assert_int_equal(a.status, -ESHUTDOWN);
  assert_int_equal(b.calls, 1);
  assert_int_equal(b.status, -ESHUTDOWN);
  late = (job_t){.status = 1};
  late.item.data = &f;
  assert_int_equal(gmt_inbox_push(&f.inbox, &late.item, on_job), -ESHUTDOWN);
  gmt_inbox_close(&f.inbox); /* twice: no-op */
  uv_run(&f.loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&f.loop), 0);
  assert_int_equal(late.calls, 0);
  assert_int_equal(f.nran, 0);
}

static void on_job_then_close(gmt_inbox_item_t *item, int status)
{
  fixture_t *f = item->data;
  on_job(item, status);
  gmt_inbox_close(&f->inbox);
}

static void test_items_after_a_close_in_a_callback_are_handed_back(void **state)
{
  (void)state;
  fixture_t f = {0};
  job_t a, b;
  assert_int_equal(uv_loop_init(&f.loop), 0);
  assert_int_equal(gmt_inbox_init(&f.inbox, &f.loop), 0);
  a = (job_t){.seq = 1, .status = 1};
  a.item.data = &f;
  assert_int_equal(gmt_inbox_push(&f.inbox, &a.item, on_job_then_close), 0);
  push(&f, &b, 2);
  uv_run(&f.loop, UV_RUN_DEFAULT);
  assert_int_equal(a.status, 0);
  assert_int_equal(b.calls, 1);
  assert_int_equal(b.status, -ESHUTDOWN);
  assert_int_equal(uv_loop_close(&f.loop), 0);
}

/* ---- many threads racing a close ---- */

#define PRODUCERS 4
#define PER_PRODUCER 2000

typedef struct {
  fixture_t *f;
  job_t *jobs;
  int refused;
} producer_t;

/* Closes the inbox from the loop once a quarter of the items have run,
 * while the producers are still pushing. */
static void on_counted(gmt_inbox_item_t *item, int status)
{
  job_t *j = (job_t *)item;
  fixture_t *f = item->data;
  j->status = status;
  j->calls++;
  if (status == 0 && ++f->nran == PRODUCERS * PER_PRODUCER / 4)
    gmt_inbox_close(&f->inbox);
}

static void produce(void *arg)
{
  producer_t *p = arg;
  for (int i = 0; i < PER_PRODUCER; i++) {
    p->jobs[i] = (job_t){.seq = i, .status = 1};
    p->jobs[i].item.data = p->f;
    if (gmt_inbox_push(&p->f->inbox, &p->jobs[i].item, on_counted) < 0)
      p->refused++;
  }
}

static void test_every_item_is_run_handed_back_or_refused_once(void **state)
{
  (void)state;
  fixture_t f = {0};
  producer_t p[PRODUCERS];
  uv_thread_t t[PRODUCERS];
  assert_int_equal(uv_loop_init(&f.loop), 0);
  assert_int_equal(gmt_inbox_init(&f.inbox, &f.loop), 0);
  for (int i = 0; i < PRODUCERS; i++) {
    p[i] = (producer_t){.f = &f, .jobs = calloc(PER_PRODUCER, sizeof(job_t))};
    assert_non_null(p[i].jobs);
    assert_int_equal(uv_thread_create(&t[i], produce, &p[i]), 0);
  }
  uv_run(&f.loop, UV_RUN_DEFAULT);
  int run = 0, back = 0, refused = 0;
  for (int i = 0; i < PRODUCERS; i++) {
    assert_int_equal(uv_thread_join(&t[i]), 0);
    refused += p[i].refused;
    for (int k = 0; k < PER_PRODUCER; k++) {
      job_t *j = &p[i].jobs[k];
      if (j->calls == 0)
        continue;
      assert_int_equal(j->calls, 1);
      if (j->status == 0)
        run++;
      else if (j->status == -ESHUTDOWN)
        back++;
      else
        fail_msg("status %d", j->status);
    }
    free(p[i].jobs);
  }
  assert_int_equal(run, PRODUCERS * PER_PRODUCER / 4);
  assert_int_equal(run + back + refused, PRODUCERS * PER_PRODUCER);
  assert_int_equal(uv_loop_close(&f.loop), 0);
}

/* ---- requests: a real server's calls through the inbox ---- */

typedef struct {
  gmt_inbox_t inbox;
  uv_loop_t loop;
  int answered; /* calls the loop answered */
} call_fixture_t;

static void on_call(void *data, gmt_call_t *call, int status)
{
  call_fixture_t *f = data;
  assert_int_equal(status, 0);
  Gmt__MemInfoReply mi = GMT__MEM_INFO_REPLY__INIT;
  mi.memory_used = 42;
  assert_int_equal(gmt_call_reply_body(call, GMT__ENVELOPE__BODY_MEMINFO_REP, &mi), 0);
  f->answered++;
}

static void on_server_call(void *arg, gmt_call_t *call, const Gmt__Envelope *req)
{
  (void)req;
  call_fixture_t *f = arg;
  gmt_inbox_push_call(&f->inbox, call, on_call, f, "tester");
}

typedef struct {
  int done, rc;
  Gmt__Envelope *rep;
} async_t;

static void on_reply(void *arg, int rc, Gmt__Envelope *rep)
{
  async_t *a = arg;
  a->rc = rc;
  a->rep = rep;
  __atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
}

static void test_a_call_runs_on_the_loop_and_is_refused_with_why_once_closed(void **state)
{
  (void)state;
  call_fixture_t f = {0};
  char dir[] = "/tmp/gmt-test-inbox-XXXXXX", url[96];
  assert_non_null(mkdtemp(dir));
  snprintf(url, sizeof url, "ipc://%s/s.sock", dir);
  assert_int_equal(uv_loop_init(&f.loop), 0);
  assert_int_equal(gmt_inbox_init(&f.inbox, &f.loop), 0);
  gmt_server_t *srv;
  assert_int_equal(gmt_server_new(&srv, 4, on_server_call, &f), 0);
  assert_int_equal(gmt_server_listen(srv, url), 0);
  assert_int_equal(gmt_server_start(srv), 0);
  gmt_client_t *c;
  assert_int_equal(gmt_client_open(&c, url, GMT_CLIENT_DIAL_NOW), 0);

  Gmt__MemInfoRequest mr = GMT__MEM_INFO_REQUEST__INIT;
  Gmt__Envelope req = GMT__ENVELOPE__INIT;
  assert_int_equal(gmt_wire_set_body(&req, GMT__ENVELOPE__BODY_MEMINFO_REQ, &mr), 0);

  /* Open: answered by the loop, on this thread. */
  async_t a = {0};
  assert_int_equal(gmt_client_call_async(c, &req, 3000, on_reply, &a), 0);
  for (int i = 0; i < 3000 && !__atomic_load_n(&a.done, __ATOMIC_ACQUIRE); i++) {
    uv_run(&f.loop, UV_RUN_NOWAIT);
    usleep(1000);
  }
  assert_true(a.done);
  assert_int_equal(a.rc, 0);
  assert_int_equal(f.answered, 1);
  assert_int_equal(gmt_wire_expect(a.rep, GMT__ENVELOPE__BODY_MEMINFO_REP, NULL, 0), 0);
  assert_int_equal(a.rep->meminfo_rep->memory_used, 42);
  gmt_wire_free(a.rep);

  /* Closed: answered at once, saying who is stopping; the loop sees none. */
  gmt_inbox_close(&f.inbox);
  Gmt__Envelope *rep = NULL;
  char err[128] = "";
  assert_int_equal(gmt_client_call(c, &req, &rep, 3000), 0);
  assert_int_equal(gmt_wire_expect(rep, GMT__ENVELOPE__BODY_MEMINFO_REP, err, sizeof err),
                   -ESHUTDOWN);
  assert_non_null(strstr(err, "tester is stopping"));
  gmt_wire_free(rep);
  assert_int_equal(f.answered, 1);

  gmt_client_close(c);
  gmt_server_free(srv);
  uv_run(&f.loop, UV_RUN_DEFAULT); /* the inbox's handle closes */
  assert_int_equal(uv_loop_close(&f.loop), 0);
  rmdir(dir);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_items_from_another_thread_run_on_the_loop_in_order),
      cmocka_unit_test(test_close_hands_back_what_is_queued_and_refuses_more),
      cmocka_unit_test(test_items_after_a_close_in_a_callback_are_handed_back),
      cmocka_unit_test(test_every_item_is_run_handed_back_or_refused_once),
      cmocka_unit_test(test_a_call_runs_on_the_loop_and_is_refused_with_why_once_closed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
