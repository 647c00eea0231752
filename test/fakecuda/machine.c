/* The fake machine (machine.h): its environment, identities, topology and
 * the ledger of device memory that all processes on the machine share
 * through one mapped file of slots. The ledger is what makes cuMemGetInfo
 * and NVML's memory info tell the truth across processes. Compiled into
 * both the fake libcuda and the fake libnvidia-ml. */
#include "machine.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define GMT_FAKE_STATE_MAGIC 0x676d7466616b6531ull /* "gmtfake1" */

struct gmt__slot {
  int32_t pid;
  uint32_t ctxs;  /* bit d: the process has a context on device d */
  uint64_t start; /* process start time, so a reused pid is not taken alive */
  uint64_t used[GMT_FAKE_MAX_DEVICES];
};
struct gmt__shared {
  uint64_t magic;
  uint64_t nslots;
  struct gmt__slot slot[GMT_FAKE_MAX_SLOTS];
};

struct gmt__machine gmt__machine;

static struct gmt__shared *shared;
static int shared_fd = -1;
static struct gmt__slot *my_slot;

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

/* A decimal number from [*p, ...) within [0, max], advancing *p. */
static int take_num(const char **p, int max, int *out)
{
  if (!isdigit((unsigned char)**p))
    return -EINVAL;
  long v = 0;
  while (isdigit((unsigned char)**p)) {
    v = v * 10 + (**p - '0');
    if (v > max)
      return -EINVAL;
    (*p)++;
  }
  *out = (int)v;
  return 0;
}

/* "A-B" of two distinct devices. */
static int take_pair(const char **p, int ndev, int *a, int *b)
{
  if (take_num(p, ndev - 1, a) != 0 || **p != '-')
    return -EINVAL;
  (*p)++;
  if (take_num(p, ndev - 1, b) != 0 || *a == *b)
    return -EINVAL;
  return 0;
}

static const struct {
  const char *name;
  int level;
} level_names[] = {
    {"single", GMT__LEVEL_SINGLE},         {"multiple", GMT__LEVEL_MULTIPLE},
    {"hostbridge", GMT__LEVEL_HOSTBRIDGE}, {"node", GMT__LEVEL_NODE},
    {"system", GMT__LEVEL_SYSTEM},
};

static int take_level(const char **p, int *level)
{
  for (size_t i = 0; i < sizeof level_names / sizeof level_names[0]; i++) {
    size_t n = strlen(level_names[i].name);
    if (strncmp(*p, level_names[i].name, n) == 0 && ((*p)[n] == ',' || (*p)[n] == '\0')) {
      *level = level_names[i].level;
      *p += n;
      return 0;
    }
  }
  return -EINVAL;
}

/* One item's value (after "key="), up to its end; why says what is wrong. */
static int topo_item(struct gmt__machine *m, const char *key, const char *v, const char **why)
{
  int ndev = m->ndev;
  if (strcmp(key, "numa") == 0) {
    int i = 0;
    for (;;) {
      if (i == ndev) {
        *why = "numa= has more entries than devices";
        return -EINVAL;
      }
      if (take_num(&v, 63, &m->numa[i]) != 0) {
        *why = "numa= wants a node number from 0 to 63 per device";
        return -EINVAL;
      }
      i++;
      if (*v == '\0')
        break;
      if (*v++ != ',') {
        *why = "numa= wants a comma list";
        return -EINVAL;
      }
    }
    if (i != ndev) {
      *why = "numa= has fewer entries than devices";
      return -EINVAL;
    }
    return 0;
  }
  int is_nvlink = strcmp(key, "nvlink") == 0;
  if (!is_nvlink && strcmp(key, "pcie") != 0) {
    *why = "unknown item (numa=, nvlink= or pcie=)";
    return -EINVAL;
  }
  for (;;) {
    int a, b;
    if (take_pair(&v, ndev, &a, &b) != 0) {
      *why = "a pair is two different device indices A-B below GMT_FAKE_DEVICES";
      return -EINVAL;
    }
    if (is_nvlink) {
      int n = 1;
      if (*v == ':') {
        v++;
        if (take_num(&v, GMT_FAKE_NVLINK_MAX, &n) != 0 || n == 0) {
          *why = "nvlink=A-B:N wants N from 1 to 18";
          return -EINVAL;
        }
      }
      m->nvlink[a][b] = m->nvlink[b][a] = n;
    } else {
      int level;
      if (*v++ != ':' || take_level(&v, &level) != 0) {
        *why = "pcie=A-B:LEVEL wants single, multiple, hostbridge, node or system";
        return -EINVAL;
      }
      m->level[a][b] = m->level[b][a] = level;
    }
    if (*v == '\0')
      break;
    if (*v++ != ',') {
      *why = "pairs are separated by commas";
      return -EINVAL;
    }
  }
  return 0;
}

int gmt__machine_topo(struct gmt__machine *m, const char *spec, const char *who)
{
  int ndev = m->ndev;
  memset(m->numa, 0, sizeof m->numa);
  memset(m->level, 0, sizeof m->level);
  memset(m->nvlink, 0, sizeof m->nvlink);
  for (int i = 0; i < ndev; i++)
    m->numa[i] = i / 2;
  int pcie_set[GMT_FAKE_MAX_DEVICES][GMT_FAKE_MAX_DEVICES] = {{0}};
  const char *why = NULL;
  if (spec && *spec) {
    char buf[1024];
    if (strlen(spec) >= sizeof buf) {
      why = "too long";
      goto bad;
    }
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *item = strtok_r(buf, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
      while (isspace((unsigned char)*item))
        item++;
      size_t n = strlen(item);
      while (n && isspace((unsigned char)item[n - 1]))
        item[--n] = '\0';
      if (n == 0)
        continue;
      char *eq = strchr(item, '=');
      if (!eq) {
        why = "an item is key=value";
        goto bad;
      }
      *eq = '\0';
      if (topo_item(m, item, eq + 1, &why) != 0)
        goto bad;
      if (strcmp(item, "pcie") == 0)
        for (int a = 0; a < ndev; a++)
          for (int b = 0; b < ndev; b++)
            pcie_set[a][b] |= m->level[a][b] != 0;
    }
  }
  for (int a = 0; a < ndev; a++) {
    int links = 0;
    for (int b = 0; b < ndev; b++) {
      links += m->nvlink[a][b];
      if (a == b)
        m->level[a][b] = GMT__LEVEL_INTERNAL;
      else if (!pcie_set[a][b])
        m->level[a][b] = m->numa[a] == m->numa[b] ? GMT__LEVEL_HOSTBRIDGE : GMT__LEVEL_SYSTEM;
    }
    if (links > GMT_FAKE_NVLINK_MAX) {
      why = "a device has more than 18 NVLinks";
      goto bad;
    }
  }
  return 0;
bad:
  fprintf(stderr, "%s: GMT_FAKE_TOPO='%s': %s\n", who, spec, why);
  return -EINVAL;
}

int gmt__machine_load(const char *who)
{
  struct gmt__machine *m = &gmt__machine;
  const char *mem = getenv("GMT_FAKE_MEM");
  m->mem_bytes = 16ull << 30;
  if (mem && *mem && parse_size(mem, &m->mem_bytes) != 0) {
    fprintf(stderr, "%s: GMT_FAKE_MEM='%s' is not a size (bytes, optional K/M/G/T)\n", who, mem);
    return -EINVAL;
  }
  const char *d = getenv("GMT_FAKE_DEVICES");
  m->ndev = 1;
  if (d && *d) {
    char *end;
    long n = strtol(d, &end, 10);
    if (*end != '\0' || n < 0 || n > GMT_FAKE_MAX_DEVICES) {
      fprintf(stderr, "%s: GMT_FAKE_DEVICES='%s' is not a count from 0 to %d\n", who, d,
              GMT_FAKE_MAX_DEVICES);
      return -EINVAL;
    }
    m->ndev = (int)n;
  }
  const char *dir = getenv("GMT_FAKE_DIR");
  if (!dir || !*dir)
    dir = dir_ok("/dev/shm") ? "/dev/shm" : "/tmp";
  if (strlen(dir) >= sizeof m->dir - 32) {
    fprintf(stderr, "%s: GMT_FAKE_DIR is too long\n", who);
    return -EINVAL;
  }
  snprintf(m->dir, sizeof m->dir, "%s", dir);
  return gmt__machine_topo(m, getenv("GMT_FAKE_TOPO"), who);
}

/* ---- identities ---- */

void gmt__machine_uuid(int dev, unsigned char out[16])
{
  static const unsigned char tag[4] = {0xfa, 0x4e, 0xc0, 0xda};
  memset(out, 0, 16);
  memcpy(out, tag, sizeof tag);
  out[15] = (unsigned char)dev;
}

void gmt__machine_uuid_str(int dev, char *buf, size_t n)
{
  unsigned char u[16];
  gmt__machine_uuid(dev, u);
  snprintf(buf, n, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
           u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
           u[15]);
}

unsigned gmt__machine_bus(int dev)
{
  return (unsigned)dev + 1;
}

int gmt__machine_visible(const char *env, int phys[GMT_FAKE_MAX_DEVICES])
{
  int ndev = gmt__machine.ndev;
  if (!env) {
    for (int i = 0; i < ndev; i++)
      phys[i] = i;
    return ndev;
  }
  int n = 0, seen[GMT_FAKE_MAX_DEVICES] = {0};
  const char *p = env;
  while (*p && n < ndev) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    int dev = -1;
    if (len > 4 && strncmp(p, "GPU-", 4) == 0) {
      for (int i = 0; i < ndev; i++) {
        char u[48];
        gmt__machine_uuid_str(i, u, sizeof u);
        if (len <= strlen(u) && strncasecmp(p, u, len) == 0) {
          if (dev >= 0) { /* not a unique prefix */
            dev = -1;
            break;
          }
          dev = i;
        }
      }
    } else if (len > 0) {
      const char *q = p;
      int v;
      if (take_num(&q, GMT_FAKE_MAX_DEVICES, &v) == 0 && q == p + len && v < ndev)
        dev = v;
    }
    if (dev < 0 || seen[dev])
      break;
    seen[dev] = 1;
    phys[n++] = dev;
    if (!end)
      break;
    p = end + 1;
  }
  return n;
}

void gmt__machine_dev_lock_path(int dev, char *buf, size_t n)
{
  snprintf(buf, n, "%s/gmt-fakecuda-dev%d.lock", gmt__machine.dir, dev);
}

uint64_t gmt__machine_dev_busy_until(int dev)
{
  char path[PATH_MAX + 32];
  gmt__machine_dev_lock_path(dev, path, sizeof path);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  uint64_t end = 0;
  ssize_t r = pread(fd, &end, sizeof end, 0);
  close(fd);
  return r == (ssize_t)sizeof end ? end : 0;
}

int gmt__machine_dev_busy(int dev)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  uint64_t now = (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
  return gmt__machine_dev_busy_until(dev) > now;
}

void gmt__machine_cpus(int dev, int *first, int *count)
{
  long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  if (ncpu < 1)
    ncpu = 1;
  int nodes = 1;
  for (int i = 0; i < gmt__machine.ndev; i++)
    if (gmt__machine.numa[i] + 1 > nodes)
      nodes = gmt__machine.numa[i] + 1;
  if (ncpu < nodes) {
    *first = 0;
    *count = (int)ncpu;
    return;
  }
  int node = gmt__machine.numa[dev];
  *first = (int)(ncpu * node / nodes);
  *count = (int)(ncpu * (node + 1) / nodes) - *first;
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

/* This process's pid on the node, as the real driver and NVML name it:
 * /proc/self names it in /proc's namespace, the node's unless a /proc of
 * a namespace of ours was mounted. getpid() is the pid in our own. */
static pid_t node_pid(void)
{
  char buf[32];
  ssize_t n = readlink("/proc/self", buf, sizeof buf - 1);
  if (n > 0) {
    buf[n] = '\0';
    long v = strtol(buf, NULL, 10);
    if (v > 0)
      return (pid_t)v;
  }
  return getpid();
}

static int slot_live(const struct gmt__slot *s)
{
  if (s->pid <= 0)
    return 0;
  uint64_t st = proc_start(s->pid);
  return st != 0 && (s->start == 0 || st == 1 || st == s->start);
}

int gmt__ledger_open(int take_slot)
{
  if (shared && (!take_slot || my_slot))
    return 0;
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/gmt-fakecuda-state", gmt__machine.dir);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    fprintf(stderr, "fakecuda: cannot open %s: %s\n", path, strerror(errno));
    return -errno;
  }
  (void)fchmod(fd, 0666); /* processes of other users share the ledger */
  flock(fd, LOCK_EX);
  struct stat st;
  if (fstat(fd, &st) != 0 ||
      (st.st_size < (off_t)sizeof *shared && ftruncate(fd, sizeof *shared) != 0)) {
    int e = errno;
    fprintf(stderr, "fakecuda: cannot size %s: %s\n", path, strerror(e));
    flock(fd, LOCK_UN);
    close(fd);
    return -e;
  }
  struct gmt__shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (sh == MAP_FAILED) {
    int e = errno;
    fprintf(stderr, "fakecuda: cannot map %s: %s\n", path, strerror(e));
    flock(fd, LOCK_UN);
    close(fd);
    return -e;
  }
  if (sh->magic != GMT_FAKE_STATE_MAGIC) {
    memset(sh, 0, sizeof *sh);
    sh->magic = GMT_FAKE_STATE_MAGIC;
    sh->nslots = GMT_FAKE_MAX_SLOTS;
  }
  struct gmt__slot *mine = NULL;
  if (take_slot) {
    pid_t me = node_pid();
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
  }
  flock(fd, LOCK_UN);
  if (take_slot && !mine) {
    fprintf(stderr, "fakecuda: all %d process slots in %s are taken\n", GMT_FAKE_MAX_SLOTS, path);
    munmap(sh, sizeof *sh);
    close(fd);
    return -EAGAIN;
  }
  if (shared) { /* mapped to read before; now with a slot */
    munmap(shared, sizeof *shared);
    close(shared_fd);
  }
  shared = sh;
  shared_fd = fd;
  my_slot = mine;
  return 0;
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

int gmt__ledger_charge(int dev, uint64_t bytes)
{
  if (!my_slot)
    return -ENXIO;
  flock(shared_fd, LOCK_EX);
  uint64_t used = used_locked(dev);
  int r = 0;
  if (used > gmt__machine.mem_bytes || bytes > gmt__machine.mem_bytes - used)
    r = -ENOMEM;
  else
    __atomic_add_fetch(&my_slot->used[dev], bytes, __ATOMIC_RELAXED);
  flock(shared_fd, LOCK_UN);
  return r;
}

void gmt__ledger_uncharge(int dev, uint64_t bytes)
{
  if (my_slot)
    __atomic_sub_fetch(&my_slot->used[dev], bytes, __ATOMIC_RELAXED);
}

void gmt__ledger_mark_ctx(int dev)
{
  if (my_slot)
    __atomic_or_fetch(&my_slot->ctxs, 1u << dev, __ATOMIC_RELAXED);
}

uint64_t gmt__ledger_used(int dev)
{
  if (!shared)
    return 0;
  flock(shared_fd, LOCK_EX);
  uint64_t used = used_locked(dev);
  flock(shared_fd, LOCK_UN);
  return used;
}

int gmt__ledger_procs(int dev, struct gmt__ledger_proc *out, int max)
{
  if (!shared)
    return 0;
  int n = 0;
  flock(shared_fd, LOCK_EX);
  for (int i = 0; i < GMT_FAKE_MAX_SLOTS; i++) {
    struct gmt__slot *s = &shared->slot[i];
    uint64_t used = __atomic_load_n(&s->used[dev], __ATOMIC_RELAXED);
    uint32_t ctxs = __atomic_load_n(&s->ctxs, __ATOMIC_RELAXED);
    if ((used == 0 && !(ctxs & (1u << dev))) || !(s == my_slot || slot_live(s)))
      continue;
    if (n < max) {
      out[n].pid = s->pid;
      out[n].used = used;
    }
    n++;
  }
  flock(shared_fd, LOCK_UN);
  return n;
}

void gmt__ledger_forget(void)
{
  if (shared)
    munmap(shared, sizeof *shared);
  if (shared_fd >= 0)
    close(shared_fd);
  shared = NULL;
  shared_fd = -1;
  my_slot = NULL;
}

void gmt__ledger_release(void)
{
  /* A crash is caught by the liveness check instead. */
  if (my_slot && my_slot->pid == node_pid()) {
    memset(my_slot->used, 0, sizeof my_slot->used);
    __atomic_store_n(&my_slot->ctxs, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&my_slot->pid, 0, __ATOMIC_RELEASE);
  }
}
