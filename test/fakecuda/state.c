/* Process state of the fake driver: cuInit and its environment, the handle
 * registry, logging, fork handling, and the ledger of device memory that all
 * processes on the machine share through one mapped file of slots. The
 * ledger is what makes cuMemGetInfo tell the truth across processes. */
#include "fakecuda.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GMT_FAKE_STATE_MAGIC 0x676d7466616b6531ull /* "gmtfake1" */

struct gmt__slot {
  int32_t pid;
  int32_t pad;
  uint64_t start; /* process start time, so a reused pid is not taken alive */
  uint64_t used[GMT_FAKE_MAX_DEVICES];
};
struct gmt__shared {
  uint64_t magic;
  uint64_t nslots;
  struct gmt__slot slot[GMT_FAKE_MAX_SLOTS];
};

struct gmt__fake gmt__fake = {.lock = PTHREAD_MUTEX_INITIALIZER};
int gmt__fake_log_on;

static struct gmt__shared *shared;
static int shared_fd = -1;
static struct gmt__slot *my_slot;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

void gmt__fake_lock(void)
{
  pthread_mutex_lock(&gmt__fake.lock);
}
void gmt__fake_unlock(void)
{
  pthread_mutex_unlock(&gmt__fake.lock);
}

void gmt__fake_log(const char *fmt, ...)
{
  if (!gmt__fake_log_on)
    return;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = snprintf(buf, sizeof buf, "fakecuda[%d]: ", (int)getpid());
  vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s\n", buf);
}

CUresult gmt__fake_trace(const char *fn, CUresult r)
{
  if (gmt__fake_log_on)
    gmt__fake_log("%s -> %d", fn, (int)r);
  return r;
}

__attribute__((constructor)) static void fake_load(void)
{
  const char *l = getenv("GMT_FAKE_LOG");
  gmt__fake_log_on = l && *l && strcmp(l, "0") != 0;
}

/* ---- handle registry: an open-addressing set of live handles ---- */

struct hent {
  uintptr_t key; /* 0 empty, 1 deleted */
  int kind;
};
static struct hent *htab;
static size_t hcap, hused; /* hused counts deleted entries too */

static size_t hhash(uintptr_t k)
{
  return (size_t)((k >> 4) * 0x9e3779b97f4a7c15ull);
}

static void hrehash(size_t ncap)
{
  struct hent *old = htab;
  size_t ocap = hcap;
  htab = calloc(ncap, sizeof *htab);
  hcap = ncap;
  hused = 0;
  for (size_t i = 0; i < ocap; i++)
    if (old[i].key > 1)
      gmt__handle_add((void *)old[i].key, old[i].kind);
  free(old);
}

int gmt__handle_add(const void *h, int kind)
{
  if ((hused + 1) * 2 > hcap)
    hrehash(hcap ? hcap * 2 : 64);
  if (!htab)
    return -ENOMEM;
  size_t i = hhash((uintptr_t)h) & (hcap - 1);
  while (htab[i].key > 1)
    i = (i + 1) & (hcap - 1);
  if (htab[i].key == 0)
    hused++;
  htab[i].key = (uintptr_t)h;
  htab[i].kind = kind;
  return 0;
}

static struct hent *hfind(const void *h)
{
  if (!hcap || (uintptr_t)h <= 1)
    return NULL;
  size_t i = hhash((uintptr_t)h) & (hcap - 1);
  while (htab[i].key != 0) {
    if (htab[i].key == (uintptr_t)h)
      return &htab[i];
    i = (i + 1) & (hcap - 1);
  }
  return NULL;
}

int gmt__handle_ok(const void *h, int kind)
{
  struct hent *e = hfind(h);
  return e && e->kind == kind;
}

void gmt__handle_del(const void *h)
{
  struct hent *e = hfind(h);
  if (e)
    e->key = 1;
}

/* Every handle of a kind, for teardown after fork. */
void gmt__handle_each(int kind, void (*fn)(void *))
{
  for (size_t i = 0; i < hcap; i++)
    if (htab[i].key > 1 && htab[i].kind == kind)
      fn((void *)htab[i].key);
}

/* ---- environment ---- */

static int parse_size(const char *s, uint64_t *out)
{
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s)
    return -EINVAL;
  uint64_t mul = 1;
  switch (toupper((unsigned char)*end)) {
  case 'K':
    mul = 1ull << 10;
    end++;
    break;
  case 'M':
    mul = 1ull << 20;
    end++;
    break;
  case 'G':
    mul = 1ull << 30;
    end++;
    break;
  case 'T':
    mul = 1ull << 40;
    end++;
    break;
  default: break;
  }
  if (*end == 'i' || *end == 'I')
    end++;
  if (*end == 'b' || *end == 'B')
    end++;
  if (*end != '\0' || v == 0 || v > UINT64_MAX / mul)
    return -EINVAL;
  *out = v * mul;
  return 0;
}

static int dir_ok(const char *d)
{
  struct stat st;
  return stat(d, &st) == 0 && S_ISDIR(st.st_mode) && access(d, W_OK) == 0;
}

/* A copy rate in GB/s (10^9 bytes) from the environment; 0 means free. */
/* A non-negative number from the environment (dflt when unset), times
 * scale into *out; what names its unit in the error. */
static int read_number(const char *name, double dflt, double scale, const char *what, double *out)
{
  const char *v = getenv(name);
  double x = dflt;
  if (v && *v) {
    char *end;
    x = strtod(v, &end);
    if (*end || !(x >= 0) || x > 1e6) {
      fprintf(stderr, "fakecuda: %s='%s' is not %s (0: free)\n", name, v, what);
      return -1;
    }
  }
  *out = x * scale;
  return 0;
}

/* A copy rate in GB/s, kept as bytes per second. */
static int read_rate(const char *name, double dflt, double *bps)
{
  return read_number(name, dflt, 1e9, "a rate in GB/s", bps);
}

/* A cost in ms per GiB, kept as ns per byte. */
static int read_cost(const char *name, double dflt, double *npb)
{
  return read_number(name, dflt, 1e6 / 1073741824.0, "a cost in ms per GiB", npb);
}

static CUresult read_env(void)
{
  const char *m = getenv("GMT_FAKE_MEM");
  gmt__fake.mem_bytes = 16ull << 30;
  if (m && *m && parse_size(m, &gmt__fake.mem_bytes) != 0) {
    fprintf(stderr, "fakecuda: GMT_FAKE_MEM='%s' is not a size (bytes, optional K/M/G/T)\n", m);
    return CUDA_ERROR_INVALID_VALUE;
  }
  const char *d = getenv("GMT_FAKE_DEVICES");
  gmt__fake.ndev = 1;
  if (d && *d) {
    char *end;
    long n = strtol(d, &end, 10);
    if (*end != '\0' || n < 0 || n > GMT_FAKE_MAX_DEVICES) {
      fprintf(stderr, "fakecuda: GMT_FAKE_DEVICES='%s' is not a count from 0 to %d\n", d,
              GMT_FAKE_MAX_DEVICES);
      return CUDA_ERROR_INVALID_VALUE;
    }
    gmt__fake.ndev = (int)n;
  }
  if (gmt__fake.ndev == 0)
    return CUDA_ERROR_NO_DEVICE;
  const char *dir = getenv("GMT_FAKE_DIR");
  if (!dir || !*dir)
    dir = dir_ok("/dev/shm") ? "/dev/shm" : "/tmp";
  if (strlen(dir) >= sizeof gmt__fake.dir - 32) {
    fprintf(stderr, "fakecuda: GMT_FAKE_DIR is too long\n");
    return CUDA_ERROR_INVALID_VALUE;
  }
  snprintf(gmt__fake.dir, sizeof gmt__fake.dir, "%s", dir);
  const char *l = getenv("GMT_FAKE_LOG");
  gmt__fake_log_on = l && *l && strcmp(l, "0") != 0;
  if (read_rate("GMT_FAKE_PAGEABLE_GBPS", 4, &gmt__fake.pageable_bps) != 0 ||
      read_rate("GMT_FAKE_PINNED_GBPS", 20, &gmt__fake.pinned_bps) != 0 ||
      read_cost("GMT_FAKE_REGISTER_MS_PER_GIB", 46, &gmt__fake.register_npb) != 0 ||
      read_cost("GMT_FAKE_HOSTALLOC_MS_PER_GIB", 374, &gmt__fake.hostalloc_npb) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

/* ---- the shared ledger ---- */

/* Start time of pid (field 22 of /proc/pid/stat), 0 if it is gone or a
 * zombie: a dead process's memory must not stay charged. */
static uint64_t proc_start(pid_t pid)
{
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      return 0;
    return kill(pid, 0) == 0 || errno == EPERM ? 1 : 0; /* no /proc */
  }
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  if (!p || p[1] == '\0')
    return 0;
  p += 2;
  if (*p == 'Z' || *p == 'X')
    return 0;
  for (int field = 3; field < 22 && p; field++) {
    p = strchr(p, ' ');
    if (p)
      p++;
  }
  return p ? strtoull(p, NULL, 10) : 0;
}

static int slot_live(const struct gmt__slot *s)
{
  if (s->pid <= 0)
    return 0;
  uint64_t st = proc_start(s->pid);
  return st != 0 && (s->start == 0 || st == 1 || st == s->start);
}

static CUresult shared_open(void)
{
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/gmt-fakecuda-state", gmt__fake.dir);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    fprintf(stderr, "fakecuda: cannot open %s: %s\n", path, strerror(errno));
    return CUDA_ERROR_OPERATING_SYSTEM;
  }
  (void)fchmod(fd, 0666); /* processes of other users share the ledger */
  flock(fd, LOCK_EX);
  struct stat st;
  if (fstat(fd, &st) != 0 ||
      (st.st_size < (off_t)sizeof *shared && ftruncate(fd, sizeof *shared) != 0)) {
    fprintf(stderr, "fakecuda: cannot size %s: %s\n", path, strerror(errno));
    flock(fd, LOCK_UN);
    close(fd);
    return CUDA_ERROR_OPERATING_SYSTEM;
  }
  struct gmt__shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (sh == MAP_FAILED) {
    fprintf(stderr, "fakecuda: cannot map %s: %s\n", path, strerror(errno));
    flock(fd, LOCK_UN);
    close(fd);
    return CUDA_ERROR_OPERATING_SYSTEM;
  }
  if (sh->magic != GMT_FAKE_STATE_MAGIC) {
    memset(sh, 0, sizeof *sh);
    sh->magic = GMT_FAKE_STATE_MAGIC;
    sh->nslots = GMT_FAKE_MAX_SLOTS;
  }
  pid_t me = getpid();
  struct gmt__slot *mine = NULL;
  /* A slot with our pid is ours from before an exec: destructors did not run. */
  for (int i = 0; i < GMT_FAKE_MAX_SLOTS; i++)
    if (sh->slot[i].pid == me)
      memset(&sh->slot[i], 0, sizeof sh->slot[i]);
  for (int i = 0; i < GMT_FAKE_MAX_SLOTS && !mine; i++)
    if (!slot_live(&sh->slot[i]))
      mine = &sh->slot[i];
  if (mine) {
    memset(mine, 0, sizeof *mine);
    mine->pid = me;
    mine->start = proc_start(me);
  }
  flock(fd, LOCK_UN);
  if (!mine) {
    fprintf(stderr, "fakecuda: all %d process slots in %s are taken\n", GMT_FAKE_MAX_SLOTS, path);
    munmap(sh, sizeof *sh);
    close(fd);
    return CUDA_ERROR_OPERATING_SYSTEM;
  }
  shared = sh;
  shared_fd = fd;
  my_slot = mine;
  return CUDA_SUCCESS;
}

static uint64_t used_locked(int dev)
{
  uint64_t sum = 0;
  for (int i = 0; i < GMT_FAKE_MAX_SLOTS; i++) {
    struct gmt__slot *s = &shared->slot[i];
    if (s == my_slot || slot_live(s))
      sum += __atomic_load_n(&s->used[dev], __ATOMIC_RELAXED);
  }
  return sum;
}

CUresult gmt__fake_charge(int dev, uint64_t bytes)
{
  if (!shared)
    return CUDA_ERROR_NOT_INITIALIZED;
  flock(shared_fd, LOCK_EX);
  uint64_t used = used_locked(dev);
  CUresult r = CUDA_SUCCESS;
  if (used > gmt__fake.mem_bytes || bytes > gmt__fake.mem_bytes - used)
    r = CUDA_ERROR_OUT_OF_MEMORY;
  else
    __atomic_add_fetch(&my_slot->used[dev], bytes, __ATOMIC_RELAXED);
  flock(shared_fd, LOCK_UN);
  return r;
}

void gmt__fake_uncharge(int dev, uint64_t bytes)
{
  if (my_slot)
    __atomic_sub_fetch(&my_slot->used[dev], bytes, __ATOMIC_RELAXED);
}

void gmt__fake_meminfo(int dev, uint64_t *free_b, uint64_t *total_b)
{
  flock(shared_fd, LOCK_EX);
  uint64_t used = used_locked(dev);
  flock(shared_fd, LOCK_UN);
  *total_b = gmt__fake.mem_bytes;
  *free_b = used >= gmt__fake.mem_bytes ? 0 : gmt__fake.mem_bytes - used;
}

int gmt__fake_dev_ok(CUdevice dev)
{
  return dev >= 0 && dev < gmt__fake.ndev;
}

/* ---- init, exit and fork ---- */

static void free_obj(void *p)
{
  free(p);
}

/* The child of a fork has no driver state of its own: it must cuInit again
 * and take its own slot, as with the real driver. The parent's slot, lock
 * files and objects are not the child's to touch, only to forget. */
static void atfork_prepare(void)
{
  gmt__fake_lock();
  gmt__queue_fork_prepare(); /* so that the child finds the queues whole */
}
static void atfork_parent(void)
{
  gmt__queue_fork_parent();
  gmt__fake_unlock();
}
static void atfork_child(void)
{
  pthread_mutex_init(&gmt__fake.lock, NULL);
  gmt__queue_reset_child();
  gmt__graph_reset_child();
  gmt__stream_reset_child();
  gmt__kernel_reset_child();
  gmt__pool_reset_child();
  gmt__vmm_reset_child();
  gmt__mem_reset_child();
  gmt__hostmem_reset_child();
  gmt__device_reset_child();
  /* Whatever kinds remain are plain malloc'd structs. */
  for (int k = GMT__K_CTX; k <= GMT__K_EXEC; k++)
    gmt__handle_each(k, free_obj);
  free(htab);
  htab = NULL;
  hcap = hused = 0;
  if (shared)
    munmap(shared, sizeof *shared);
  if (shared_fd >= 0)
    close(shared_fd);
  shared = NULL;
  shared_fd = -1;
  my_slot = NULL;
  gmt__fake.inited = 0;
}

static void install_atfork(void)
{
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

__attribute__((destructor)) static void fake_unload(void)
{
  if (gmt__fake.inited)
    gmt__queue_exit(); /* queued work runs before the process goes */
  /* Give the slot back at exit; a crash is caught by the liveness check. */
  if (my_slot && my_slot->pid == getpid()) {
    memset(my_slot->used, 0, sizeof my_slot->used);
    __atomic_store_n(&my_slot->pid, 0, __ATOMIC_RELEASE);
  }
}

CUresult gmt__fake_init(void)
{
  pthread_once(&atfork_once, install_atfork);
  if (gmt__fake.inited)
    return CUDA_SUCCESS;
  CUresult r = read_env();
  if (r != CUDA_SUCCESS)
    return r;
  r = shared_open();
  if (r != CUDA_SUCCESS)
    return r;
  gmt__fake.inited = 1;
  gmt__fake_log("init: %d device(s) of %llu bytes, state in %s", gmt__fake.ndev,
                (unsigned long long)gmt__fake.mem_bytes, gmt__fake.dir);
  return CUDA_SUCCESS;
}
