/* Page-locked host memory of the fake driver: cuMemAllocHost/cuMemHostAlloc
 * and cuMemHostRegister. Nothing is really pinned; the fake remembers what
 * is "pinned" so that frees and unregisters of unknown pointers fail as on
 * a GPU, so that queued copies touch pinned memory when they run but
 * pageable memory at the call (copy.c), and host memory is never charged
 * to a device. With GMT_FAKE_LOG each allocation and registration logs
 * the memory policy it runs under, which is where a real driver's pages
 * would go (log_policy). */
#include "fakecuda.h"

#include <errno.h>
#include <linux/mempolicy.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct pinned {
  char *p;
  size_t size;
  int registered; /* cuMemHostRegister rather than allocated by us */
};
static struct pinned *pins;
static size_t npins, cappins;

/* Page-locking takes time on a GPU (fakecuda.h): spent here, outside the
 * lock, as the real driver's calls spend it. */
static void spend(double npb, size_t bytes)
{
  double ns = npb * (double)bytes;
  struct timespec ts = {.tv_sec = (time_t)(ns / 1e9),
                        .tv_nsec = (long)((uint64_t)ns % 1000000000u)};
  while (ns > 0 && nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* With GMT_FAKE_LOG, the calling thread's memory policy while the call
 * runs (a real driver takes and pins the pages here, under it) and, with
 * p, the policy of the range at p: "fn: thread policy MODE nodes 0xMASK"
 * and "fn: range policy MODE nodes 0xMASK", MODE as <linux/mempolicy.h>
 * numbers it (0 default, 1 preferred, 3 interleave), -1 when it could not
 * be read; the mask's first 64 nodes (test/e2e/test_numa.py). */
static void log_policy(const char *fn, const void *p)
{
  if (!gmt__fake_log_on)
    return;
  for (int range = 0; range <= (p != NULL); range++) {
    int mode = -1;
    unsigned long mask[1024 / (8 * sizeof(unsigned long))] = {0};
    if (syscall(SYS_get_mempolicy, &mode, mask, 1025UL, range ? p : NULL,
                range ? (unsigned long)MPOL_F_ADDR : 0UL) != 0)
      mode = -1;
    gmt__fake_log("%s: %s policy %d nodes 0x%lx", fn, range ? "range" : "thread", mode, mask[0]);
  }
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static char *page_down(const void *p)
{
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  return (char *)((uintptr_t)p & ~(page - 1));
}

/* The bytes of [p, p + size) whose pages are not in memory (mincore), in
 * whole pages; 0 when that cannot be told. */
static size_t absent_bytes(const void *p, size_t size)
{
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  char *b = page_down(p);
  size_t pages = (size + (size_t)((const char *)p - b) + page - 1) / page;
  unsigned char *vec = malloc(pages ? pages : 1);
  size_t absent = 0;
  if (vec && mincore(b, pages * page, vec) == 0)
    for (size_t i = 0; i < pages; i++)
      absent += (vec[i] & 1) ? 0 : page;
  free(vec);
  return absent < size ? absent : size;
}

static struct pinned *pin_find(const void *p, int inside)
{
  for (size_t i = 0; i < npins; i++) {
    if (pins[i].p == p)
      return &pins[i];
    if (inside && (const char *)p > pins[i].p && (const char *)p < pins[i].p + pins[i].size)
      return &pins[i];
  }
  return NULL;
}

static int pin_add(char *p, size_t size, int registered)
{
  if (npins == cappins) {
    size_t ncap = cappins ? cappins * 2 : 16;
    struct pinned *n = realloc(pins, ncap * sizeof *n);
    if (!n)
      return -1;
    pins = n;
    cappins = ncap;
  }
  pins[npins++] = (struct pinned){p, size, registered};
  return 0;
}

static void pin_del(struct pinned *e)
{
  *e = pins[--npins];
}

int gmt__hostmem_pinned_locked(const void *p, size_t n)
{
  const char *c = p;
  for (size_t i = 0; i < npins; i++)
    if (c >= pins[i].p && n <= pins[i].size && (size_t)(c - pins[i].p) <= pins[i].size - n)
      return 1;
  return 0;
}

static CUresult host_alloc(const char *fn, void **pp, size_t size)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!pp || size == 0)
    return CUDA_ERROR_INVALID_VALUE;
  log_policy(fn, NULL);
  spend(gmt__fake.hostalloc_npb, size);
  gmt__fake_lock();
  int dev = 0;
  CUresult r = gmt__ctx_dev_locked(&dev);
  char *p = NULL;
  if (r == CUDA_SUCCESS) {
    p = gmt__hostbuf_new(size);
    if (!p || pin_add(p, size, 0) != 0) {
      gmt__hostbuf_free(p, size);
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      *pp = p;
    }
  }
  gmt__fake_unlock();
  return r;
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
  GMT_FAKE_RET(host_alloc("cuMemAllocHost_v2", pp, bytesize));
}
CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
  GMT_FAKE_RET(host_alloc("cuMemAllocHost", pp, bytesize));
}
CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
  if (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                          CU_MEMHOSTALLOC_WRITECOMBINED))
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  GMT_FAKE_RET(host_alloc("cuMemHostAlloc", pp, bytesize));
}

CUresult cuMemFreeHost(void *p)
{
  GMT_FAKE_NEED_INIT();
  /* Queued copies read and write page-locked memory when they run: they
   * must have run before it goes, or stops being the driver's. */
  gmt__queue_drain();
  gmt__fake_lock();
  struct pinned *e = pin_find(p, 0);
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  if (e && !e->registered) {
    gmt__hostbuf_free(e->p, e->size);
    pin_del(e);
    r = CUDA_SUCCESS;
  }
  gmt__fake_unlock();
  GMT_FAKE_RET(r);
}

static CUresult host_register(const char *fn, void *p, size_t size)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!p || size == 0)
    return CUDA_ERROR_INVALID_VALUE;
  log_policy(fn, p);
  /* The real driver holds the process's driver lock while it pins: a
   * launch or an allocation of another thread waits behind a registration
   * (on an H200 a 128 MiB pin of fresh pages stalled the program's
   * launches 30-45 ms). Pages not yet in memory it faults in meanwhile,
   * which is most of that time: on an H200 registering huge pages already
   * faulted in took 27-32 ms/GiB, fresh ones 188-250. */
  gmt__fake_lock();
  size_t absent = absent_bytes(p, size);
  spend(gmt__fake.register_npb, size);
  spend(gmt__fake.fault_npb, absent);
  if (absent)
    (void)madvise(page_down(p), size + (size_t)((char *)p - page_down(p)), MADV_POPULATE_WRITE);
  CUresult r = CUDA_SUCCESS;
  for (size_t i = 0; i < npins; i++)
    if ((char *)p < pins[i].p + pins[i].size && pins[i].p < (char *)p + size)
      r = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  if (r == CUDA_SUCCESS && pin_add(p, size, 1) != 0)
    r = CUDA_ERROR_OUT_OF_MEMORY;
  gmt__fake_unlock();
  return r;
}

CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
  (void)Flags;
  GMT_FAKE_RET(host_register("cuMemHostRegister_v2", p, bytesize));
}
CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
  (void)Flags;
  GMT_FAKE_RET(host_register("cuMemHostRegister", p, bytesize));
}

CUresult cuMemHostUnregister(void *p)
{
  GMT_FAKE_NEED_INIT();
  gmt__queue_drain();
  gmt__fake_lock();
  struct pinned *e = pin_find(p, 0);
  CUresult r = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  size_t size = 0;
  if (e && e->registered) {
    size = e->size;
    pin_del(e);
    r = CUDA_SUCCESS;
  }
  gmt__fake_unlock();
  spend(gmt__fake.register_npb, size);
  GMT_FAKE_RET(r);
}

CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
  GMT_FAKE_NEED_INIT();
  if (!pFlags)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  gmt__fake_lock();
  struct pinned *e = pin_find(p, 1);
  gmt__fake_unlock();
  if (!e)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  *pFlags = 0;
  GMT_FAKE_RET(CUDA_SUCCESS);
}

void gmt__hostmem_reset_child(void)
{
  /* Pinned buffers are the child's copies; it may still read them, as a
   * forked CUDA process may read its parent's host data. */
  free(pins);
  pins = NULL;
  npins = cappins = 0;
}
