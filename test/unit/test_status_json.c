/* gmt status --json (client/status_json.c): a StatusReply built in memory
 * is rendered and read back with json-c; every field must come back as
 * docs/protocol.md documents it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "status_json.h"

#define TRICKY_EXE "/opt/\"odd\" dir\\bin\n\ttab\x01/π"

static json_object *render(const Gmt__StatusReply *st)
{
  char *text = NULL;
  assert_int_equal(gmt_status_json(st, &text), 0);
  assert_non_null(text);
  assert_null(strchr(text, '\n')); /* one line */
  json_object *root = json_tokener_parse(text);
  free(text);
  assert_non_null(root);
  return root;
}

static json_object *field(json_object *obj, const char *key, json_type type)
{
  json_object *v = NULL;
  assert_true(json_object_object_get_ex(obj, key, &v));
  assert_int_equal(json_object_get_type(v), type);
  return v;
}

static int64_t int_field(json_object *obj, const char *key)
{
  return json_object_get_int64(field(obj, key, json_type_int));
}

static void test_status_json_renders_every_field(void **state)
{
  (void)state;
  Gmt__PodConfig cfg_a = GMT__POD_CONFIG__INIT, cfg_b = GMT__POD_CONFIG__INIT;
  cfg_a.name = "alpha";
  cfg_a.request = 0.3;
  cfg_a.limit = 1.0;
  cfg_a.memory_limit = 1073741824ull;
  cfg_a.pin = GMT__PIN_MODE__PIN_ADAPTIVE;
  cfg_b.name = "beta \"quoted\"";
  cfg_b.request = 0.25;
  cfg_b.limit = 0.5;
  cfg_b.memory_limit = 40ull << 30; /* past 32 bits */

  Gmt__ProcessStatus p1 = GMT__PROCESS_STATUS__INIT, p2 = GMT__PROCESS_STATUS__INIT;
  p1.pid = 1234;
  p1.exe = "/usr/bin/python3";
  p1.memory_used = 512ull << 20;
  p1.launches = 1000000;
  p1.allocs = 17;
  p1.frees = 5;
  p2.pid = 4000000;
  p2.exe = TRICKY_EXE;
  p2.memory_used = 6ull << 30;
  p2.launches = 0;
  p2.allocs = 1;
  p2.frees = 0;
  p2.memory_reserved = (6ull << 30) + (32ull << 20);
  p2.pinned_bytes = 5ull << 30; /* past 32 bits */
  p2.pinned_advised = 4ull << 30;
  Gmt__ProcessStatus *procs_a[] = {&p1, &p2};

  Gmt__PodStatus a = GMT__POD_STATUS__INIT, b = GMT__POD_STATUS__INIT;
  a.config = &cfg_a;
  a.connected = 1;
  a.memory_used = (512ull << 20) + (6ull << 30);
  a.n_processes = 2;
  a.processes = procs_a;
  a.memory_reserved = (6ull << 30) + (32ull << 20);
  a.gpu_time_share = 0.25;
  a.holds_token = 1;
  a.pinned_bytes = 5ull << 30;
  a.pinned_advised = 4ull << 30;
  b.config = &cfg_b;
  b.connected = 0;
  b.memory_used = 0;
  Gmt__PodStatus *pods[] = {&a, &b};

  Gmt__StatusReply st = GMT__STATUS_REPLY__INIT;
  st.n_pods = 2;
  st.pods = pods;
  Gmt__HostStatus host = GMT__HOST_STATUS__INIT;
  host.pinned_bytes = 5ull << 30;
  host.pinned_limit = 24ull << 30;
  host.pinned_advised = 4ull << 30;
  st.host = &host;

  json_object *root = render(&st);
  json_object *jpods = field(root, "pods", json_type_array);
  assert_int_equal(json_object_array_length(jpods), 2);

  json_object *ja = json_object_array_get_idx(jpods, 0);
  assert_string_equal(json_object_get_string(field(ja, "name", json_type_string)), "alpha");
  assert_true(json_object_get_double(field(ja, "request", json_type_double)) == 0.3);
  assert_true(json_object_get_double(field(ja, "limit", json_type_double)) == 1.0);
  assert_int_equal(int_field(ja, "memory_used"), (int64_t)((512ull << 20) + (6ull << 30)));
  assert_int_equal(int_field(ja, "memory_limit"), 1073741824);
  assert_string_equal(json_object_get_string(field(ja, "pin", json_type_string)), "adaptive");
  assert_true(json_object_get_boolean(field(ja, "connected", json_type_boolean)));
  assert_int_equal(int_field(ja, "memory_reserved"), (int64_t)((6ull << 30) + (32ull << 20)));
  assert_true(json_object_get_double(field(ja, "gpu_time_share", json_type_double)) == 0.25);
  assert_true(json_object_get_boolean(field(ja, "holds_token", json_type_boolean)));
  json_object *jprocs = field(ja, "processes", json_type_array);
  assert_int_equal(json_object_array_length(jprocs), 2);

  json_object *j1 = json_object_array_get_idx(jprocs, 0);
  assert_int_equal(int_field(j1, "pid"), 1234);
  assert_string_equal(json_object_get_string(field(j1, "exe", json_type_string)),
                      "/usr/bin/python3");
  assert_int_equal(int_field(j1, "memory_used"), 512ll << 20);
  assert_int_equal(int_field(j1, "launches"), 1000000);
  assert_int_equal(int_field(j1, "allocs"), 17);
  assert_int_equal(int_field(j1, "frees"), 5);

  json_object *j2 = json_object_array_get_idx(jprocs, 1);
  assert_int_equal(int_field(j2, "pid"), 4000000);
  assert_string_equal(json_object_get_string(field(j2, "exe", json_type_string)), TRICKY_EXE);
  assert_int_equal(int_field(j2, "memory_used"), 6ll << 30);
  assert_int_equal(int_field(j2, "launches"), 0);
  assert_int_equal(int_field(j2, "allocs"), 1);
  assert_int_equal(int_field(j2, "frees"), 0);
  assert_int_equal(int_field(j2, "memory_reserved"), (int64_t)((6ull << 30) + (32ull << 20)));
  assert_int_equal(int_field(j2, "pinned_bytes"), 5ll << 30);
  assert_int_equal(int_field(j2, "pinned_advised"), 4ll << 30);
  assert_int_equal(int_field(j1, "pinned_advised"), 0);
  assert_int_equal(json_object_object_length(j2), 9); /* nothing undocumented */

  json_object *jb = json_object_array_get_idx(jpods, 1);
  assert_string_equal(json_object_get_string(field(jb, "name", json_type_string)),
                      "beta \"quoted\"");
  assert_true(json_object_get_double(field(jb, "request", json_type_double)) == 0.25);
  assert_true(json_object_get_double(field(jb, "limit", json_type_double)) == 0.5);
  assert_int_equal(int_field(jb, "memory_used"), 0);
  assert_int_equal(int_field(jb, "memory_limit"), 40ll << 30);
  assert_string_equal(json_object_get_string(field(jb, "pin", json_type_string)), "off");
  assert_false(json_object_get_boolean(field(jb, "connected", json_type_boolean)));
  assert_int_equal(json_object_array_length(field(jb, "processes", json_type_array)), 0);
  assert_false(json_object_get_boolean(field(jb, "holds_token", json_type_boolean)));
  assert_int_equal(int_field(ja, "pinned_bytes"), 5ll << 30);
  assert_int_equal(int_field(jb, "pinned_bytes"), 0);
  assert_int_equal(int_field(ja, "pinned_advised"), 4ll << 30);
  assert_int_equal(int_field(jb, "pinned_advised"), 0);
  assert_int_equal(json_object_object_length(jb), 13);
  json_object *jh = field(root, "host", json_type_object);
  assert_int_equal(int_field(jh, "pinned_bytes"), 5ll << 30);
  assert_int_equal(int_field(jh, "pinned_limit"), 24ll << 30);
  assert_int_equal(int_field(jh, "pinned_advised"), 4ll << 30);
  assert_int_equal(json_object_object_length(jh), 3);
  assert_int_equal(json_object_object_length(root), 2);
  json_object_put(root);
}

static void test_status_json_writes_shares_as_configured(void **state)
{
  (void)state;
  Gmt__PodConfig cfg = GMT__POD_CONFIG__INIT;
  cfg.name = "a";
  cfg.request = 0.3;
  cfg.limit = 1.0;
  Gmt__PodStatus pod = GMT__POD_STATUS__INIT;
  pod.config = &cfg;
  Gmt__PodStatus *pods[] = {&pod};
  Gmt__StatusReply st = GMT__STATUS_REPLY__INIT;
  st.n_pods = 1;
  st.pods = pods;

  char *text = NULL;
  assert_int_equal(gmt_status_json(&st, &text), 0);
  /* Not 0.29999999999999999, and a whole share stays a double. */
  assert_non_null(strstr(text, "\"request\":0.3,"));
  assert_non_null(strstr(text, "\"limit\":1.0,"));
  assert_non_null(strstr(text, "\"processes\":[]"));
  free(text);
}

static void test_status_json_of_no_pods_is_an_empty_list(void **state)
{
  (void)state;
  Gmt__StatusReply st = GMT__STATUS_REPLY__INIT;
  char *text = NULL;
  assert_int_equal(gmt_status_json(&st, &text), 0);
  assert_string_equal(text, "{\"pods\":[]}");
  free(text);
}

static void test_status_json_clamps_memory_past_int64(void **state)
{
  (void)state;
  Gmt__PodConfig cfg = GMT__POD_CONFIG__INIT;
  cfg.name = "huge";
  cfg.memory_limit = UINT64_MAX;
  Gmt__PodStatus pod = GMT__POD_STATUS__INIT; /* and a pod without processes */
  pod.config = &cfg;
  pod.memory_used = (uint64_t)INT64_MAX + 1;
  Gmt__PodStatus *pods[] = {&pod};
  Gmt__StatusReply st = GMT__STATUS_REPLY__INIT;
  st.n_pods = 1;
  st.pods = pods;

  json_object *root = render(&st);
  json_object *jp = json_object_array_get_idx(field(root, "pods", json_type_array), 0);
  assert_int_equal(int_field(jp, "memory_limit"), INT64_MAX);
  assert_int_equal(int_field(jp, "memory_used"), INT64_MAX);
  json_object_put(root);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_json_renders_every_field),
      cmocka_unit_test(test_status_json_writes_shares_as_configured),
      cmocka_unit_test(test_status_json_of_no_pods_is_an_empty_list),
      cmocka_unit_test(test_status_json_clamps_memory_past_int64),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
