/* mode=swap's host copies (swaphost.h): the pages behind a move out. */
#include "swaphost.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "driver.h"
#include "faultahead.h"
#include "gmt_log.h"
#include "log.h"
#include "numa.h"
#include "swaptab.h"

/* Faulting pages in: at most this many threads, each given at least this
 * much (below it one thread does all: starting more costs more). */
#define GMT_SWAPHOST_FAULT_THREADS 4
#define GMT_SWAPHOST_FAULT_MIN (64ull << 20)

struct fault_part {
  char *p;
  size_t n;
};

static void *fault_part(void *arg)
{
  struct fault_part *f = arg;
  gmt__fault_pages(f->p, f->n);
  return NULL;
}

/* [p, p + size) faulted in, by up to threads threads, none holding the
 * driver. Threads that cannot start leave their part to this one. */
static void fault_in(char *p, uint64_t size, int threads)
{
  struct fault_part parts[GMT_SWAPHOST_FAULT_THREADS];
  pthread_t tid[GMT_SWAPHOST_FAULT_THREADS];
  int started[GMT_SWAPHOST_FAULT_THREADS] = {0};
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int n = threads;
  if (n > GMT_SWAPHOST_FAULT_THREADS)
    n = GMT_SWAPHOST_FAULT_THREADS;
  if (cpus > 0 && n > cpus / 2)
    n = (int)(cpus / 2);
  while (n > 1 && size / (uint64_t)n < GMT_SWAPHOST_FAULT_MIN)
    n--;
  if (n < 1)
    n = 1;
  /* Parts on 2 MiB bounds, so that no huge page is split between two. */
  uint64_t step = (size / (uint64_t)n + (2ull << 20) - 1) & ~((2ull << 20) - 1);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old); /* the program's handlers never run on them */
  for (int i = 0; i < n; i++) {
    uint64_t off = (uint64_t)i * step;
    parts[i].p = p + off;
    parts[i].n = off >= size ? 0 : (size - off < step ? size - off : step);
    if (i > 0 && parts[i].n)
      started[i] = pthread_create(&tid[i], NULL, fault_part, &parts[i]) == 0;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  for (int i = 0; i < n; i++)
    if (parts[i].n && !started[i])
      fault_part(&parts[i]);
  for (int i = 1; i < n; i++)
    if (started[i])
      pthread_join(tid[i], NULL);
}

/* A pinned host copy: fresh pages, mapped with transparent huge pages
 * asked for, faulted in, then registered with the driver; the first move
 * out of every allocation pays it. The driver is held only while it
 * registers: on the H200 registering huge pages already faulted in takes
 * 27-32 ms/GiB, against 188-250 for fresh ones, whose faulting (171-250
 * ms/GiB) the driver would do holding itself, while every launch of the
 * program waits (bench/pin_cost.c, 2026-11-29). Faulting runs on
 * fault_threads threads. The pages are preferred on the NUMA node of the
 * allocation's device (CUDA ordinal dev) before they are faulted in.
 * NULL when it cannot be had. */
void *gmt__swaphost_pinned(uint64_t size, int dev, int fault_threads, void (*before)(void),
                           double *driver_ms)
{
  if (driver_ms)
    *driver_ms = 0;
  if (!GMT_REAL(cuMemHostRegister_v2))
    return NULL;
  void *p = gmt__fault_map(size);
  if (!p)
    return NULL;
  gmt__swaphost_place(p, size, dev);
  fault_in(p, size, fault_threads);
  if (before)
    before();
  return gmt__swaphost_register(p, size, driver_ms);
}

void gmt__swaphost_place(void *p, uint64_t size, int dev)
{
  (void)gmt__numa_place(p, size, gmt__numa_node(dev));
}

void *gmt__swaphost_register(void *p, uint64_t size, double *driver_ms)
{
  __typeof__(&cuMemHostRegister_v2) reg = GMT_REAL(cuMemHostRegister_v2);
  double t0 = gmt_now_ms_f();
  CUresult r = reg ? reg(p, size, 0) : CUDA_ERROR_NOT_INITIALIZED;
  if (driver_ms)
    *driver_ms = gmt_now_ms_f() - t0;
  if (r != CUDA_SUCCESS) {
    munmap(p, size);
    return NULL;
  }
  return p;
}

void gmt__swaphost_free(void *p, int kind, uint64_t size)
{
  if (!p)
    return;
  if (kind == GMT_SWAP_HOST_MALLOC) {
    free(p);
    return;
  }
  if (kind == GMT_SWAP_HOST_PINNED) {
    __typeof__(&cuMemHostUnregister) unreg = GMT_REAL(cuMemHostUnregister);
    if (!unreg || unreg(p) != CUDA_SUCCESS)
      GMT_HOOK_DEBUG("cannot unregister a pinned swap copy at %p", p);
  }
  /* A pinned copy's pages, or a spill file's mapping (the unlinked file
   * goes with it). */
  if (munmap(p, size) != 0)
    GMT_HOOK_DEBUG("cannot unmap a swap copy at %p: %s", p, strerror(errno));
}

/* A host copy of size bytes in a spill file under dir: an unlinked file
 * (O_TMPFILE, else a named one unlinked at once: it goes with its last
 * mapping, so a killed process leaves nothing behind), its blocks
 * allocated first (a full disk is an error here, not a SIGBUS at the
 * copy), mapped shared. NULL with *err an errno when it cannot be. */
void *gmt__swaphost_spill(const char *dir, uint64_t size, int *err)
{
  int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && errno != ENOENT && errno != EACCES) {
    char path[4200];
    snprintf(path, sizeof path, "%s/gmt-spill-XXXXXX", dir);
    fd = mkostemp(path, O_CLOEXEC);
    if (fd >= 0)
      unlink(path);
  }
  if (fd < 0) {
    *err = errno;
    return NULL;
  }
  int r = posix_fallocate(fd, 0, (off_t)size);
  void *p = MAP_FAILED;
  if (r == 0) {
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    r = p == MAP_FAILED ? errno : 0;
  }
  close(fd);
  *err = r;
  return p == MAP_FAILED ? NULL : p;
}

/* The first number after "key" in text (kB in /proc/meminfo), or -1. */
static long long field_kb(const char *text, const char *key)
{
  const char *p = strstr(text, key);
  return p ? strtoll(p + strlen(key), NULL, 10) : -1;
}

/* A file of a few lines into buf (NUL-terminated): its length, or -1. */
static ssize_t slurp(const char *path, char *buf, size_t len)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = read(fd, buf, len - 1);
  close(fd);
  if (n >= 0)
    buf[n] = '\0';
  return n;
}

uint64_t gmt__swaphost_room(void)
{
  char buf[4096];
  if (slurp("/proc/meminfo", buf, sizeof buf) <= 0)
    return 0;
  long long total = field_kb(buf, "MemTotal:"), avail = field_kb(buf, "MemAvailable:");
  if (total <= 0 || avail < 0)
    return 0;
  uint64_t room = (uint64_t)avail << 10;
  char max[64], cur[64];
  if (slurp("/sys/fs/cgroup/memory.max", max, sizeof max) > 0 &&
      slurp("/sys/fs/cgroup/memory.current", cur, sizeof cur) > 0 && strncmp(max, "max", 3)) {
    unsigned long long m = strtoull(max, NULL, 10), c = strtoull(cur, NULL, 10);
    uint64_t left = m > c ? m - c : 0;
    if (left < room)
      room = left;
  }
  uint64_t margin = ((uint64_t)total << 10) / 8;
  return room > margin ? room - margin : 0;
}
