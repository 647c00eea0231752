/* pin_buffers: host buffers with hot and cold copies, for pin advice's
 * end-to-end tests (test_pinning.py).
 *
 *   pin_buffers SIZE_MIB HOT HOT_COPIES COLD COLD_COPIES [async] [ptds] [register] [realloc]
 *               [api] [gate] [phases]
 *               [gate]
 *
 * Mallocs HOT + COLD buffers of SIZE_MIB at one call site (hot first), then
 * copies each hot buffer HOT_COPIES times to the device and back, and each
 * cold one COLD_COPIES times, spread over the rounds. Every round trip
 * checks the bytes that come back. Then prints
 *   PINNED hot=<n pinned> cold=<n pinned> bytes=<pinned bytes> which=<indices>
 * as the driver sees them (cuMemHostGetFlags answers for page-locked
 * memory only). With `register` it then registers the first hot buffer
 * itself (and unregisters it) as a program that pins its own memory would.
 * After a line on stdin it frees every buffer (with `realloc`, first grows
 * each to twice its size and checks its bytes survived) and prints FREED;
 * after another line it exits. With `api` the buffers come from
 * gmt_host_alloc (gmt/alloc.h) under one site name, and go back with
 * gmt_host_free (no realloc). With `gate` it says READY pid=N once the
 * driver is up (the hook registered) and waits for a line on stdin before
 * it allocates, so that a tracer can attach first (test_trace_pins.py).
 * Any failure prints FAIL and exits 1. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include "../../common/cudaprog.h"

#include <gmt/alloc.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
#define MAXBUF 64

static unsigned char pattern(int buf, int round, size_t k)
{
  return (unsigned char)(buf * 31 + round * 7 + (k >> 12));
}

static void fill(unsigned char *p, size_t n, int buf, int round)
{
  for (size_t k = 0; k < n; k += 4096)
    memset(p + k, pattern(buf, round, k), n - k < 4096 ? n - k : 4096);
}

static int check(const unsigned char *p, size_t n, int buf, int round)
{
  for (size_t k = 0; k < n; k++)
    if (p[k] != pattern(buf, round, k)) {
      printf("FAIL what=bytes buffer=%d round=%d offset=%zu\n", buf, round, k);
      fflush(stdout);
      return 0;
    }
  return 1;
}

static void sleep_ms(long ms)
{
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static int use_async, use_ptds;
static CUstream g_stream;

/* The per-thread default stream's copies: the driver exports them, cuda.h
 * names them only through macros. */
CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n);
CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n);

/* One round trip: to the device, scrub, back, check. */
static int round_trip(unsigned char *p, size_t n, CUdeviceptr d, int buf, int round)
{
  fill(p, n, buf, round);
  if (use_async) {
    if (!gmt_prog_ok(cuMemcpyHtoDAsync_v2(d, p, n, g_stream), "htod_async") ||
        !gmt_prog_ok(cuStreamSynchronize(g_stream), "sync"))
      return 0;
    memset(p, 0, n);
    if (!gmt_prog_ok(cuMemcpyDtoHAsync_v2(p, d, n, g_stream), "dtoh_async") ||
        !gmt_prog_ok(cuStreamSynchronize(g_stream), "sync"))
      return 0;
  } else if (use_ptds) {
    if (!gmt_prog_ok(cuMemcpyHtoD_v2_ptds(d, p, n), "htod_ptds"))
      return 0;
    memset(p, 0, n);
    if (!gmt_prog_ok(cuMemcpyDtoH_v2_ptds(p, d, n), "dtoh_ptds"))
      return 0;
  } else {
    if (!gmt_prog_ok(cuMemcpyHtoD_v2(d, p, n), "htod"))
      return 0;
    memset(p, 0, n);
    if (!gmt_prog_ok(cuMemcpyDtoH_v2(p, d, n), "dtoh"))
      return 0;
  }
  return check(p, n, buf, round);
}

static int pinned(void *p)
{
  unsigned int flags;
  return cuMemHostGetFlags(&flags, p) == CUDA_SUCCESS;
}

int main(int argc, char **argv)
{
  if (argc < 6) {
    fprintf(stderr, "usage: pin_buffers SIZE_MIB HOT HOT_COPIES COLD COLD_COPIES [async] "
                    "[ptds] [register] [realloc] [api] [gate] [phases]\n");
    return 2;
  }
  size_t size = (size_t)atoi(argv[1]) * MiB;
  int hot = atoi(argv[2]), hot_copies = atoi(argv[3]);
  int cold = atoi(argv[4]), cold_copies = atoi(argv[5]);
  int do_register = 0, do_realloc = 0, api = 0, gate = 0, phases = 0;
  for (int i = 6; i < argc; i++) {
    use_async |= strcmp(argv[i], "async") == 0;
    use_ptds |= strcmp(argv[i], "ptds") == 0;
    do_register |= strcmp(argv[i], "register") == 0;
    do_realloc |= strcmp(argv[i], "realloc") == 0;
    api |= strcmp(argv[i], "api") == 0;
    gate |= strcmp(argv[i], "gate") == 0;
    phases |= strcmp(argv[i], "phases") == 0;
  }
  int n = hot + cold;
  if (n <= 0 || n > MAXBUF || size == 0 || hot_copies < 0 || cold_copies < 0)
    return 2;

  CUdevice dev;
  CUcontext ctx;
  CUdeviceptr d;
  if (!gmt_prog_ok(cuInit(0), "cuInit") || !gmt_prog_ok(cuDeviceGet(&dev, 0), "cuDeviceGet") ||
      !gmt_prog_ok(cuDevicePrimaryCtxRetain(&ctx, dev), "retain") ||
      !gmt_prog_ok(cuCtxSetCurrent(ctx), "set") ||
      !gmt_prog_ok(cuMemAlloc_v2(&d, size), "cuMemAlloc") ||
      !gmt_prog_ok(cuStreamCreate(&g_stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"))
    return 1;
  if (gate) {
    printf("READY pid=%d\n", (int)getpid());
    fflush(stdout);
    gmt_prog_wait_line();
  }
  unsigned char *buf[MAXBUF];
  for (int i = 0; i < n; i++) /* one call site: the nth names the buffer */
    if (!(buf[i] = api ? gmt_host_alloc(size, "pin_buffers.buf") : malloc(size))) {
      printf("FAIL what=malloc\n");
      return 1;
    }

  /* phases: the hot buffers one after another, 1.2 s apart, so that each
   * goes cold (no copy for over a second) before the next one heats up. */
  for (int i = 0; phases && i < hot; i++) {
    if (i > 0)
      sleep_ms(1200);
    for (int r = 0; r < hot_copies; r++)
      if (!round_trip(buf[i], size, d, i, r))
        return 1;
  }
  int rounds = hot_copies > cold_copies ? hot_copies : cold_copies;
  for (int r = 0; r < rounds; r++) {
    for (int i = 0; !phases && i < hot && r < hot_copies; i++)
      if (!round_trip(buf[i], size, d, i, r))
        return 1;
    /* Cold buffers spread over the rounds: buffer j's copies start at
     * round j * rounds / cold. */
    for (int j = 0; j < cold; j++) {
      int first = cold ? j * rounds / cold : 0, k = r - first;
      if (k >= 0 && k < cold_copies && !round_trip(buf[hot + j], size, d, hot + j, r))
        return 1;
    }
  }

  int hot_pinned = 0, cold_pinned = 0;
  char which[4 * MAXBUF] = "";
  for (int i = 0; i < n; i++)
    if (pinned(buf[i])) {
      if (i < hot)
        hot_pinned++;
      else
        cold_pinned++;
      snprintf(which + strlen(which), sizeof which - strlen(which), "%s%d", *which ? "," : "", i);
    }
  printf("PINNED hot=%d cold=%d bytes=%zu which=%s\n", hot_pinned, cold_pinned,
         (size_t)(hot_pinned + cold_pinned) * size, *which ? which : "-");
  fflush(stdout);

  if (do_register && hot > 0) {
    if (!gmt_prog_ok(cuMemHostRegister_v2(buf[0], size, 0), "program cuMemHostRegister") ||
        !round_trip(buf[0], size, d, 0, rounds) ||
        !gmt_prog_ok(cuMemHostUnregister(buf[0]), "program cuMemHostUnregister"))
      return 1;
    printf("REGISTERED\n");
    fflush(stdout);
  }

  gmt_prog_wait_line();
  for (int i = 0; i < n; i++) {
    if (api) {
      gmt_host_free(buf[i]);
      continue;
    }
    if (do_realloc) {
      fill(buf[i], size, i, 1000);
      unsigned char *q = realloc(buf[i], 2 * size);
      if (!q) {
        printf("FAIL what=realloc\n");
        return 1;
      }
      if (!check(q, size, i, 1000))
        return 1;
      buf[i] = q;
    }
    free(buf[i]);
  }
  if (!gmt_prog_ok(cuMemFree_v2(d), "cuMemFree"))
    return 1;
  printf("FREED\n");
  fflush(stdout);
  gmt_prog_wait_line();
  return 0;
}
