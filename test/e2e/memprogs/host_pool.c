/* host_pool: pinned blocks allocated and freed each round, for the caching
 * pinned pool (test/e2e/test_pin_pool.py). Usage: host_pool SIZE_MIB ROUNDS.
 *
 * Each round allocates SIZE_MIB pinned (cuMemHostAlloc and cuMemAllocHost
 * in turn), fills it with the round's byte, queues a copy of it to the
 * round's device buffer and frees it at once, without waiting: as on a GPU,
 * the free must not let the next round's fill reach a copy still queued.
 * Then every device buffer is read back and checked, and it prints
 * "ROUNDS distinct=N" (how many addresses the rounds got). After a line on
 * stdin it allocates and frees one block in a context of its own, prints
 * "OWNCTX"; after another it destroys that context and prints "DESTROYED";
 * after another it allocates again in the first context, checks the block
 * is pinned and works, frees it and prints "AGAIN"; then exits at the next
 * line. A failure prints FAIL and exits 1. */
#include <cuda.h>

#include "../../common/cudaprog.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((size_t)1 << 20)
#define MAX_ROUNDS 16

/* Copies block to dev and back into a pageable buffer; 1 when every byte
 * is byte. */
static int round_trip(CUdeviceptr dev, const unsigned char *block, size_t n, unsigned char byte)
{
  unsigned char *back = malloc(n);
  if (!back || !gmt_prog_ok(cuMemcpyHtoD(dev, block, n), "HtoD") ||
      !gmt_prog_ok(cuMemcpyDtoH(back, dev, n), "DtoH")) {
    free(back);
    return 0;
  }
  int ok = 1;
  for (size_t i = 0; i < n && ok; i++)
    ok = back[i] == byte;
  free(back);
  return ok;
}

int main(int argc, char **argv)
{
  if (argc != 3) {
    fprintf(stderr, "usage: host_pool SIZE_MIB ROUNDS\n");
    return 2;
  }
  size_t n = (size_t)atoi(argv[1]) * MiB;
  int rounds = atoi(argv[2]);
  if (n == 0 || rounds < 1 || rounds > MAX_ROUNDS) {
    fprintf(stderr, "host_pool: SIZE_MIB > 0 and 1 <= ROUNDS <= %d\n", MAX_ROUNDS);
    return 2;
  }
  CUdevice dev;
  CUcontext ctx, own;
  CUstream s;
  CUdeviceptr d[MAX_ROUNDS];
  if (!gmt_prog_ok(cuInit(0), "cuInit") || !gmt_prog_ok(cuDeviceGet(&dev, 0), "cuDeviceGet") ||
      !gmt_prog_ok(cuDevicePrimaryCtxRetain(&ctx, dev), "retain") ||
      !gmt_prog_ok(cuCtxSetCurrent(ctx), "set") ||
      !gmt_prog_ok(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate"))
    return 1;
  for (int r = 0; r < rounds; r++)
    if (!gmt_prog_ok(cuMemAlloc(&d[r], n), "cuMemAlloc"))
      return 1;

  void *seen[MAX_ROUNDS];
  int distinct = 0;
  for (int r = 0; r < rounds; r++) {
    void *p = NULL;
    CUresult rc = r % 2 ? cuMemAllocHost(&p, n) : cuMemHostAlloc(&p, n, 0);
    if (!gmt_prog_ok(rc, "pinned alloc"))
      return 1;
    int known = 0;
    for (int i = 0; i < distinct; i++)
      known |= seen[i] == p;
    if (!known)
      seen[distinct++] = p;
    memset(p, r + 1, n);
    if (!gmt_prog_ok(cuMemcpyHtoDAsync(d[r], p, n, s), "HtoDAsync") ||
        !gmt_prog_ok(cuMemFreeHost(p), "cuMemFreeHost"))
      return 1;
  }
  if (!gmt_prog_ok(cuStreamSynchronize(s), "sync"))
    return 1;
  unsigned char *back = malloc(n);
  for (int r = 0; r < rounds; r++) {
    if (!back || !gmt_prog_ok(cuMemcpyDtoH(back, d[r], n), "DtoH"))
      return 1;
    for (size_t i = 0; i < n; i++)
      if (back[i] != (unsigned char)(r + 1)) {
        printf("FAIL what=round %d byte %zu is %d\n", r, i, back[i]);
        return 1;
      }
  }
  free(back);
  printf("ROUNDS distinct=%d\n", distinct);
  fflush(stdout);

  gmt_prog_wait_line();
  void *q = NULL;
  if (!gmt_prog_ok(cuCtxCreate(&own, NULL, 0, dev), "cuCtxCreate") ||
      !gmt_prog_ok(cuMemHostAlloc(&q, n, 0), "alloc in own context") ||
      !gmt_prog_ok(cuMemFreeHost(q), "free in own context"))
    return 1;
  printf("OWNCTX\n");
  fflush(stdout);

  gmt_prog_wait_line();
  if (!gmt_prog_ok(cuCtxDestroy(own), "cuCtxDestroy") || !gmt_prog_ok(cuCtxSetCurrent(ctx), "set"))
    return 1;
  printf("DESTROYED\n");
  fflush(stdout);

  gmt_prog_wait_line();
  unsigned flags;
  if (!gmt_prog_ok(cuMemHostAlloc(&q, n, 0), "alloc again") ||
      !gmt_prog_ok(cuMemHostGetFlags(&flags, q), "flags of the new block"))
    return 1;
  memset(q, 0x5a, n);
  if (!round_trip(d[0], q, n, 0x5a)) {
    printf("FAIL what=bytes of the new block\n");
    return 1;
  }
  if (!gmt_prog_ok(cuMemFreeHost(q), "free again"))
    return 1;
  printf("AGAIN\n");
  fflush(stdout);
  gmt_prog_wait_line();
  return 0;
}
