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

static const char spin_ptx[] =
    ".version 7.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    ".visible .entry spin(.param .u32 us)\n"
    "{\n"
    "  .reg .pred %p;\n"
    "  .reg .b32 %r;\n"
    "  .reg .b64 %d<6>;\n"
    "  ld.param.u32 %r, [us];\n"
    "  cvt.u64.u32 %d1, %r;\n"
    "  mul.lo.u64 %d2, %d1, 1000;\n"
    "  mov.u64 %d3, %globaltimer;\n"
    "LOOP:\n"
    "  mov.u64 %d4, %globaltimer;\n"
    "  sub.u64 %d5, %d4, %d3;\n"
    "  setp.lt.u64 %p, %d5, %d2;\n"
    "  @%p bra LOOP;\n"
    "  ret;\n"
    "}\n";

#define CHECK(call)                                                                    \
  do {                                                                                 \
    CUresult rc_ = (call);                                                             \
    if (rc_ != CUDA_SUCCESS) {                                                         \
      const char *name_ = NULL;                                                        \
      cuGetErrorName(rc_, &name_);                                                     \
      fprintf(stderr, "sample_job: %s failed: %s (%d)\n", #call, name_ ? name_ : "?", \
              (int)rc_);                                                               \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

static double now_s(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

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
  CHECK(cuModuleLoadData(&mod, spin_ptx));
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

  double end = now_s() + seconds;
  while (now_s() < end) {
    void *params[] = {&kernel_us};

    CHECK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    if (++launches % 16 == 0)
      CHECK(cuCtxSynchronize());
  }
  CHECK(cuCtxSynchronize());
  printf("sample_job: pid %d held %zu MiB on device 0, %lu launches of %u us\n", (int)getpid(),
         mib, launches, kernel_us);
  for (int i = 0; i < 4; i++)
    CHECK(cuMemFree(bufs[i]));
  CHECK(cuModuleUnload(mod));
  CHECK(cuDevicePrimaryCtxRelease(dev));
  free(host);
  return 0;
}
