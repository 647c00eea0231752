/* nvml_view: NVML's memory view next to cuMemGetInfo's, for
 * test/e2e/test_nvml.py.
 *
 *   nvml_view BYTES
 *
 * Allocates BYTES on CUDA device 0 with cuMemAlloc, then prints one line
 * per route, each with NVML's numbers for the NVML device that CUDA device
 * 0 is (found by its PCI bus id, so CUDA_VISIBLE_DEVICES is honoured):
 *   CU free=F total=T                           cuMemGetInfo (v2)
 *   LINK1 total=T used=U free=F                 nvmlDeviceGetMemoryInfo, linked
 *   LINK2 total=T used=U free=F reserved=R version=V   ..._v2, linked
 *   DEF1 ... / DEF2 ...                         dlsym(RTLD_DEFAULT, ...)
 *   DL1 ... / DL2 ...                           dlopen(libnvidia-ml.so.1) + dlsym
 *   IDX i total=T used=U free=F                 linked v1, each NVML index
 *   DONE
 * Built twice: nvml_view links libnvidia-ml (every route); nvml_view_dl
 * does not (DL lines only, NVML opened by dlopen as pynvml does). A failure
 * prints `FAIL what=... rc=...` and exits 1. */
#include <cuda.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "gmt_nvml_abi.h"

typedef nvmlReturn_t (*mem1_fn)(nvmlDevice_t, nvmlMemory_t *);
typedef nvmlReturn_t (*mem2_fn)(nvmlDevice_t, nvmlMemory_v2_t *);
typedef nvmlReturn_t (*init_fn)(void);
typedef nvmlReturn_t (*by_bus_fn)(const char *, nvmlDevice_t *);
typedef nvmlReturn_t (*count_fn)(unsigned int *);
typedef nvmlReturn_t (*by_index_fn)(unsigned int, nvmlDevice_t *);

static void fail(const char *what, int rc)
{
  printf("FAIL what=%s rc=%d\n", what, rc);
  fflush(stdout);
  exit(1);
}

#define CK(call)                                                                                   \
  do {                                                                                             \
    int r_ = (int)(call);                                                                          \
    if (r_ != 0)                                                                                   \
      fail(#call, r_);                                                                             \
  } while (0)

/* dlsym's void * to a function pointer (see dlsym(3)). */
#define SYM(type, h, name) ((type)(uintptr_t)dlsym((h), (name)))

static void show(const char *route, mem1_fn m1, mem2_fn m2, nvmlDevice_t dev)
{
  if (!m1 || !m2)
    fail(route, -1);
  nvmlMemory_t a = {0};
  CK(m1(dev, &a));
  printf("%s1 total=%llu used=%llu free=%llu\n", route, a.total, a.used, a.free);
  nvmlMemory_v2_t b = {.version = nvmlMemory_v2};
  CK(m2(dev, &b));
  printf("%s2 total=%llu used=%llu free=%llu reserved=%llu version=%u\n", route, b.total, b.used,
         b.free, b.reserved, b.version);
}

int main(int argc, char **argv)
{
  if (argc != 2)
    fail("usage", -1);
  size_t bytes = strtoull(argv[1], NULL, 0);
  CUdevice cu_dev;
  CUcontext ctx;
  CUdeviceptr p;
  char bus[32];
  CK(cuInit(0));
  CK(cuDeviceGet(&cu_dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, cu_dev));
  CK(cuCtxSetCurrent(ctx));
  CK(cuMemAlloc(&p, bytes));
  CK(cuDeviceGetPCIBusId(bus, (int)sizeof bus, cu_dev));
  size_t f = 0, t = 0;
  CK(cuMemGetInfo(&f, &t));
  printf("CU free=%zu total=%zu\n", f, t);

  void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h)
    fail("dlopen", -1);
  init_fn init = SYM(init_fn, h, "nvmlInit_v2");
  by_bus_fn by_bus = SYM(by_bus_fn, h, "nvmlDeviceGetHandleByPciBusId_v2");
  if (!init || !by_bus)
    fail("dlsym", -1);
  CK(init());
  nvmlDevice_t dev;
  CK(by_bus(bus, &dev));
  show("DL", SYM(mem1_fn, h, "nvmlDeviceGetMemoryInfo"),
       SYM(mem2_fn, h, "nvmlDeviceGetMemoryInfo_v2"), dev);
#ifdef NVML_LINKED
  show("LINK", nvmlDeviceGetMemoryInfo, nvmlDeviceGetMemoryInfo_v2, dev);
  show("DEF", SYM(mem1_fn, RTLD_DEFAULT, "nvmlDeviceGetMemoryInfo"),
       SYM(mem2_fn, RTLD_DEFAULT, "nvmlDeviceGetMemoryInfo_v2"), dev);
  unsigned n = 0;
  CK(nvmlDeviceGetCount_v2(&n));
  for (unsigned i = 0; i < n; i++) {
    nvmlDevice_t d;
    nvmlMemory_t m = {0};
    CK(nvmlDeviceGetHandleByIndex_v2(i, &d));
    CK(nvmlDeviceGetMemoryInfo(d, &m));
    printf("IDX %u total=%llu used=%llu free=%llu\n", i, m.total, m.used, m.free);
  }
#endif
  CK(cuMemFree(p));
  printf("DONE\n");
  fflush(stdout);
  return 0;
}
