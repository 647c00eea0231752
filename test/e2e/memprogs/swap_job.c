/* swap_job: one allocation whose bytes must survive whatever mode=swap
 * does to it (test/e2e/test_swap_hook.py). Usage:
 *   swap_job [--mib N] [--seed S] [--kernel-us U] [--pitch] [--gate] [--pieces K]
 * Allocates N MiB (default 64) with cuMemAlloc_v2 (--pitch: with
 * cuMemAllocPitch_v2, rows of 1 MiB less 100 bytes, so the pitch is the
 * driver's or gmt's choice; --pieces K: as K allocations of N/K MiB, one
 * after the other, which the commands below treat as one), fills it with
 * a pattern of the seed (default
 * the pid) by cuMemcpyHtoD, prints "READY ptr=0x... bytes=B pitch=P" and
 * then, for each line on stdin (--gate: first "GATE pid=P" once the
 * driver is up, and a line on stdin before it allocates, so that a tracer
 * attaches first):
 *   check      (with --kernel-us, a spin kernel is launched first) reads
 *              the whole allocation back with cuMemcpyDtoH and prints
 *              "OK <bytes>" or "BAD <offset>";
 *   memset V   sets every 32-bit word to V with cuMemsetD32_v2 (the
 *              pattern from then on), prints "SET";
 *   spin MS [K] (with --kernel-us) launches spin kernels, waiting for
 *              each K (default 4) to finish (a training loop's
 *              loss.item()), until MS milliseconds have passed; prints
 *              "SPUN <kernels done>" (bench/swap_quantum.py: GPU work done
 *              while swapping);
 *   churn MS   (with --kernel-us) allocates 16 x 1 MiB, launches a spin
 *              kernel, then frees them one by one over MS milliseconds,
 *              launching nothing (an allocator releasing its cache), then
 *              launches another; prints "CHURNED frees=16";
 *   free       frees it with cuMemFree_v2, prints "FREED";
 *   exit       exits 0.
 * Any CUDA failure prints "CUDAFAIL <call> <error name>" and exits 1.
 * Its copies go through one host buffer of at most 64 MiB, so a job may
 * hold more device memory than the host could hold twice
 * (bench/swap_quantum.py at half a card). */
#include <cuda.h>

#include "../../common/cudaprog.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
#define MAX_PIECES 64
#define CHUNK (64 * MiB) /* host memory for the copies in and out */

#define CHECK(call)                                                                                \
  do {                                                                                             \
    CUresult rc_ = (call);                                                                         \
    if (rc_ != CUDA_SUCCESS) {                                                                     \
      const char *name_ = NULL;                                                                    \
      cuGetErrorName(rc_, &name_);                                                                 \
      printf("CUDAFAIL %s %s\n", #call, name_ ? name_ : "?");                                      \
      fflush(stdout);                                                                              \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static double now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Word i of the pattern of seed (0: the memset value instead). */
static uint32_t word(uint64_t seed, uint32_t set, int is_set, size_t i)
{
  if (is_set)
    return set;
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL + i;
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 32;
  return (uint32_t)x;
}

int main(int argc, char **argv)
{
  size_t mib = 64;
  uint64_t seed = (uint64_t)getpid();
  unsigned int kernel_us = 0;
  int pitched = 0, gate = 0;
  size_t pieces = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--mib") && i + 1 < argc)
      mib = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
      seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--kernel-us") && i + 1 < argc)
      kernel_us = (unsigned int)strtoul(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--pitch"))
      pitched = 1;
    else if (!strcmp(argv[i], "--gate"))
      gate = 1;
    else if (!strcmp(argv[i], "--pieces") && i + 1 < argc)
      pieces = strtoull(argv[++i], NULL, 10);
    else {
      fprintf(stderr, "usage: swap_job [--mib N] [--seed S] [--kernel-us U] [--pitch] [--gate] "
                      "[--pieces K]\n");
      return 2;
    }
  }
  if (!mib) {
    fprintf(stderr, "swap_job: --mib must be > 0\n");
    return 2;
  }
  if (!pieces || pieces > MAX_PIECES || mib % pieces || (pitched && pieces > 1)) {
    fprintf(stderr, "swap_job: --pieces must divide --mib, at most %d, without --pitch\n",
            MAX_PIECES);
    return 2;
  }
  CUdevice dev;
  CUcontext ctx;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  CUmodule mod = NULL;
  CUfunction spin = NULL;
  if (kernel_us) {
    CHECK(cuModuleLoadData(&mod, gmt_spin_ptx));
    CHECK(cuModuleGetFunction(&spin, mod, "spin"));
  }
  if (gate) {
    char go[16];
    printf("GATE pid=%d\n", (int)getpid());
    fflush(stdout);
    if (!fgets(go, sizeof go, stdin))
      return 1;
  }
  CUdeviceptr d[MAX_PIECES] = {0};
  size_t pitch = 0, bytes = mib * MiB;
  if (pitched) {
    CHECK(cuMemAllocPitch_v2(&d[0], &pitch, MiB - 100, mib, 4));
    bytes = pitch * mib;
  } else {
    for (size_t p = 0; p < pieces; p++)
      CHECK(cuMemAlloc_v2(&d[p], bytes / pieces));
  }
  size_t each = bytes / pieces;
  /* Copied through one chunk of host memory at a time, so that a job may
   * hold more device memory than the host could hold twice. */
  size_t chunk_max = each < CHUNK ? each : CHUNK;
  uint32_t *buf = malloc(chunk_max);
  if (!buf) {
    fprintf(stderr, "swap_job: no host memory for %zu bytes\n", chunk_max);
    return 1;
  }
  uint32_t set = 0;
  int is_set = 0;
  for (size_t p = 0; p < pieces; p++)
    for (size_t off = 0; off < each; off += chunk_max) {
      size_t len = each - off < chunk_max ? each - off : chunk_max, first = (p * each + off) / 4;
      for (size_t i = 0; i < len / 4; i++)
        buf[i] = word(seed, set, is_set, first + i);
      CHECK(cuMemcpyHtoD_v2(d[p] + off, buf, len));
    }
  printf("READY ptr=0x%llx bytes=%zu pitch=%zu\n", (unsigned long long)d[0], bytes, pitch);
  fflush(stdout);

  char line[128];
  while (fgets(line, sizeof line, stdin)) {
    if (!strncmp(line, "check", 5)) {
      if (spin) {
        void *params[] = {&kernel_us};
        CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
      }
      size_t bad = bytes;
      for (size_t p = 0; p < pieces && bad == bytes; p++)
        for (size_t off = 0; off < each && bad == bytes; off += chunk_max) {
          size_t len = each - off < chunk_max ? each - off : chunk_max,
                 first = (p * each + off) / 4;
          memset(buf, 0, len);
          CHECK(cuMemcpyDtoH_v2(buf, d[p] + off, len));
          for (size_t i = 0; i < len / 4 && bad == bytes; i++) {
            uint32_t want = word(seed, set, is_set, first + i);
            for (size_t b = 0; b < 4 && buf[i] != want; b++)
              if (((unsigned char *)&buf[i])[b] != ((unsigned char *)&want)[b] && bad == bytes)
                bad = (first + i) * 4 + b;
          }
        }
      if (bad == bytes)
        printf("OK %zu\n", bytes);
      else
        printf("BAD %zu\n", bad);
    } else if (!strncmp(line, "spin", 4) && spin) {
      char *end;
      double until = now_ms() + strtod(line + 4, &end);
      long per = strtol(end, NULL, 10);
      if (per <= 0)
        per = 4;
      unsigned long done = 0;
      while (now_ms() < until) {
        void *params[] = {&kernel_us};
        for (long k = 0; k < per; k++)
          CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
        CHECK(cuCtxSynchronize());
        done += (unsigned long)per;
      }
      printf("SPUN %lu\n", done);
    } else if (!strncmp(line, "churn", 5) && spin) {
      enum { CHURN = 16 };
      CUdeviceptr t[CHURN];
      for (int k = 0; k < CHURN; k++)
        CHECK(cuMemAlloc_v2(&t[k], MiB));
      void *params[] = {&kernel_us};
      CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
      CHECK(cuCtxSynchronize());
      long gap_us = (long)(strtod(line + 5, NULL) * 1000 / CHURN);
      struct timespec gap = {gap_us / 1000000, gap_us % 1000000 * 1000};
      for (int k = 0; k < CHURN; k++) {
        nanosleep(&gap, NULL);
        CHECK(cuMemFree_v2(t[k]));
      }
      CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
      CHECK(cuCtxSynchronize());
      printf("CHURNED frees=%d\n", CHURN);
    } else if (!strncmp(line, "memset", 6)) {
      set = (uint32_t)strtoul(line + 6, NULL, 0);
      is_set = 1;
      for (size_t p = 0; p < pieces; p++)
        CHECK(cuMemsetD32_v2(d[p], set, each / 4));
      printf("SET\n");
    } else if (!strncmp(line, "free", 4)) {
      for (size_t p = 0; p < pieces; p++) {
        CHECK(cuMemFree_v2(d[p]));
        d[p] = 0;
      }
      printf("FREED\n");
    } else if (!strncmp(line, "exit", 4)) {
      break;
    }
    fflush(stdout);
  }
  if (mod)
    CHECK(cuModuleUnload(mod));
  free(buf);
  return 0;
}
