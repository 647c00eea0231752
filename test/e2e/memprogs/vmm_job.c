/* vmm_job: a program that maps its own physical memory with the driver's
 * virtual memory calls, as PyTorch's expandable segments do, and whose
 * bytes must survive whatever mode=swap does to it
 * (test/e2e/test_swap_vmm.py). Usage:
 *   vmm_job [--kernel-us U] [--fd]
 * Makes three handles with cuMemCreate (--fd: each may be exported as a
 * file descriptor, as PyTorch asks) and maps them in one reserved range:
 *   h0 32 MiB at A, once;
 *   h1 16 MiB at B and again at C (the same bytes at two addresses);
 *   h2 16 MiB: all of it at D while it is filled, then only its second
 *      half at E (its first half holds bytes nothing maps);
 * each mapping read/write for device 0. Fills every byte of each handle
 * with a pattern of the handle and the offset, prints "READY bytes=B
 * h0=0x.. h1=0x.. h2=0x.." (B: 64 MiB), then for each line on stdin:
 *   check    (with --kernel-us, a spin kernel first) reads every mapping
 *            back with cuMemcpyDtoH: "OK <bytes read>" or "BAD <where>";
 *   whole    maps h2 whole at D again, reads all of it, unmaps it: "OK
 *            <bytes>" or "BAD";
 *   remap    unmaps h0 and maps it again at A (access set again), reads
 *            it: "OK <bytes>" or "BAD";
 *   retain   cuMemRetainAllocationHandle at B+1 MiB and at C: "RETAINED
 *            same=<1 when both are h1>", then releases both;
 *   props    cuMemGetAllocationPropertiesFromHandle of h0: "PROPS dev=<id>
 *            types=<requestedHandleTypes>";
 *   more     one more 2 MiB handle, mapped at F and filled: "MORE
 *            distinct=<1 when its value is none of h0-h2>", then checked
 *            by later checks;
 *   export N cuMemExportToShareableHandle of hN as a file descriptor
 *            (closed at once): "EXPORTED";
 *   async    two stream-ordered allocations and their frees: "ASYNC";
 *   release  unmaps everything and releases every handle: "RELEASED";
 *   exit     exits 0.
 * Any CUDA failure prints "CUDAFAIL <call> <error name>" and exits 1. */
#include <cuda.h>

#include "../../common/cudaprog.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

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

enum { NH = 4 };
static const size_t g_size[NH] = {32 * MiB, 16 * MiB, 16 * MiB, 2 * MiB};
static CUmemGenericAllocationHandle g_h[NH];
static int g_nh = 3;
static CUdeviceptr g_base; /* A = base, B = +32, C = +48, D = +64, E = +80+8, F = +96 MiB */
static CUmemAllocationProp g_prop;
static CUmemAccessDesc g_rw;
static unsigned char *g_buf;

/* Byte off of handle i. */
static unsigned char pattern(int i, size_t off)
{
  uint64_t x = (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ULL + off / 8;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ULL;
  return (unsigned char)(x >> (8 * (off % 8)));
}

static void map_rw(CUdeviceptr at, size_t len, size_t off, int i)
{
  CHECK(cuMemMap(at, len, off, g_h[i], 0));
  CHECK(cuMemSetAccess(at, len, &g_rw, 1));
}

static void fill(CUdeviceptr at, int i, size_t off, size_t len)
{
  for (size_t k = 0; k < len; k++)
    g_buf[k] = pattern(i, off + k);
  CHECK(cuMemcpyHtoD_v2(at, g_buf, len));
}

/* 0, or 1 + the first offset in [off, off+len) of handle i, read at at,
 * that is wrong. */
static size_t bad_at(CUdeviceptr at, int i, size_t off, size_t len)
{
  memset(g_buf, 0, len);
  CHECK(cuMemcpyDtoH_v2(g_buf, at, len));
  for (size_t k = 0; k < len; k++)
    if (g_buf[k] != pattern(i, off + k))
      return 1 + off + k;
  return 0;
}

static void report(size_t bad, const char *what, size_t bytes)
{
  if (bad)
    printf("BAD %s+%zu\n", what, bad - 1);
  else
    printf("OK %zu\n", bytes);
}

int main(int argc, char **argv)
{
  unsigned int kernel_us = 0;
  int fd_type = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--kernel-us") && i + 1 < argc)
      kernel_us = (unsigned int)strtoul(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--fd"))
      fd_type = 1;
    else {
      fprintf(stderr, "usage: vmm_job [--kernel-us U] [--fd]\n");
      return 2;
    }
  }
  CUdevice dev;
  CUcontext ctx;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  CUfunction spin = NULL;
  if (kernel_us) {
    CUmodule mod;
    CHECK(cuModuleLoadData(&mod, gmt_spin_ptx));
    CHECK(cuModuleGetFunction(&spin, mod, "spin"));
  }
  g_buf = malloc(32 * MiB);
  if (!g_buf)
    return 1;
  g_prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  g_prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  g_prop.location.id = 0;
  if (fd_type)
    g_prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  g_rw.location = g_prop.location;
  g_rw.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  for (int i = 0; i < 3; i++)
    CHECK(cuMemCreate(&g_h[i], g_size[i], &g_prop, 0));
  CHECK(cuMemAddressReserve(&g_base, 128 * MiB, 0, 0, 0));
  CUdeviceptr A = g_base, B = g_base + 32 * MiB, C = g_base + 48 * MiB, D = g_base + 64 * MiB,
              E = g_base + 88 * MiB, F = g_base + 96 * MiB;
  map_rw(A, 32 * MiB, 0, 0);
  map_rw(B, 16 * MiB, 0, 1);
  map_rw(C, 16 * MiB, 0, 1);
  map_rw(D, 16 * MiB, 0, 2);
  fill(A, 0, 0, 32 * MiB);
  fill(B, 1, 0, 16 * MiB);
  fill(D, 2, 0, 16 * MiB);
  CHECK(cuMemUnmap(D, 16 * MiB));
  map_rw(E, 8 * MiB, 8 * MiB, 2);
  printf("READY bytes=%zu h0=0x%llx h1=0x%llx h2=0x%llx\n", 64 * MiB, (unsigned long long)g_h[0],
         (unsigned long long)g_h[1], (unsigned long long)g_h[2]);
  fflush(stdout);

  char line[128];
  while (fgets(line, sizeof line, stdin)) {
    if (!strncmp(line, "check", 5)) {
      if (spin) {
        void *params[] = {&kernel_us};
        CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
      }
      size_t bad = bad_at(A, 0, 0, 32 * MiB), read = 32 * MiB;
      const char *what = "h0";
      if (!bad) {
        bad = bad_at(B, 1, 0, 16 * MiB), what = "h1@B", read += 16 * MiB;
      }
      if (!bad) {
        bad = bad_at(C, 1, 0, 16 * MiB), what = "h1@C", read += 16 * MiB;
      }
      if (!bad) {
        bad = bad_at(E, 2, 8 * MiB, 8 * MiB), what = "h2@E", read += 8 * MiB;
      }
      if (!bad && g_nh > 3) {
        bad = bad_at(F, 3, 0, 2 * MiB), what = "h3", read += 2 * MiB;
      }
      report(bad, what, read);
    } else if (!strncmp(line, "whole", 5)) {
      map_rw(D, 16 * MiB, 0, 2);
      report(bad_at(D, 2, 0, 16 * MiB), "h2@D", 16 * MiB);
      CHECK(cuMemUnmap(D, 16 * MiB));
    } else if (!strncmp(line, "remap", 5)) {
      CHECK(cuMemUnmap(A, 32 * MiB));
      map_rw(A, 32 * MiB, 0, 0);
      report(bad_at(A, 0, 0, 32 * MiB), "h0", 32 * MiB);
    } else if (!strncmp(line, "retain", 6)) {
      CUmemGenericAllocationHandle r1 = 0, r2 = 0;
      CHECK(cuMemRetainAllocationHandle(&r1, (void *)(uintptr_t)(B + MiB)));
      CHECK(cuMemRetainAllocationHandle(&r2, (void *)(uintptr_t)C));
      printf("RETAINED same=%d\n", r1 == g_h[1] && r2 == g_h[1]);
      CHECK(cuMemRelease(r1));
      CHECK(cuMemRelease(r2));
    } else if (!strncmp(line, "props", 5)) {
      CUmemAllocationProp p;
      memset(&p, 0xff, sizeof p);
      CHECK(cuMemGetAllocationPropertiesFromHandle(&p, g_h[0]));
      printf("PROPS dev=%d types=%d\n", p.location.id, (int)p.requestedHandleTypes);
    } else if (!strncmp(line, "more", 4) && g_nh == 3) {
      CHECK(cuMemCreate(&g_h[3], g_size[3], &g_prop, 0));
      g_nh = 4;
      map_rw(F, 2 * MiB, 0, 3);
      fill(F, 3, 0, 2 * MiB);
      printf("MORE distinct=%d\n", g_h[3] != g_h[0] && g_h[3] != g_h[1] && g_h[3] != g_h[2]);
    } else if (!strncmp(line, "export", 6)) {
      int i = atoi(line + 6), fd = -1;
      CHECK(cuMemExportToShareableHandle(&fd, g_h[i], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
      close(fd);
      printf("EXPORTED\n");
    } else if (!strncmp(line, "async", 5)) {
      CUdeviceptr p1 = 0, p2 = 0;
      CHECK(cuMemAllocAsync(&p1, 2 * MiB, NULL));
      CHECK(cuMemAllocAsync(&p2, 2 * MiB, NULL));
      CHECK(cuMemFreeAsync(p1, NULL));
      CHECK(cuMemFreeAsync(p2, NULL));
      CHECK(cuStreamSynchronize(NULL));
      printf("ASYNC\n");
    } else if (!strncmp(line, "release", 7)) {
      CHECK(cuMemUnmap(A, 32 * MiB));
      CHECK(cuMemUnmap(B, 16 * MiB));
      CHECK(cuMemRelease(g_h[1])); /* still mapped at C: its bytes stay until that goes */
      CHECK(cuMemUnmap(C, 16 * MiB));
      CHECK(cuMemUnmap(E, 8 * MiB));
      if (g_nh > 3)
        CHECK(cuMemUnmap(F, 2 * MiB));
      CHECK(cuMemRelease(g_h[0]));
      CHECK(cuMemRelease(g_h[2]));
      if (g_nh > 3)
        CHECK(cuMemRelease(g_h[3]));
      CHECK(cuMemAddressFree(g_base, 128 * MiB));
      printf("RELEASED\n");
    } else if (!strncmp(line, "exit", 4)) {
      break;
    }
    fflush(stdout);
  }
  free(g_buf);
  return 0;
}
