/* Hook overhead, one side of a side-by-side run (hook_overhead.py runs it
 * with and without LD_PRELOAD and prints the ratios):
 *   hook_overhead launch N   N empty-kernel launches, then one sync
 *   hook_overhead alloc N    N times cuMemAlloc(2 MiB) + cuMemFree
 *   hook_overhead dtoh N     N synchronizing 4-byte copies to the host
 *                            (the .item() of an inference call)
 *   hook_overhead infer N    N calls of 10 empty-kernel launches and one
 *                            4-byte copy to the host (a batch-1 inference
 *                            call's shape)
 *   hook_overhead procaddr N N cuGetProcAddress_v2 of one name: a wrapped
 *                            call that does little in the hook or the
 *                            driver, so that what wrapping itself costs
 *                            (the per-call logs' timing) shows
 * Prints one line: `<mode> rate=<per s> p50_us= p99_us= p999_us=`, the
 * rate over the whole loop and percentiles of each call (each pair for
 * alloc, each call of 11 for infer) timed on its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

#include "../test/common/cudaprog.h"

static const char empty_ptx[] = ".version 7.0\n.target sm_75\n.address_size 64\n"
                                ".visible .entry empty()\n{\n  ret;\n}\n";

#define CHECK(call) GMT_CU_CHECK("hook_overhead", call)

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The loop's rate and its calls' percentiles (us sorted here). */
static void report(const char *mode, double *us, long n, double seconds)
{
  qsort(us, (size_t)n, sizeof *us, cmp_double);
  printf("%s rate=%.1f p50_us=%.3f p99_us=%.3f p999_us=%.3f\n", mode, (double)n / seconds,
         us[n / 2], us[n * 99 / 100], us[n * 999 / 1000]);
}

enum { LAUNCH, ALLOC, DTOH, INFER, PROCADDR };
static const char *const modes[] = {"launch", "alloc", "dtoh", "infer", "procaddr"};

/* What one call of a mode uses. */
typedef struct {
  CUfunction fn;
  CUdeviceptr p;
  int word;
} loop_t;

/* One call of mode m (alloc: a pair; infer: 11 calls). */
static void one_call(int m, loop_t *l)
{
  void *fp;
  CUdriverProcAddressQueryResult st;
  CUdeviceptr q;
  switch (m) {
  case LAUNCH: CHECK(cuLaunchKernel(l->fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL)); break;
  case ALLOC:
    CHECK(cuMemAlloc(&q, 2u << 20));
    CHECK(cuMemFree(q));
    break;
  case DTOH: CHECK(cuMemcpyDtoH(&l->word, l->p, sizeof l->word)); break;
  case INFER:
    for (int k = 0; k < 10; k++)
      CHECK(cuLaunchKernel(l->fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CHECK(cuMemcpyDtoH(&l->word, l->p, sizeof l->word));
    break;
  default: CHECK(cuGetProcAddress_v2("cuLaunchKernel", &fp, 12000, 0, &st)); break;
  }
}

int main(int argc, char **argv)
{
  CUcontext ctx;
  CUdevice dev;
  CUmodule mod;
  loop_t l = {0};
  long n;
  const char *mode = argc == 3 ? argv[1] : "";
  int m = -1; /* decoded once: the timed loop compares no strings */
  for (int i = 0; i < (int)(sizeof modes / sizeof modes[0]); i++)
    if (!strcmp(mode, modes[i]))
      m = i;
  if (m < 0 || (n = atol(argv[2])) <= 0) {
    fprintf(stderr, "usage: hook_overhead launch|alloc|dtoh|infer|procaddr N\n");
    return 2;
  }
  double *us = malloc((size_t)n * sizeof *us);
  if (!us) {
    fprintf(stderr, "hook_overhead: no memory for %ld timings\n", n);
    return 2;
  }
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  CHECK(cuModuleLoadData(&mod, empty_ptx));
  CHECK(cuModuleGetFunction(&l.fn, mod, "empty"));
  CHECK(cuMemAlloc(&l.p, 4));

  long warm = n / 10 < 1000 ? n / 10 : 1000;
  for (long i = 0; i < warm; i++)
    one_call(m, &l);
  CHECK(cuCtxSynchronize());
  double t0 = gmt_prog_now_s(), last = t0;
  for (long i = 0; i < n; i++) {
    one_call(m, &l);
    double t = gmt_prog_now_s();
    us[i] = (t - last) * 1e6;
    last = t;
  }
  CHECK(cuCtxSynchronize());
  double t1 = gmt_prog_now_s();
  report(mode, us, n, t1 - t0);
  CHECK(cuMemFree(l.p));
  CHECK(cuModuleUnload(mod));
  CHECK(cuDevicePrimaryCtxRelease(dev));
  free(us);
  return 0;
}
