/* The demo's sample job: a plain driver-API program that holds some device
 * memory, copies into it and launches a "spin" kernel again and again for
 * a few seconds, then says what it did. On a GPU the kernel is real PTX
 * that spins on %globaltimer; the fake driver runs "spin" by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "../../common/cudaprog.h"

#define CHECK(call) GMT_CU_CHECK("sample_job", call)

int main(int argc, char **argv)
{
  double seconds = 3.0;
  size_t mib = 256;
  unsigned int kernel_us = 1000;
  CUdeviceptr bufs[4];
  CUcontext ctx;
  CUdevice dev;
  CUmodule mod;
  CUfunction fn;
  unsigned long launches = 0;
  char *host;

  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--seconds"))
      seconds = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--mib"))
      mib = strtoul(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--kernel-us"))
      kernel_us = (unsigned int)strtoul(argv[i + 1], NULL, 10);
    else {
      fprintf(stderr, "usage: sample_job [--seconds S] [--mib M] [--kernel-us U]\n");
      return 2;
    }
  }

  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  CHECK(cuModuleLoadData(&mod, gmt_spin_ptx));
  CHECK(cuModuleGetFunction(&fn, mod, "spin"));

  size_t each = (mib << 20) / 4;
  host = calloc(1, each);
  if (!host) {
    fprintf(stderr, "sample_job: out of host memory\n");
    return 1;
  }
  for (int i = 0; i < 4; i++) {
    CHECK(cuMemAlloc(&bufs[i], each));
    CHECK(cuMemcpyHtoD(bufs[i], host, each));
  }

  double end = gmt_prog_now_s() + seconds;
  while (gmt_prog_now_s() < end) {
    void *params[] = {&kernel_us};

    CHECK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    if (++launches % 16 == 0)
      CHECK(cuCtxSynchronize());
  }
  CHECK(cuCtxSynchronize());
  printf("sample_job: pid %d held %zu MiB on device 0, %lu launches of %u us\n", (int)getpid(), mib,
         launches, kernel_us);
  for (int i = 0; i < 4; i++)
    CHECK(cuMemFree(bufs[i]));
  CHECK(cuModuleUnload(mod));
  CHECK(cuDevicePrimaryCtxRelease(dev));
  free(host);
  return 0;
}
