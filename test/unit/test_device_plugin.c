/* What gmt-device-plugin advertises, without gRPC: the node it makes of a
 * Status reply (deploy/device-plugin/node.c), each resource's devices, the
 * allocation it prefers and what Allocate tells a container (devices.c).
 * test/e2e/test_device_plugin.py runs the same through a fake kubelet. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "devices.h"
#include "node.h"

#define GIB (1ull << 30)

static gmt_dp_node_t two_gpus(uint64_t space0, uint64_t space1)
{
  gmt_dp_node_t n = {.known = true, .healthy = true, .n_gpus = 2};
  n.gpus[0] = (gmt_dp_gpu_t){.index = 0, .uuid = "GPU-a", .space = space0};
  n.gpus[1] = (gmt_dp_gpu_t){.index = 1, .uuid = "GPU-b", .space = space1};
  return n;
}

static void test_device_plugin_node_takes_gpus_from_devices_and_gpu_spaces(void **state)
{
  (void)state;
  Gmt__DeviceStatus d1 = GMT__DEVICE_STATUS__INIT, d0 = GMT__DEVICE_STATUS__INIT;
  d1.index = 1;
  d1.uuid = "GPU-one";
  d0.index = 0;
  d0.uuid = "GPU-zero";
  Gmt__DeviceStatus *devs[] = {&d1, &d0};
  /* GPU 2 has a space but no device status (no NVML); GPU 0 has none
   * (--gpu-capacity 0=off); the host tier is not a GPU's. */
  Gmt__TierSpace s1 = GMT__TIER_SPACE__INIT, s2 = GMT__TIER_SPACE__INIT, h = GMT__TIER_SPACE__INIT;
  s1.tier = "gpu";
  s1.index = 1;
  s1.capacity = 9 * GIB;
  s1.limit = 8 * GIB;
  s2.tier = "gpu";
  s2.index = 2;
  s2.limit = 3 * GIB;
  h.tier = "host";
  h.index = 0;
  h.limit = 64 * GIB;
  Gmt__TierSpace *tiers[] = {&s2, &h, &s1};
  Gmt__HostStatus host = GMT__HOST_STATUS__INIT;
  host.n_tiers = 3;
  host.tiers = tiers;
  Gmt__StatusReply st = GMT__STATUS_REPLY__INIT;
  st.n_devices = 2;
  st.devices = devs;
  st.host = &host;

  gmt_dp_node_t n;
  assert_int_equal(gmt_dp_node_from_status(&st, &n), 0);
  assert_true(n.known && n.healthy);
  assert_int_equal(n.n_gpus, 3);
  assert_int_equal(n.gpus[0].index, 0);
  assert_string_equal(n.gpus[0].uuid, "GPU-zero");
  assert_int_equal(n.gpus[0].space, 0);
  assert_int_equal(n.gpus[1].index, 1);
  assert_string_equal(n.gpus[1].uuid, "GPU-one");
  assert_int_equal(n.gpus[1].space, 8 * GIB); /* the limit, not the capacity */
  assert_int_equal(n.gpus[2].index, 2);
  assert_string_equal(n.gpus[2].uuid, "");
  assert_int_equal(n.gpus[2].space, 3 * GIB);

  gmt_dp_node_t m = n;
  assert_true(gmt_dp_node_equal(&n, &m));
  m.gpus[1].space--;
  assert_false(gmt_dp_node_equal(&n, &m));
  m = n;
  m.healthy = false;
  assert_false(gmt_dp_node_equal(&n, &m));
}

static void test_device_plugin_node_leaves_out_gpus_past_its_bound(void **state)
{
  (void)state;
  enum { N = GMT_DP_MAX_GPUS + 3 };
  Gmt__DeviceStatus d[N], *p[N];
  for (int i = 0; i < N; i++) {
    gmt__device_status__init(&d[i]);
    d[i].index = N - 1 - i;
    p[i] = &d[i];
  }
  Gmt__StatusReply st = GMT__STATUS_REPLY__INIT;
  st.n_devices = N;
  st.devices = p;
  gmt_dp_node_t n;
  assert_int_equal(gmt_dp_node_from_status(&st, &n), 3);
  assert_int_equal(n.n_gpus, GMT_DP_MAX_GPUS);
  for (size_t i = 1; i < n.n_gpus; i++)
    assert_true(n.gpus[i - 1].index < n.gpus[i].index);
}

static void test_device_plugin_ids_parse_back_and_refuse_anything_else(void **state)
{
  (void)state;
  char id[GMT_DP_ID_MAX + 1];
  gmt_dp_id(id, sizeof id, 7, 12345);
  assert_string_equal(id, "gpu7-12345");
  int32_t g;
  uint64_t k;
  assert_int_equal(gmt_dp_parse_id(id, &g, &k), 0);
  assert_int_equal(g, 7);
  assert_int_equal(k, 12345);
  assert_int_equal(gmt_dp_parse_id("gpu0-0", &g, &k), 0);
  const char *bad[] = {
      "",        "gpu",     "gpu0",   "gpu0-",   "gpu-1-0",         "gpu01-0",
      "gpu0-01", "gpu0-1x", "GPU0-1", "gpu+0-1", "gpu2147483648-0", "gpu0-18446744073709551616"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    assert_int_equal(gmt_dp_parse_id(bad[i], &g, &k), -EINVAL);
  assert_int_equal(gmt_dp_parse_id("gpu2147483647-18446744073709551615", &g, &k), 0);
}

static void test_device_plugin_lists_one_device_per_unit_of_each_gpu_space(void **state)
{
  (void)state;
  /* 7.5 GiB rounds down to 7 units; a GPU with no space has none. */
  gmt_dp_node_t n = two_gpus(15 * GIB / 2, 0);
  V1beta1__ListAndWatchResponse *l;
  uint64_t left = 99;
  assert_int_equal(gmt_dp_list(&n, GMT_DP_MEMORY, GIB, &l, &left), 0);
  assert_int_equal(left, 0);
  assert_int_equal(l->n_devices, 7);
  assert_string_equal(l->devices[0]->id, "gpu0-0");
  assert_string_equal(l->devices[6]->id, "gpu0-6");
  assert_string_equal(l->devices[6]->health, "Healthy");
  protobuf_c_message_free_unpacked(&l->base, NULL);

  /* 256 MiB units: four times as many. */
  assert_int_equal(gmt_dp_list(&n, GMT_DP_MEMORY, GIB / 4, &l, NULL), 0);
  assert_int_equal(l->n_devices, 30);
  protobuf_c_message_free_unpacked(&l->base, NULL);

  /* The share: 100 a GPU, whatever its space. */
  assert_int_equal(gmt_dp_list(&n, GMT_DP_SHARE, GIB, &l, NULL), 0);
  assert_int_equal(l->n_devices, 200);
  assert_string_equal(l->devices[199]->id, "gpu1-99");
  protobuf_c_message_free_unpacked(&l->base, NULL);
}

static void
test_device_plugin_lists_unhealthy_when_schd_is_down_and_none_before_it_answered(void **state)
{
  (void)state;
  gmt_dp_node_t n = two_gpus(2 * GIB, GIB);
  n.healthy = false;
  V1beta1__ListAndWatchResponse *l;
  assert_int_equal(gmt_dp_list(&n, GMT_DP_MEMORY, GIB, &l, NULL), 0);
  assert_int_equal(l->n_devices, 3);
  for (size_t i = 0; i < l->n_devices; i++)
    assert_string_equal(l->devices[i]->health, "Unhealthy");
  protobuf_c_message_free_unpacked(&l->base, NULL);

  gmt_dp_node_t never = {0};
  assert_int_equal(gmt_dp_list(&never, GMT_DP_SHARE, GIB, &l, NULL), 0);
  assert_int_equal(l->n_devices, 0);
  protobuf_c_message_free_unpacked(&l->base, NULL);
}

static void test_device_plugin_list_stops_at_its_bound_and_says_how_many_are_left(void **state)
{
  (void)state;
  /* 8 GPUs of 141 GiB in 1 MiB units: far past the bound. */
  gmt_dp_node_t n = {.known = true, .healthy = true, .n_gpus = 8};
  for (int i = 0; i < 8; i++)
    n.gpus[i] = (gmt_dp_gpu_t){.index = i, .space = 141 * GIB};
  V1beta1__ListAndWatchResponse *l;
  uint64_t left;
  assert_int_equal(gmt_dp_list(&n, GMT_DP_MEMORY, 1ull << 20, &l, &left), 0);
  assert_int_equal(l->n_devices, GMT_DP_MAX_DEVICES);
  assert_int_equal(left, 8 * 141 * 1024 - GMT_DP_MAX_DEVICES);
  protobuf_c_message_free_unpacked(&l->base, NULL);
}

/* gmt_dp_prefer's answer for these as one comma-separated string. */
static void prefer(const char *const *avail, size_t n, const char *const *must, size_t nm, int size,
                   const char *want)
{
  V1beta1__ContainerPreferredAllocationRequest req =
      V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
  req.n_available_deviceids = n;
  req.available_deviceids = (char **)avail;
  req.n_must_include_deviceids = nm;
  req.must_include_deviceids = (char **)must;
  req.allocation_size = size;
  V1beta1__ContainerPreferredAllocationResponse *r;
  assert_int_equal(gmt_dp_prefer(&req, &r), 0);
  char got[1024] = "";
  for (size_t i = 0; i < r->n_deviceids; i++)
    snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", i ? "," : "", r->deviceids[i]);
  assert_string_equal(got, want);
  protobuf_c_message_free_unpacked(&r->base, NULL);
}

static void test_device_plugin_prefers_the_tightest_gpu_that_holds_the_request(void **state)
{
  (void)state;
  /* Offered out of order: GPU 0 has 5 units free, GPU 1 has 2, GPU 3 has 3. */
  const char *avail[] = {"gpu1-4", "gpu0-3", "gpu3-0", "gpu0-0", "gpu3-1",
                         "gpu0-1", "gpu1-3", "gpu0-9", "gpu0-2", "gpu3-2"};
  size_t n = sizeof avail / sizeof *avail;
  prefer(avail, n, NULL, 0, 2, "gpu1-3,gpu1-4");
  prefer(avail, n, NULL, 0, 3, "gpu3-0,gpu3-1,gpu3-2");
  prefer(avail, n, NULL, 0, 4, "gpu0-0,gpu0-1,gpu0-2,gpu0-3");
  /* Nothing holds 7: the largest first, then the tightest for the rest. */
  prefer(avail, n, NULL, 0, 7, "gpu0-0,gpu0-1,gpu0-2,gpu0-3,gpu0-9,gpu1-3,gpu1-4");
  /* Asked for more than offered: all of it. */
  prefer(avail, n, NULL, 0, 20,
         "gpu0-0,gpu0-1,gpu0-2,gpu0-3,gpu0-9,gpu3-0,gpu3-1,gpu3-2,gpu1-3,gpu1-4");
  prefer(avail, n, NULL, 0, 0, "");
  prefer(avail, n, NULL, 0, -3, "");
}

static void test_device_plugin_prefers_the_gpu_of_the_must_include_ids(void **state)
{
  (void)state;
  const char *avail[] = {"gpu0-0", "gpu0-1", "gpu0-2", "gpu1-0", "gpu1-1", "gpu1-2", "gpu1-3"};
  size_t n = sizeof avail / sizeof *avail;
  /* Must-include first (once each, in order), the rest on their GPU;
   * with one on each, on the lower GPU. */
  const char *must[] = {"gpu1-2", "gpu1-2", "gpu0-1", "gpu1-3"};
  prefer(avail, n, must, 1, 3, "gpu1-2,gpu1-0,gpu1-1");
  prefer(avail, n, must, 3, 4, "gpu1-2,gpu0-1,gpu0-0,gpu0-2");
  prefer(avail, n, must, 4, 4, "gpu1-2,gpu0-1,gpu1-3,gpu1-0");
  /* Must-include past the size: the size wins. */
  prefer(avail, n, must, 3, 1, "gpu1-2");
}

static void test_device_plugin_prefers_ids_not_its_own_last(void **state)
{
  (void)state;
  const char *avail[] = {"other", "gpu0-0", "gpu00-1", "gpu0-1"};
  prefer(avail, 4, NULL, 0, 3, "gpu0-0,gpu0-1,gpu00-1");
  prefer(avail, 4, NULL, 0, 4, "gpu0-0,gpu0-1,gpu00-1,other");
}

static V1beta1__ContainerAllocateResponse *allocate(const gmt_dp_node_t *n, gmt_dp_kind_t kind,
                                                    uint64_t unit, const char *const *ids,
                                                    size_t nids, int want_rc, char *err,
                                                    size_t errlen)
{
  V1beta1__ContainerAllocateRequest req = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
  req.n_devices_ids = nids;
  req.devices_ids = (char **)ids;
  V1beta1__ContainerAllocateResponse *r = NULL;
  assert_int_equal(gmt_dp_allocate(n, kind, unit, &req, &r, err, errlen), want_rc);
  return r;
}

static void test_device_plugin_allocate_says_the_bytes_and_gpus_granted(void **state)
{
  (void)state;
  gmt_dp_node_t n = two_gpus(4 * GIB, 2 * GIB);
  n.gpus[1].uuid[0] = '\0'; /* no UUID known: its index */
  char err[256];
  const char *ids[] = {"gpu1-1", "gpu0-3", "gpu0-0"};
  V1beta1__ContainerAllocateResponse *r =
      allocate(&n, GMT_DP_MEMORY, GIB / 2, ids, 3, 0, err, sizeof err);
  assert_int_equal(r->n_envs, 2);
  assert_string_equal(r->envs[0]->key, "GMT_GRANTED_GPU_MEMORY");
  assert_string_equal(r->envs[0]->value, "1610612736"); /* 3 x 512 MiB */
  assert_string_equal(r->envs[1]->key, "GMT_GRANTED_GPU_MEMORY_GPUS");
  assert_string_equal(r->envs[1]->value, "GPU-a,1");
  protobuf_c_message_free_unpacked(&r->base, NULL);

  const char *share[] = {"gpu1-0", "gpu1-99"};
  r = allocate(&n, GMT_DP_SHARE, GIB, share, 2, 0, err, sizeof err);
  assert_string_equal(r->envs[0]->key, "GMT_GRANTED_GPU_SHARE");
  assert_string_equal(r->envs[0]->value, "2");
  assert_string_equal(r->envs[1]->value, "1");
  protobuf_c_message_free_unpacked(&r->base, NULL);
}

static void test_device_plugin_allocate_refuses_ids_it_does_not_advertise(void **state)
{
  (void)state;
  gmt_dp_node_t n = two_gpus(4 * GIB, 2 * GIB);
  char err[256];
  /* Past GPU 1's units, a GPU it does not have, not an ID, a share unit
   * past 100. */
  const char *past[] = {"gpu0-0", "gpu1-2"};
  assert_null(allocate(&n, GMT_DP_MEMORY, GIB, past, 2, -EINVAL, err, sizeof err));
  assert_string_equal(err, "device 'gpu1-2' is not one gmt-device-plugin advertises for "
                           "gmt.io/gpu-memory");
  const char *gone[] = {"gpu5-0"};
  assert_null(allocate(&n, GMT_DP_MEMORY, GIB, gone, 1, -EINVAL, err, sizeof err));
  const char *junk[] = {"nvidia0"};
  assert_null(allocate(&n, GMT_DP_SHARE, GIB, junk, 1, -EINVAL, err, sizeof err));
  const char *over[] = {"gpu0-100"};
  assert_null(allocate(&n, GMT_DP_SHARE, GIB, over, 1, -EINVAL, err, sizeof err));
  assert_string_equal(err, "device 'gpu0-100' is not one gmt-device-plugin advertises for "
                           "gmt.io/gpu-share");
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_device_plugin_node_takes_gpus_from_devices_and_gpu_spaces),
      cmocka_unit_test(test_device_plugin_node_leaves_out_gpus_past_its_bound),
      cmocka_unit_test(test_device_plugin_ids_parse_back_and_refuse_anything_else),
      cmocka_unit_test(test_device_plugin_lists_one_device_per_unit_of_each_gpu_space),
      cmocka_unit_test(
          test_device_plugin_lists_unhealthy_when_schd_is_down_and_none_before_it_answered),
      cmocka_unit_test(test_device_plugin_list_stops_at_its_bound_and_says_how_many_are_left),
      cmocka_unit_test(test_device_plugin_prefers_the_tightest_gpu_that_holds_the_request),
      cmocka_unit_test(test_device_plugin_prefers_the_gpu_of_the_must_include_ids),
      cmocka_unit_test(test_device_plugin_prefers_ids_not_its_own_last),
      cmocka_unit_test(test_device_plugin_allocate_says_the_bytes_and_gpus_granted),
      cmocka_unit_test(test_device_plugin_allocate_refuses_ids_it_does_not_advertise),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
