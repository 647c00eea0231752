/* How fast managed memory moves by prefetch (mode=um's moves, docs/tiers.md
 * "Unified memory"), side by side with a pinned copy of the same bytes:
 * for each size, rounds of prefetch to the host then back to the device,
 * each timed alone (cuCtxSynchronize after it), for a few ways to name
 * the host and advise the range. Prints GB/s per move and against the
 * pinned copy. Built on the GPU machine:
 *   nvcc -O2 -o um_prefetch bench/um_prefetch.c -lcuda
 * usage: um_prefetch [MIB...] (default 256 1024 4096) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../test/common/cudaprog.h"

#define CK(call) GMT_CU_CHECK("um_prefetch", call)

static double prefetch(CUdeviceptr p, size_t n, CUmemLocation loc)
{
  double t = gmt_prog_now_s();
  CK(cuMemPrefetchAsync_v2(p, n, loc, 0, NULL));
  CK(cuCtxSynchronize());
  return n / (gmt_prog_now_s() - t) / 1e9;
}

int main(int argc, char **argv)
{
  CK(cuInit(0));
  CUdevice dev;
  CUcontext ctx;
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  size_t sizes[16] = {256, 1024, 4096};
  int ns = 3;
  if (argc > 1)
    for (ns = 0; ns < argc - 1 && ns < 16; ns++)
      sizes[ns] = strtoull(argv[ns + 1], NULL, 10);
  CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST},
                numa = {.type = CU_MEM_LOCATION_TYPE_HOST_NUMA, .id = 0},
                gpu = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
  printf("%6s %-22s %9s %9s %9s %9s %8s %8s\n", "MiB", "variant", "out1", "out", "in", "pinD2H",
         "out/pin", "in/pin");
  for (int s = 0; s < ns; s++) {
    size_t n = sizes[s] << 20;
    /* The baseline: a pinned copy each way. */
    CUdeviceptr d;
    void *h;
    CK(cuMemAlloc(&d, n));
    CK(cuMemHostAlloc(&h, n, 0));
    CK(cuMemsetD8(d, 1, n));
    double best = 0;
    for (int i = 0; i < 3; i++) {
      double t = gmt_prog_now_s();
      CK(cuMemcpyDtoH(h, d, n));
      double g = n / (gmt_prog_now_s() - t) / 1e9;
      best = g > best ? g : best;
    }
    CK(cuMemFreeHost(h));
    CK(cuMemFree(d));
    for (int v = 0; v < 3; v++) {
      const char *name = v == 0 ? "host" : v == 1 ? "host numa 0" : "host, accessed-by gpu";
      CUmemLocation to = v == 1 ? numa : host;
      CUdeviceptr p;
      CK(cuMemAllocManaged(&p, n, CU_MEM_ATTACH_GLOBAL));
      if (v == 2)
        CK(cuMemAdvise_v2(p, n, CU_MEM_ADVISE_SET_ACCESSED_BY, gpu));
      CK(cuMemsetD8(p, 7, n)); /* first touch on the GPU */
      CK(cuCtxSynchronize());
      double out1 = prefetch(p, n, to), out = 0, in = 0;
      for (int r = 0; r < 3; r++) {
        in += prefetch(p, n, gpu) / 3;
        out += prefetch(p, n, to) / 3;
      }
      unsigned char c = 0;
      CK(cuMemcpyDtoH(&c, p + n - 1, 1));
      if (c != 7) {
        fprintf(stderr, "byte %u, not 7\n", c);
        return 1;
      }
      printf("%6zu %-22s %9.2f %9.2f %9.2f %9.2f %8.2f %8.2f\n", sizes[s], name, out1, out, in,
             best, out / best, in / best);
      fflush(stdout);
      CK(cuMemFree(p));
    }
  }
  return 0;
}
