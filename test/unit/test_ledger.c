/* The memory ledger (server/ledger.c): the exact-limit rule, releases,
 * reclaim of processes that are gone, limits taken from the config in
 * force at each reservation, and the rebuild from reports. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "gmt_error.h"
#include "ledger.h"

#define MIB (1024ull * 1024ull)
#define GIB (1024ull * MIB)
#define NOW 100000u /* ms; any monotonic time */

static int setup(void **state)
{
  gmt_ledger_t *l;
  if (gmt_ledger_new(&l) < 0)
    return -1;
  *state = l;
  return 0;
}

static int teardown(void **state)
{
  gmt_ledger_free(*state);
  return 0;
}

static void test_reservation_that_fits_exactly_succeeds(void **state)
{
  gmt_ledger_t *l = *state;
  uint64_t total = 0;
  assert_int_equal(gmt_ledger_reserve(l, "a", 10, 0, 600 * MIB, GIB, NOW, &total), 0);
  assert_int_equal(total, 600 * MIB);
  assert_int_equal(gmt_ledger_reserve(l, "a", 11, 1, GIB - 600 * MIB, GIB, NOW, &total), 0);
  assert_int_equal(total, GIB);
  assert_int_equal(gmt_ledger_pod_total(l, "a"), GIB);
}

static void test_one_byte_over_the_limit_is_refused_and_changes_nothing(void **state)
{
  gmt_ledger_t *l = *state;
  uint64_t total = 0;
  assert_int_equal(gmt_ledger_reserve(l, "a", 10, 0, GIB - 1, GIB, NOW, &total), 0);
  assert_int_equal(gmt_ledger_reserve(l, "a", 10, 0, 2, GIB, NOW, &total), GMT_EQUOTA);
  assert_int_equal(total, GIB - 1);
  assert_int_equal(gmt_ledger_pid_total(l, "a", 10), GIB - 1);
  /* Nothing at all fits in an empty pod with a limit of 0. */
  assert_int_equal(gmt_ledger_reserve(l, "z", 1, 0, 1, 0, NOW, NULL), GMT_EQUOTA);
  /* A huge request does not wrap around. */
  assert_int_equal(gmt_ledger_reserve(l, "a", 10, 0, UINT64_MAX, GIB, NOW, NULL), GMT_EQUOTA);
}

static void test_quota_is_the_pods_total_across_devices_and_processes(void **state)
{
  gmt_ledger_t *l = *state;
  assert_int_equal(gmt_ledger_reserve(l, "a", 10, 0, 512 * MIB, GIB, NOW, NULL), 0);
  assert_int_equal(gmt_ledger_reserve(l, "a", 11, 3, 512 * MIB, GIB, NOW, NULL), 0);
  assert_int_equal(gmt_ledger_reserve(l, "a", 12, 1, 1, GIB, NOW, NULL), GMT_EQUOTA);
  /* Another pod has its own quota. */
  assert_int_equal(gmt_ledger_reserve(l, "b", 20, 0, GIB, GIB, NOW, NULL), 0);
  assert_int_equal(gmt_ledger_pod_total(l, "a"), GIB);
  assert_int_equal(gmt_ledger_pod_total(l, "b"), GIB);
  assert_int_equal(gmt_ledger_reserve(l, "a", 10, GMT_LEDGER_DEVICES, 1, GIB, NOW, NULL), -EINVAL);
}

static void test_release_returns_bytes_and_is_clamped_to_what_the_pid_holds(void **state)
{
  gmt_ledger_t *l = *state;
  assert_int_equal(gmt_ledger_reserve(l, "a", 10, 0, GIB, GIB, NOW, NULL), 0);
  assert_int_equal(gmt_ledger_release(l, "a", 10, 0, 100 * MIB), 100 * MIB);
  assert_int_equal(gmt_ledger_pod_total(l, "a"), GIB - 100 * MIB);
  /* The freed bytes can be reserved again, by another process too. */
  assert_int_equal(gmt_ledger_reserve(l, "a", 11, 0, 100 * MIB, GIB, NOW, NULL), 0);
  /* More than it holds: only what it holds. */
  assert_int_equal(gmt_ledger_release(l, "a", 11, 0, GIB), 100 * MIB);
  /* Another pid's, another device's or an unknown pod's: nothing. */
  assert_int_equal(gmt_ledger_release(l, "a", 12, 0, MIB), 0);
  assert_int_equal(gmt_ledger_release(l, "a", 10, 1, MIB), 0);
  assert_int_equal(gmt_ledger_release(l, "nope", 10, 0, MIB), 0);
  assert_int_equal(gmt_ledger_pod_total(l, "a"), GIB - 100 * MIB);
  assert_true(gmt_ledger_knows(l, "a", 11)); /* holds 0, still known */
}

typedef struct {
  int calls;
  uint32_t pid;
  uint64_t bytes;
} reclaims_t;

static void on_reclaim(void *arg, const char *pod, uint32_t pid, uint64_t bytes)
{
  reclaims_t *r = arg;
  assert_string_equal(pod, "a");
  r->calls++;
  r->pid = pid;
  r->bytes = bytes;
}

static void test_reservations_of_a_process_that_left_the_pod_are_reclaimed(void **state)
{
  gmt_ledger_t *l = *state;
  const uint32_t both[] = {10, 11}, one[] = {11};
  assert_int_equal(gmt_ledger_reserve(l, "a", 10, 0, 300 * MIB, GIB, NOW, NULL), 0);
  assert_int_equal(gmt_ledger_reserve(l, "a", 11, 1, 200 * MIB, GIB, NOW, NULL), 0);
  reclaims_t r = {0};
  assert_int_equal(gmt_ledger_retain(l, "a", both, 2, NOW, on_reclaim, &r), 0);
  assert_int_equal(r.calls, 0);
  assert_int_equal(gmt_ledger_retain(l, "a", one, 1, NOW, on_reclaim, &r), 300 * MIB);
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.pid, 10);
  assert_int_equal(r.bytes, 300 * MIB);
  assert_false(gmt_ledger_knows(l, "a", 10));
  assert_int_equal(gmt_ledger_pod_total(l, "a"), 200 * MIB);
  /* The pod disconnected: everything goes. */
  assert_int_equal(gmt_ledger_retain(l, "a", NULL, 0, NOW, on_reclaim, &r), 200 * MIB);
  assert_int_equal(gmt_ledger_pod_total(l, "a"), 0);
}

static void test_reservation_ahead_of_its_first_heartbeat_survives_grace_period(void **state)
{
  gmt_ledger_t *l = *state;
  assert_int_equal(gmt_ledger_reserve(l, "a", 10, 0, MIB, GIB, NOW, NULL), 0);
  assert_int_equal(gmt_ledger_retain(l, "a", NULL, 0, NOW + 10, NULL, NULL), 0);
  assert_int_equal(gmt_ledger_pid_total(l, "a", 10), MIB);
  assert_int_equal(gmt_ledger_retain(l, "a", NULL, 0, NOW + GMT_LEDGER_GRACE_MS, NULL, NULL), MIB);
  assert_false(gmt_ledger_knows(l, "a", 10));
}

static bool keep_b(void *arg, const char *pod)
{
  (void)arg;
  return strcmp(pod, "b") == 0;
}

static void test_pod_removed_from_config_is_reclaimed(void **state)
{
  gmt_ledger_t *l = *state;
  assert_int_equal(gmt_ledger_reserve(l, "a", 10, 0, MIB, GIB, NOW, NULL), 0);
  assert_int_equal(gmt_ledger_reserve(l, "b", 20, 0, 2 * MIB, GIB, NOW, NULL), 0);
  assert_int_equal(gmt_ledger_retain_pods(l, keep_b, NULL, NULL), MIB);
  assert_int_equal(gmt_ledger_pod_total(l, "a"), 0);
  assert_int_equal(gmt_ledger_pod_total(l, "b"), 2 * MIB);
}

static uint64_t limit_of(const char *text, const char *pod)
{
  gmt_config_t *cfg = NULL;
  assert_int_equal(gmt_config_parse("resource-config.txt", text, strlen(text), &cfg, NULL), 0);
  const gmt_pod_config_t *pc = gmt_config_find(cfg, pod);
  assert_non_null(pc);
  uint64_t limit = pc->memory_limit;
  gmt_config_free(cfg);
  return limit;
}

static void test_lower_limit_after_reload_applies_to_the_next_reserve(void **state)
{
  gmt_ledger_t *l = *state;
  uint64_t before = limit_of("1\na 0.5 1.0 1Gi\n", "a");
  uint64_t after = limit_of("1\na 0.5 1.0 256Mi\n", "a");
  assert_int_equal(gmt_ledger_reserve(l, "a", 10, 0, 512 * MIB, before, NOW, NULL), 0);
  /* Holds more than the new limit: kept (it is allocated), but nothing
   * more fits until it is back under. */
  assert_int_equal(gmt_ledger_reserve(l, "a", 10, 0, 1, after, NOW, NULL), GMT_EQUOTA);
  assert_int_equal(gmt_ledger_pod_total(l, "a"), 512 * MIB);
  assert_int_equal(gmt_ledger_release(l, "a", 10, 0, 512 * MIB - 200 * MIB), 312 * MIB);
  assert_int_equal(gmt_ledger_reserve(l, "a", 10, 0, 56 * MIB, after, NOW, NULL), 0);
  assert_int_equal(gmt_ledger_reserve(l, "a", 10, 0, 1, after, NOW, NULL), GMT_EQUOTA);
}

static void test_higher_limit_after_reload_applies_to_the_next_reserve(void **state)
{
  gmt_ledger_t *l = *state;
  uint64_t before = limit_of("1\na 0.5 1.0 256Mi\n", "a");
  uint64_t after = limit_of("1\na 0.5 1.0 1Gi\n", "a");
  assert_int_equal(gmt_ledger_reserve(l, "a", 10, 0, 256 * MIB, before, NOW, NULL), 0);
  assert_int_equal(gmt_ledger_reserve(l, "a", 10, 0, MIB, before, NOW, NULL), GMT_EQUOTA);
  assert_int_equal(gmt_ledger_reserve(l, "a", 10, 0, GIB - 256 * MIB, after, NOW, NULL), 0);
  assert_int_equal(gmt_ledger_pod_total(l, "a"), GIB);
}

static void test_rebuild_adopts_what_unknown_processes_report(void **state)
{
  gmt_ledger_t *l = *state;
  /* A restarted scheduler: nothing known, the reports say what is held. */
  assert_false(gmt_ledger_synced(l, "a"));
  assert_int_equal(gmt_ledger_adopt(l, "a", 10, 300 * MIB, true, UINT64_MAX), 300 * MIB);
  assert_int_equal(gmt_ledger_adopt(l, "a", 11, 0, true, UINT64_MAX), 0);
  assert_false(gmt_ledger_knows(l, "a", 11));
  assert_int_equal(gmt_ledger_set_synced(l, "a", true), 0);
  assert_true(gmt_ledger_synced(l, "a"));
  assert_int_equal(gmt_ledger_pod_total(l, "a"), 300 * MIB);
  /* Adopted bytes count against the quota and can be released (from any
   * device: the report did not say which). */
  assert_int_equal(gmt_ledger_reserve(l, "a", 12, 0, 724 * MIB + 1, GIB, NOW, NULL), GMT_EQUOTA);
  assert_int_equal(gmt_ledger_release(l, "a", 10, 2, 100 * MIB), 100 * MIB);
  /* Once in step, a known pid's report does not override the ledger (a
   * late report of what it held before a release). */
  assert_int_equal(gmt_ledger_adopt(l, "a", 10, 300 * MIB, false, UINT64_MAX), 0);
  assert_int_equal(gmt_ledger_pid_total(l, "a", 10), 200 * MIB);
  /* The first report after losing track raises a pid that holds less. */
  assert_int_equal(gmt_ledger_adopt(l, "a", 10, 250 * MIB, true, UINT64_MAX), 50 * MIB);
  assert_int_equal(gmt_ledger_adopt(l, "a", 10, 100 * MIB, true, UINT64_MAX), 0);
  assert_int_equal(gmt_ledger_pod_total(l, "a"), 250 * MIB);
}

/* A report of 2^64-1 bytes after a restart: believed only as far as the
 * pod may hold, its total within the limit, across its processes. */
static void test_adopt_believes_a_report_only_as_far_as_the_pods_limit(void **state)
{
  gmt_ledger_t *l = *state;
  assert_int_equal(gmt_ledger_reserve(l, "a", 10, 0, 100 * MIB, GIB, NOW, NULL), 0);
  assert_int_equal(gmt_ledger_adopt(l, "a", 11, UINT64_MAX, true, GIB), GIB - 100 * MIB);
  assert_int_equal(gmt_ledger_pod_total(l, "a"), GIB);
  /* Full: nothing more, for a new pid or a known one raised. */
  assert_int_equal(gmt_ledger_adopt(l, "a", 12, 1, true, GIB), 0);
  assert_false(gmt_ledger_knows(l, "a", 12));
  assert_int_equal(gmt_ledger_adopt(l, "a", 10, 200 * MIB, true, GIB), 0);
  assert_int_equal(gmt_ledger_pid_total(l, "a", 10), 100 * MIB);
  /* Room made by a release is room a report may fill, no more. */
  assert_int_equal(gmt_ledger_release(l, "a", 11, 0, 300 * MIB), 300 * MIB);
  assert_int_equal(gmt_ledger_adopt(l, "a", 10, 500 * MIB, true, GIB), 300 * MIB);
  assert_int_equal(gmt_ledger_pid_total(l, "a", 10), 400 * MIB);
  /* A pod over its limit (a reload lowered it) takes nothing in. */
  assert_int_equal(gmt_ledger_adopt(l, "a", 13, MIB, true, 512 * MIB), 0);
  /* A limit of 0 believes nothing; another pod's limit is its own. */
  assert_int_equal(gmt_ledger_adopt(l, "b", 20, MIB, true, 0), 0);
  assert_false(gmt_ledger_knows(l, "b", 20));
  assert_int_equal(gmt_ledger_adopt(l, "b", 20, MIB, true, GIB), MIB);
  assert_int_equal(gmt_ledger_node_total(l), GIB + MIB);
}

static void test_node_total_sums_every_pod_and_follows_releases_and_reclaims(void **state)
{
  gmt_ledger_t *l = *state;
  assert_int_equal(gmt_ledger_node_total(l), 0);
  assert_int_equal(gmt_ledger_reserve(l, "a", 10, 0, 48 * MIB, UINT64_MAX, NOW, NULL), 0);
  assert_int_equal(gmt_ledger_reserve(l, "a", 11, 0, 8 * MIB, UINT64_MAX, NOW, NULL), 0);
  assert_int_equal(gmt_ledger_reserve(l, "b", 20, 0, 16 * MIB, UINT64_MAX, NOW, NULL), 0);
  assert_int_equal(gmt_ledger_reserve(l, "b", 20, 1, 4 * MIB, UINT64_MAX, NOW, NULL), 0);
  assert_int_equal(gmt_ledger_node_total(l), 76 * MIB);
  /* Per device, every pod's processes (--gpu-capacity's check). */
  assert_int_equal(gmt_ledger_device_total(l, 0), 72 * MIB);
  assert_int_equal(gmt_ledger_device_total(l, 1), 4 * MIB);
  assert_int_equal(gmt_ledger_device_total(l, 2), 0);
  assert_int_equal(gmt_ledger_device_total(l, -1), 0);
  assert_int_equal(gmt_ledger_device_total(l, GMT_LEDGER_DEVICES), 0);
  /* Only the pods asked for (mode=swap's are counted apart, rpc_tiers.c). */
  assert_int_equal(gmt_ledger_device_total_if(l, 0, keep_b, NULL), 16 * MIB);
  assert_int_equal(gmt_ledger_device_total_if(l, 1, keep_b, NULL), 4 * MIB);
  assert_int_equal(gmt_ledger_device_total_if(l, 0, NULL, NULL), 72 * MIB);
  assert_int_equal(gmt_ledger_release(l, "b", 20, 1, 4 * MIB), 4 * MIB);
  assert_int_equal(gmt_ledger_release(l, "a", 10, 0, 32 * MIB), 32 * MIB);
  assert_int_equal(gmt_ledger_device_total(l, 0), 40 * MIB);
  assert_int_equal(gmt_ledger_node_total(l), 40 * MIB);
  const uint32_t none[] = {0};
  assert_int_equal(gmt_ledger_retain(l, "b", none, 0, NOW + GMT_LEDGER_GRACE_MS, NULL, NULL),
                   16 * MIB);
  assert_int_equal(gmt_ledger_node_total(l), 24 * MIB);
  assert_int_equal(gmt_ledger_retain_pods(l, keep_b, NULL, NULL), 24 * MIB);
  assert_int_equal(gmt_ledger_node_total(l), 0);
  /* Adopted bytes count, and a sum past 2^64 saturates. */
  assert_int_equal(gmt_ledger_adopt(l, "c", 30, UINT64_MAX - 1, true, UINT64_MAX), UINT64_MAX - 1);
  assert_int_equal(gmt_ledger_adopt(l, "d", 40, 5, true, UINT64_MAX), 5);
  assert_true(gmt_ledger_node_total(l) == UINT64_MAX);
}

static void test_pod_device_total_is_the_pods_processes_on_that_device(void **state)
{
  gmt_ledger_t *l = *state;
  assert_int_equal(gmt_ledger_pod_device_total(l, "a", 0), 0); /* no such pod yet */
  assert_int_equal(gmt_ledger_reserve(l, "a", 10, 0, 10000001, GIB, NOW, NULL), 0);
  assert_int_equal(gmt_ledger_reserve(l, "a", 10, 1, 3000, GIB, NOW, NULL), 0);
  assert_int_equal(gmt_ledger_reserve(l, "a", 11, 1, 7, GIB, NOW, NULL), 0);
  assert_int_equal(gmt_ledger_reserve(l, "b", 20, 1, 5 * MIB, GIB, NOW, NULL), 0);
  /* Exact bytes, this pod's only, each device apart. */
  assert_int_equal(gmt_ledger_pod_device_total(l, "a", 0), 10000001);
  assert_int_equal(gmt_ledger_pod_device_total(l, "a", 1), 3007);
  assert_int_equal(gmt_ledger_pod_device_total(l, "a", 2), 0);
  assert_int_equal(gmt_ledger_pod_device_total(l, "b", 1), 5 * MIB);
  assert_int_equal(gmt_ledger_pod_device_total(l, "b", 0), 0);
  assert_int_equal(gmt_ledger_pod_device_total(l, "a", -1), 0);
  assert_int_equal(gmt_ledger_pod_device_total(l, "a", GMT_LEDGER_DEVICES), 0);
  assert_int_equal(gmt_ledger_pod_device_total(l, NULL, 0), 0);
  /* Releases and reclaims follow; adopted bytes have no device. */
  assert_int_equal(gmt_ledger_release(l, "a", 10, 1, 1000), 1000);
  assert_int_equal(gmt_ledger_pod_device_total(l, "a", 1), 2007);
  const uint32_t keep[] = {10};
  assert_int_equal(gmt_ledger_retain(l, "a", keep, 1, NOW + GMT_LEDGER_GRACE_MS, NULL, NULL), 7);
  assert_int_equal(gmt_ledger_pod_device_total(l, "a", 1), 2000);
  assert_int_equal(gmt_ledger_adopt(l, "a", 12, 64 * MIB, true, UINT64_MAX), 64 * MIB);
  assert_int_equal(gmt_ledger_pod_device_total(l, "a", 0), 10000001);
  assert_int_equal(gmt_ledger_pod_device_total(l, "a", 1), 2000);
  assert_int_equal(gmt_ledger_pod_total(l, "a"), 10000001 + 2000 + 64 * MIB);
  /* The largest sum there is. */
  assert_int_equal(gmt_ledger_reserve(l, "c", 30, 3, UINT64_MAX - 1, UINT64_MAX, NOW, NULL), 0);
  assert_int_equal(gmt_ledger_reserve(l, "c", 31, 3, 1, UINT64_MAX, NOW, NULL), 0);
  assert_true(gmt_ledger_pod_device_total(l, "c", 3) == UINT64_MAX);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_reservation_that_fits_exactly_succeeds, setup, teardown),
      cmocka_unit_test_setup_teardown(test_one_byte_over_the_limit_is_refused_and_changes_nothing,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_quota_is_the_pods_total_across_devices_and_processes,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_release_returns_bytes_and_is_clamped_to_what_the_pid_holds, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_reservations_of_a_process_that_left_the_pod_are_reclaimed, setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_reservation_ahead_of_its_first_heartbeat_survives_grace_period, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pod_removed_from_config_is_reclaimed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lower_limit_after_reload_applies_to_the_next_reserve,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_higher_limit_after_reload_applies_to_the_next_reserve,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_rebuild_adopts_what_unknown_processes_report, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_adopt_believes_a_report_only_as_far_as_the_pods_limit,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(
          test_node_total_sums_every_pod_and_follows_releases_and_reclaims, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pod_device_total_is_the_pods_processes_on_that_device,
                                      setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
