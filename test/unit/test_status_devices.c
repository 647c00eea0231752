/* StatusReply.devices in `gmt status` (client/cli/status_devices.c): the JSON
 * list, with null for what is not known, and the table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "gmt.pb-c.h"
#include "status_devices.h"
#include "status_json.h"

static void two_gpus(Gmt__StatusReply *st, Gmt__DeviceStatus d[2], Gmt__DeviceStatus *dp[2])
{
  gmt__status_reply__init(st);
  for (int i = 0; i < 2; i++) {
    gmt__device_status__init(&d[i]);
    dp[i] = &d[i];
  }
  d[0].index = 0;
  d[0].bus_id = "0000:17:00.0";
  d[0].uuid = "GPU-0";
  d[0].name = "NVIDIA H100";
  d[0].memory_total = 80ull << 30;
  d[0].memory_free = 70ull << 30;
  d[0].memory_reserved = 4ull << 30;
  d[0].utilization = 0.25;
  d[0].probe_delay_ms = 0.5;
  d[0].tokens_waiting = 2;
  d[0].token_holder = "train";
  d[0].score = 0.75;
  d[0].sample_age_ms = 120;
  /* Without NVML: nothing measured. */
  d[1].index = 1;
  d[1].bus_id = "0000:65:00.0";
  d[1].uuid = "";
  d[1].name = "";
  d[1].token_holder = "";
  d[1].utilization = -1;
  d[1].probe_delay_ms = -1;
  st->n_devices = 2;
  st->devices = dp;
}

static void test_status_devices_json_lists_each_gpu_with_null_for_unknowns(void **state)
{
  (void)state;
  Gmt__StatusReply st;
  Gmt__DeviceStatus d[2], *dp[2];
  two_gpus(&st, d, dp);
  char *out = NULL;
  assert_int_equal(gmt_status_json(&st, &out), 0);
  json_object *root = json_tokener_parse(out);
  assert_non_null(root);
  json_object *devs, *g;
  assert_true(json_object_object_get_ex(root, "devices", &devs));
  assert_int_equal(json_object_array_length(devs), 2);
  json_object *a = json_object_array_get_idx(devs, 0), *b = json_object_array_get_idx(devs, 1);
  assert_true(json_object_object_get_ex(a, "bus_id", &g));
  assert_string_equal(json_object_get_string(g), "0000:17:00.0");
  assert_true(json_object_object_get_ex(a, "memory_free", &g));
  assert_int_equal(json_object_get_int64(g), 70ll << 30);
  assert_true(json_object_object_get_ex(a, "utilization", &g));
  assert_true(json_object_get_double(g) == 0.25);
  assert_true(json_object_object_get_ex(a, "probe_delay_ms", &g));
  assert_true(json_object_get_double(g) == 0.5);
  assert_true(json_object_object_get_ex(a, "token_holder", &g));
  assert_string_equal(json_object_get_string(g), "train");
  assert_true(json_object_object_get_ex(a, "tokens_waiting", &g));
  assert_int_equal(json_object_get_int(g), 2);
  assert_true(json_object_object_get_ex(a, "score", &g));
  assert_true(json_object_get_double(g) == 0.75);
  assert_true(json_object_object_get_ex(a, "sample_age_ms", &g));
  assert_int_equal(json_object_get_int(g), 120);
  static const char *nulls[] = {"uuid",        "name",           "memory_total",
                                "utilization", "probe_delay_ms", "token_holder"};
  for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++) {
    assert_true(json_object_object_get_ex(b, nulls[i], &g));
    assert_null(g);
  }
  json_object_put(root);
  free(out);
}

static void test_status_devices_json_is_an_empty_list_without_gpus(void **state)
{
  (void)state;
  Gmt__StatusReply st = GMT__STATUS_REPLY__INIT;
  char *out = NULL;
  assert_int_equal(gmt_status_json(&st, &out), 0);
  assert_non_null(strstr(out, "\"devices\":[]"));
  free(out);
}

static void test_status_devices_table_shows_each_gpu(void **state)
{
  (void)state;
  Gmt__StatusReply st;
  Gmt__DeviceStatus d[2], *dp[2];
  two_gpus(&st, d, dp);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  gmt_status_devices_print(f, &st);
  fclose(f);
  assert_non_null(strstr(buf, "GPU  BUS ID"));
  assert_non_null(strstr(buf, "0    0000:17:00.0  70.0 GiB / 80.0 GiB"));
  assert_non_null(strstr(buf, "25%"));
  assert_non_null(strstr(buf, "0.500 ms"));
  assert_non_null(strstr(buf, "train"));
  assert_non_null(strstr(buf, "0.750"));
  assert_non_null(strstr(buf, "1    0000:65:00.0  0 B / ?"));
  assert_non_null(strstr(buf, "(sampled 120 ms ago)"));
  free(buf);
  /* No GPUs: nothing at all. */
  Gmt__StatusReply none = GMT__STATUS_REPLY__INIT;
  buf = NULL;
  f = open_memstream(&buf, &len);
  gmt_status_devices_print(f, &none);
  fclose(f);
  assert_int_equal(len, 0);
  free(buf);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_devices_json_lists_each_gpu_with_null_for_unknowns),
      cmocka_unit_test(test_status_devices_json_is_an_empty_list_without_gpus),
      cmocka_unit_test(test_status_devices_table_shows_each_gpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
