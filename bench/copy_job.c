/* The tracer benchmark's transfer workload: one device buffer and one
 * pageable host buffer of SIZE bytes, ITER round trips (cuMemcpyHtoD then
 * cuMemcpyDtoH). It prints `ready pid=P`, waits for a line on stdin (so a
 * tracer can attach first), runs, and prints `done seconds=S`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "../test/common/cudaprog.h"

#define CHECK(call) GMT_CU_CHECK("copy_job", call)

int main(int argc, char **argv)
{
  CUcontext ctx;
  CUdevice dev;
  CUdeviceptr d;
  char line[64];
  size_t size;
  long iters;

  if (argc != 3 || (size = strtoull(argv[1], NULL, 10)) == 0 || (iters = atol(argv[2])) <= 0) {
    fprintf(stderr, "usage: copy_job SIZE_BYTES ITERATIONS\n");
    return 2;
  }
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  CHECK(cuMemAlloc(&d, size));
  char *h = malloc(size);
  if (!h) {
    fprintf(stderr, "copy_job: out of host memory\n");
    return 1;
  }
  memset(h, 1, size);
  CHECK(cuMemcpyHtoD(d, h, size)); /* warm up: first touch, page tables */
  printf("ready pid=%d\n", (int)getpid());
  fflush(stdout);
  if (!fgets(line, sizeof(line), stdin))
    return 1;
  double t0 = gmt_prog_now_s();
  for (long i = 0; i < iters; i++) {
    CHECK(cuMemcpyHtoD(d, h, size));
    CHECK(cuMemcpyDtoH(h, d, size));
  }
  printf("done seconds=%.6f\n", gmt_prog_now_s() - t0);
  CHECK(cuMemFree(d));
  free(h);
  CHECK(cuDevicePrimaryCtxRelease(dev));
  return 0;
}
