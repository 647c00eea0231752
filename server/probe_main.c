/* gmt-probe: how long a tiny piece of work waits on each GPU, for gmt-schd's
 * best-GPU score (docs/devices.md, "Picking a GPU"). gmt-schd runs it only
 * when its sampled numbers are stale and a Pick needs them, so that the
 * daemon itself never holds a CUDA context.
 *
 *   gmt-probe [--repeat N] BUS_ID...
 *
 * For each GPU, named by PCI bus id ("0000:17:00.0"), in order: retain its
 * primary context, allocate 4 KiB, one warm-up cuMemsetD32 and a context
 * synchronize, then N (default 5) timed cuMemsetD32Async +
 * cuStreamSynchronize on a stream of its own, 1 ms apart; print one line
 *
 *   BUS_ID DELAY_MS           the median of the N, in milliseconds
 *   BUS_ID error WHAT: NAME   a CUDA call failed there (its name and code)
 *
 * and free what it made before the next GPU. A memset queued behind other
 * processes' work waits for its turn on the GPU (time slicing), so a busy
 * GPU shows a longer delay. Its own cost: a context on each GPU for a
 * moment (hundreds of MiB of device memory and some 100 ms each on a real
 * GPU), freed when it moves on and when it exits.
 *
 * The driver is dlopen()ed: $GMT_REAL_LIBCUDA when set (as the hook does),
 * else libcuda.so.1. Exit 0 when every GPU got a line, 1 when the driver
 * could not be loaded or initialized (said on stderr), 2 for bad usage.
 * Every CUDA return code is checked. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

#define MAX_REPEAT 101
#define PROBE_BYTES 4096
#define GAP_NS 1000000 /* between two timed memsets */

/* The entry points it calls, by their exported (versioned) names. */
static struct {
  CUresult (*Init)(unsigned int);
  CUresult (*GetErrorName)(CUresult, const char **);
  CUresult (*DeviceGetByPCIBusId)(CUdevice *, const char *);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*DevicePrimaryCtxRelease)(CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*CtxSynchronize)(void);
  CUresult (*MemAlloc)(CUdeviceptr *, size_t);
  CUresult (*MemFree)(CUdeviceptr);
  CUresult (*StreamCreate)(CUstream *, unsigned int);
  CUresult (*StreamDestroy)(CUstream);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*MemsetD32)(CUdeviceptr, unsigned int, size_t);
  CUresult (*MemsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
} cu;

static int load_driver(void)
{
  const char *path = getenv("GMT_REAL_LIBCUDA");
  if (!path || !*path)
    path = "libcuda.so.1";
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "gmt-probe: cannot load %s: %s\n", path, dlerror());
    return -1;
  }
  static const struct {
    const char *name, *alt;
    void **slot;
  } syms[] = {
      {"cuInit", NULL, (void **)&cu.Init},
      {"cuGetErrorName", NULL, (void **)&cu.GetErrorName},
      {"cuDeviceGetByPCIBusId", NULL, (void **)&cu.DeviceGetByPCIBusId},
      {"cuDevicePrimaryCtxRetain", NULL, (void **)&cu.DevicePrimaryCtxRetain},
      {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease",
       (void **)&cu.DevicePrimaryCtxRelease},
      {"cuCtxSetCurrent", NULL, (void **)&cu.CtxSetCurrent},
      {"cuCtxSynchronize", NULL, (void **)&cu.CtxSynchronize},
      {"cuMemAlloc_v2", NULL, (void **)&cu.MemAlloc},
      {"cuMemFree_v2", NULL, (void **)&cu.MemFree},
      {"cuStreamCreate", NULL, (void **)&cu.StreamCreate},
      {"cuStreamDestroy_v2", "cuStreamDestroy", (void **)&cu.StreamDestroy},
      {"cuStreamSynchronize", NULL, (void **)&cu.StreamSynchronize},
      {"cuMemsetD32_v2", NULL, (void **)&cu.MemsetD32},
      {"cuMemsetD32Async", NULL, (void **)&cu.MemsetD32Async},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    void *p = dlsym(h, syms[i].name);
    if (!p && syms[i].alt)
      p = dlsym(h, syms[i].alt);
    if (!p) {
      fprintf(stderr, "gmt-probe: %s has no %s\n", path, syms[i].name);
      return -1;
    }
    *syms[i].slot = p;
  }
  /* The handle stays open until exit: the driver is needed to the end. */
  return 0;
}

static const char *cu_name(CUresult r)
{
  const char *n = NULL;
  if (cu.GetErrorName(r, &n) != CUDA_SUCCESS || !n)
    return "an unknown CUDA error";
  return n;
}

static double now_ms(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Probes the GPU at bus_id: 0 and *median_ms, or the failing call in *what
 * and its result. Whatever was made is freed in every case. */
static CUresult probe_one(const char *bus_id, int repeat, double *median_ms, const char **what)
{
  CUdevice dev;
  CUcontext ctx = NULL;
  CUdeviceptr buf = 0;
  CUstream stream = NULL;
  double t[MAX_REPEAT];
  const struct timespec gap = {0, GAP_NS};
  CUresult r, r2;

#define STEP(name, call)                                                                           \
  do {                                                                                             \
    *what = name;                                                                                  \
    if ((r = (call)) != CUDA_SUCCESS)                                                              \
      goto out;                                                                                    \
  } while (0)

  *what = "cuDeviceGetByPCIBusId";
  if ((r = cu.DeviceGetByPCIBusId(&dev, bus_id)) != CUDA_SUCCESS)
    return r;
  *what = "cuDevicePrimaryCtxRetain";
  if ((r = cu.DevicePrimaryCtxRetain(&ctx, dev)) != CUDA_SUCCESS)
    return r;
  STEP("cuCtxSetCurrent", cu.CtxSetCurrent(ctx));
  STEP("cuMemAlloc", cu.MemAlloc(&buf, PROBE_BYTES));
  STEP("cuStreamCreate", cu.StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  /* Warm-up: the first work on a fresh context pays for its setup. */
  STEP("cuMemsetD32", cu.MemsetD32(buf, 0, PROBE_BYTES / 4));
  STEP("cuCtxSynchronize", cu.CtxSynchronize());
  for (int i = 0; i < repeat; i++) {
    /* Spaced out, so that the samples do not all fall into one gap
     * between another job's kernels (the first would wait, the rest
     * would not). */
    if (i > 0)
      nanosleep(&gap, NULL);
    double t0 = now_ms();
    STEP("cuMemsetD32Async", cu.MemsetD32Async(buf, (unsigned)i, PROBE_BYTES / 4, stream));
    STEP("cuStreamSynchronize", cu.StreamSynchronize(stream));
    t[i] = now_ms() - t0;
  }
  qsort(t, (size_t)repeat, sizeof t[0], cmp_double);
  *median_ms = repeat % 2 ? t[repeat / 2] : (t[repeat / 2 - 1] + t[repeat / 2]) / 2;
#undef STEP

out:
  /* Freed in reverse; a failure here is reported only when the probe
   * itself went well. */
  if (stream && (r2 = cu.StreamDestroy(stream)) != CUDA_SUCCESS && r == CUDA_SUCCESS) {
    r = r2;
    *what = "cuStreamDestroy";
  }
  if (buf && (r2 = cu.MemFree(buf)) != CUDA_SUCCESS && r == CUDA_SUCCESS) {
    r = r2;
    *what = "cuMemFree";
  }
  if ((r2 = cu.CtxSetCurrent(NULL)) != CUDA_SUCCESS && r == CUDA_SUCCESS) {
    r = r2;
    *what = "cuCtxSetCurrent(NULL)";
  }
  if ((r2 = cu.DevicePrimaryCtxRelease(dev)) != CUDA_SUCCESS && r == CUDA_SUCCESS) {
    r = r2;
    *what = "cuDevicePrimaryCtxRelease";
  }
  return r;
}

static void usage(FILE *f)
{
  fprintf(f, "usage: gmt-probe [--repeat N] BUS_ID...\n"
             "\n"
             "Times a tiny memset on each GPU named by PCI bus id and prints\n"
             "'BUS_ID DELAY_MS' (the median of N, default 5) or 'BUS_ID error ...'\n"
             "per GPU. Run by gmt-schd for its best-GPU score; it holds a CUDA\n"
             "context on each GPU for a moment.\n");
}

int main(int argc, char **argv)
{
  int repeat = 5, first = 1;
  if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    usage(stdout);
    return 0;
  }
  if (argc > 2 && !strcmp(argv[1], "--repeat")) {
    char *end;
    long n = strtol(argv[2], &end, 10);
    if (*end || n < 1 || n > MAX_REPEAT) {
      fprintf(stderr, "gmt-probe: --repeat '%s': want 1 to %d\n", argv[2], MAX_REPEAT);
      return 2;
    }
    repeat = (int)n;
    first = 3;
  }
  if (first >= argc) {
    usage(stderr);
    return 2;
  }
  if (load_driver() < 0)
    return 1;
  CUresult r = cu.Init(0);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "gmt-probe: cuInit: %s (%d)\n", cu_name(r), (int)r);
    return 1;
  }
  for (int i = first; i < argc; i++) {
    double ms = 0;
    const char *what = "";
    r = probe_one(argv[i], repeat, &ms, &what);
    if (r == CUDA_SUCCESS)
      printf("%s %.6f\n", argv[i], ms);
    else
      printf("%s error %s: %s (%d)\n", argv[i], what, cu_name(r), (int)r);
    /* One line at a time: what was measured before a timeout is kept. */
    if (fflush(stdout) != 0)
      return 1;
  }
  return 0;
}
