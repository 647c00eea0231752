/* What a new pinned host copy costs (mode=swap's first move out of an
 * allocation, docs/tiers.md): cuMemHostAlloc against fresh pages
 * registered with cuMemHostRegister, plain, prefaulted (MAP_POPULATE),
 * with transparent huge pages asked for (MADV_HUGEPAGE), and with huge
 * pages faulted in by the caller first (MADV_POPULATE_WRITE, else a write
 * to each page: no driver call) so that the registration, which holds the
 * driver, pins only pages already there. Each followed by a
 * device-to-host copy into it. Prints ms/GiB outside the driver (faulting)
 * and inside it (the driver call), and the copy's GB/s.
 * scripts/gpu-bundle.sh builds it (.carry/gpu/pin_cost).
 * usage: pin_cost [MIB...] (default 1024 4096) */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../test/common/cudaprog.h"

#define CK(call) GMT_CU_CHECK("pin_cost", call)

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* The pages of [p, p + n) faulted in without the driver. */
static void fault_in(char *p, size_t n)
{
  if (madvise(p, n, MADV_POPULATE_WRITE) == 0)
    return;
  long page = sysconf(_SC_PAGESIZE);
  for (size_t o = 0; o < n; o += (size_t)page)
    p[o] = 0;
}

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
  printf("%6s %-28s %12s %12s %10s\n", "MiB", "variant", "fault ms/GiB", "driver ms/GiB",
         "copy GB/s");
  for (int s = 0; s < ns; s++) {
    size_t n = sizes[s] << 20;
    CUdeviceptr d;
    CK(cuMemAlloc(&d, n));
    CK(cuMemsetD8(d, 3, n));
    double gib = (double)n / (1 << 30);
    for (int v = 0; v < 5; v++) {
      const char *name = v == 0   ? "cuMemHostAlloc"
                         : v == 1 ? "mmap + register"
                         : v == 2 ? "mmap populate + register"
                         : v == 3 ? "mmap hugepage + register"
                                  : "hugepage, faulted, register";
      void *h = NULL;
      double fault = 0;
      double t = gmt_prog_now_s();
      if (v == 0) {
        CK(cuMemHostAlloc(&h, n, 0));
      } else {
        h = mmap(NULL, n, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | (v == 2 ? MAP_POPULATE : 0), -1, 0);
        if (h == MAP_FAILED)
          return 1;
        if (v >= 3)
          madvise(h, n, MADV_HUGEPAGE);
        if (v == 4) {
          fault_in(h, n);
          fault = (gmt_prog_now_s() - t) * 1e3 / gib;
          t = gmt_prog_now_s();
        }
        CK(cuMemHostRegister(h, n, 0));
      }
      double get = (gmt_prog_now_s() - t) * 1e3 / gib;
      t = gmt_prog_now_s();
      CK(cuMemcpyDtoH(h, d, n));
      double gbps = n / (gmt_prog_now_s() - t) / 1e9;
      printf("%6zu %-28s %12.1f %12.1f %10.2f\n", sizes[s], name, fault, get, gbps);
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
