/* mode=swap's host copies (swaphost.h): the pages behind a move out. */
#include "swaphost.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "driver.h"
#include "log.h"
#include "numa.h"
#include "swaptab.h"

/* A pinned host copy: fresh pages, mapped, then registered with the
 * driver; the first move out of every allocation pays it. With
 * transparent huge pages asked for, getting and pinning them costs 158
 * ms/GiB on the H200 against 374 for cuMemHostAlloc and 290 for small
 * pages (bench/pin_cost.c, 2026-11-26). The pages are preferred on the
 * NUMA node of the allocation's device (CUDA ordinal dev) before
 * registering touches them. NULL when it cannot be had. */
void *gmt__swaphost_pinned(uint64_t size, int dev)
{
  __typeof__(&cuMemHostRegister_v2) reg = GMT_REAL(cuMemHostRegister_v2);
  if (!reg)
    return NULL;
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  (void)gmt__numa_place(p, size, gmt__numa_node(dev));
  (void)madvise(p, size, MADV_HUGEPAGE); /* a hint: a kernel without THP ignores it */
  if (reg(p, size, 0) != CUDA_SUCCESS) {
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
