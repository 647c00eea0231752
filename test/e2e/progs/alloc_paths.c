/* alloc_paths: one known set of allocations and launches, reached by the
 * route a real program would take to the driver, so the end-to-end tests
 * can check that the hook sees all of them whichever route is used:
 *
 *   --route direct    call the exported symbols (linked against libcuda)
 *   --route dlsym     dlopen("libcuda.so.1") + dlsym of each versioned name
 *   --route procaddr  dlsym "cuGetProcAddress_v2" once, then every entry
 *                     point through it at version 13000 (as the CUDA
 *                     runtime does), cuMemAlloc/cuMemFree also at 3010 (the
 *                     32-bit v1 functions) and launches with flags 2
 *                     (per-thread default stream: the _ptsz functions)
 *
 * It then holds the memory, prints
 *   READY bytes=<device bytes held> launches=<kernel launches>
 * waits for a line on stdin (or SIGUSR1 / SIGTERM), frees some, prints
 *   FREED bytes=<device bytes still held>
 * waits again and exits 0. Any CUDA call that fails is printed with its
 * code and the program exits 1.
 *
 * Options: --launches N (per launch API, default 4), --no-v1 (skip the
 * 32-bit cuMemAlloc/cuMemFree, which a 64-bit GPU driver may refuse),
 * --no-graph, --no-coop, --arrays (also a 64x64 float CUarray, 16 KiB). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include "../../common/cudaprog.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FN(name) __typeof__(&name) name
static struct {
  FN(cuInit);
  FN(cuGetErrorName);
  FN(cuDeviceGet);
  FN(cuDevicePrimaryCtxRetain);
  FN(cuCtxSetCurrent);
  FN(cuCtxSynchronize);
  FN(cuModuleLoadData);
  FN(cuModuleGetFunction);
  FN(cuMemAlloc); /* v1: 32-bit pointer and size */
  FN(cuMemFree);  /* v1 */
  FN(cuMemAlloc_v2);
  FN(cuMemAllocPitch_v2);
  FN(cuMemAllocManaged);
  FN(cuMemAllocAsync);
  FN(cuMemFreeAsync);
  FN(cuMemFree_v2);
  FN(cuStreamSynchronize);
  FN(cuMemGetAllocationGranularity);
  FN(cuMemCreate);
  FN(cuMemRelease);
  FN(cuArray3DCreate_v2);
  FN(cuArrayDestroy);
  FN(cuLaunchKernel);
  FN(cuLaunchKernel_ptsz);
  FN(cuLaunchKernelEx);
  FN(cuLaunchCooperativeKernel);
  FN(cuGraphCreate);
  FN(cuGraphAddKernelNode_v2);
  FN(cuGraphInstantiateWithFlags);
  FN(cuGraphLaunch);
} api;
#undef FN

/* One entry point: its member, the exact symbol (direct and dlsym routes)
 * and how the runtime would ask cuGetProcAddress for it. */
struct entry {
  void **slot;
  const char *symbol;
  const char *base;
  int version;
  cuuint64_t flags;
};

#define E(name, base, ver, flags)                                                                  \
  {                                                                                                \
    (void **)&api.name, #name, base, ver, flags                                                    \
  }
static const struct entry entries[] = {
    E(cuInit, "cuInit", 13000, 0),
    E(cuGetErrorName, "cuGetErrorName", 13000, 0),
    E(cuDeviceGet, "cuDeviceGet", 13000, 0),
    E(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 13000, 0),
    E(cuCtxSetCurrent, "cuCtxSetCurrent", 13000, 0),
    E(cuCtxSynchronize, "cuCtxSynchronize", 13000, 0),
    E(cuModuleLoadData, "cuModuleLoadData", 13000, 0),
    E(cuModuleGetFunction, "cuModuleGetFunction", 13000, 0),
    E(cuMemAlloc, "cuMemAlloc", 3010, 0),
    E(cuMemFree, "cuMemFree", 3010, 0),
    E(cuMemAlloc_v2, "cuMemAlloc", 13000, 0),
    E(cuMemAllocPitch_v2, "cuMemAllocPitch", 13000, 0),
    E(cuMemAllocManaged, "cuMemAllocManaged", 13000, 0),
    E(cuMemAllocAsync, "cuMemAllocAsync", 13000, 0),
    E(cuMemFreeAsync, "cuMemFreeAsync", 13000, 0),
    E(cuMemFree_v2, "cuMemFree", 13000, 0),
    E(cuStreamSynchronize, "cuStreamSynchronize", 13000, 0),
    E(cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity", 13000, 0),
    E(cuMemCreate, "cuMemCreate", 13000, 0),
    E(cuMemRelease, "cuMemRelease", 13000, 0),
    E(cuArray3DCreate_v2, "cuArray3DCreate", 13000, 0),
    E(cuArrayDestroy, "cuArrayDestroy", 13000, 0),
    E(cuLaunchKernel, "cuLaunchKernel", 13000, 0),
    E(cuLaunchKernel_ptsz, "cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
    E(cuLaunchKernelEx, "cuLaunchKernelEx", 13000, 0),
    E(cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel", 13000, 0),
    E(cuGraphCreate, "cuGraphCreate", 13000, 0),
    E(cuGraphAddKernelNode_v2, "cuGraphAddKernelNode", 13000, 0),
    E(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", 13000, 0),
    E(cuGraphLaunch, "cuGraphLaunch", 13000, 0),
};
#undef E
#define NENTRIES (sizeof(entries) / sizeof(entries[0]))

#define CHECK(call)                                                                                \
  do {                                                                                             \
    CUresult rc_ = (call);                                                                         \
    if (rc_ != CUDA_SUCCESS) {                                                                     \
      const char *name_ = NULL;                                                                    \
      if (api.cuGetErrorName)                                                                      \
        api.cuGetErrorName(rc_, &name_);                                                           \
      fprintf(stderr, "alloc_paths: %s failed: %s (%d)\n", #call, name_ ? name_ : "?", (int)rc_);  \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static void die(const char *what)
{
  fprintf(stderr, "alloc_paths: %s\n", what);
  exit(1);
}

/* ---- routes ---- */

static void *must_dlsym(void *h, const char *name)
{
  void *p = dlsym(h, name);
  if (!p) {
    fprintf(stderr, "alloc_paths: dlsym(%s) failed: %s\n", name, dlerror());
    exit(1);
  }
  return p;
}

static void route_direct(void)
{
#define D(name) api.name = &name
  D(cuInit);
  D(cuGetErrorName);
  D(cuDeviceGet);
  D(cuDevicePrimaryCtxRetain);
  D(cuCtxSetCurrent);
  D(cuCtxSynchronize);
  D(cuModuleLoadData);
  D(cuModuleGetFunction);
  D(cuMemAlloc);
  D(cuMemFree);
  D(cuMemAlloc_v2);
  D(cuMemAllocPitch_v2);
  D(cuMemAllocManaged);
  D(cuMemAllocAsync);
  D(cuMemFreeAsync);
  D(cuMemFree_v2);
  D(cuStreamSynchronize);
  D(cuMemGetAllocationGranularity);
  D(cuMemCreate);
  D(cuMemRelease);
  D(cuArray3DCreate_v2);
  D(cuArrayDestroy);
  D(cuLaunchKernel);
  D(cuLaunchKernel_ptsz);
  D(cuLaunchKernelEx);
  D(cuLaunchCooperativeKernel);
  D(cuGraphCreate);
  D(cuGraphAddKernelNode_v2);
  D(cuGraphInstantiateWithFlags);
  D(cuGraphLaunch);
#undef D
}

static void *open_driver(void)
{
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) {
    fprintf(stderr, "alloc_paths: dlopen(libcuda.so.1) failed: %s\n", dlerror());
    exit(1);
  }
  return h;
}

static void route_dlsym(void)
{
  void *h = open_driver();
  for (size_t i = 0; i < NENTRIES; i++)
    *entries[i].slot = must_dlsym(h, entries[i].symbol);
}

/* The pointer cuGetProcAddress gives for a request must be the function
 * a program linked against the driver would call by that exact name:
 * under the hook both are the hook's wrapper of that version. */
static void expect_same(const char *what, void *got, const char *symbol)
{
  void *want = dlsym(RTLD_DEFAULT, symbol);
  if (got != want) {
    fprintf(stderr, "alloc_paths: %s gave %p, but %s is %p\n", what, got, symbol, want);
    exit(1);
  }
  printf("ROUTE %s = %s\n", what, symbol);
}

static void route_procaddr(void)
{
  void *h = open_driver();
  __typeof__(&cuGetProcAddress_v2) gpa = must_dlsym(h, "cuGetProcAddress_v2");
  for (size_t i = 0; i < NENTRIES; i++) {
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    void *p = NULL;
    CUresult rc = gpa(entries[i].base, &p, entries[i].version, entries[i].flags, &st);
    if (rc != CUDA_SUCCESS || !p || st != CU_GET_PROC_ADDRESS_SUCCESS) {
      fprintf(stderr, "alloc_paths: cuGetProcAddress_v2(%s, %d, %llu) failed: %d status %d\n",
              entries[i].base, entries[i].version, (unsigned long long)entries[i].flags, (int)rc,
              (int)st);
      exit(1);
    }
    *entries[i].slot = p;
  }
  /* The versions the driver chose are the ones the names say. */
  expect_same("cuMemAlloc@3010", (void *)api.cuMemAlloc, "cuMemAlloc");
  expect_same("cuMemAlloc@13000", (void *)api.cuMemAlloc_v2, "cuMemAlloc_v2");
  expect_same("cuLaunchKernel@13000/ptsz", (void *)api.cuLaunchKernel_ptsz, "cuLaunchKernel_ptsz");
  expect_same("cuLaunchKernel@13000", (void *)api.cuLaunchKernel, "cuLaunchKernel");
  /* cuGetProcAddress asked for itself: two functions, two signatures. */
  void *p11 = NULL, *p12 = NULL;
  CHECK(gpa("cuGetProcAddress", &p11, 11030, 0, NULL));
  CHECK(gpa("cuGetProcAddress", &p12, 12000, 0, NULL));
  expect_same("cuGetProcAddress@11030", p11, "cuGetProcAddress");
  expect_same("cuGetProcAddress@12000", p12, "cuGetProcAddress_v2");
  if (p12 != (void *)gpa)
    die("cuGetProcAddress@12000 is not the cuGetProcAddress_v2 that dlsym gave");
  /* The v1 cuGetProcAddress, reached through v2, answers too. */
  __typeof__(&cuGetProcAddress) gpa1 = p11;
  void *p = NULL;
  CHECK(gpa1("cuMemAlloc", &p, 13000, 0));
  expect_same("cuGetProcAddress(v1) cuMemAlloc@13000", p, "cuMemAlloc_v2");
}

/* ---- waiting ---- */

static volatile sig_atomic_t g_signalled;

static void on_signal(int sig)
{
  (void)sig;
  g_signalled = 1;
}

static void wait_step(void)
{
  static int eof;
  char line[256];
  while (!g_signalled) {
    if (eof) {
      usleep(10000);
      continue;
    }
    if (fgets(line, sizeof(line), stdin))
      break;
    if (feof(stdin))
      eof = 1;
    clearerr(stdin);
  }
  g_signalled = 0;
}

/* ---- main ---- */

int main(int argc, char **argv)
{
  const char *route = "direct";
  int launches_each = 4, v1 = 1, graph = 1, coop = 1, arrays = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--route") && i + 1 < argc)
      route = argv[++i];
    else if (!strcmp(argv[i], "--launches") && i + 1 < argc)
      launches_each = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--no-v1"))
      v1 = 0;
    else if (!strcmp(argv[i], "--no-graph"))
      graph = 0;
    else if (!strcmp(argv[i], "--no-coop"))
      coop = 0;
    else if (!strcmp(argv[i], "--arrays"))
      arrays = 1;
    else {
      fprintf(stderr, "usage: alloc_paths [--route direct|dlsym|procaddr] [--launches N] "
                      "[--no-v1] [--no-graph] [--no-coop] [--arrays]\n");
      return 2;
    }
  }
  if (!strcmp(route, "direct"))
    route_direct();
  else if (!strcmp(route, "dlsym"))
    route_dlsym();
  else if (!strcmp(route, "procaddr"))
    route_procaddr();
  else
    die("--route is direct, dlsym or procaddr");

  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal; /* no SA_RESTART: a signal ends the read */
  sigaction(SIGUSR1, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction fn;
  CHECK(api.cuInit(0));
  CHECK(api.cuDeviceGet(&dev, 0));
  CHECK(api.cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(api.cuCtxSetCurrent(ctx));
  CHECK(api.cuModuleLoadData(&mod, gmt_spin_ptx));
  CHECK(api.cuModuleGetFunction(&fn, mod, "spin"));

  /* ---- allocations ---- */
  unsigned long long held = 0;
  CUdeviceptr plain, pitched, managed, async;
  size_t pitch = 0;
  CHECK(api.cuMemAlloc_v2(&plain, 1 << 20));
  held += 1 << 20;
  CHECK(api.cuMemAllocPitch_v2(&pitched, &pitch, 3000, 100, 4));
  held += (unsigned long long)pitch * 100;
  CHECK(api.cuMemAllocManaged(&managed, 2 << 20, CU_MEM_ATTACH_GLOBAL));
  held += 2 << 20;
  CHECK(api.cuMemAllocAsync(&async, 4 << 20, NULL));
  CHECK(api.cuStreamSynchronize(NULL));
  held += 4 << 20;

  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0;
  CHECK(api.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  size_t phys_size = ((size_t)(2 << 20) + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle phys;
  CHECK(api.cuMemCreate(&phys, phys_size, &prop, 0));
  held += phys_size;

  CUdeviceptr_v1 small = 0;
  if (v1) {
    CHECK(api.cuMemAlloc(&small, 64 << 10));
    held += 64 << 10;
  }
  CUarray arr = NULL;
  if (arrays) {
    CUDA_ARRAY3D_DESCRIPTOR d;
    memset(&d, 0, sizeof(d));
    d.Width = 64;
    d.Height = 64;
    d.Format = CU_AD_FORMAT_FLOAT;
    d.NumChannels = 1;
    CHECK(api.cuArray3DCreate_v2(&arr, &d));
    held += 64 * 64 * 4;
  }

  /* ---- launches of the 0 µs spin kernel ---- */
  unsigned int us = 0;
  void *params[] = {&us};
  unsigned long long launches = 0;
  for (int i = 0; i < launches_each; i++) {
    CHECK(api.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    CHECK(api.cuLaunchKernel_ptsz(fn, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    launches += 2;
  }
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
  for (int i = 0; i < launches_each; i++) {
    CHECK(api.cuLaunchKernelEx(&cfg, fn, params, NULL));
    launches++;
  }
  for (int i = 0; coop && i < launches_each; i++) {
    CHECK(api.cuLaunchCooperativeKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, params));
    launches++;
  }
  if (graph) {
    CUgraph g;
    CUgraphNode node;
    CUgraphExec exec;
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof(kp));
    kp.func = fn;
    kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = params;
    CHECK(api.cuGraphCreate(&g, 0));
    CHECK(api.cuGraphAddKernelNode_v2(&node, g, NULL, 0, &kp));
    CHECK(api.cuGraphInstantiateWithFlags(&exec, g, 0));
    for (int i = 0; i < launches_each; i++) {
      CHECK(api.cuGraphLaunch(exec, NULL));
      launches++;
    }
  }
  CHECK(api.cuCtxSynchronize());

  printf("READY bytes=%llu launches=%llu\n", held, launches);
  fflush(stdout);
  wait_step();

  /* ---- frees: the plain, the async and the physical allocation ---- */
  CHECK(api.cuMemFree_v2(plain));
  held -= 1 << 20;
  CHECK(api.cuMemFreeAsync(async, NULL));
  CHECK(api.cuStreamSynchronize(NULL));
  held -= 4 << 20;
  CHECK(api.cuMemRelease(phys));
  held -= phys_size;
  if (v1) {
    CHECK(api.cuMemFree(small));
    held -= 64 << 10;
  }
  if (arrays) {
    CHECK(api.cuArrayDestroy(arr));
    held -= 64 * 64 * 4;
  }
  printf("FREED bytes=%llu\n", held);
  fflush(stdout);
  wait_step();
  (void)managed;
  (void)pitched;
  return 0;
}
