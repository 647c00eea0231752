/* mem_paths: the memory quota on one allocation path, for
 * test/e2e/test_memory.py.
 *
 *   mem_paths PATH LIMIT [--step BYTES] [--over BYTES] [--loops N]
 *
 * PATH is alloc (cuMemAlloc_v2), alloc_v1 (cuMemAlloc), pitch
 * (cuMemAllocPitch_v2, 512-byte rows), pitch_v1, managed, async
 * (cuMemAllocAsync from the device's pool), pool (cuMemAllocFromPoolAsync
 * from a pool of its own), vmm (cuMemCreate), array (cuArray3DCreate_v2),
 * array2d (cuArrayCreate_v2) or mipmap (cuMipmappedArrayCreate).
 *
 * Phases, each ended by a line on stdout; between phases it waits for a
 * line on stdin (EOF ends it):
 *   INFO free=F total=T free1=F1 total1=T1     cuMemGetInfo_v2 and v1
 *   FILLED ok=1 bytes=LIMIT n=K                allocated up to exactly LIMIT
 *   OVER rc=R name=N                           OVER bytes more, which must fail
 *   INFO ...                                   at the limit
 *   FREED                                      all freed (pools trimmed)
 *   LOOPED ok=1 n=N pool=P                     N alloc/free cycles of STEP
 *                                              (pool: what the pool holds)
 *   TRIMMED pool=P                             pools trimmed to 0
 *   INFO ...
 * A failure prints `FAIL what=... rc=...` and exits 1. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXN 4096

static const char *path;
static CUmemoryPool g_pool;
static CUstream g_stream;

static const char *name_of(CUresult r)
{
  const char *n = NULL;
  cuGetErrorName(r, &n);
  return n ? n : "?";
}

static void fail(const char *what, CUresult r)
{
  printf("FAIL what=%s rc=%d name=%s\n", what, (int)r, name_of(r));
  fflush(stdout);
  exit(1);
}

#define CK(call)                                                                                   \
  do {                                                                                             \
    CUresult r_ = (call);                                                                          \
    if (r_ != CUDA_SUCCESS)                                                                        \
      fail(#call, r_);                                                                             \
  } while (0)

static void wait_line(void)
{
  char buf[64];
  if (!fgets(buf, sizeof buf, stdin))
    exit(0);
}

static void info(void)
{
  size_t f = 0, t = 0;
  unsigned int f1 = 0, t1 = 0;
  CK(cuMemGetInfo_v2(&f, &t));
  CK(cuMemGetInfo(&f1, &t1));
  printf("INFO free=%zu total=%zu free1=%u total1=%u\n", f, t, f1, t1);
  fflush(stdout);
}

typedef struct {
  int kind; /* 0 ptr, 1 ptr async, 2 vmm, 3 array, 4 mipmap, 5 ptr v1 */
  CUdeviceptr ptr;
  CUmemGenericAllocationHandle h;
  CUarray arr;
  CUmipmappedArray mip;
} block_t;

/* One allocation of bytes on the path. */
static CUresult alloc_one(size_t bytes, block_t *b)
{
  memset(b, 0, sizeof *b);
  if (!strcmp(path, "alloc"))
    return cuMemAlloc_v2(&b->ptr, bytes);
  if (!strcmp(path, "alloc_v1")) {
    CUdeviceptr_v1 p = 0;
    CUresult r = cuMemAlloc(&p, (unsigned int)bytes);
    b->ptr = p;
    b->kind = 5;
    return r;
  }
  if (!strcmp(path, "pitch")) {
    size_t pitch = 0, w = bytes < 512 ? bytes : 512, h = bytes < 512 ? 1 : bytes / 512;
    return cuMemAllocPitch_v2(&b->ptr, &pitch, w, h, 4);
  }
  if (!strcmp(path, "pitch_v1")) {
    unsigned int pitch = 0, w = bytes < 512 ? (unsigned)bytes : 512,
                 h = bytes < 512 ? 1 : (unsigned)(bytes / 512);
    CUdeviceptr_v1 p = 0;
    CUresult r = cuMemAllocPitch(&p, &pitch, w, h, 4);
    b->ptr = p;
    b->kind = 5;
    return r;
  }
  if (!strcmp(path, "managed"))
    return cuMemAllocManaged(&b->ptr, bytes, CU_MEM_ATTACH_GLOBAL);
  if (!strcmp(path, "async")) {
    b->kind = 1;
    return cuMemAllocAsync(&b->ptr, bytes, g_stream);
  }
  if (!strcmp(path, "pool")) {
    b->kind = 1;
    return cuMemAllocFromPoolAsync(&b->ptr, bytes, g_pool, g_stream);
  }
  if (!strcmp(path, "vmm")) {
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    b->kind = 2;
    return cuMemCreate(&b->h, bytes, &prop, 0);
  }
  if (!strcmp(path, "array")) {
    CUDA_ARRAY3D_DESCRIPTOR d = {0};
    d.Width = bytes;
    d.Format = CU_AD_FORMAT_UNSIGNED_INT8;
    d.NumChannels = 1;
    b->kind = 3;
    return cuArray3DCreate_v2(&b->arr, &d);
  }
  if (!strcmp(path, "array2d")) {
    CUDA_ARRAY_DESCRIPTOR d = {0};
    d.Width = bytes < 1024 ? bytes : 1024;
    d.Height = bytes < 1024 ? 1 : bytes / 1024;
    d.Format = CU_AD_FORMAT_UNSIGNED_INT8;
    d.NumChannels = 1;
    b->kind = 3;
    return cuArrayCreate_v2(&b->arr, &d);
  }
  if (!strcmp(path, "mipmap")) {
    CUDA_ARRAY3D_DESCRIPTOR d = {0};
    d.Width = bytes;
    d.Format = CU_AD_FORMAT_UNSIGNED_INT8;
    d.NumChannels = 1;
    b->kind = 4;
    return cuMipmappedArrayCreate(&b->mip, &d, 1);
  }
  fprintf(stderr, "mem_paths: unknown path '%s'\n", path);
  exit(2);
}

static void free_one(block_t *b)
{
  switch (b->kind) {
  case 0: CK(cuMemFree_v2(b->ptr)); break;
  case 5: CK(cuMemFree((CUdeviceptr_v1)b->ptr)); break;
  case 1: CK(cuMemFreeAsync(b->ptr, g_stream)); break;
  case 2: CK(cuMemRelease(b->h)); break;
  case 3: CK(cuArrayDestroy(b->arr)); break;
  case 4: CK(cuMipmappedArrayDestroy(b->mip)); break;
  }
}

/* What the path's pool holds (0 for paths without one). */
static unsigned long long pool_reserved(void)
{
  CUmemoryPool p = g_pool;
  if (!strcmp(path, "async"))
    CK(cuDeviceGetMemPool(&p, 0));
  else if (strcmp(path, "pool"))
    return 0;
  cuuint64_t v = 0;
  CK(cuMemPoolGetAttribute(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v));
  return (unsigned long long)v;
}

static void trim_pools(void)
{
  if (strcmp(path, "async") && strcmp(path, "pool"))
    return;
  CUmemoryPool p = g_pool;
  if (!strcmp(path, "async"))
    CK(cuDeviceGetMemPool(&p, 0));
  CK(cuStreamSynchronize(g_stream));
  CK(cuMemPoolTrimTo(p, 0));
}

int main(int argc, char **argv)
{
  if (argc < 3) {
    fprintf(stderr, "usage: mem_paths PATH LIMIT [--step BYTES] [--over BYTES] [--loops N]\n");
    return 2;
  }
  path = argv[1];
  size_t limit = strtoull(argv[2], NULL, 0), step = limit / 4 ? limit / 4 : 1, over = 1;
  long loops = 0;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--step"))
      step = strtoull(argv[i + 1], NULL, 0);
    else if (!strcmp(argv[i], "--over"))
      over = strtoull(argv[i + 1], NULL, 0);
    else if (!strcmp(argv[i], "--loops"))
      loops = strtol(argv[i + 1], NULL, 0);
  }
  setvbuf(stdout, NULL, _IOLBF, 0);

  CUdevice dev;
  CUcontext ctx;
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CK(cuStreamCreate(&g_stream, 0));
  if (!strcmp(path, "pool")) {
    CUmemPoolProps props = {0};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CK(cuMemPoolCreate(&g_pool, &props));
  }
  info();
  wait_line();

  /* Up to exactly the limit. */
  static block_t blocks[MAXN];
  size_t n = 0, done = 0;
  while (done < limit && n < MAXN) {
    size_t want = limit - done < step ? limit - done : step;
    CUresult r = alloc_one(want, &blocks[n]);
    if (r != CUDA_SUCCESS) {
      printf("FILLED ok=0 bytes=%zu n=%zu rc=%d name=%s\n", done, n, (int)r, name_of(r));
      return 1;
    }
    n++;
    done += want;
  }
  printf("FILLED ok=1 bytes=%zu n=%zu\n", done, n);
  block_t extra;
  CUresult r = alloc_one(over, &extra);
  printf("OVER rc=%d name=%s\n", (int)r, name_of(r));
  if (r == CUDA_SUCCESS)
    free_one(&extra);
  info();
  wait_line();

  for (size_t i = 0; i < n; i++)
    free_one(&blocks[i]);
  trim_pools();
  printf("FREED\n");
  wait_line();

  for (long i = 0; i < loops; i++) {
    block_t b;
    CK(alloc_one(step, &b));
    free_one(&b);
  }
  printf("LOOPED ok=1 n=%ld pool=%llu\n", loops, pool_reserved());
  wait_line();

  trim_pools();
  printf("TRIMMED pool=%llu\n", pool_reserved());
  info();
  wait_line();
  return 0;
}
