/* The table of envelope bodies (proto/rpc_kinds.c): every body of the
 * envelope has its row, each request names its reply, the views and the
 * pod manager's routes are the expected ones, and the fields that name
 * the caller are found (and replaced) in real messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmt_rpc_kinds.h"
#include "gmt_wire.h"

#define C(x) GMT__ENVELOPE__BODY_##x

static bool is_in(Gmt__Envelope__BodyCase c, const Gmt__Envelope__BodyCase *set, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (set[i] == c)
      return true;
  return false;
}

static void test_every_body_of_the_envelope_has_a_row_and_nothing_else(void **state)
{
  (void)state;
  const ProtobufCFieldDescriptor *body = NULL;
  size_t bodies = 0;
  for (unsigned i = 0; i < gmt__envelope__descriptor.n_fields; i++) {
    body = &gmt__envelope__descriptor.fields[i];
    if (!(body->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
      continue;
    bodies++;
    const gmt_rpc_kind_t *k = gmt_rpc_kind((Gmt__Envelope__BodyCase)body->id);
    assert_non_null(k);
    assert_int_equal(gmt_rpc_case(k), body->id);
  }
  assert_int_equal(bodies, 29);
  size_t rows = 0;
  for (unsigned c = 0; c < 200; c++)
    if (gmt_rpc_kind((Gmt__Envelope__BodyCase)c)) {
      assert_non_null(protobuf_c_message_descriptor_get_field(&gmt__envelope__descriptor, c));
      rows++;
    }
  assert_int_equal(rows, bodies);
  assert_null(gmt_rpc_kind(C(_NOT_SET)));
  assert_null(gmt_rpc_kind((Gmt__Envelope__BodyCase)1000));
}

static void test_each_request_names_its_reply_and_replies_name_none(void **state)
{
  (void)state;
  static const struct {
    Gmt__Envelope__BodyCase req, rep;
    const char *name;
  } rpcs[] = {
      {C(REGISTER_REQ), C(REGISTER_REP), "Register"},
      {C(HEARTBEAT_REQ), C(HEARTBEAT_REP), "Heartbeat"},
      {C(REPORT_REQ), C(REPORT_REP), "Report"},
      {C(TOKEN_REQ), C(TOKEN_REP), "Token"},
      {C(RESERVE_REQ), C(RESERVE_REP), "Reserve"},
      {C(RELEASE_REQ), C(RELEASE_REP), "Release"},
      {C(MEMINFO_REQ), C(MEMINFO_REP), "MemInfo"},
      {C(STATUS_REQ), C(STATUS_REP), "Status"},
      {C(TRACE_SPOTS_REQ), C(TRACE_SPOTS_REP), "TraceSpots"},
      {C(ADVISE_REQ), C(ADVISE_REP), "Advise"},
      {C(RESIDENT_REQ), C(RESIDENT_REP), "Resident"},
      {C(DEVICES_REQ), C(DEVICES_REP), "Devices"},
      {C(PICK_REQ), C(PICK_REP), "Pick"},
  };
  for (size_t i = 0; i < sizeof rpcs / sizeof rpcs[0]; i++) {
    const gmt_rpc_kind_t *q = gmt_rpc_kind(rpcs[i].req), *r = gmt_rpc_kind(rpcs[i].rep);
    assert_string_equal(q->name, rpcs[i].name);
    assert_int_equal(q->reply, rpcs[i].rep);
    char want[64];
    snprintf(want, sizeof want, "%sReply", rpcs[i].name);
    assert_string_equal(r->name, want);
    assert_int_equal(r->reply, C(_NOT_SET));
    assert_false(r->view);
    assert_int_equal(r->pmgr, GMT_RPC_PMGR_NONE);
    /* The reply's message is the one its service returns. */
    const ProtobufCFieldDescriptor *fq =
        protobuf_c_message_descriptor_get_field(&gmt__envelope__descriptor, rpcs[i].req);
    const ProtobufCFieldDescriptor *fr =
        protobuf_c_message_descriptor_get_field(&gmt__envelope__descriptor, rpcs[i].rep);
    const ProtobufCMessageDescriptor *mq = fq->descriptor, *mr = fr->descriptor;
    size_t nq = strlen(mq->short_name) - strlen("Request");
    assert_string_equal(mq->short_name + nq, "Request");
    assert_memory_equal(mr->short_name, mq->short_name, nq);
    assert_string_equal(mr->short_name + nq, "Reply");
  }
  assert_string_equal(gmt_rpc_kind(C(ERROR))->name, "Error");
  assert_int_equal(gmt_rpc_kind(C(ERROR))->reply, C(_NOT_SET));
}

static void test_views_are_exactly_status_devices_and_pick(void **state)
{
  (void)state;
  static const Gmt__Envelope__BodyCase views[] = {C(STATUS_REQ), C(DEVICES_REQ), C(PICK_REQ)};
  for (unsigned c = 0; c < 64; c++) {
    const gmt_rpc_kind_t *k = gmt_rpc_kind((Gmt__Envelope__BodyCase)c);
    if (k)
      assert_int_equal(k->view, is_in((Gmt__Envelope__BodyCase)c, views, 3));
  }
}

static void test_pod_manager_routes_and_outage_answers(void **state)
{
  (void)state;
  static const struct {
    Gmt__Envelope__BodyCase c;
    gmt_rpc_pmgr_t pmgr;
    gmt_rpc_outage_t outage;
    int wait_ms;
  } served[] = {
      {C(REGISTER_REQ), GMT_RPC_PMGR_OWN, GMT_RPC_OUTAGE_NONE, 0},
      {C(REPORT_REQ), GMT_RPC_PMGR_OWN, GMT_RPC_OUTAGE_NONE, 0},
      {C(TOKEN_REQ), GMT_RPC_PMGR_SHARE, GMT_RPC_OUTAGE_GRANT, 0},
      {C(TOKEN_WATCH_REQ), GMT_RPC_PMGR_SHARE, GMT_RPC_OUTAGE_NONE, 0},
      {C(RESERVE_REQ), GMT_RPC_PMGR_FORWARD, GMT_RPC_OUTAGE_COUNT, 800},
      {C(RELEASE_REQ), GMT_RPC_PMGR_FORWARD, GMT_RPC_OUTAGE_COUNT, 800},
      {C(MEMINFO_REQ), GMT_RPC_PMGR_FORWARD, GMT_RPC_OUTAGE_COUNT, 800},
      {C(ADVISE_REQ), GMT_RPC_PMGR_FORWARD, GMT_RPC_OUTAGE_REFUSE, 400},
      {C(RESIDENT_REQ), GMT_RPC_PMGR_FORWARD, GMT_RPC_OUTAGE_GRANT, 400},
      {C(DEVICES_REQ), GMT_RPC_PMGR_FORWARD, GMT_RPC_OUTAGE_UNKNOWN, 800},
      {C(PICK_REQ), GMT_RPC_PMGR_FORWARD, GMT_RPC_OUTAGE_REFUSE, 4000},
  };
  size_t n = sizeof served / sizeof served[0];
  for (size_t i = 0; i < n; i++) {
    const gmt_rpc_kind_t *k = gmt_rpc_kind(served[i].c);
    assert_int_equal(k->pmgr, served[i].pmgr);
    assert_int_equal(k->outage, served[i].outage);
    assert_int_equal(k->pmgr_wait_ms, served[i].wait_ms);
    /* A forwarded call is stamped with the pod's name. */
    if (k->pmgr == GMT_RPC_PMGR_FORWARD)
      assert_string_equal(k->pod, "pod");
  }
  /* Every other kind is refused by a pod manager. */
  for (unsigned c = 0; c < 64; c++) {
    const gmt_rpc_kind_t *k = gmt_rpc_kind((Gmt__Envelope__BodyCase)c);
    bool found = false;
    for (size_t i = 0; i < n; i++)
      found |= served[i].c == (Gmt__Envelope__BodyCase)c;
    if (k && !found) {
      assert_int_equal(k->pmgr, GMT_RPC_PMGR_NONE);
      assert_int_equal(k->outage, GMT_RPC_OUTAGE_NONE);
    }
  }
}

/* An envelope of case c with an empty body of its message. */
static Gmt__Envelope *envelope_of(Gmt__Envelope__BodyCase c)
{
  const ProtobufCFieldDescriptor *f =
      protobuf_c_message_descriptor_get_field(&gmt__envelope__descriptor, c);
  const ProtobufCMessageDescriptor *d = f->descriptor;
  ProtobufCMessage *m = malloc(d->sizeof_message);
  assert_non_null(m);
  d->message_init(m);
  Gmt__Envelope *env = calloc(1, sizeof *env);
  assert_non_null(env);
  gmt__envelope__init(env);
  assert_int_equal(gmt_wire_set_body(env, c, m), 0);
  return env;
}

static void envelope_free(Gmt__Envelope *env)
{
  free(env->error); /* the body, whichever: one union */
  free(env);
}

static void test_caller_fields_are_found_in_every_kind_that_names_them(void **state)
{
  (void)state;
  /* The pods a request speaks for (gmt-schd: the pod manager that named it
   * first), and the pids a pod manager replaces with the caller's. */
  static const Gmt__Envelope__BodyCase pods[] = {C(REGISTER_REQ), C(HEARTBEAT_REQ),  C(TOKEN_REQ),
                                                 C(RESERVE_REQ),  C(RELEASE_REQ),    C(MEMINFO_REQ),
                                                 C(ADVISE_REQ),   C(RESIDENT_REQ),   C(DEVICES_REQ),
                                                 C(PICK_REQ),     C(TOKEN_WATCH_REQ)};
  static const Gmt__Envelope__BodyCase pids[] = {
      C(REGISTER_REQ), C(REPORT_REQ),   C(TOKEN_REQ),   C(RESERVE_REQ),    C(RELEASE_REQ),
      C(ADVISE_REQ),   C(RESIDENT_REQ), C(DEVICES_REQ), C(TOKEN_WATCH_REQ)};
  for (unsigned c = 0; c < 64; c++) {
    const gmt_rpc_kind_t *k = gmt_rpc_kind((Gmt__Envelope__BodyCase)c);
    if (!k)
      continue;
    Gmt__Envelope *env = envelope_of((Gmt__Envelope__BodyCase)c);
    bool pod = is_in((Gmt__Envelope__BodyCase)c, pods, sizeof pods / sizeof pods[0]);
    bool pid = is_in((Gmt__Envelope__BodyCase)c, pids, sizeof pids / sizeof pids[0]);
    assert_int_equal(k->pod != NULL, pod);
    if (c == C(REPORT_REQ)) {
      /* Its pid is in its process, which an empty report lacks. */
      Gmt__ProcessReport pr = GMT__PROCESS_REPORT__INIT;
      assert_null(gmt_rpc_pid(env));
      env->report_req->process = &pr;
      uint32_t *at = gmt_rpc_pid(env);
      assert_ptr_equal(at, &pr.pid);
    } else if (pid) {
      uint32_t *at = gmt_rpc_pid(env);
      assert_non_null(at);
      *at = 4242;
    } else {
      assert_null(gmt_rpc_pid(env));
    }
    if (pod) {
      char **at = gmt_rpc_pod(env);
      assert_non_null(at);
      assert_string_equal(*at, "");
    } else {
      assert_null(gmt_rpc_pod(env));
    }
    envelope_free(env);
  }
  /* The pid found is the message's own. */
  Gmt__ReserveRequest r = GMT__RESERVE_REQUEST__INIT;
  Gmt__Envelope env = GMT__ENVELOPE__INIT;
  gmt_wire_set_body(&env, C(RESERVE_REQ), &r);
  *gmt_rpc_pid(&env) = 77;
  assert_int_equal(r.pid, 77);
}

static void test_with_pod_stamps_a_copy_and_leaves_the_request(void **state)
{
  (void)state;
  Gmt__AdviseRequest a = GMT__ADVISE_REQUEST__INIT;
  a.pod = "other";
  a.pid = 9;
  a.bytes = 123;
  Gmt__Envelope env = GMT__ENVELOPE__INIT, out;
  gmt_wire_set_body(&env, C(ADVISE_REQ), &a);
  void *copy = NULL;
  assert_int_equal(gmt_rpc_with_pod(&env, "mine", &out, &copy), 0);
  assert_non_null(copy);
  assert_int_equal(out.body_case, C(ADVISE_REQ));
  assert_ptr_equal(out.advise_req, copy);
  assert_string_equal(out.advise_req->pod, "mine");
  assert_int_equal(out.advise_req->pid, 9);
  assert_int_equal(out.advise_req->bytes, 123);
  assert_string_equal(a.pod, "other");
  /* It packs as the request with the pod replaced. */
  void *buf;
  size_t len;
  Gmt__Envelope *back;
  assert_int_equal(gmt_wire_pack(&out, &buf, &len), 0);
  assert_int_equal(gmt_wire_unpack(buf, len, &back), 0);
  assert_string_equal(back->advise_req->pod, "mine");
  assert_int_equal(back->advise_req->bytes, 123);
  gmt_wire_free(back);
  free(buf);
  free(copy);

  /* A kind whose pod is not the caller's is not stamped. */
  Gmt__TraceSpotsRequest t = GMT__TRACE_SPOTS_REQUEST__INIT;
  gmt_wire_set_body(&env, C(TRACE_SPOTS_REQ), &t);
  assert_int_equal(gmt_rpc_with_pod(&env, "mine", &out, &copy), -EINVAL);
  assert_null(copy);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_body_of_the_envelope_has_a_row_and_nothing_else),
      cmocka_unit_test(test_each_request_names_its_reply_and_replies_name_none),
      cmocka_unit_test(test_views_are_exactly_status_devices_and_pick),
      cmocka_unit_test(test_pod_manager_routes_and_outage_answers),
      cmocka_unit_test(test_caller_fields_are_found_in_every_kind_that_names_them),
      cmocka_unit_test(test_with_pod_stamps_a_copy_and_leaves_the_request),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
