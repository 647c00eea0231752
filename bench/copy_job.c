/* The tracer benchmark's transfer workload: one pageable host buffer of
 * SIZE bytes, kept for the whole process, copied to and from the device in
 * blocks. It prints `ready pid=P`, then for each `go` line on stdin runs one
 * block of ITERATIONS round trips (cuMemcpyHtoD then cuMemcpyDtoH) and
 * prints `done seconds=S`; at the end of stdin it frees what it holds and
 * exits 0. The bench runs its traced and untraced blocks in this one
 * process: pageable-copy times depend on which host pages a process got,
 * enough to hide the tracer's cost when each side has its own process.
 *
 * The device buffer is allocated afresh for each block (outside the timed
 * loop): a tracer attached between blocks learns of a buffer only from its
 * allocation, and this way it can count the block's copies against it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "../test/common/cudaprog.h"

#define CHECK(call) GMT_CU_CHECK("copy_job", call)

/* One block; returns its seconds, the allocation and its first touch left out. */
static double run_block(char *h, size_t size, long iters)
{
  CUdeviceptr d;

  CHECK(cuMemAlloc(&d, size));
  CHECK(cuMemcpyHtoD(d, h, size));
  double t0 = gmt_prog_now_s();
  for (long i = 0; i < iters; i++) {
    CHECK(cuMemcpyHtoD(d, h, size));
    CHECK(cuMemcpyDtoH(h, d, size));
  }
  double secs = gmt_prog_now_s() - t0;
  CHECK(cuMemFree(d));
  return secs;
}

int main(int argc, char **argv)
{
  CUcontext ctx;
  CUdevice dev;
  char line[64];
  size_t size;
  long iters;
  int status = 0;

  if (argc != 3 || (size = strtoull(argv[1], NULL, 10)) == 0 || (iters = atol(argv[2])) <= 0) {
    fprintf(stderr, "usage: copy_job SIZE_BYTES ITERATIONS\n");
    return 2;
  }
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  char *h = malloc(size);
  if (!h) {
    fprintf(stderr, "copy_job: out of host memory\n");
    return 1;
  }
  memset(h, 1, size);
  run_block(h, size, 1); /* warm up: first touch, page tables, the driver's staging */
  printf("ready pid=%d\n", (int)getpid());
  fflush(stdout);
  while (fgets(line, sizeof(line), stdin)) {
    if (strcmp(line, "go\n") != 0 && strcmp(line, "go") != 0) {
      fprintf(stderr, "copy_job: expected 'go' on stdin, not '%.*s'\n", (int)strcspn(line, "\n"),
              line);
      status = 2;
      break;
    }
    printf("done seconds=%.6f\n", run_block(h, size, iters));
    fflush(stdout);
  }
  free(h);
  CHECK(cuDevicePrimaryCtxRelease(dev));
  return status;
}
