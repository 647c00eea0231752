/* The program test_trace.py traces. It says "ready pid=N" and waits for a
 * line on stdin (so that the tracer can attach first), does the work of
 * its mode, says "done ..." with what it did, and exits.
 *
 *   trace_job hotcold  2 hot device buffers of 50 H2D + 50 D2H copies each,
 *                      then 5 cold ones of 1 + 1
 *   trace_job fork     forks a child that copies 10 + 10 into one buffer;
 *                      after it exits, the parent copies 3 H2D into its own
 *   trace_job reuse    the same host memory registered twice (a new history
 *                      at the same address), and a 4 MiB pageable buffer,
 *                      touched page by page, unmapped and mapped again
 *   trace_job pitched  one 1 MiB device buffer: 2D copies (4 H2D of 1024 x 64
 *                      bytes, 3 D2H, 1 async D2H) and 3D copies (2 H2D of
 *                      512 x 8 x 4), each starting inside the buffer
 *   trace_job vmm      two granules of physical memory (cuMemCreate) mapped
 *                      side by side; 3 H2D copies into the first, 2 into
 *                      the second; one cuMemUnmap of both. And an 8 MiB
 *                      PROT_NONE mmap, as the driver reserves address space
 *   trace_job filemap PATH
 *                      writes every page of a 4 MiB file at PATH through a
 *                      shared mapping: each first write is a page-cache
 *                      fault (the file is removed at the end)
 *   trace_job compact  asks the kernel to compact all memory (root): the
 *                      compaction runs in this process, which waits for it
 *   trace_job idle     loads libcuda and waits, doing nothing (error tests)
 *   trace_job attach   the tracer attaches to a job whose buffers exist:
 *                      2 hot and 5 cold malloc'd 1 MiB host buffers and one
 *                      1 MiB device buffer, all made before "ready"; then
 *                      50 H2D + 50 D2H between each hot one and the device
 *                      buffer, 1 + 1 for each cold one (synchronous copies)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>

#include "../../common/cudaprog.h"

#define HOT_SIZE ((size_t)256 << 10)
#define COLD_SIZE ((size_t)64 << 10)
#define HOT_COPIES 50
#define FORK_SIZE ((size_t)128 << 10)
#define PAGEABLE_SIZE ((size_t)4 << 20)
#define PIN_SIZE ((size_t)256 << 10)
#define ATTACH_SIZE ((size_t)1 << 20)

#define CHECK(call) GMT_CU_CHECK("trace_job", call)

static void init_ctx(void)
{
  CUdevice dev;
  CUcontext ctx;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
}

static void wait_go(void)
{
  char line[64];
  printf("ready pid=%d\n", (int)getpid());
  fflush(stdout);
  if (!fgets(line, sizeof line, stdin))
    exit(3);
}

/* Separate functions so that each kind of buffer has its own call site. */
static __attribute__((noinline)) CUdeviceptr alloc_hot(void)
{
  CUdeviceptr p;
  CHECK(cuMemAlloc(&p, HOT_SIZE));
  return p;
}

static __attribute__((noinline)) CUdeviceptr alloc_cold(void)
{
  CUdeviceptr p;
  CHECK(cuMemAlloc(&p, COLD_SIZE));
  return p;
}

static int hotcold(void)
{
  char *host = calloc(1, HOT_SIZE); /* below the tracked mmap size */
  CUdeviceptr hot[2], cold[5];
  init_ctx();
  wait_go();
  for (int i = 0; i < 2; i++)
    hot[i] = alloc_hot();
  for (int i = 0; i < 5; i++)
    cold[i] = alloc_cold();
  for (int r = 0; r < HOT_COPIES; r++)
    for (int i = 0; i < 2; i++) {
      CHECK(cuMemcpyHtoD(hot[i], host, HOT_SIZE));
      CHECK(cuMemcpyDtoH(host, hot[i], HOT_SIZE));
    }
  for (int i = 0; i < 5; i++) {
    CHECK(cuMemcpyHtoD(cold[i], host, COLD_SIZE));
    CHECK(cuMemcpyDtoH(host, cold[i], COLD_SIZE));
  }
  printf("done hot=0x%llx,0x%llx cold=", (unsigned long long)hot[0], (unsigned long long)hot[1]);
  for (int i = 0; i < 5; i++)
    printf("%s0x%llx", i ? "," : "", (unsigned long long)cold[i]);
  printf("\n");
  for (int i = 0; i < 5; i++)
    CHECK(cuMemFree(cold[i]));
  /* the hot ones stay allocated until exit */
  free(host);
  return 0;
}

static int forking(void)
{
  char *host = calloc(1, FORK_SIZE);
  wait_go();
  fflush(stdout);
  pid_t child = fork();
  if (child < 0)
    return 1;
  if (child == 0) { /* CUDA starts after fork, as it must */
    CUdeviceptr p;
    init_ctx();
    CHECK(cuMemAlloc(&p, FORK_SIZE));
    for (int i = 0; i < 10; i++) {
      CHECK(cuMemcpyHtoD(p, host, FORK_SIZE));
      CHECK(cuMemcpyDtoH(host, p, FORK_SIZE));
    }
    CHECK(cuMemFree(p));
    _exit(0);
  }
  int st = 0;
  waitpid(child, &st, 0);
  CUdeviceptr p;
  init_ctx();
  CHECK(cuMemAlloc(&p, FORK_SIZE));
  for (int i = 0; i < 3; i++)
    CHECK(cuMemcpyHtoD(p, host, FORK_SIZE));
  CHECK(cuMemFree(p));
  printf("done child=%d status=%d\n", (int)child, st);
  free(host);
  return 0;
}

static int reuse(void)
{
  static char pinbuf[PIN_SIZE] __attribute__((aligned(4096)));
  CUdeviceptr d;
  init_ctx();
  wait_go();
  CHECK(cuMemAlloc(&d, PIN_SIZE));
  /* registered, 3 copies, unregistered; registered again, 7 copies */
  CHECK(cuMemHostRegister(pinbuf, PIN_SIZE, 0));
  for (int i = 0; i < 3; i++)
    CHECK(cuMemcpyHtoD(d, pinbuf, PIN_SIZE));
  CHECK(cuMemHostUnregister(pinbuf));
  CHECK(cuMemHostRegister(pinbuf, PIN_SIZE, 0));
  for (int i = 0; i < 7; i++)
    CHECK(cuMemcpyHtoD(d, pinbuf, PIN_SIZE));
  CHECK(cuMemHostUnregister(pinbuf));

  /* pageable: touched page by page (faults), copied from twice */
  char *a = mmap(NULL, PAGEABLE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (a == MAP_FAILED)
    return 1;
  for (size_t o = 0; o < PAGEABLE_SIZE; o += 4096)
    a[o] = 1;
  for (int i = 0; i < 2; i++)
    CHECK(cuMemcpyHtoD(d, a, PIN_SIZE));
  munmap(a, PAGEABLE_SIZE);
  char *b = mmap(NULL, PAGEABLE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (b == MAP_FAILED)
    return 1;
  CHECK(cuMemcpyDtoH(b, d, PIN_SIZE));
  printf("done pin=0x%llx pageable1=0x%llx pageable2=0x%llx\n",
         (unsigned long long)(uintptr_t)pinbuf, (unsigned long long)(uintptr_t)a,
         (unsigned long long)(uintptr_t)b);
  munmap(b, PAGEABLE_SIZE);
  CHECK(cuMemFree(d));
  return 0;
}

static CUDA_MEMCPY2D copy_2d(CUdeviceptr d, char *host, int to_device)
{
  CUDA_MEMCPY2D c;
  memset(&c, 0, sizeof c);
  c.WidthInBytes = 1024;
  c.Height = 64;
  if (to_device) {
    c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = host, c.srcPitch = 1024;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = d, c.dstPitch = 4096, c.dstY = 1;
  } else {
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = d, c.srcPitch = 4096, c.srcXInBytes = 512;
    c.dstMemoryType = CU_MEMORYTYPE_HOST, c.dstHost = host, c.dstPitch = 1024;
  }
  return c;
}

static int pitched(void)
{
  char *host = calloc(1, 64 << 10);
  CUdeviceptr d;
  init_ctx();
  wait_go();
  CHECK(cuMemAlloc(&d, 1 << 20));
  CUDA_MEMCPY2D up = copy_2d(d, host, 1), down = copy_2d(d, host, 0);
  for (int i = 0; i < 4; i++)
    CHECK(cuMemcpy2D(&up));
  for (int i = 0; i < 3; i++)
    CHECK(cuMemcpy2D(&down));
  CHECK(cuMemcpy2DAsync(&down, NULL));
  CHECK(cuStreamSynchronize(NULL));

  CUDA_MEMCPY3D c;
  memset(&c, 0, sizeof c);
  c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = host, c.srcPitch = 512, c.srcHeight = 8;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = d, c.dstPitch = 2048, c.dstHeight = 16;
  c.dstZ = 2;
  c.WidthInBytes = 512, c.Height = 8, c.Depth = 4;
  for (int i = 0; i < 2; i++)
    CHECK(cuMemcpy3D(&c));
  printf("done buf=0x%llx\n", (unsigned long long)d);
  CHECK(cuMemFree(d));
  free(host);
  return 0;
}

static int vmm(void)
{
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t g;
  init_ctx();
  CHECK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  char *host = calloc(1, g);
  CUdeviceptr va;
  CUmemGenericAllocationHandle h[2];
  wait_go();
  CHECK(cuMemAddressReserve(&va, 2 * g, 0, 0, 0));
  for (int i = 0; i < 2; i++) {
    CHECK(cuMemCreate(&h[i], g, &prop, 0));
    CHECK(cuMemMap(va + i * g, g, 0, h[i], 0));
  }
  CUmemAccessDesc access = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CHECK(cuMemSetAccess(va, 2 * g, &access, 1));
  for (int i = 0; i < 3; i++)
    CHECK(cuMemcpyHtoD(va, host, g));
  for (int i = 0; i < 2; i++)
    CHECK(cuMemcpyHtoD(va + g, host, g));
  CHECK(cuMemUnmap(va, 2 * g));
  for (int i = 0; i < 2; i++)
    CHECK(cuMemRelease(h[i]));
  CHECK(cuMemAddressFree(va, 2 * g));
  void *resv = mmap(NULL, 8 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (resv == MAP_FAILED)
    return 1;
  printf("done va=0x%llx granule=%zu reserved=0x%llx\n", (unsigned long long)va, g,
         (unsigned long long)(uintptr_t)resv);
  munmap(resv, 8 << 20);
  free(host);
  return 0;
}

static int filemap(const char *path)
{
  size_t size = (size_t)4 << 20;
  init_ctx();
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
    perror(path);
    return 1;
  }
  char *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  wait_go();
  for (size_t o = 0; o < size; o += 4096)
    m[o] = 1;
  munmap(m, size);
  close(fd);
  unlink(path);
  printf("done pages=%zu\n", size / 4096);
  return 0;
}

static int compact(void)
{
  init_ctx();
  wait_go();
  int fd = open("/proc/sys/vm/compact_memory", O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, "1", 1) != 1) {
    perror("/proc/sys/vm/compact_memory");
    return 1;
  }
  close(fd);
  printf("done\n");
  return 0;
}

static int attach(void)
{
  char *hot[2], *cold[5];
  CUdeviceptr dev;
  for (int i = 0; i < 2; i++)
    hot[i] = malloc(ATTACH_SIZE);
  for (int i = 0; i < 5; i++)
    cold[i] = malloc(ATTACH_SIZE);
  for (int i = 0; i < 2; i++)
    memset(hot[i], i, ATTACH_SIZE);
  for (int i = 0; i < 5; i++)
    memset(cold[i], i, ATTACH_SIZE);
  init_ctx();
  CHECK(cuMemAlloc(&dev, ATTACH_SIZE));
  wait_go();
  for (int r = 0; r < HOT_COPIES; r++)
    for (int i = 0; i < 2; i++) {
      CHECK(cuMemcpyHtoD(dev, hot[i], ATTACH_SIZE));
      CHECK(cuMemcpyDtoH(hot[i], dev, ATTACH_SIZE));
    }
  for (int i = 0; i < 5; i++) {
    CHECK(cuMemcpyHtoD(dev, cold[i], ATTACH_SIZE));
    CHECK(cuMemcpyDtoH(cold[i], dev, ATTACH_SIZE));
  }
  CHECK(cuCtxSynchronize()); /* nothing queued: the copies were synchronous */
  printf("done dev=0x%llx hot=0x%llx,0x%llx cold=", (unsigned long long)dev,
         (unsigned long long)(uintptr_t)hot[0], (unsigned long long)(uintptr_t)hot[1]);
  for (int i = 0; i < 5; i++)
    printf("%s0x%llx", i ? "," : "", (unsigned long long)(uintptr_t)cold[i]);
  printf("\n");
  for (int i = 0; i < 2; i++)
    free(hot[i]);
  for (int i = 0; i < 5; i++)
    free(cold[i]);
  CHECK(cuMemFree(dev));
  return 0;
}

static int idle(void)
{
  init_ctx();
  wait_go();
  printf("done\n");
  return 0;
}

int main(int argc, char **argv)
{
  const char *mode = argc > 1 ? argv[1] : "hotcold";
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (!strcmp(mode, "hotcold"))
    return hotcold();
  if (!strcmp(mode, "fork"))
    return forking();
  if (!strcmp(mode, "reuse"))
    return reuse();
  if (!strcmp(mode, "pitched"))
    return pitched();
  if (!strcmp(mode, "filemap") && argc > 2)
    return filemap(argv[2]);
  if (!strcmp(mode, "vmm"))
    return vmm();
  if (!strcmp(mode, "compact"))
    return compact();
  if (!strcmp(mode, "idle"))
    return idle();
  if (!strcmp(mode, "attach"))
    return attach();
  fprintf(stderr,
          "usage: trace_job hotcold|fork|reuse|pitched|vmm|filemap PATH|compact|idle|attach\n");
  return 2;
}
