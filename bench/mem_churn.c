/* The daemon-fault benchmark's workload (bench/fault_load.py): a process
 * that allocates and frees device memory for a while, never holding more
 * than MAX bytes, so that a pod of N such processes with a quota of N x MAX
 * bytes never needs more than it has: every out-of-memory is a false one.
 *
 *   mem_churn SECONDS MAX SEED
 *
 * It prints READY once its context is up and waits for a line on stdin;
 * then, until SECONDS have passed, it picks a total of 1 MiB to MAX (whole
 * MiB), allocates it in blocks of 1 to 8 MiB (cuMemAlloc_v2), holds them
 * 20-100 ms, frees them and rests 0-200 ms. Each refused allocation ends
 * its round and is told on stderr as `OOM t=<monotonic s> held=B want=B`.
 * At the end it prints `DONE ok=N oom=M other=K` and exits at the next
 * line (or EOF). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cuda.h>

#include "../test/common/cudaprog.h"

#define CHECK(call) GMT_CU_CHECK("mem_churn", call)
#define MIB ((size_t)1 << 20)
#define MAX_BLOCKS 64

int main(int argc, char **argv)
{
  if (argc != 4) {
    fprintf(stderr, "usage: mem_churn SECONDS MAX SEED\n");
    return 2;
  }
  double seconds = atof(argv[1]);
  size_t max = strtoull(argv[2], NULL, 0);
  srand((unsigned)atoi(argv[3]));
  if (max < MIB) {
    fprintf(stderr, "mem_churn: MAX is at least 1 MiB\n");
    return 2;
  }
  CUdevice dev;
  CUcontext ctx;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  setvbuf(stdout, NULL, _IOLBF, 0);
  printf("READY\n");
  gmt_prog_wait_line();

  long ok = 0, oom = 0, other = 0;
  double end = gmt_prog_now_s() + seconds;
  CUdeviceptr blocks[MAX_BLOCKS];
  while (gmt_prog_now_s() < end) {
    size_t target = (size_t)(1 + rand() % (int)(max / MIB)) * MIB, held = 0;
    int n = 0;
    while (held < target && n < MAX_BLOCKS) {
      size_t want = (size_t)(1 + rand() % 8) * MIB;
      if (want > target - held)
        want = target - held;
      CUresult r = cuMemAlloc_v2(&blocks[n], want);
      if (r == CUDA_SUCCESS) {
        ok++;
        n++;
        held += want;
        continue;
      }
      if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        oom++;
        fprintf(stderr, "OOM t=%.3f held=%zu want=%zu\n", gmt_prog_now_s(), held, want);
      } else {
        other++;
      }
      break;
    }
    usleep((useconds_t)(20000 + rand() % 80000));
    for (int i = 0; i < n; i++)
      CHECK(cuMemFree_v2(blocks[i]));
    usleep((useconds_t)(rand() % 200000));
  }
  printf("DONE ok=%ld oom=%ld other=%ld\n", ok, oom, other);
  gmt_prog_wait_line();
  return 0;
}
