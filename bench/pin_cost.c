/* What a new pinned host copy costs (mode=swap's first move out of an
 * allocation, docs/tiers.md): cuMemHostAlloc against fresh pages
 * registered with cuMemHostRegister, plain, prefaulted (MAP_POPULATE) and
 * with transparent huge pages asked for (MADV_HUGEPAGE), each followed by
 * a device-to-host copy into it. Prints ms/GiB to get the pages and the
 * copy's GB/s. scripts/gpu-bundle.sh builds it (.carry/gpu/pin_cost).
 * usage: pin_cost [MIB...] (default 1024 4096) */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "../test/common/cudaprog.h"

#define CK(call) GMT_CU_CHECK("pin_cost", call)

int main(int argc, char **argv)
{
  CK(cuInit(0));
  CUdevice dev;
  CUcontext ctx;
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  size_t sizes[8] = {1024, 4096};
  int ns = 2;
  if (argc > 1)
    for (ns = 0; ns < argc - 1 && ns < 8; ns++)
      sizes[ns] = strtoull(argv[ns + 1], NULL, 10);
  printf("%6s %-26s %10s %10s\n", "MiB", "variant", "ms/GiB", "copy GB/s");
  for (int s = 0; s < ns; s++) {
    size_t n = sizes[s] << 20;
    CUdeviceptr d;
    CK(cuMemAlloc(&d, n));
    CK(cuMemsetD8(d, 3, n));
    for (int v = 0; v < 4; v++) {
      const char *name = v == 0   ? "cuMemHostAlloc"
                         : v == 1 ? "mmap + register"
                         : v == 2 ? "mmap populate + register"
                                  : "mmap hugepage + register";
      void *h = NULL;
      double t = gmt_prog_now_s();
      if (v == 0) {
        CK(cuMemHostAlloc(&h, n, 0));
      } else {
        h = mmap(NULL, n, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | (v == 2 ? MAP_POPULATE : 0), -1, 0);
        if (h == MAP_FAILED)
          return 1;
        if (v == 3)
          madvise(h, n, MADV_HUGEPAGE);
        CK(cuMemHostRegister(h, n, 0));
      }
      double get = (gmt_prog_now_s() - t) * 1e3 / ((double)n / (1 << 30));
      t = gmt_prog_now_s();
      CK(cuMemcpyDtoH(h, d, n));
      double gbps = n / (gmt_prog_now_s() - t) / 1e9;
      printf("%6zu %-26s %10.1f %10.2f\n", sizes[s], name, get, gbps);
      fflush(stdout);
      if (v == 0) {
        CK(cuMemFreeHost(h));
      } else {
        CK(cuMemHostUnregister(h));
        munmap(h, n);
      }
    }
    CK(cuMemFree(d));
  }
  return 0;
}
