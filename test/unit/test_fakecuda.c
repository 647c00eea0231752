/* Tests of the fake libcuda.so.1: that cuGetProcAddress routes versions and
 * per-thread-stream flags to the right exported symbols, that device memory
 * round-trips and is accounted truthfully across processes, that kernels
 * take their time and contend across processes, that pools, VMM and
 * graphs behave as a hook will meet them on a GPU, and that work runs
 * after the call that queues it: streams, events, synchronizes, copies
 * from and to pageable and page-locked memory, frees, fork and threads. */
#define __CUDA_API_VERSION_INTERNAL
#include <cuda.h>

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fakecuda_symbols.h"

#define MiB ((size_t)1 << 20)
#define FAKE_MEM (256 * MiB)

static char tmpdir[] = "/tmp/gmt-fakecuda-test-XXXXXX";
static CUcontext ctx;

static uint64_t now_us(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static size_t free_mem(void)
{
  size_t f = 0, t = 0;
  assert_int_equal(cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
  assert_int_equal(t, FAKE_MEM);
  return f;
}

/* Child processes report through their exit status: 0 is success. */
static int wait_child(pid_t pid)
{
  int st = 0;
  if (waitpid(pid, &st, 0) != pid)
    return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

static int setup(void **state)
{
  (void)state;
  if (!mkdtemp(tmpdir))
    return -1;
  setenv("GMT_FAKE_DIR", tmpdir, 1);
  setenv("GMT_FAKE_MEM", "256M", 1);
  setenv("GMT_FAKE_DEVICES", "2", 1);
  /* Pageable copies at 1 GB/s (the default is 4): 64 MiB then take 64 ms
   * more than pinned ones, well past the memmove's own spread under ASan
   * on a loaded machine (45-65 ms), which 13 ms at 4 GB/s was not. */
  setenv("GMT_FAKE_PAGEABLE_GBPS", "1", 1);
  if (cuInit(0) != CUDA_SUCCESS)
    return -1;
  CUdevice dev;
  if (cuDeviceGet(&dev, 0) != CUDA_SUCCESS)
    return -1;
  if (cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS)
    return -1;
  return cuCtxSetCurrent(ctx) == CUDA_SUCCESS ? 0 : -1;
}

static int teardown(void **state)
{
  (void)state;
  cuDevicePrimaryCtxRelease_v2(0);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

/* ---- cuGetProcAddress ---- */

static void test_procaddr_maps_mem_alloc_by_version(void **state)
{
  (void)state;
  void *old = NULL, *cur = NULL;
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  assert_int_equal(cuGetProcAddress_v2("cuMemAlloc", &old, 3010, 0, &st), CUDA_SUCCESS);
  assert_int_equal(st, CU_GET_PROC_ADDRESS_SUCCESS);
  assert_int_equal(cuGetProcAddress_v2("cuMemAlloc", &cur, 3020, 0, &st), CUDA_SUCCESS);
  assert_ptr_equal(old, (void *)&cuMemAlloc);
  assert_ptr_equal(cur, (void *)&cuMemAlloc_v2);
  assert_ptr_not_equal(old, cur);
  const char *sym = NULL;
  assert_int_equal(gmt_fake_lookup("cuMemGetInfo", 12000, 0, &sym, NULL), 0);
  assert_string_equal(sym, "cuMemGetInfo_v2");
  assert_int_equal(gmt_fake_lookup("cuStreamDestroy", 3020, 0, &sym, NULL), 0);
  assert_string_equal(sym, "cuStreamDestroy");
  assert_int_equal(gmt_fake_lookup("cuStreamDestroy", 4000, 0, &sym, NULL), 0);
  assert_string_equal(sym, "cuStreamDestroy_v2");
  assert_int_equal(gmt_fake_lookup("cuCtxCreate", 12080, 0, &sym, NULL), 0);
  assert_string_equal(sym, "cuCtxCreate_v4");
  assert_int_equal(gmt_fake_lookup("cuCtxCreate", 11040, 0, &sym, NULL), 0);
  assert_string_equal(sym, "cuCtxCreate_v3");
}

static void test_procaddr_per_thread_flag_picks_ptsz_and_ptds(void **state)
{
  (void)state;
  void *p = NULL;
  assert_int_equal(cuGetProcAddress_v2("cuLaunchKernel", &p, 12000, 2, NULL), CUDA_SUCCESS);
  assert_ptr_equal(p, (void *)&cuLaunchKernel_ptsz);
  assert_int_equal(cuGetProcAddress_v2("cuLaunchKernel", &p, 12000, 0, NULL), CUDA_SUCCESS);
  assert_ptr_equal(p, (void *)&cuLaunchKernel);
  assert_int_equal(cuGetProcAddress_v2("cuLaunchKernel", &p, 12000, 1, NULL), CUDA_SUCCESS);
  assert_ptr_equal(p, (void *)&cuLaunchKernel);
  assert_int_equal(cuGetProcAddress_v2("cuMemcpyHtoD", &p, 12000, 2, NULL), CUDA_SUCCESS);
  assert_ptr_equal(p, (void *)&cuMemcpyHtoD_v2_ptds);
  assert_int_equal(cuGetProcAddress_v2("cuMemAllocAsync", &p, 11020, 2, NULL), CUDA_SUCCESS);
  assert_ptr_equal(p, (void *)&cuMemAllocAsync_ptsz);
  assert_int_equal(cuGetProcAddress_v2("cuGraphLaunch", &p, 12000, 2, NULL), CUDA_SUCCESS);
  assert_ptr_equal(p, (void *)&cuGraphLaunch_ptsz);
  /* Functions without a stream have no variant: the flag changes nothing. */
  assert_int_equal(cuGetProcAddress_v2("cuMemAlloc", &p, 12000, 2, NULL), CUDA_SUCCESS);
  assert_ptr_equal(p, (void *)&cuMemAlloc_v2);
}

static void test_procaddr_get_proc_address_has_two_signatures(void **state)
{
  (void)state;
  void *v1 = NULL, *v2 = NULL;
  assert_int_equal(cuGetProcAddress_v2("cuGetProcAddress", &v1, 11030, 0, NULL), CUDA_SUCCESS);
  assert_int_equal(cuGetProcAddress("cuGetProcAddress", &v2, 12000, 0), CUDA_SUCCESS);
  assert_ptr_equal(v1, (void *)&cuGetProcAddress);
  assert_ptr_equal(v2, (void *)&cuGetProcAddress_v2);
}

static void test_procaddr_unknown_name_and_low_version_fail(void **state)
{
  (void)state;
  void *p = (void *)&p;
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
  assert_int_equal(cuGetProcAddress_v2("cuNoSuchThing", &p, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
  assert_null(p);
  assert_int_equal(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  p = (void *)&p;
  assert_int_equal(cuGetProcAddress_v2("cuMemAllocAsync", &p, 11000, 0, &st), CUDA_ERROR_NOT_FOUND);
  assert_null(p);
  assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  /* Suffixed names are not base names, as with the real driver. */
  assert_int_equal(cuGetProcAddress_v2("cuMemAlloc_v2", &p, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
  assert_int_equal(cuGetProcAddress_v2("cuMemAlloc", NULL, 13000, 0, &st),
                   CUDA_ERROR_INVALID_VALUE);
}

static void test_procaddr_every_row_resolves_to_its_symbol(void **state)
{
  (void)state;
  const char *base, *pt, *sym, *got;
  int ver;
  size_t n = 0;
  for (size_t i = 0; (sym = gmt_fake_symbol_at(i, &base, &ver, &pt)); i++, n++) {
    assert_int_equal(gmt_fake_lookup(base, ver, 0, &got, NULL), 0);
    assert_string_equal(got, sym);
    if (pt) {
      assert_int_equal(gmt_fake_lookup(base, 13000, 2, &got, NULL), 0);
      assert_non_null(strstr(got, "_pt"));
    }
  }
  assert_true(n > 100);
}

/* ---- memory ---- */

static void test_alloc_copy_round_trip_through_device_addresses(void **state)
{
  (void)state;
  enum { N = 1 << 20 };
  unsigned char *src = malloc(N), *dst = calloc(1, N);
  assert_non_null(src);
  assert_non_null(dst);
  for (size_t i = 0; i < N; i++)
    src[i] = (unsigned char)(i * 7 + 3);
  CUdeviceptr a = 0, b = 0;
  assert_int_equal(cuMemAlloc_v2(&a, N), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc_v2(&b, N), CUDA_SUCCESS);
  assert_int_equal(a % 256, 0);
  assert_true(a != (CUdeviceptr)(uintptr_t)src && a != b);
  assert_int_equal(cuMemcpyHtoD_v2(a, src, N), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoD_v2(b, a, N), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoH_v2(dst, b, N), CUDA_SUCCESS);
  assert_memory_equal(src, dst, N);
  /* Interior pointers, the UVA cuMemcpy and memset. */
  unsigned char four[4] = {0};
  assert_int_equal(cuMemcpyDtoH_v2_ptds(four, a + 1000, 4), CUDA_SUCCESS);
  assert_memory_equal(four, src + 1000, 4);
  assert_int_equal(cuMemsetD8_v2(b + 10, 0xab, 5), CUDA_SUCCESS);
  assert_int_equal(cuMemcpy(a, b + 8, 8), CUDA_SUCCESS);
  assert_int_equal(cuMemcpy((CUdeviceptr)(uintptr_t)dst, a, 8), CUDA_SUCCESS);
  assert_int_equal(dst[1], src[9]);
  assert_int_equal(dst[2], 0xab);
  assert_int_equal(dst[6], 0xab);
  assert_int_equal(dst[7], src[15]);
  /* A copy past the end of an allocation writes nothing and fails. */
  assert_int_equal(cuMemcpyHtoD_v2(a + N - 4, src, 8), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemFree_v2(a), CUDA_SUCCESS);
  assert_int_equal(cuMemFree_v2(b), CUDA_SUCCESS);
  free(src);
  free(dst);
}

static void test_v1_alloc_returns_32_bit_address(void **state)
{
  (void)state;
  CUdeviceptr_v1 p = 0;
  unsigned int v = 0xdeadbeef, back = 0;
  assert_int_equal(cuMemAlloc(&p, 4096), CUDA_SUCCESS);
  assert_true(p != 0);
  assert_int_equal(cuMemcpyHtoD(p, &v, 4), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoH_v2(&back, p, 4), CUDA_SUCCESS);
  assert_int_equal(back, v);
  assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
}

static void test_bad_arguments_get_cuda_errors(void **state)
{
  (void)state;
  CUdeviceptr p = 0;
  assert_int_equal(cuMemAlloc_v2(NULL, 16), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemAlloc_v2(&p, 0), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemFree_v2(0x123400), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemcpyHtoD_v2(0x123400, &p, 8), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuInit(1), CUDA_ERROR_INVALID_VALUE);
  int n = 0;
  assert_int_equal(cuDeviceGet(&n, 2), CUDA_ERROR_INVALID_DEVICE);
  const char *s = NULL;
  assert_int_equal(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
  assert_string_equal(s, "CUDA_ERROR_OUT_OF_MEMORY");
  assert_int_equal(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
  assert_string_equal(s, "out of memory");
}

static void test_pitch_is_rounded_up_to_512(void **state)
{
  (void)state;
  CUdeviceptr p = 0;
  size_t pitch = 0, before = free_mem();
  assert_int_equal(cuMemAllocPitch_v2(&p, &pitch, 1000, 10, 4), CUDA_SUCCESS);
  assert_int_equal(pitch, 1024);
  assert_int_equal(before - free_mem(), 1024 * 10);
  assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
}

static void test_meminfo_tells_truth_after_alloc_and_free(void **state)
{
  (void)state;
  size_t before = free_mem();
  CUdeviceptr p = 0;
  assert_int_equal(cuMemAlloc_v2(&p, 64 * MiB), CUDA_SUCCESS);
  assert_int_equal(before - free_mem(), 64 * MiB);
  unsigned int f1 = 0, t1 = 0;
  assert_int_equal(cuMemGetInfo(&f1, &t1), CUDA_SUCCESS);
  assert_int_equal(f1, before - 64 * MiB);
  assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
  assert_int_equal(free_mem(), before);
  size_t total = 0;
  assert_int_equal(cuDeviceTotalMem_v2(&total, 0), CUDA_SUCCESS);
  assert_int_equal(total, FAKE_MEM);
}

static void test_oom_exactly_at_the_limit(void **state)
{
  (void)state;
  size_t avail = free_mem();
  CUdeviceptr p = 0, q = 0;
  assert_int_equal(cuMemAlloc_v2(&p, avail + 1), CUDA_ERROR_OUT_OF_MEMORY);
  assert_int_equal(cuMemAlloc_v2(&p, avail), CUDA_SUCCESS);
  assert_int_equal(free_mem(), 0);
  assert_int_equal(cuMemAlloc_v2(&q, 1), CUDA_ERROR_OUT_OF_MEMORY);
  CUstream s = NULL;
  assert_int_equal(cuMemAllocAsync(&q, 1, s), CUDA_ERROR_OUT_OF_MEMORY);
  assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
  assert_int_equal(free_mem(), avail);
}

static void test_meminfo_counts_live_processes_only(void **state)
{
  (void)state;
  size_t before = free_mem();
  int up[2], down[2];
  assert_int_equal(pipe(up), 0);
  assert_int_equal(pipe(down), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* The child starts with no driver state: it must cuInit afresh. */
    CUdeviceptr p = 0;
    CUcontext c;
    char x = 0;
    if (cuMemAlloc_v2(&p, 4096) != CUDA_ERROR_NOT_INITIALIZED)
      _exit(1);
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&c, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(c) != CUDA_SUCCESS)
      _exit(2);
    if (cuMemAlloc_v2(&p, 32 * MiB) != CUDA_SUCCESS)
      _exit(3);
    if (write(up[1], "a", 1) != 1)
      _exit(4);
    if (read(down[0], &x, 1) != 1)
      _exit(5);
    _exit(0); /* no free: a dead process's memory must not stay charged */
  }
  char x = 0;
  assert_int_equal(read(up[0], &x, 1), 1);
  assert_int_equal(before - free_mem(), 32 * MiB);
  assert_int_equal(write(down[1], "b", 1), 1);
  assert_int_equal(wait_child(pid), 0);
  assert_int_equal(free_mem(), before);
  close(up[0]), close(up[1]), close(down[0]), close(down[1]);
}

/* ---- kernels ---- */

static CUfunction get_func(const char *name)
{
  static CUmodule mod;
  static const char image[] = "any image";
  if (!mod)
    assert_int_equal(cuModuleLoadData(&mod, image), CUDA_SUCCESS);
  CUfunction f = NULL;
  assert_int_equal(cuModuleGetFunction(&f, mod, name), CUDA_SUCCESS);
  return f;
}

static void test_spin_kernel_takes_its_duration(void **state)
{
  (void)state;
  CUfunction spin = get_func("spin"), noop = get_func("noop");
  unsigned int us = 50000;
  void *params[] = {&us};
  /* Launches return at once: a kernel's time is measured to the end of
   * the synchronize that waits for it, as on a GPU. */
  uint64_t t0 = now_us();
  assert_int_equal(cuLaunchKernel(spin, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
  uint64_t dt = now_us() - t0;
  assert_true(dt >= us);
  assert_true(dt < us + 200000);
  t0 = now_us();
  assert_int_equal(cuLaunchKernel_ptsz(noop, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL),
                   CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize_ptsz(NULL), CUDA_SUCCESS);
  assert_true(now_us() - t0 < 20000);
  CUlaunchConfig cfg = {
      .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1};
  us = 20000;
  t0 = now_us();
  assert_int_equal(cuLaunchKernelEx(&cfg, spin, params, NULL), CUDA_SUCCESS);
  assert_int_equal(cuLaunchCooperativeKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, params),
                   CUDA_SUCCESS);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  dt = now_us() - t0;
  assert_true(dt >= 2 * us);
  assert_true(dt < 2 * us + 200000);
  assert_int_equal(cuLaunchKernel(spin, 0, 1, 1, 1, 1, 1, 0, NULL, params, NULL),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuLaunchKernel((CUfunction)&us, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL),
                   CUDA_ERROR_INVALID_HANDLE);
}

static void test_kernels_on_one_device_serialize_across_processes(void **state)
{
  (void)state;
  unsigned int us = 100000;
  void *params[] = {&us};
  CUfunction spin = get_func("spin");
  int go[2];
  assert_int_equal(pipe(go), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    CUcontext c;
    CUmodule m;
    CUfunction f;
    char x;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&c, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(c) != CUDA_SUCCESS || cuModuleLoadData(&m, "x") != CUDA_SUCCESS ||
        cuModuleGetFunction(&f, m, "spin") != CUDA_SUCCESS)
      _exit(1);
    if (read(go[0], &x, 1) != 1)
      _exit(2);
    if (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL) != CUDA_SUCCESS)
      _exit(3);
    _exit(cuCtxSynchronize() == CUDA_SUCCESS ? 0 : 4);
  }
  uint64_t t0 = now_us();
  assert_int_equal(write(go[1], "g", 1), 1);
  assert_int_equal(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(wait_child(pid), 0);
  uint64_t dt = now_us() - t0;
  /* Two 100 ms kernels on one device: one after the other. */
  assert_true(dt >= 2 * us);
  assert_true(dt < 2 * us + 400000);
  close(go[0]), close(go[1]);
}

static void test_graph_launch_runs_kernel_nodes_in_order(void **state)
{
  (void)state;
  CUgraph g;
  CUgraphNode a, b;
  CUgraphExec e;
  unsigned int us = 20000;
  void *params[] = {&us};
  CUDA_KERNEL_NODE_PARAMS p = {.func = get_func("spin"),
                               .gridDimX = 1,
                               .gridDimY = 1,
                               .gridDimZ = 1,
                               .blockDimX = 1,
                               .blockDimY = 1,
                               .blockDimZ = 1,
                               .kernelParams = params};
  assert_int_equal(cuGraphCreate(&g, 0), CUDA_SUCCESS);
  assert_int_equal(cuGraphAddKernelNode_v2(&a, g, NULL, 0, &p), CUDA_SUCCESS);
  assert_int_equal(cuGraphAddKernelNode_v2(&b, g, &a, 1, &p), CUDA_SUCCESS);
  us = 0; /* parameters were copied when the nodes were added */
  assert_int_equal(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
  uint64_t t0 = now_us();
  assert_int_equal(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
  uint64_t dt = now_us() - t0;
  assert_true(dt >= 40000);
  assert_true(dt < 40000 + 200000);
  assert_int_equal(cuGraphExecDestroy(e), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);
  assert_int_equal(cuGraphLaunch(e, NULL), CUDA_ERROR_INVALID_VALUE);
}

static void test_event_elapsed_time_covers_a_kernel(void **state)
{
  (void)state;
  CUevent a, b;
  unsigned int us = 30000;
  void *params[] = {&us};
  float ms = 0;
  assert_int_equal(cuEventCreate(&a, 0), CUDA_SUCCESS);
  assert_int_equal(cuEventCreate(&b, 0), CUDA_SUCCESS);
  assert_int_equal(cuEventRecord(a, NULL), CUDA_SUCCESS);
  assert_int_equal(cuLaunchKernel(get_func("spin"), 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL),
                   CUDA_SUCCESS);
  assert_int_equal(cuEventRecord(b, NULL), CUDA_SUCCESS);
  assert_int_equal(cuEventSynchronize(b), CUDA_SUCCESS);
  assert_int_equal(cuEventElapsedTime_v2(&ms, a, b), CUDA_SUCCESS);
  assert_true(ms >= 30.0f && ms < 230.0f);
  assert_int_equal(cuEventDestroy_v2(a), CUDA_SUCCESS);
  assert_int_equal(cuEventDestroy_v2(b), CUDA_SUCCESS);
}

/* ---- pools and VMM ---- */

static uint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute a)
{
  cuuint64_t v = 0;
  assert_int_equal(cuMemPoolGetAttribute(pool, a, &v), CUDA_SUCCESS);
  return v;
}

static void test_pool_holds_freed_memory_until_trim(void **state)
{
  (void)state;
  CUmemoryPool pool;
  CUstream s;
  assert_int_equal(cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
  assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
  size_t before = free_mem();
  CUdeviceptr p = 0, q = 0;
  assert_int_equal(cuMemAllocAsync(&p, 8 * MiB, s), CUDA_SUCCESS);
  assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 8 * MiB);
  assert_int_equal(cuMemFreeAsync_ptsz(p, s), CUDA_SUCCESS);
  /* Freed but reserved: still charged, as on a GPU. */
  assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
  assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 8 * MiB);
  assert_int_equal(before - free_mem(), 8 * MiB);
  /* Reuse does not reserve more. */
  assert_int_equal(cuMemAllocAsync(&q, 6 * MiB, s), CUDA_SUCCESS);
  assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 8 * MiB);
  assert_int_equal(cuMemFreeAsync(q, s), CUDA_SUCCESS);
  assert_int_equal(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
  assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
  assert_int_equal(free_mem(), before);
  /* Above the release threshold a synchronize gives memory back. */
  cuuint64_t keep = 4 * MiB;
  assert_int_equal(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep),
                   CUDA_SUCCESS);
  assert_int_equal(cuMemAllocAsync(&p, 2 * MiB, s), CUDA_SUCCESS);
  assert_int_equal(cuMemFreeAsync(p, s), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 2 * MiB);
  keep = 0;
  assert_int_equal(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep),
                   CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
  assert_int_equal(free_mem(), before);
  assert_int_equal(cuStreamDestroy_v2(s), CUDA_SUCCESS);
}

static void test_vmm_maps_handles_and_charges_until_release(void **state)
{
  (void)state;
  CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
  size_t gran = 0, before = free_mem();
  assert_int_equal(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                   CUDA_SUCCESS);
  assert_int_equal(gran, 2 * MiB);
  CUmemGenericAllocationHandle h1, h2;
  CUdeviceptr va = 0;
  assert_int_equal(cuMemCreate(&h1, gran, &prop, 0), CUDA_SUCCESS);
  assert_int_equal(cuMemCreate(&h2, gran, &prop, 0), CUDA_SUCCESS);
  assert_int_equal(before - free_mem(), 2 * gran);
  assert_int_equal(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0), CUDA_SUCCESS);
  assert_int_equal(before - free_mem(), 2 * gran); /* address space is free */
  assert_int_equal(cuMemMap(va, gran, 0, h1, 0), CUDA_SUCCESS);
  assert_int_equal(cuMemMap(va + gran, gran, 0, h2, 0), CUDA_SUCCESS);
  CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  assert_int_equal(cuMemSetAccess(va, 2 * gran, &acc, 1), CUDA_SUCCESS);
  /* A copy across the seam of two handles. */
  char in[16] = "across the seam", out[16] = {0};
  assert_int_equal(cuMemcpyHtoD_v2(va + gran - 8, in, sizeof in), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoH_v2(out, va + gran - 8, sizeof out), CUDA_SUCCESS);
  assert_memory_equal(in, out, sizeof in);
  assert_int_equal(cuMemUnmap(va, 2 * gran), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoH_v2(out, va, 4), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemRelease(h1), CUDA_SUCCESS);
  assert_int_equal(before - free_mem(), gran);
  assert_int_equal(cuMemRelease(h2), CUDA_SUCCESS);
  assert_int_equal(cuMemAddressFree(va, 2 * gran), CUDA_SUCCESS);
  assert_int_equal(free_mem(), before);
}

/* What moving a program's own physical memory relies on: a mapping
 * without access faults, access is per device and mapping, a handle lives
 * while referenced or mapped (a retain is one more reference), its bytes
 * are gone once neither, the range can be mapped again, and a handle
 * exports only as a type it was created for. */
static void test_vmm_access_references_remap_and_export(void **state)
{
  (void)state;
  size_t g = 2 * MiB, before = free_mem();
  CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
  CUmemGenericAllocationHandle h = 0, again = 0;
  CUdeviceptr va = 0;
  assert_int_equal(cuMemCreate(&h, g, &prop, 0), CUDA_SUCCESS);
  assert_int_equal(cuMemAddressReserve(&va, 2 * g, 0, 0, 0), CUDA_SUCCESS);
  assert_int_equal(cuMemMap(va, g, 0, h, 0), CUDA_SUCCESS);
  char in[8] = "bytes!!", out[8] = {0};
  /* Mapped, but no device may touch it yet. */
  assert_int_equal(cuMemcpyHtoD_v2(va, in, sizeof in), CUDA_ERROR_INVALID_VALUE);
  unsigned long long flags = 9;
  assert_int_equal(cuMemGetAccess(&flags, &prop.location, va), CUDA_SUCCESS);
  assert_int_equal(flags, CU_MEM_ACCESS_FLAGS_PROT_NONE);
  CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  /* Not all of the range is mapped. */
  assert_int_equal(cuMemSetAccess(va, 2 * g, &acc, 1), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemSetAccess(va, g, &acc, 1), CUDA_SUCCESS);
  assert_int_equal(cuMemGetAccess(&flags, &prop.location, va + 100), CUDA_SUCCESS);
  assert_int_equal(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  assert_int_equal(cuMemcpyHtoD_v2(va, in, sizeof in), CUDA_SUCCESS);
  /* A retain is a reference of its own: one release leaves it. */
  assert_int_equal(cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)(va + 64)), CUDA_SUCCESS);
  assert_int_equal(again, h);
  assert_int_equal(cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)(va + g)),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemRelease(h), CUDA_SUCCESS);
  assert_int_equal(cuMemRelease(h), CUDA_SUCCESS);
  /* No reference left, but mapped: the bytes stay until the unmap. */
  assert_int_equal(before - free_mem(), g);
  assert_int_equal(cuMemcpyDtoH_v2(out, va, sizeof out), CUDA_SUCCESS);
  assert_memory_equal(in, out, sizeof in);
  assert_int_equal(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemUnmap(va, g), CUDA_SUCCESS);
  assert_int_equal(free_mem(), before);
  assert_int_equal(cuMemcpyDtoH_v2(out, va, sizeof out), CUDA_ERROR_INVALID_VALUE);
  /* The same range takes a new handle, whose bytes start as zeros and
   * whose access is set again. */
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  assert_int_equal(cuMemCreate(&h, g, &prop, 0), CUDA_SUCCESS);
  assert_int_equal(cuMemMap(va, g, 0, h, 0), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoH_v2(out, va, sizeof out), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemSetAccess(va, g, &acc, 1), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoH_v2(out, va, sizeof out), CUDA_SUCCESS);
  assert_memory_equal(out, (char[8]){0}, sizeof out);
  CUmemAllocationProp got;
  memset(&got, 0, sizeof got);
  assert_int_equal(cuMemGetAllocationPropertiesFromHandle(&got, h), CUDA_SUCCESS);
  assert_int_equal(got.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  CUmemFabricHandle fab;
  assert_int_equal(cuMemExportToShareableHandle(&fab, h, CU_MEM_HANDLE_TYPE_FABRIC, 0),
                   CUDA_ERROR_INVALID_VALUE);
  int fd = -1;
  assert_int_equal(
      cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
      CUDA_SUCCESS);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(cuMemUnmap(va, g), CUDA_SUCCESS);
  assert_int_equal(cuMemRelease(h), CUDA_SUCCESS);
  assert_int_equal(cuMemAddressFree(va, 2 * g), CUDA_SUCCESS);
  assert_int_equal(free_mem(), before);
}

/* Managed memory is charged to the card while there: a whole
 * allocation's prefetch to the host gives it back, one to the device takes
 * it again, and its bytes stay what they were. */
static void test_prefetch_moves_managed_memory_off_the_card_and_back(void **state)
{
  (void)state;
  size_t before = free_mem();
  CUdeviceptr p = 0, d = 0;
  assert_int_equal(cuMemAllocManaged(&p, 8 * MiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  assert_int_equal(before - free_mem(), 8 * MiB);
  char in[16] = "managed bytes", out[16] = {0};
  assert_int_equal(cuMemcpyHtoD_v2(p + MiB, in, sizeof in), CUDA_SUCCESS);
  CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST},
                dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  /* Part of it moves nothing; the whole of it leaves the card. */
  assert_int_equal(cuMemPrefetchAsync_v2(p, MiB, host, 0, NULL), CUDA_SUCCESS);
  assert_int_equal(before - free_mem(), 8 * MiB);
  assert_int_equal(cuMemPrefetchAsync_v2(p, 8 * MiB, host, 0, NULL), CUDA_SUCCESS);
  assert_int_equal(free_mem(), before);
  assert_int_equal(cuMemPrefetchAsync_v2(p, 8 * MiB, dev0, 0, NULL), CUDA_SUCCESS);
  assert_int_equal(before - free_mem(), 8 * MiB);
  /* The CUDA 8 entry point, CU_DEVICE_CPU for the host. */
  assert_int_equal(cuMemPrefetchAsync(p, 8 * MiB, CU_DEVICE_CPU, NULL), CUDA_SUCCESS);
  assert_int_equal(free_mem(), before);
  assert_int_equal(cuMemcpyDtoH_v2(out, p + MiB, sizeof out), CUDA_SUCCESS);
  assert_memory_equal(in, out, sizeof in);
  /* Freed while on the host: nothing more to give back. */
  assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
  assert_int_equal(free_mem(), before);
  /* Only managed memory, within its allocation, to a device that exists. */
  assert_int_equal(cuMemAlloc_v2(&d, MiB), CUDA_SUCCESS);
  assert_int_equal(cuMemPrefetchAsync_v2(d, MiB, host, 0, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemFree_v2(d), CUDA_SUCCESS);
  assert_int_equal(cuMemAllocManaged(&p, MiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  assert_int_equal(cuMemPrefetchAsync_v2(p, 2 * MiB, host, 0, NULL), CUDA_ERROR_INVALID_VALUE);
  CUmemLocation dev9 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 9};
  assert_int_equal(cuMemPrefetchAsync_v2(p, MiB, dev9, 0, NULL), CUDA_ERROR_INVALID_DEVICE);
  assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
  assert_int_equal(free_mem(), before);
}

static void test_second_device_has_its_own_memory(void **state)
{
  (void)state;
  CUcontext c1;
  CUdeviceptr p = 0;
  size_t before0 = free_mem();
  assert_int_equal(cuCtxCreate_v2(&c1, 0, 1), CUDA_SUCCESS);
  size_t f = 0, t = 0;
  assert_int_equal(cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc_v2(&p, 16 * MiB), CUDA_SUCCESS);
  size_t f2 = 0;
  assert_int_equal(cuMemGetInfo_v2(&f2, &t), CUDA_SUCCESS);
  assert_int_equal(f - f2, 16 * MiB);
  assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
  assert_int_equal(cuCtxDestroy_v2(c1), CUDA_SUCCESS);
  assert_int_equal(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  assert_int_equal(free_mem(), before0);
}

/* ---- queues: work runs after the call that issues it, as on a GPU ---- */

static void spin_on(CUstream s, unsigned int us)
{
  void *params[] = {&us};
  assert_int_equal(cuLaunchKernel(get_func("spin"), 1, 1, 1, 1, 1, 1, 0, s, params, NULL),
                   CUDA_SUCCESS);
}

/* Bounds for timings on a busy two-core machine: a call that only queues
 * must return well before the kernel it queued could have run. */
#define QUICK_US 25000

static void test_launch_returns_before_its_kernel_has_run(void **state)
{
  (void)state;
  unsigned int us = 50000;
  uint64_t t0 = now_us();
  spin_on(NULL, us);
  assert_true(now_us() - t0 < QUICK_US);
  assert_int_equal(cuStreamQuery(NULL), CUDA_ERROR_NOT_READY);
  assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
  assert_true(now_us() - t0 >= us);
  assert_int_equal(cuStreamQuery(NULL), CUDA_SUCCESS);
  /* Nobody need wait for the work to run: the device's worker runs it. */
  spin_on(NULL, 20000);
  usleep(200000);
  assert_int_equal(cuStreamQuery(NULL), CUDA_SUCCESS);
}

static int host_fn_calls;
static void count_call(void *arg)
{
  __atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST);
}

static void test_every_launch_path_queues(void **state)
{
  (void)state;
  CUfunction spin = get_func("spin");
  unsigned int us = 20000;
  void *params[] = {&us};
  CUlaunchConfig cfg = {
      .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1};
  CUDA_LAUNCH_PARAMS multi = {.function = spin,
                              .gridDimX = 1,
                              .gridDimY = 1,
                              .gridDimZ = 1,
                              .blockDimX = 1,
                              .blockDimY = 1,
                              .blockDimZ = 1,
                              .kernelParams = params};
  CUDA_KERNEL_NODE_PARAMS node = {.func = spin,
                                  .gridDimX = 1,
                                  .gridDimY = 1,
                                  .gridDimZ = 1,
                                  .blockDimX = 1,
                                  .blockDimY = 1,
                                  .blockDimZ = 1,
                                  .kernelParams = params};
  CUgraph g;
  CUgraphNode n;
  CUgraphExec e;
  assert_int_equal(cuGraphCreate(&g, 0), CUDA_SUCCESS);
  assert_int_equal(cuGraphAddKernelNode_v2(&n, g, NULL, 0, &node), CUDA_SUCCESS);
  assert_int_equal(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
  host_fn_calls = 0;
  uint64_t t0 = now_us();
  assert_int_equal(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);
  assert_int_equal(cuLaunchKernel_ptsz(spin, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL),
                   CUDA_SUCCESS);
  assert_int_equal(cuLaunchKernelEx(&cfg, spin, params, NULL), CUDA_SUCCESS);
  assert_int_equal(cuLaunchCooperativeKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, params),
                   CUDA_SUCCESS);
  assert_int_equal(cuLaunchCooperativeKernelMultiDevice(&multi, 1, 0), CUDA_SUCCESS);
  assert_int_equal(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
  assert_int_equal(cuLaunchHostFunc(NULL, count_call, &host_fn_calls), CUDA_SUCCESS);
  /* Seven calls, six kernels of 20 ms: all queued, none run yet. */
  assert_true(now_us() - t0 < QUICK_US);
  assert_int_equal(__atomic_load_n(&host_fn_calls, __ATOMIC_SEQ_CST), 0);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_true(now_us() - t0 >= 6 * us);
  assert_int_equal(__atomic_load_n(&host_fn_calls, __ATOMIC_SEQ_CST), 1);
  /* Arguments are still checked at the call. */
  assert_int_equal(cuLaunchKernel(spin, 1, 1, 1, 2048, 1, 1, 0, NULL, params, NULL),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, (CUstream)&us, params, NULL),
                   CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(cuLaunchHostFunc(NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuGraphExecDestroy(e), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);
}

static void test_stream_query_is_not_ready_until_synchronized(void **state)
{
  (void)state;
  CUstream s;
  assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
  assert_int_equal(cuStreamQuery(s), CUDA_SUCCESS);
  uint64_t t0 = now_us();
  spin_on(s, 50000);
  assert_int_equal(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_true(now_us() - t0 >= 50000);
  assert_int_equal(cuStreamQuery(s), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy_v2(s), CUDA_SUCCESS);
}

static void test_event_time_is_when_the_stream_reached_it(void **state)
{
  (void)state;
  CUevent a, b;
  float ms = -1;
  assert_int_equal(cuEventCreate(&a, 0), CUDA_SUCCESS);
  assert_int_equal(cuEventCreate(&b, 0), CUDA_SUCCESS);
  /* 40 ms of work before the first event and 30 ms between the two, all
   * issued at once: the events time the 30 ms kernel, not the calls. */
  uint64_t t0 = now_us();
  spin_on(NULL, 40000);
  assert_int_equal(cuEventRecord(a, NULL), CUDA_SUCCESS);
  spin_on(NULL, 30000);
  assert_int_equal(cuEventRecord(b, NULL), CUDA_SUCCESS);
  assert_int_equal(cuEventQuery(a), CUDA_ERROR_NOT_READY);
  assert_int_equal(cuEventElapsedTime_v2(&ms, a, b), CUDA_ERROR_NOT_READY);
  assert_int_equal(cuEventSynchronize(a), CUDA_SUCCESS);
  assert_true(now_us() - t0 >= 40000);
  assert_int_equal(cuEventQuery(a), CUDA_SUCCESS);
  assert_int_equal(cuEventQuery(b), CUDA_ERROR_NOT_READY); /* 30 ms to go */
  assert_int_equal(cuEventElapsedTime(&ms, a, b), CUDA_ERROR_NOT_READY);
  assert_int_equal(cuEventSynchronize(b), CUDA_SUCCESS);
  assert_true(now_us() - t0 >= 70000);
  assert_int_equal(cuEventElapsedTime_v2(&ms, a, b), CUDA_SUCCESS);
  assert_true(ms >= 30.0f && ms < 130.0f);
  assert_int_equal(cuEventDestroy_v2(a), CUDA_SUCCESS);
  assert_int_equal(cuEventDestroy_v2(b), CUDA_SUCCESS);
}

static void test_streams_are_waited_for_separately(void **state)
{
  (void)state;
  CUstream busy, idle, nonblocking;
  assert_int_equal(cuStreamCreate(&busy, 0), CUDA_SUCCESS);
  assert_int_equal(cuStreamCreate(&idle, 0), CUDA_SUCCESS);
  assert_int_equal(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  uint64_t t0 = now_us();
  spin_on(busy, 60000);
  /* Another stream's work is not this one's. */
  assert_int_equal(cuStreamQuery(busy), CUDA_ERROR_NOT_READY);
  assert_int_equal(cuStreamQuery(idle), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(idle), CUDA_SUCCESS);
  assert_true(now_us() - t0 < QUICK_US);
  /* The legacy default stream waits for blocking streams... */
  assert_int_equal(cuStreamQuery(NULL), CUDA_ERROR_NOT_READY);
  assert_int_equal(cuStreamSynchronize(CU_STREAM_LEGACY), CUDA_SUCCESS);
  assert_true(now_us() - t0 >= 60000);
  assert_int_equal(cuStreamQuery(busy), CUDA_SUCCESS);
  /* ...but not for non-blocking ones. */
  t0 = now_us();
  spin_on(nonblocking, 60000);
  assert_int_equal(cuStreamQuery(nonblocking), CUDA_ERROR_NOT_READY);
  assert_int_equal(cuStreamQuery(NULL), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
  assert_true(now_us() - t0 < QUICK_US);
  assert_int_equal(cuStreamSynchronize(nonblocking), CUDA_SUCCESS);
  assert_true(now_us() - t0 >= 60000);
  /* Work in one stream runs in the order it was issued. */
  host_fn_calls = 0;
  spin_on(busy, 30000);
  assert_int_equal(cuLaunchHostFunc(busy, count_call, &host_fn_calls), CUDA_SUCCESS);
  assert_int_equal(__atomic_load_n(&host_fn_calls, __ATOMIC_SEQ_CST), 0);
  assert_int_equal(cuStreamSynchronize(busy), CUDA_SUCCESS);
  assert_int_equal(__atomic_load_n(&host_fn_calls, __ATOMIC_SEQ_CST), 1);
  assert_int_equal(cuStreamDestroy_v2(busy), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy_v2(idle), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy_v2(nonblocking), CUDA_SUCCESS);
}

static void test_stream_waits_for_an_event_of_another_device(void **state)
{
  (void)state;
  CUcontext c1;
  CUstream s1, waiter, other;
  CUevent e;
  assert_int_equal(cuCtxCreate_v2(&c1, 0, 1), CUDA_SUCCESS); /* device 1, now current */
  assert_int_equal(cuStreamCreate(&s1, 0), CUDA_SUCCESS);
  assert_int_equal(cuEventCreate(&e, 0), CUDA_SUCCESS);
  uint64_t t0 = now_us();
  spin_on(s1, 80000);
  assert_int_equal(cuEventRecord(e, s1), CUDA_SUCCESS);
  assert_int_equal(cuCtxSetCurrent(ctx), CUDA_SUCCESS); /* device 0 */
  assert_int_equal(cuStreamCreate(&waiter, 0), CUDA_SUCCESS);
  assert_int_equal(cuStreamCreate(&other, 0), CUDA_SUCCESS);
  assert_int_equal(cuStreamWaitEvent(waiter, e, 0), CUDA_SUCCESS);
  spin_on(waiter, 0);
  /* Device 0 is idle, but the waiting stream holds until device 1 has
   * reached the event; a stream without the wait runs meanwhile. */
  spin_on(other, 0);
  assert_int_equal(cuStreamSynchronize(other), CUDA_SUCCESS);
  assert_true(now_us() - t0 < QUICK_US);
  assert_int_equal(cuStreamQuery(waiter), CUDA_ERROR_NOT_READY);
  assert_int_equal(cuStreamSynchronize(waiter), CUDA_SUCCESS);
  assert_true(now_us() - t0 >= 80000);
  assert_int_equal(cuEventQuery(e), CUDA_SUCCESS);
  /* A bad event is refused at the call. */
  assert_int_equal(cuStreamWaitEvent(waiter, (CUevent)&t0, 0), CUDA_ERROR_INVALID_HANDLE);
  /* An event never recorded is nothing to wait for. */
  CUevent never;
  assert_int_equal(cuEventCreate(&never, 0), CUDA_SUCCESS);
  assert_int_equal(cuStreamWaitEvent(waiter, never, 0), CUDA_SUCCESS);
  assert_int_equal(cuStreamQuery(waiter), CUDA_SUCCESS);
  assert_int_equal(cuEventDestroy_v2(never), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy_v2(waiter), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy_v2(other), CUDA_SUCCESS);
  assert_int_equal(cuEventDestroy_v2(e), CUDA_SUCCESS);
  assert_int_equal(cuCtxPushCurrent_v2(c1), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy_v2(s1), CUDA_SUCCESS);
  assert_int_equal(cuCtxDestroy_v2(c1), CUDA_SUCCESS);
  assert_int_equal(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
}

static void fill(unsigned char *p, size_t n, unsigned char seed)
{
  for (size_t i = 0; i < n; i++)
    p[i] = (unsigned char)(seed + i * 13);
}

static void test_async_htod_takes_pageable_bytes_at_the_call(void **state)
{
  (void)state;
  enum { N = 64 << 10 };
  unsigned char *pageable = malloc(N), *want = malloc(N), *back = malloc(N), *pinned = NULL;
  assert_non_null(pageable);
  assert_non_null(want);
  assert_non_null(back);
  assert_int_equal(cuMemAllocHost_v2((void **)&pinned, N), CUDA_SUCCESS);
  CUstream s;
  CUdeviceptr d = 0;
  assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc_v2(&d, N), CUDA_SUCCESS);
  /* Behind a kernel, the copy runs 50 ms after the call; the buffer is
   * changed right after the call. Pageable: the old bytes arrive. */
  fill(pageable, N, 1);
  memcpy(want, pageable, N);
  spin_on(s, 50000);
  assert_int_equal(cuMemcpyHtoDAsync_v2(d, pageable, N, s), CUDA_SUCCESS);
  fill(pageable, N, 99);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoH_v2(back, d, N), CUDA_SUCCESS);
  assert_memory_equal(back, want, N);
  /* Page-locked: read when the copy runs, so the new bytes arrive. */
  fill(pinned, N, 2);
  spin_on(s, 50000);
  assert_int_equal(cuMemcpyHtoDAsync_v2(d, pinned, N, s), CUDA_SUCCESS);
  fill(pinned, N, 77);
  memcpy(want, pinned, N);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoH_v2(back, d, N), CUDA_SUCCESS);
  assert_memory_equal(back, want, N);
  /* A copy that would fail is refused at the call and queues nothing. */
  assert_int_equal(cuMemcpyHtoDAsync_v2(d + N - 4, pageable, 8, s), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemcpyDtoHAsync_v2(NULL, d, 8, s), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemsetD32Async(d + 2, 0, 1, s), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuStreamQuery(s), CUDA_SUCCESS);
  assert_int_equal(cuMemFree_v2(d), CUDA_SUCCESS);
  assert_int_equal(cuMemFreeHost(pinned), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy_v2(s), CUDA_SUCCESS);
  free(pageable);
  free(want);
  free(back);
}

static void test_async_dtoh_into_pageable_has_landed_at_return(void **state)
{
  (void)state;
  enum { N = 64 << 10 };
  unsigned char *want = malloc(N), *pageable = calloc(1, N), *pinned = NULL;
  assert_non_null(want);
  assert_non_null(pageable);
  assert_int_equal(cuMemAllocHost_v2((void **)&pinned, N), CUDA_SUCCESS);
  memset(pinned, 0, N);
  CUstream s;
  CUdeviceptr d = 0;
  assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc_v2(&d, N), CUDA_SUCCESS);
  fill(want, N, 5);
  assert_int_equal(cuMemcpyHtoD_v2(d, want, N), CUDA_SUCCESS);
  /* Into pageable memory the call waits for the kernel before it. */
  uint64_t t0 = now_us();
  spin_on(s, 50000);
  assert_int_equal(cuMemcpyDtoHAsync_v2(pageable, d, N, s), CUDA_SUCCESS);
  assert_true(now_us() - t0 >= 50000);
  assert_memory_equal(pageable, want, N);
  assert_int_equal(cuStreamQuery(s), CUDA_SUCCESS);
  /* Into page-locked memory it returns at once; the bytes land later. */
  t0 = now_us();
  spin_on(s, 50000);
  assert_int_equal(cuMemcpyDtoHAsync_v2(pinned, d, N, s), CUDA_SUCCESS);
  assert_true(now_us() - t0 < QUICK_US);
  assert_int_equal(pinned[0], 0);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_memory_equal(pinned, want, N);
  /* A synchronous copy and memset wait for what the legacy stream waits
   * for: here the blocking stream's kernel. */
  t0 = now_us();
  spin_on(s, 40000);
  assert_int_equal(cuMemsetD8_v2(d, 0x5a, 16), CUDA_SUCCESS);
  assert_true(now_us() - t0 >= 40000);
  spin_on(s, 40000);
  assert_int_equal(cuMemcpyDtoH_v2(pageable, d, 16), CUDA_SUCCESS);
  assert_true(now_us() - t0 >= 80000);
  assert_int_equal(pageable[15], 0x5a);
  assert_int_equal(cuMemFree_v2(d), CUDA_SUCCESS);
  assert_int_equal(cuMemFreeHost(pinned), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy_v2(s), CUDA_SUCCESS);
  free(want);
  free(pageable);
}

static void test_frees_wait_for_queued_work_that_uses_the_memory(void **state)
{
  (void)state;
  enum { N = 1 << 20 };
  unsigned char *pinned = NULL;
  assert_int_equal(cuMemAllocHost_v2((void **)&pinned, N), CUDA_SUCCESS);
  memset(pinned, 0x11, N);
  CUstream s;
  CUdeviceptr d = 0;
  assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc_v2(&d, N), CUDA_SUCCESS);
  /* Copies queued behind a kernel: cuMemFree and cuMemFreeHost must wait
   * for them, or the worker would copy freed memory (ASan would say). */
  uint64_t t0 = now_us();
  spin_on(s, 50000);
  assert_int_equal(cuMemcpyHtoDAsync_v2(d, pinned, N, s), CUDA_SUCCESS);
  assert_int_equal(cuMemsetD8Async(d, 0x22, N, s), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoHAsync_v2(pinned, d, N, s), CUDA_SUCCESS);
  assert_int_equal(cuMemFree_v2(d), CUDA_SUCCESS);
  assert_true(now_us() - t0 >= 50000);
  assert_int_equal(cuStreamQuery(s), CUDA_SUCCESS);
  assert_int_equal(pinned[N - 1], 0x22);
  assert_int_equal(cuMemsetD8Async(d, 0, 1, s), CUDA_ERROR_INVALID_VALUE); /* freed */
  CUdeviceptr d2 = 0;
  unsigned char last = 0;
  assert_int_equal(cuMemAlloc_v2(&d2, N), CUDA_SUCCESS);
  memset(pinned, 0x44, N);
  t0 = now_us();
  spin_on(s, 50000);
  assert_int_equal(cuMemcpyHtoDAsync_v2(d2, pinned, N, s), CUDA_SUCCESS);
  assert_int_equal(cuMemFreeHost(pinned), CUDA_SUCCESS);
  assert_true(now_us() - t0 >= 50000);
  assert_int_equal(cuStreamQuery(s), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoH_v2(&last, d2 + N - 1, 1), CUDA_SUCCESS);
  assert_int_equal(last, 0x44);
  assert_int_equal(cuMemFree_v2(d2), CUDA_SUCCESS);
  /* cuMemFreeAsync frees in stream order: the block stays in use until
   * the stream reaches the free. */
  CUmemoryPool pool;
  assert_int_equal(cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  assert_int_equal(cuMemAllocAsync(&p, 2 * MiB, s), CUDA_SUCCESS);
  uint64_t used = pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
  assert_true(used >= 2 * MiB);
  spin_on(s, 50000);
  assert_int_equal(cuMemsetD8Async(p, 0x33, 2 * MiB, s), CUDA_SUCCESS);
  t0 = now_us();
  assert_int_equal(cuMemFreeAsync(p, s), CUDA_SUCCESS);
  assert_true(now_us() - t0 < QUICK_US);
  assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), used);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), used - 2 * MiB);
  assert_int_equal(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy_v2(s), CUDA_SUCCESS);
}

static void test_ctx_synchronize_waits_for_every_stream(void **state)
{
  (void)state;
  CUstream blocking, nonblocking;
  assert_int_equal(cuStreamCreate(&blocking, 0), CUDA_SUCCESS);
  assert_int_equal(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  uint64_t t0 = now_us();
  spin_on(blocking, 30000);
  spin_on(nonblocking, 30000);
  spin_on(NULL, 30000);
  unsigned int us = 30000;
  void *params[] = {&us};
  assert_int_equal(cuLaunchKernel_ptsz(get_func("spin"), 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL),
                   CUDA_SUCCESS);
  assert_true(now_us() - t0 < QUICK_US);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_true(now_us() - t0 >= 4 * 30000);
  assert_int_equal(cuStreamQuery(blocking), CUDA_SUCCESS);
  assert_int_equal(cuStreamQuery(nonblocking), CUDA_SUCCESS);
  assert_int_equal(cuStreamQuery(NULL), CUDA_SUCCESS);
  assert_int_equal(cuStreamQuery(CU_STREAM_PER_THREAD), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy_v2(blocking), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy_v2(nonblocking), CUDA_SUCCESS);
}

/* Waits up to ms for a child; kills it and fails if it is not done. */
static int wait_child_within(pid_t pid, int ms)
{
  for (int waited = 0; waited < ms; waited += 10) {
    int st = 0;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid)
      return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
    if (r < 0)
      return -1;
    usleep(10000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return 101; /* hung */
}

static void test_fork_leaves_queued_work_to_the_parent(void **state)
{
  (void)state;
  enum { N = 256 << 10 };
  unsigned char *host = malloc(N);
  assert_non_null(host);
  fill(host, N, 9);
  CUstream s;
  CUdeviceptr d = 0;
  assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc_v2(&d, N), CUDA_SUCCESS);
  uint64_t t0 = now_us();
  spin_on(s, 150000);
  assert_int_equal(cuMemcpyHtoDAsync_v2(d, host, N, s), CUDA_SUCCESS); /* staged */
  spin_on(NULL, 20000);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* No worker and empty queues: nothing of the parent's to wait for. */
    CUcontext c;
    uint64_t c0 = now_us();
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&c, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(c) != CUDA_SUCCESS)
      _exit(1);
    if (cuStreamQuery(NULL) != CUDA_SUCCESS || cuCtxSynchronize() != CUDA_SUCCESS)
      _exit(2);
    if (now_us() - c0 >= 100000)
      _exit(3);
    /* Its own work runs on its own worker, then it exits with more queued:
     * no hang, no crash. */
    CUmodule m;
    CUfunction f;
    unsigned int us = 10000;
    void *params[] = {&us};
    if (cuModuleLoadData(&m, "x") != CUDA_SUCCESS ||
        cuModuleGetFunction(&f, m, "spin") != CUDA_SUCCESS ||
        cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL) != CUDA_SUCCESS ||
        cuCtxSynchronize() != CUDA_SUCCESS)
      _exit(4);
    for (int i = 0; i < 3; i++)
      if (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL) != CUDA_SUCCESS)
        _exit(5);
    exit(0);
  }
  assert_int_equal(wait_child_within(pid, 10000), 0);
  /* The parent's work was not lost to the fork. */
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_true(now_us() - t0 >= 170000);
  unsigned char back[64];
  assert_int_equal(cuMemcpyDtoH_v2(back, d + N - sizeof back, sizeof back), CUDA_SUCCESS);
  assert_memory_equal(back, host + N - sizeof back, sizeof back);
  assert_int_equal(cuMemFree_v2(d), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy_v2(s), CUDA_SUCCESS);
  free(host);
}

/* ---- threads ---- */

#define THREADS 4
#define PER_THREAD 40

struct worker_arg;
struct call {
  struct worker_arg *w;
  int i;
};
struct worker_arg {
  int id;
  struct call calls[PER_THREAD];
  int seen[PER_THREAD]; /* which host functions ran, in the order they ran */
  int nseen;
  int failed;
};

static void note_order(void *arg)
{
  struct call *c = arg;
  c->w->seen[c->w->nseen++] = c->i;
}

static void *launcher(void *arg)
{
  struct worker_arg *w = arg;
  if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
    return w->failed = 1, NULL;
  CUstream s = CU_STREAM_PER_THREAD; /* thread 0: its per-thread stream */
  if (w->id && cuStreamCreate(&s, w->id % 2 ? CU_STREAM_NON_BLOCKING : 0) != CUDA_SUCCESS)
    return w->failed = 2, NULL;
  CUfunction f = NULL;
  CUmodule m;
  if (cuModuleLoadData(&m, "x") != CUDA_SUCCESS ||
      cuModuleGetFunction(&f, m, "spin") != CUDA_SUCCESS)
    return w->failed = 3, NULL;
  unsigned int us = 200;
  void *params[] = {&us};
  for (int i = 0; i < PER_THREAD; i++) {
    w->calls[i] = (struct call){w, i};
    if (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL) != CUDA_SUCCESS ||
        cuLaunchHostFunc(s, note_order, &w->calls[i]) != CUDA_SUCCESS)
      return w->failed = 4, NULL;
    if (i % 10 == 9 && cuStreamSynchronize(s) != CUDA_SUCCESS)
      return w->failed = 5, NULL;
  }
  if (cuStreamSynchronize(s) != CUDA_SUCCESS)
    return w->failed = 6, NULL;
  if (w->nseen != PER_THREAD)
    return w->failed = 7, NULL;
  if (w->id && cuStreamDestroy_v2(s) != CUDA_SUCCESS)
    return w->failed = 8, NULL;
  if (cuModuleUnload(m) != CUDA_SUCCESS)
    return w->failed = 9, NULL;
  return NULL;
}

static void test_many_threads_launch_on_many_streams(void **state)
{
  (void)state;
  pthread_t th[THREADS];
  struct worker_arg w[THREADS];
  memset(w, 0, sizeof w);
  uint64_t t0 = now_us();
  for (int i = 0; i < THREADS; i++) {
    w[i].id = i;
    assert_int_equal(pthread_create(&th[i], NULL, launcher, &w[i]), 0);
  }
  for (int i = 0; i < THREADS; i++)
    assert_int_equal(pthread_join(th[i], NULL), 0);
  for (int i = 0; i < THREADS; i++) {
    assert_int_equal(w[i].failed, 0);
    assert_int_equal(w[i].nseen, PER_THREAD);
    for (int k = 0; k < PER_THREAD; k++)
      assert_int_equal(w[i].seen[k], k);
  }
  /* All the kernels ran, one at a time on the device. */
  assert_true(now_us() - t0 >= THREADS * PER_THREAD * 200);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
}

/* Host<->device copies take their bytes' time at the rate of their host
 * memory, on top of the memmove: pageable 4 GB/s, pinned (allocated or
 * registered) 20 GB/s by default, so that pinning pays here as on a GPU.
 * Each side's best of 3. */
static uint64_t best_htod_us(CUdeviceptr d, const void *h, size_t n)
{
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 3; i++) {
    uint64_t t0 = now_us();
    assert_int_equal(cuMemcpyHtoD_v2(d, h, n), CUDA_SUCCESS);
    uint64_t dt = now_us() - t0;
    best = dt < best ? dt : best;
  }
  return best;
}

static void test_pageable_copies_are_slower_than_pinned(void **state)
{
  (void)state;
  enum { N = 64 << 20 };
  CUdeviceptr d = 0;
  assert_int_equal(cuMemAlloc_v2(&d, N), CUDA_SUCCESS);
  char *pageable = malloc(N), *reg = malloc(N);
  void *pinned = NULL;
  assert_non_null(pageable);
  assert_non_null(reg);
  memset(pageable, 1, N);
  memset(reg, 2, N);
  assert_int_equal(cuMemAllocHost_v2(&pinned, N), CUDA_SUCCESS);
  assert_int_equal(cuMemHostRegister_v2(reg, N, 0), CUDA_SUCCESS);
  uint64_t slow = best_htod_us(d, pageable, N), fast = best_htod_us(d, pinned, N),
           registered = best_htod_us(d, reg, N);
  print_message("64 MiB H2D: pageable %llu us, pinned %llu us, registered %llu us\n",
                (unsigned long long)slow, (unsigned long long)fast, (unsigned long long)registered);
  assert_true(slow >= (uint64_t)N / 10000); /* 10 GB/s = 10^4 bytes a us */
  assert_true(fast >= (uint64_t)N / 50000); /* 50 GB/s */
  assert_true(registered >= (uint64_t)N / 50000);
  assert_true(slow > fast && slow > registered);
  /* The bytes are right whatever the rate. */
  char back[16];
  assert_int_equal(cuMemcpyDtoH_v2(back, d, sizeof back), CUDA_SUCCESS);
  assert_int_equal(back[0], 2);
  assert_int_equal(cuMemHostUnregister(reg), CUDA_SUCCESS);
  assert_int_equal(cuMemFreeHost(pinned), CUDA_SUCCESS);
  assert_int_equal(cuMemFree_v2(d), CUDA_SUCCESS);
  free(pageable);
  free(reg);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_procaddr_maps_mem_alloc_by_version),
      cmocka_unit_test(test_procaddr_per_thread_flag_picks_ptsz_and_ptds),
      cmocka_unit_test(test_procaddr_get_proc_address_has_two_signatures),
      cmocka_unit_test(test_procaddr_unknown_name_and_low_version_fail),
      cmocka_unit_test(test_procaddr_every_row_resolves_to_its_symbol),
      cmocka_unit_test(test_alloc_copy_round_trip_through_device_addresses),
      cmocka_unit_test(test_pageable_copies_are_slower_than_pinned),
      cmocka_unit_test(test_v1_alloc_returns_32_bit_address),
      cmocka_unit_test(test_bad_arguments_get_cuda_errors),
      cmocka_unit_test(test_pitch_is_rounded_up_to_512),
      cmocka_unit_test(test_meminfo_tells_truth_after_alloc_and_free),
      cmocka_unit_test(test_oom_exactly_at_the_limit),
      cmocka_unit_test(test_meminfo_counts_live_processes_only),
      cmocka_unit_test(test_spin_kernel_takes_its_duration),
      cmocka_unit_test(test_kernels_on_one_device_serialize_across_processes),
      cmocka_unit_test(test_graph_launch_runs_kernel_nodes_in_order),
      cmocka_unit_test(test_event_elapsed_time_covers_a_kernel),
      cmocka_unit_test(test_pool_holds_freed_memory_until_trim),
      cmocka_unit_test(test_vmm_maps_handles_and_charges_until_release),
      cmocka_unit_test(test_vmm_access_references_remap_and_export),
      cmocka_unit_test(test_second_device_has_its_own_memory),
      cmocka_unit_test(test_launch_returns_before_its_kernel_has_run),
      cmocka_unit_test(test_every_launch_path_queues),
      cmocka_unit_test(test_stream_query_is_not_ready_until_synchronized),
      cmocka_unit_test(test_event_time_is_when_the_stream_reached_it),
      cmocka_unit_test(test_streams_are_waited_for_separately),
      cmocka_unit_test(test_stream_waits_for_an_event_of_another_device),
      cmocka_unit_test(test_async_htod_takes_pageable_bytes_at_the_call),
      cmocka_unit_test(test_async_dtoh_into_pageable_has_landed_at_return),
      cmocka_unit_test(test_frees_wait_for_queued_work_that_uses_the_memory),
      cmocka_unit_test(test_ctx_synchronize_waits_for_every_stream),
      cmocka_unit_test(test_fork_leaves_queued_work_to_the_parent),
      cmocka_unit_test(test_many_threads_launch_on_many_streams),
      cmocka_unit_test(test_prefetch_moves_managed_memory_off_the_card_and_back),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
