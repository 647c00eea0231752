/* Tests of the fake libnvidia-ml.so.1 and of the fake machine it shares with
 * the fake libcuda.so.1: NVML's memory info is cuMemGetInfo's, from this
 * process and from another; handles by index, UUID and bus id agree with
 * each other and with the driver's UUID and bus id; CUDA_VISIBLE_DEVICES
 * renumbers the driver's devices and not NVML's; GMT_FAKE_TOPO sets NUMA
 * nodes, NVLinks and PCIe ancestors, and a bad one fails init with a reason.
 *
 * The environment is read at init, so a test of another environment runs
 * in a forked child that initializes afresh and reports by exit status. */
#define __CUDA_API_VERSION_INTERNAL
#include <cuda.h>

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "gmt_nvml_abi.h"

#define MiB ((size_t)1 << 20)
#define FAKE_MEM (256 * MiB)

static char tmpdir[] = "/tmp/gmt-fakenvml-test-XXXXXX";
static CUcontext ctx;

/* In a child: a failed check names its line and exits 1. */
#define CHECK(c)                                                                                   \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "%s:%d: child check failed: %s\n", __FILE__, __LINE__, #c);                  \
      _exit(1);                                                                                    \
    }                                                                                              \
  } while (0)

static int wait_child(pid_t pid)
{
  int st = 0;
  if (waitpid(pid, &st, 0) != pid)
    return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

/* A child that starts NVML over from the environment it sets. */
static void child_nvml_fresh(void)
{
  while (nvmlShutdown() == NVML_SUCCESS) {
  }
}

static int setup(void **state)
{
  (void)state;
  if (!mkdtemp(tmpdir))
    return -1;
  setenv("GMT_FAKE_DIR", tmpdir, 1);
  setenv("GMT_FAKE_MEM", "256M", 1);
  setenv("GMT_FAKE_DEVICES", "2", 1);
  unsetenv("GMT_FAKE_TOPO");
  unsetenv("CUDA_VISIBLE_DEVICES");
  if (cuInit(0) != CUDA_SUCCESS || nvmlInit_v2() != NVML_SUCCESS)
    return -1;
  if (cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS)
    return -1;
  return cuCtxSetCurrent(ctx) == CUDA_SUCCESS ? 0 : -1;
}

static int teardown(void **state)
{
  (void)state;
  nvmlShutdown();
  cuDevicePrimaryCtxRelease_v2(0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

static nvmlDevice_t handle(unsigned i)
{
  nvmlDevice_t d = NULL;
  assert_int_equal(nvmlDeviceGetHandleByIndex_v2(i, &d), NVML_SUCCESS);
  return d;
}

/* NVML's and the driver's view of device 0 agree, both versions of
 * NVML's struct; returns the bytes used. */
static unsigned long long used_agrees_with_driver(void)
{
  size_t f = 0, t = 0;
  assert_int_equal(cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
  nvmlMemory_t m;
  assert_int_equal(nvmlDeviceGetMemoryInfo(handle(0), &m), NVML_SUCCESS);
  nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
  assert_int_equal(nvmlDeviceGetMemoryInfo_v2(handle(0), &m2), NVML_SUCCESS);
  assert_int_equal(m.total, t);
  assert_int_equal(m.free, f);
  assert_int_equal(m.used, t - f);
  assert_int_equal(m2.total, t);
  assert_int_equal(m2.free, f);
  assert_int_equal(m2.used, t - f);
  assert_int_equal(m2.reserved, 0);
  return m.used;
}

static void test_nvml_memory_equals_cumemgetinfo_around_an_alloc(void **state)
{
  (void)state;
  unsigned long long before = used_agrees_with_driver();
  CUdeviceptr p = 0;
  assert_int_equal(cuMemAlloc_v2(&p, 64 * MiB), CUDA_SUCCESS);
  unsigned long long during = used_agrees_with_driver();
  assert_int_equal(during - before, 64 * MiB);
  assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
  assert_int_equal(used_agrees_with_driver(), before);
  /* A wrong version word is refused, as by the real NVML. */
  nvmlMemory_v2_t bad = {.version = 1};
  assert_int_equal(nvmlDeviceGetMemoryInfo_v2(handle(0), &bad),
                   NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
}

static void test_nvml_sees_another_process_memory_and_pid(void **state)
{
  (void)state;
  nvmlMemory_t m0;
  assert_int_equal(nvmlDeviceGetMemoryInfo(handle(1), &m0), NVML_SUCCESS);
  int go[2], done[2];
  assert_int_equal(pipe(go), 0);
  assert_int_equal(pipe(done), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    CUcontext c;
    CUdeviceptr p;
    char b = 0;
    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&c, 1) == CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(c) == CUDA_SUCCESS);
    CHECK(cuMemAlloc_v2(&p, 32 * MiB) == CUDA_SUCCESS);
    CHECK(write(go[1], &b, 1) == 1);
    CHECK(read(done[0], &b, 1) == 1);
    _exit(0);
  }
  char b;
  assert_int_equal(read(go[0], &b, 1), 1);
  nvmlMemory_t m;
  assert_int_equal(nvmlDeviceGetMemoryInfo(handle(1), &m), NVML_SUCCESS);
  assert_int_equal(m.used - m0.used, 32 * MiB);
  nvmlProcessInfo_t infos[8];
  unsigned n = 8;
  assert_int_equal(nvmlDeviceGetComputeRunningProcesses_v3(handle(1), &n, infos), NVML_SUCCESS);
  int found = 0;
  for (unsigned i = 0; i < n; i++)
    if (infos[i].pid == (unsigned)pid) {
      found = 1;
      assert_int_equal(infos[i].usedGpuMemory, 32 * MiB);
      assert_int_equal(infos[i].gpuInstanceId, 0xFFFFFFFFu);
    }
  assert_true(found);
  unsigned none = 0;
  assert_int_equal(nvmlDeviceGetComputeRunningProcesses_v3(handle(1), &none, NULL),
                   NVML_ERROR_INSUFFICIENT_SIZE);
  assert_int_equal(none, n);
  /* This process has a context on device 0 and nothing on device 1. */
  n = 8;
  assert_int_equal(nvmlDeviceGetComputeRunningProcesses_v3(handle(0), &n, infos), NVML_SUCCESS);
  found = 0;
  for (unsigned i = 0; i < n; i++)
    found |= infos[i].pid == (unsigned)getpid();
  assert_true(found);
  assert_int_equal(write(done[1], &b, 1), 1);
  assert_int_equal(wait_child(pid), 0);
  assert_int_equal(nvmlDeviceGetMemoryInfo(handle(1), &m), NVML_SUCCESS);
  assert_int_equal(m.used, m0.used);
  close(go[0]);
  close(go[1]);
  close(done[0]);
  close(done[1]);
}

static void test_handles_by_index_uuid_and_bus_id_agree_with_driver(void **state)
{
  (void)state;
  unsigned count = 0;
  assert_int_equal(nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
  assert_int_equal(count, 2);
  for (unsigned i = 0; i < count; i++) {
    nvmlDevice_t d = handle(i), by = NULL;
    unsigned idx = 99;
    assert_int_equal(nvmlDeviceGetIndex(d, &idx), NVML_SUCCESS);
    assert_int_equal(idx, i);
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    assert_int_equal(nvmlDeviceGetUUID(d, uuid, sizeof uuid), NVML_SUCCESS);
    assert_int_equal(nvmlDeviceGetHandleByUUID(uuid, &by), NVML_SUCCESS);
    assert_ptr_equal(by, d);
    nvmlPciInfo_t pci;
    assert_int_equal(nvmlDeviceGetPciInfo_v3(d, &pci), NVML_SUCCESS);
    by = NULL;
    assert_int_equal(nvmlDeviceGetHandleByPciBusId_v2(pci.busId, &by), NVML_SUCCESS);
    assert_ptr_equal(by, d);
    by = NULL;
    assert_int_equal(nvmlDeviceGetHandleByPciBusId_v2(pci.busIdLegacy, &by), NVML_SUCCESS);
    assert_ptr_equal(by, d);
    assert_int_equal(pci.pciDeviceId & 0xffff, 0x10de);
    /* The driver's ordinal i (every device visible) is NVML's index i. */
    CUuuid cu;
    assert_int_equal(cuDeviceGetUuid_v2(&cu, (CUdevice)i), CUDA_SUCCESS);
    char hex[48];
    const unsigned char *u = (const unsigned char *)cu.bytes;
    snprintf(hex, sizeof hex,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
             u[15]);
    assert_string_equal(hex, uuid);
    char bus[32];
    assert_int_equal(cuDeviceGetPCIBusId(bus, sizeof bus, (CUdevice)i), CUDA_SUCCESS);
    assert_string_equal(bus, pci.busIdLegacy);
  }
  nvmlDevice_t d = NULL;
  assert_int_equal(nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000", &d),
                   NVML_ERROR_NOT_FOUND);
  assert_int_equal(nvmlDeviceGetHandleByPciBusId_v2("0000:7f:00.0", &d), NVML_ERROR_NOT_FOUND);
  assert_int_equal(nvmlDeviceGetHandleByPciBusId_v2("not a bus id", &d),
                   NVML_ERROR_INVALID_ARGUMENT);
  assert_int_equal(nvmlDeviceGetHandleByIndex_v2(2, &d), NVML_ERROR_INVALID_ARGUMENT);
  char small[4];
  assert_int_equal(nvmlDeviceGetUUID(handle(0), small, sizeof small), NVML_ERROR_INSUFFICIENT_SIZE);
  unsigned cur = 9, pend = 9;
  assert_int_equal(nvmlDeviceGetMigMode(handle(0), &cur, &pend), NVML_SUCCESS);
  assert_int_equal(cur, NVML_DEVICE_MIG_DISABLE);
  assert_int_equal(pend, NVML_DEVICE_MIG_DISABLE);
}

/* The UUID string of the driver's ordinal `dev` in this process. */
static void cu_uuid_str(CUdevice dev, char *buf, size_t n)
{
  CUuuid cu;
  CHECK(cuDeviceGetUuid(&cu, dev) == CUDA_SUCCESS);
  const unsigned char *u = (const unsigned char *)cu.bytes;
  snprintf(buf, n, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
           u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
           u[15]);
}

static void test_visible_devices_one_makes_ordinal_zero_physical_one(void **state)
{
  (void)state;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    child_nvml_fresh();
    setenv("CUDA_VISIBLE_DEVICES", "1", 1);
    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(nvmlInit_v2() == NVML_SUCCESS);
    int n = 0;
    CHECK(cuDeviceGetCount(&n) == CUDA_SUCCESS && n == 1);
    CUdevice d;
    CHECK(cuDeviceGet(&d, 1) == CUDA_ERROR_INVALID_DEVICE);
    /* NVML ignores CUDA_VISIBLE_DEVICES, as the real one does. */
    unsigned count = 0;
    CHECK(nvmlDeviceGetCount_v2(&count) == NVML_SUCCESS && count == 2);
    nvmlDevice_t one, zero;
    CHECK(nvmlDeviceGetHandleByIndex_v2(1, &one) == NVML_SUCCESS);
    CHECK(nvmlDeviceGetHandleByIndex_v2(0, &zero) == NVML_SUCCESS);
    char nv[NVML_DEVICE_UUID_V2_BUFFER_SIZE], cu[48];
    CHECK(nvmlDeviceGetUUID(one, nv, sizeof nv) == NVML_SUCCESS);
    cu_uuid_str(0, cu, sizeof cu);
    CHECK(strcmp(nv, cu) == 0);
    char bus[32];
    nvmlPciInfo_t pci;
    CHECK(cuDeviceGetPCIBusId(bus, sizeof bus, 0) == CUDA_SUCCESS);
    CHECK(nvmlDeviceGetPciInfo_v3(one, &pci) == NVML_SUCCESS);
    CHECK(strcmp(bus, pci.busIdLegacy) == 0);
    int attr = -1;
    CHECK(cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0) == CUDA_SUCCESS);
    CHECK(attr == (int)pci.bus);
    /* Memory of ordinal 0 is physical device 1's, in the ledger too. */
    nvmlMemory_t m0a, m1a, m0b, m1b;
    CHECK(nvmlDeviceGetMemoryInfo(zero, &m0a) == NVML_SUCCESS);
    CHECK(nvmlDeviceGetMemoryInfo(one, &m1a) == NVML_SUCCESS);
    CUcontext c;
    CUdeviceptr p;
    CHECK(cuDevicePrimaryCtxRetain(&c, 0) == CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(c) == CUDA_SUCCESS);
    CHECK(cuMemAlloc_v2(&p, 16 * MiB) == CUDA_SUCCESS);
    CHECK(nvmlDeviceGetMemoryInfo(zero, &m0b) == NVML_SUCCESS);
    CHECK(nvmlDeviceGetMemoryInfo(one, &m1b) == NVML_SUCCESS);
    CHECK(m0b.used == m0a.used);
    CHECK(m1b.used - m1a.used == 16 * MiB);
    size_t f, t;
    CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS && f == m1b.free);
    _exit(0);
  }
  assert_int_equal(wait_child(pid), 0);
}

/* In a child: with CUDA_VISIBLE_DEVICES=cvd over 3 devices, the driver
 * shows `count` devices, the first being physical `first`. */
static int visible_child(const char *cvd, int count, int first)
{
  pid_t pid = fork();
  if (pid == 0) {
    setenv("GMT_FAKE_DEVICES", "3", 1);
    setenv("CUDA_VISIBLE_DEVICES", cvd, 1);
    CUresult r = cuInit(0);
    if (count == 0) {
      CHECK(r == CUDA_ERROR_NO_DEVICE);
      _exit(0);
    }
    CHECK(r == CUDA_SUCCESS);
    int n = -1;
    CHECK(cuDeviceGetCount(&n) == CUDA_SUCCESS);
    if (n != count) {
      fprintf(stderr, "CUDA_VISIBLE_DEVICES='%s': %d devices, not %d\n", cvd, n, count);
      _exit(1);
    }
    int bus = -1;
    CHECK(cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0) == CUDA_SUCCESS);
    /* Bus ids are the physical index + 1 (machine.h). */
    if (bus != first + 1) {
      fprintf(stderr, "CUDA_VISIBLE_DEVICES='%s': ordinal 0 is bus %d\n", cvd, bus);
      _exit(1);
    }
    _exit(0);
  }
  return wait_child(pid);
}

static void test_visible_devices_list_ends_at_an_invalid_entry(void **state)
{
  (void)state;
  assert_int_equal(visible_child("2,0", 2, 2), 0);
  assert_int_equal(visible_child("1,7,0", 1, 1), 0);
  assert_int_equal(visible_child("1,x,0", 1, 1), 0);
  assert_int_equal(visible_child("0,0", 1, 0), 0);
  assert_int_equal(visible_child("", 0, 0), 0);
  assert_int_equal(visible_child("5", 0, 0), 0);
  assert_int_equal(visible_child("GPU-fa4ec0da-0000-0000-0000-000000000002,0", 2, 2), 0);
  /* A UUID prefix that names one device names it; one that names several
   * names none. */
  assert_int_equal(visible_child("GPU-fa4ec0da-0000-0000-0000-0000000000", 0, 0), 0);
}

static void test_topo_sets_numa_nvlink_and_common_ancestor(void **state)
{
  (void)state;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    child_nvml_fresh();
    setenv("GMT_FAKE_DEVICES", "4", 1);
    setenv("GMT_FAKE_TOPO", " numa=0,0,1,1; nvlink=0-1:4,2-3 ;pcie=0-1:single,2-3:multiple", 1);
    CHECK(nvmlInit_v2() == NVML_SUCCESS);
    nvmlDevice_t d[4];
    for (unsigned i = 0; i < 4; i++)
      CHECK(nvmlDeviceGetHandleByIndex_v2(i, &d[i]) == NVML_SUCCESS);
    unsigned node = 9;
    CHECK(nvmlDeviceGetNumaNodeId(d[1], &node) == NVML_SUCCESS && node == 0);
    CHECK(nvmlDeviceGetNumaNodeId(d[2], &node) == NVML_SUCCESS && node == 1);
    nvmlEnableState_t on;
    for (unsigned l = 0; l < 4; l++)
      CHECK(nvmlDeviceGetNvLinkState(d[0], l, &on) == NVML_SUCCESS && on == NVML_FEATURE_ENABLED);
    CHECK(nvmlDeviceGetNvLinkState(d[0], 4, &on) == NVML_SUCCESS && on == NVML_FEATURE_DISABLED);
    CHECK(nvmlDeviceGetNvLinkState(d[2], 0, &on) == NVML_SUCCESS && on == NVML_FEATURE_ENABLED);
    CHECK(nvmlDeviceGetNvLinkState(d[2], 1, &on) == NVML_SUCCESS && on == NVML_FEATURE_DISABLED);
    CHECK(nvmlDeviceGetNvLinkState(d[0], NVML_NVLINK_MAX_LINKS, &on) ==
          NVML_ERROR_INVALID_ARGUMENT);
    nvmlPciInfo_t peer, one;
    CHECK(nvmlDeviceGetNvLinkRemotePciInfo_v2(d[0], 3, &peer) == NVML_SUCCESS);
    CHECK(nvmlDeviceGetPciInfo_v3(d[1], &one) == NVML_SUCCESS);
    CHECK(strcmp(peer.busId, one.busId) == 0);
    /* A link has two ends: device 1 sees 4 links back to device 0. */
    nvmlPciInfo_t zero;
    CHECK(nvmlDeviceGetNvLinkState(d[1], 3, &on) == NVML_SUCCESS && on == NVML_FEATURE_ENABLED);
    CHECK(nvmlDeviceGetNvLinkRemotePciInfo_v2(d[1], 0, &peer) == NVML_SUCCESS);
    CHECK(nvmlDeviceGetPciInfo_v3(d[0], &zero) == NVML_SUCCESS);
    CHECK(strcmp(peer.busId, zero.busId) == 0);
    CHECK(nvmlDeviceGetNvLinkRemotePciInfo_v2(d[1], 4, &peer) == NVML_ERROR_NOT_SUPPORTED);
    nvmlGpuTopologyLevel_t lv;
    CHECK(nvmlDeviceGetTopologyCommonAncestor(d[0], d[1], &lv) == NVML_SUCCESS &&
          lv == NVML_TOPOLOGY_SINGLE);
    CHECK(nvmlDeviceGetTopologyCommonAncestor(d[3], d[2], &lv) == NVML_SUCCESS &&
          lv == NVML_TOPOLOGY_MULTIPLE);
    CHECK(nvmlDeviceGetTopologyCommonAncestor(d[0], d[2], &lv) == NVML_SUCCESS &&
          lv == NVML_TOPOLOGY_SYSTEM);
    CHECK(nvmlDeviceGetTopologyCommonAncestor(d[1], d[1], &lv) == NVML_SUCCESS &&
          lv == NVML_TOPOLOGY_INTERNAL);
    /* CPUs of the two sockets' GPUs do not overlap (with 2 CPUs or more). */
    unsigned long a[4], b[4];
    CHECK(nvmlDeviceGetCpuAffinity(d[0], 4, a) == NVML_SUCCESS);
    CHECK(nvmlDeviceGetCpuAffinity(d[3], 4, b) == NVML_SUCCESS);
    CHECK(a[0] != 0 && b[0] != 0);
    if (sysconf(_SC_NPROCESSORS_CONF) >= 2)
      CHECK((a[0] & b[0]) == 0);
    /* The driver sees the same machine. */
    int numa = -1;
    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, 3) == CUDA_SUCCESS);
    CHECK(numa == 1);
    _exit(0);
  }
  assert_int_equal(wait_child(pid), 0);
}

static void test_topo_defaults_one_host_bridge_per_numa_node(void **state)
{
  (void)state;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    child_nvml_fresh();
    setenv("GMT_FAKE_DEVICES", "4", 1);
    CHECK(nvmlInit_v2() == NVML_SUCCESS);
    nvmlDevice_t d[4];
    for (unsigned i = 0; i < 4; i++)
      CHECK(nvmlDeviceGetHandleByIndex_v2(i, &d[i]) == NVML_SUCCESS);
    unsigned node = 9;
    CHECK(nvmlDeviceGetNumaNodeId(d[3], &node) == NVML_SUCCESS && node == 1);
    nvmlGpuTopologyLevel_t lv;
    CHECK(nvmlDeviceGetTopologyCommonAncestor(d[0], d[1], &lv) == NVML_SUCCESS &&
          lv == NVML_TOPOLOGY_HOSTBRIDGE);
    CHECK(nvmlDeviceGetTopologyCommonAncestor(d[1], d[2], &lv) == NVML_SUCCESS &&
          lv == NVML_TOPOLOGY_SYSTEM);
    nvmlEnableState_t on;
    CHECK(nvmlDeviceGetNvLinkState(d[0], 0, &on) == NVML_SUCCESS && on == NVML_FEATURE_DISABLED);
    _exit(0);
  }
  assert_int_equal(wait_child(pid), 0);
}

/* In a child, stderr to a file: init with GMT_FAKE_TOPO=spec over 4 devices
 * fails in both libraries, and what they print contains `reason`. */
static int bad_topo_child(const char *spec, const char *reason)
{
  char path[128];
  snprintf(path, sizeof path, "%s/stderr", tmpdir);
  pid_t pid = fork();
  if (pid == 0) {
    child_nvml_fresh();
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    int saved = dup(2);
    dup2(fd, 2);
    setenv("GMT_FAKE_DEVICES", "4", 1);
    setenv("GMT_FAKE_TOPO", spec, 1);
    nvmlReturn_t nr = nvmlInit_v2();
    CUresult cr = cuInit(0);
    dup2(saved, 2);
    CHECK(nr == NVML_ERROR_UNKNOWN);
    CHECK(cr == CUDA_ERROR_INVALID_VALUE);
    char buf[2048] = {0};
    FILE *f = fopen(path, "r");
    CHECK(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (!strstr(buf, "fakenvml: GMT_FAKE_TOPO=") || !strstr(buf, "fakecuda: GMT_FAKE_TOPO=") ||
        !strstr(buf, reason)) {
      fprintf(stderr, "GMT_FAKE_TOPO='%s' printed: %s", spec, buf);
      _exit(1);
    }
    _exit(0);
  }
  return wait_child(pid);
}

static void test_bad_topo_fails_init_with_its_reason(void **state)
{
  (void)state;
  assert_int_equal(bad_topo_child("numa=0,0,1", "fewer entries than devices"), 0);
  assert_int_equal(bad_topo_child("numa=0,0,1,1,1", "more entries than devices"), 0);
  assert_int_equal(bad_topo_child("nvlink=0-0", "two different device indices"), 0);
  assert_int_equal(bad_topo_child("nvlink=0-4", "two different device indices"), 0);
  assert_int_equal(bad_topo_child("nvlink=0-1:19", "from 1 to 18"), 0);
  assert_int_equal(bad_topo_child("nvlink=0-1:10,0-2:10", "more than 18 NVLinks"), 0);
  assert_int_equal(bad_topo_child("pcie=0-1:far", "single, multiple"), 0);
  assert_int_equal(bad_topo_child("switch=0-1", "unknown item"), 0);
  assert_int_equal(bad_topo_child("numa", "key=value"), 0);
}

static void test_utilization_is_busy_while_a_kernel_runs(void **state)
{
  (void)state;
  static const char image[] = "any image";
  CUmodule mod;
  CUfunction spin;
  assert_int_equal(cuModuleLoadData(&mod, image), CUDA_SUCCESS);
  assert_int_equal(cuModuleGetFunction(&spin, mod, "spin"), CUDA_SUCCESS);
  nvmlUtilization_t u;
  assert_int_equal(nvmlDeviceGetUtilizationRates(handle(0), &u), NVML_SUCCESS);
  assert_int_equal(u.gpu, 0);
  unsigned us = 300000;
  void *params[] = {&us};
  assert_int_equal(cuLaunchKernel(spin, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
  usleep(100000);
  assert_int_equal(nvmlDeviceGetUtilizationRates(handle(0), &u), NVML_SUCCESS);
  assert_int_equal(u.gpu, 100);
  assert_int_equal(nvmlDeviceGetUtilizationRates(handle(1), &u), NVML_SUCCESS);
  assert_int_equal(u.gpu, 0);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(nvmlDeviceGetUtilizationRates(handle(0), &u), NVML_SUCCESS);
  assert_int_equal(u.gpu, 0);
  assert_int_equal(cuModuleUnload(mod), CUDA_SUCCESS);
}

static void test_init_is_counted_and_shutdown_past_it_fails(void **state)
{
  (void)state;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    child_nvml_fresh();
    unsigned n;
    CHECK(nvmlDeviceGetCount_v2(&n) == NVML_ERROR_UNINITIALIZED);
    CHECK(nvmlShutdown() == NVML_ERROR_UNINITIALIZED);
    CHECK(nvmlInitWithFlags(0) == NVML_SUCCESS);
    CHECK(nvmlInit() == NVML_SUCCESS);
    CHECK(nvmlShutdown() == NVML_SUCCESS);
    char v[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    CHECK(nvmlSystemGetDriverVersion(v, sizeof v) == NVML_SUCCESS && strchr(v, '.'));
    CHECK(nvmlShutdown() == NVML_SUCCESS);
    CHECK(nvmlDeviceGetCount_v2(&n) == NVML_ERROR_UNINITIALIZED);
    CHECK(strcmp(nvmlErrorString(NVML_ERROR_NOT_FOUND), "Not Found") == 0);
    _exit(0);
  }
  assert_int_equal(wait_child(pid), 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nvml_memory_equals_cumemgetinfo_around_an_alloc),
      cmocka_unit_test(test_nvml_sees_another_process_memory_and_pid),
      cmocka_unit_test(test_handles_by_index_uuid_and_bus_id_agree_with_driver),
      cmocka_unit_test(test_visible_devices_one_makes_ordinal_zero_physical_one),
      cmocka_unit_test(test_visible_devices_list_ends_at_an_invalid_entry),
      cmocka_unit_test(test_topo_sets_numa_nvlink_and_common_ancestor),
      cmocka_unit_test(test_topo_defaults_one_host_bridge_per_numa_node),
      cmocka_unit_test(test_bad_topo_fails_init_with_its_reason),
      cmocka_unit_test(test_utilization_is_busy_while_a_kernel_runs),
      cmocka_unit_test(test_init_is_counted_and_shutdown_past_it_fails),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
