/* host_pins: pinned host memory, for test/e2e/test_memory.py's pinned
 * accounting. Allocates 8 MiB with cuMemAllocHost, 4 MiB with
 * cuMemHostAlloc and registers a 2 MiB malloc'd buffer, then prints
 * PINNED; after a line on stdin frees and unregisters them all and prints
 * FREED; after another line it exits. With the argument `gate` it says
 * READY pid=N once the driver is up and waits for a line before it pins,
 * so that a tracer can attach first (test_trace_pins.py). With the
 * argument `interleave` it sets its own memory policy first
 * (MPOL_INTERLEAVE over node 0), as numactl would. PINNED also says
 * policy=MODE, the thread's memory policy after the pins (0: default;
 * test_numa.py). A failure prints FAIL and exits 1. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include "../../common/cudaprog.h"

#include <linux/mempolicy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MiB (1u << 20)

int main(int argc, char **argv)
{
  CUdevice dev;
  CUcontext ctx;
  void *a = NULL, *b = NULL;
  char *c = malloc(2 * MiB);
  unsigned long node0 = 1;
  if (argc > 1 && strcmp(argv[1], "interleave") == 0 &&
      syscall(SYS_set_mempolicy, MPOL_INTERLEAVE, &node0, 8 * sizeof node0) != 0) {
    printf("FAIL what=set_mempolicy\n");
    return 1;
  }
  if (!c || !gmt_prog_ok(cuInit(0), "cuInit") ||
      !gmt_prog_ok(cuDeviceGet(&dev, 0), "cuDeviceGet") ||
      !gmt_prog_ok(cuDevicePrimaryCtxRetain(&ctx, dev), "retain") ||
      !gmt_prog_ok(cuCtxSetCurrent(ctx), "set"))
    return 1;
  if (argc > 1 && strcmp(argv[1], "gate") == 0) {
    printf("READY pid=%d\n", (int)getpid());
    fflush(stdout);
    gmt_prog_wait_line();
  }
  if (!gmt_prog_ok(cuMemAllocHost_v2(&a, 8 * MiB), "cuMemAllocHost") ||
      !gmt_prog_ok(cuMemHostAlloc(&b, 4 * MiB, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc") ||
      !gmt_prog_ok(cuMemHostRegister_v2(c, 2 * MiB, 0), "cuMemHostRegister"))
    return 1;
  /* Page-locked as the driver sees it: it answers for such memory only. */
  unsigned int flags;
  if (!gmt_prog_ok(cuMemHostGetFlags(&flags, a), "flags of cuMemAllocHost's") ||
      !gmt_prog_ok(cuMemHostGetFlags(&flags, b), "flags of cuMemHostAlloc's") ||
      !gmt_prog_ok(cuMemHostGetFlags(&flags, c), "flags of the registered buffer"))
    return 1;
  int mode = -1;
  if (syscall(SYS_get_mempolicy, &mode, NULL, 0UL, NULL, 0UL) != 0)
    mode = -1;
  printf("PINNED bytes=%u policy=%d\n", 14 * MiB, mode);
  fflush(stdout);
  gmt_prog_wait_line();
  if (!gmt_prog_ok(cuMemFreeHost(a), "cuMemFreeHost") ||
      !gmt_prog_ok(cuMemFreeHost(b), "cuMemFreeHost") ||
      !gmt_prog_ok(cuMemHostUnregister(c), "cuMemHostUnregister"))
    return 1;
  free(c);
  printf("FREED\n");
  fflush(stdout);
  gmt_prog_wait_line();
  return 0;
}
