/* Hook overhead, one side of a side-by-side run (hook_overhead.py runs it
 * with and without LD_PRELOAD and prints the ratios):
 *   hook_overhead launch N   N empty-kernel launches, then one sync
 *   hook_overhead alloc N    N times cuMemAlloc(2 MiB) + cuMemFree
 *   hook_overhead procaddr N N cuGetProcAddress_v2 of one name: a wrapped
 *                            call that does little in the hook or the
 *                            driver, so that what wrapping itself costs
 *                            (the per-call logs' timing) shows
 * Prints one line: `launch rate=<per s>`, `alloc rate=<pairs per s>` or
 * `procaddr rate=<per s>`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

#include "../test/common/cudaprog.h"

static const char empty_ptx[] = ".version 7.0\n.target sm_75\n.address_size 64\n"
                                ".visible .entry empty()\n{\n  ret;\n}\n";

#define CHECK(call) GMT_CU_CHECK("hook_overhead", call)

int main(int argc, char **argv)
{
  CUcontext ctx;
  CUdevice dev;
  CUmodule mod;
  CUfunction fn;
  long n;
  double t0, t1;

  if (argc != 3 ||
      (strcmp(argv[1], "launch") && strcmp(argv[1], "alloc") && strcmp(argv[1], "procaddr")) ||
      (n = atol(argv[2])) <= 0) {
    fprintf(stderr, "usage: hook_overhead launch|alloc|procaddr N\n");
    return 2;
  }
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));

  if (!strcmp(argv[1], "launch")) {
    CHECK(cuModuleLoadData(&mod, empty_ptx));
    CHECK(cuModuleGetFunction(&fn, mod, "empty"));
    for (int i = 0; i < 1000; i++) /* warm up */
      CHECK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CHECK(cuCtxSynchronize());
    t0 = gmt_prog_now_s();
    for (long i = 0; i < n; i++)
      CHECK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CHECK(cuCtxSynchronize());
    t1 = gmt_prog_now_s();
    printf("launch rate=%.1f\n", (double)n / (t1 - t0));
    CHECK(cuModuleUnload(mod));
  } else if (!strcmp(argv[1], "procaddr")) {
    void *fp;
    CUdriverProcAddressQueryResult st;

    for (int i = 0; i < 10000; i++) /* warm up */
      CHECK(cuGetProcAddress_v2("cuLaunchKernel", &fp, 12000, 0, &st));
    t0 = gmt_prog_now_s();
    for (long i = 0; i < n; i++)
      CHECK(cuGetProcAddress_v2("cuLaunchKernel", &fp, 12000, 0, &st));
    t1 = gmt_prog_now_s();
    printf("procaddr rate=%.1f\n", (double)n / (t1 - t0));
  } else {
    CUdeviceptr p;

    for (int i = 0; i < 100; i++) { /* warm up */
      CHECK(cuMemAlloc(&p, 2u << 20));
      CHECK(cuMemFree(p));
    }
    t0 = gmt_prog_now_s();
    for (long i = 0; i < n; i++) {
      CHECK(cuMemAlloc(&p, 2u << 20));
      CHECK(cuMemFree(p));
    }
    t1 = gmt_prog_now_s();
    printf("alloc rate=%.1f\n", (double)n / (t1 - t0));
  }
  CHECK(cuDevicePrimaryCtxRelease(dev));
  return 0;
}
