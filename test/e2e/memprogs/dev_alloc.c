/* dev_alloc: allocations (and launches) on chosen devices, for
 * test/e2e/test_devices.py (devices= confinement, the per-device view,
 * context memory).
 *
 *   dev_alloc [--launch] DEV:BYTES...
 *
 * For each DEV:BYTES, in order: cuMemAlloc_v2 of BYTES in DEV's primary
 * context (BYTES 0: the context alone), then prints
 *   ALLOC dev=D bytes=B rc=R name=N
 * With --launch, one 1 ms "spin" kernel and a synchronize on each DEV:
 *   LAUNCH dev=D rc=R name=N ms=<how long the launch call took>
 * Then
 *   READY pid=P
 * and waits for a line on stdin; frees what it allocated, prints FREED,
 * waits for one more line and exits 0 (EOF ends it at either wait). A
 * refused call is printed, not fatal: the test reads its code. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/cudaprog.h"

#define MAXN 16

static const char *name_of(CUresult r)
{
  const char *n = NULL;
  cuGetErrorName(r, &n);
  return n ? n : "?";
}

static CUcontext ctx_of(int dev)
{
  CUdevice d;
  CUcontext c = NULL;
  if (cuDeviceGet(&d, dev) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&c, d) != CUDA_SUCCESS) {
    printf("FAIL what=context dev=%d\n", dev);
    fflush(stdout);
    exit(1);
  }
  cuCtxSetCurrent(c);
  return c;
}

int main(int argc, char **argv)
{
  int launch = 0, n = 0, dev[MAXN];
  unsigned long long bytes[MAXN];
  CUdeviceptr ptr[MAXN] = {0};

  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--launch")) {
      launch = 1;
      continue;
    }
    if (n == MAXN || sscanf(argv[i], "%d:%llu", &dev[n], &bytes[n]) != 2) {
      fprintf(stderr, "usage: dev_alloc [--launch] DEV:BYTES...\n");
      return 2;
    }
    n++;
  }
  if (cuInit(0) != CUDA_SUCCESS) {
    printf("FAIL what=cuInit\n");
    return 1;
  }
  for (int i = 0; i < n; i++) {
    ctx_of(dev[i]);
    CUresult r = bytes[i] ? cuMemAlloc_v2(&ptr[i], (size_t)bytes[i]) : CUDA_SUCCESS;
    if (r != CUDA_SUCCESS)
      ptr[i] = 0;
    printf("ALLOC dev=%d bytes=%llu rc=%d name=%s\n", dev[i], bytes[i], (int)r, name_of(r));
    fflush(stdout);
  }
  for (int i = 0; launch && i < n; i++) {
    int seen = 0;
    for (int j = 0; j < i; j++)
      seen |= dev[j] == dev[i];
    if (seen)
      continue;
    ctx_of(dev[i]);
    CUmodule mod;
    CUfunction fn;
    if (cuModuleLoadData(&mod, gmt_spin_ptx) != CUDA_SUCCESS ||
        cuModuleGetFunction(&fn, mod, "spin") != CUDA_SUCCESS) {
      printf("FAIL what=module dev=%d\n", dev[i]);
      return 1;
    }
    unsigned int us = 1000;
    void *params[] = {&us};
    double t0 = gmt_prog_now_s();
    CUresult r = cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL);
    double ms = (gmt_prog_now_s() - t0) * 1e3;
    if (r == CUDA_SUCCESS)
      r = cuCtxSynchronize();
    printf("LAUNCH dev=%d rc=%d name=%s ms=%.1f\n", dev[i], (int)r, name_of(r), ms);
    fflush(stdout);
    cuModuleUnload(mod);
  }
  printf("READY pid=%d\n", (int)getpid());
  fflush(stdout);
  gmt_prog_wait_line();
  for (int i = 0; i < n; i++) {
    if (!ptr[i])
      continue;
    ctx_of(dev[i]);
    cuMemFree_v2(ptr[i]);
  }
  printf("FREED\n");
  fflush(stdout);
  gmt_prog_wait_line();
  return 0;
}
