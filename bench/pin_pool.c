/* The caching pinned pool's benchmark workload (issue 11, bench/pin_pool.py):
 * a loop that allocates a pinned staging block each round, fills it, copies
 * it to the device and frees it, as code that calls cudaMallocHost and
 * cudaFreeHost per batch does. Usage: pin_pool SIZE_MIB ROUNDS.
 *
 * Timed: the whole loop, and the allocation and free calls alone. Each
 * round fills the block with its own byte; the device buffer is read back
 * after the last round and checked (exit 1 on a wrong byte). Prints one
 * JSON line. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "../test/common/cudaprog.h"

#define CHECK(call) GMT_CU_CHECK("pin_pool", call)

int main(int argc, char **argv)
{
  if (argc != 3 || atoi(argv[1]) <= 0 || atoi(argv[2]) <= 0) {
    fprintf(stderr, "usage: pin_pool SIZE_MIB ROUNDS\n");
    return 2;
  }
  size_t n = (size_t)atoi(argv[1]) << 20;
  int rounds = atoi(argv[2]);
  CUdevice dev;
  CUcontext ctx;
  CUdeviceptr d;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  CHECK(cuMemAlloc(&d, n));

  double alloc_s = 0, free_s = 0, t0 = gmt_prog_now_s();
  void *last = NULL;
  int distinct = 0;
  for (int r = 0; r < rounds; r++) {
    void *p;
    double a = gmt_prog_now_s();
    CHECK(cuMemHostAlloc(&p, n, 0));
    alloc_s += gmt_prog_now_s() - a;
    distinct += p != last;
    last = p;
    memset(p, r & 0xff, n);
    CHECK(cuMemcpyHtoD(d, p, n));
    double f = gmt_prog_now_s();
    CHECK(cuMemFreeHost(p));
    free_s += gmt_prog_now_s() - f;
  }
  double whole_s = gmt_prog_now_s() - t0;

  unsigned char *back = malloc(n);
  if (!back)
    return 1;
  CHECK(cuMemcpyDtoH(back, d, n));
  long bad = 0;
  for (size_t i = 0; i < n; i++)
    bad += back[i] != (unsigned char)((rounds - 1) & 0xff);
  free(back);
  CHECK(cuMemFree(d));
  printf("{\"size\": %zu, \"rounds\": %d, \"whole_s\": %.6f, \"alloc_s\": %.6f, "
         "\"free_s\": %.6f, \"distinct\": %d, \"verified\": %s}\n",
         n, rounds, whole_s, alloc_s, free_s, distinct, bad ? "false" : "true");
  return bad ? 1 : 0;
}
