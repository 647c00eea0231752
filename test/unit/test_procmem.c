/* Device memory per process from NVML (server/procmem.c): summed over the
 * GPUs that list a process, read at most every GMT_PROCMEM_EVERY_MS,
 * lists longer than the first room, unknown numbers, GPUs that fail, and
 * the context bytes (NVML's count less gmt's charge, never below 0).
 * NVML is a stub table playing two GPUs. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "procmem.h"

#define MIB (1024ull * 1024ull)
#define NGPU 2
#define MAXP 300

/* What each stub GPU lists, and how the stub behaves. */
static struct {
  unsigned n;
  gmt_nvml_process_info_t p[MAXP];
  int fail; /* answer with this error instead */
} g_gpu[NGPU];
static int g_calls;

static gmt_nvml_device_t handle(int i)
{
  return (gmt_nvml_device_t)(uintptr_t)(i + 1);
}

static int stub_procs(gmt_nvml_device_t dev, unsigned int *count, gmt_nvml_process_info_t *infos)
{
  int i = (int)(uintptr_t)dev - 1;
  g_calls++;
  if (i < 0 || i >= NGPU)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (g_gpu[i].fail)
    return g_gpu[i].fail;
  unsigned room = *count;
  *count = g_gpu[i].n;
  if (g_gpu[i].n > room)
    return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(infos, g_gpu[i].p, g_gpu[i].n * sizeof *infos);
  return GMT_NVML_SUCCESS;
}

static void list(int gpu, uint32_t pid, unsigned long long used)
{
  gmt_nvml_process_info_t *p = &g_gpu[gpu].p[g_gpu[gpu].n++];
  p->pid = pid;
  p->usedGpuMemory = used;
  p->gpuInstanceId = p->computeInstanceId = 0xFFFFFFFFu;
}

static gmt_nvml_t g_nvml = {.DeviceGetComputeRunningProcesses_v3 = stub_procs};
static gmt_nvml_device_t g_gpus[NGPU];

static int setup(void **state)
{
  memset(g_gpu, 0, sizeof g_gpu);
  g_calls = 0;
  for (int i = 0; i < NGPU; i++)
    g_gpus[i] = handle(i);
  gmt_procmem_t *pm = calloc(1, sizeof *pm);
  *state = pm;
  return pm ? 0 : -1;
}

static int teardown(void **state)
{
  gmt_procmem_close(*state);
  free(*state);
  return 0;
}

static uint64_t used_of(const gmt_procmem_t *pm, uint32_t pid)
{
  uint64_t u = 0;
  assert_true(gmt_procmem_used(pm, pid, &u));
  return u;
}

static void test_a_process_on_two_gpus_is_summed_and_others_are_apart(void **state)
{
  gmt_procmem_t *pm = *state;
  list(0, 300, 500 * MIB + 7);
  list(0, 100, 300 * MIB);
  list(1, 300, 200 * MIB);
  list(1, 200, 1);
  assert_int_equal(gmt_procmem_sample(pm, &g_nvml, g_gpus, NGPU, 1000), 1);
  assert_int_equal(used_of(pm, 300), 700 * MIB + 7);
  assert_int_equal(used_of(pm, 100), 300 * MIB);
  assert_int_equal(used_of(pm, 200), 1);
  uint64_t u = 12345;
  assert_false(gmt_procmem_used(pm, 150, &u));
  assert_int_equal(u, 12345); /* untouched */
  assert_false(gmt_procmem_used(pm, 0, &u));
  assert_false(gmt_procmem_used(pm, 400, &u));
}

static void test_a_reading_is_kept_for_500_ms(void **state)
{
  gmt_procmem_t *pm = *state;
  list(0, 10, 5 * MIB);
  assert_int_equal(gmt_procmem_sample(pm, &g_nvml, g_gpus, NGPU, 1000), 1);
  assert_int_equal(g_calls, 2);
  list(0, 11, 6 * MIB);
  assert_int_equal(gmt_procmem_sample(pm, &g_nvml, g_gpus, NGPU, 1000 + GMT_PROCMEM_EVERY_MS - 1),
                   0);
  assert_int_equal(g_calls, 2);
  uint64_t u;
  assert_false(gmt_procmem_used(pm, 11, &u)); /* not read yet */
  assert_int_equal(gmt_procmem_sample(pm, &g_nvml, g_gpus, NGPU, 1000 + GMT_PROCMEM_EVERY_MS), 1);
  assert_int_equal(g_calls, 4);
  assert_int_equal(used_of(pm, 11), 6 * MIB);
  /* A process gone from the lists is gone from the reading. */
  g_gpu[0].n = 0;
  assert_int_equal(gmt_procmem_sample(pm, &g_nvml, g_gpus, NGPU, 2000), 1);
  assert_false(gmt_procmem_used(pm, 10, &u));
}

static void test_a_list_longer_than_the_first_room_is_read_whole(void **state)
{
  gmt_procmem_t *pm = *state;
  for (uint32_t i = 0; i < MAXP; i++)
    list(1, MAXP - i, (unsigned long long)i * MIB); /* pids in falling order */
  assert_int_equal(gmt_procmem_sample(pm, &g_nvml, g_gpus, NGPU, 1000), 1);
  assert_int_equal(pm->n, MAXP);
  for (uint32_t pid = 1; pid <= MAXP; pid++)
    assert_int_equal(used_of(pm, pid), (uint64_t)(MAXP - pid) * MIB);
}

static void test_an_unknown_number_or_a_failing_gpu_leaves_it_out(void **state)
{
  gmt_procmem_t *pm = *state;
  list(0, 10, (unsigned long long)NVML_VALUE_NOT_AVAILABLE);
  list(1, 10, 8 * MIB);
  list(1, 20, 9 * MIB);
  assert_int_equal(gmt_procmem_sample(pm, &g_nvml, g_gpus, NGPU, 1000), 1);
  uint64_t u;
  assert_false(gmt_procmem_used(pm, 10, &u)); /* a part unknown: unknown */
  assert_int_equal(used_of(pm, 20), 9 * MIB);
  g_gpu[1].fail = NVML_ERROR_NOT_SUPPORTED;
  assert_int_equal(gmt_procmem_sample(pm, &g_nvml, g_gpus, NGPU, 2000), 1);
  assert_false(gmt_procmem_used(pm, 20, &u));
  /* A missing handle (a GPU NVML does not know) is skipped. */
  g_gpu[1].fail = 0;
  g_gpus[0] = NULL;
  assert_int_equal(gmt_procmem_sample(pm, &g_nvml, g_gpus, NGPU, 3000), 1);
  assert_int_equal(used_of(pm, 20), 9 * MIB);
  /* Without the entry point (an older driver) nothing is read. */
  gmt_nvml_t none = {0};
  assert_int_equal(gmt_procmem_sample(pm, &none, g_gpus, NGPU, 9000), -ENOSYS);
  assert_int_equal(gmt_procmem_sample(pm, NULL, g_gpus, NGPU, 9000), -ENOSYS);
}

static void test_context_is_what_nvml_counts_past_the_charge(void **state)
{
  (void)state;
  assert_int_equal(gmt_procmem_context(812 * MIB, 300 * MIB), 512 * MIB);
  assert_int_equal(gmt_procmem_context(300 * MIB, 300 * MIB), 0);
  assert_int_equal(gmt_procmem_context(100 * MIB, 300 * MIB), 0); /* never below 0 */
  assert_int_equal(gmt_procmem_context(UINT64_MAX, 0), UINT64_MAX);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
      T(test_a_process_on_two_gpus_is_summed_and_others_are_apart),
      T(test_a_reading_is_kept_for_500_ms),
      T(test_a_list_longer_than_the_first_room_is_read_whole),
      T(test_an_unknown_number_or_a_failing_gpu_leaves_it_out),
      T(test_context_is_what_nvml_counts_past_the_charge),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
