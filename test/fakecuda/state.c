/* Process state of the fake driver: cuInit and its environment, the handle
 * registry, logging, fork handling, and this process's view of the fake
 * machine (machine.c): which of its devices CUDA_VISIBLE_DEVICES shows, and
 * the charges to the machine-wide ledger that make cuMemGetInfo tell the
 * truth across processes. */
#include "fakecuda.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct gmt__fake gmt__fake = {.lock = PTHREAD_MUTEX_INITIALIZER};
int gmt__fake_log_on;

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

/* A copy rate in GB/s (10^9 bytes) from the environment; 0 means free. */
/* A non-negative number from the environment (dflt when unset), times
 * scale into *out; what names its unit in the error. */
/* GMT_FAKE_CONTEXT_MIB (default 0): the device memory a process's first
 * context on a device takes, as a real CUDA context takes hundreds of MiB
 * that no allocation shows. It is charged to the process in the machine's
 * ledger (so free memory and NVML's per-process use show it) and held
 * until the process exits: the fake keeps a context's trace in its
 * process list until then too. Bit d of ctx_charged: charged on device d. */
static uint64_t ctx_bytes;
static _Atomic uint32_t ctx_charged;

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
  if (gmt__machine_load("fakecuda") != 0)
    return CUDA_ERROR_INVALID_VALUE;
  /* The driver numbers only the devices CUDA_VISIBLE_DEVICES shows. */
  gmt__fake.ndev = gmt__machine_visible(getenv("CUDA_VISIBLE_DEVICES"), gmt__fake.phys);
  if (gmt__fake.ndev == 0)
    return CUDA_ERROR_NO_DEVICE;
  double ctx_mib = 0;
  if (read_number("GMT_FAKE_CONTEXT_MIB", 0, 1048576.0, "a size in MiB", &ctx_mib) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  ctx_bytes = (uint64_t)ctx_mib;
  const char *l = getenv("GMT_FAKE_LOG");
  gmt__fake_log_on = l && *l && strcmp(l, "0") != 0;
  const char *mw = getenv("GMT_FAKE_MEMSET_WAITS");
  gmt__fake.memset_waits = mw && *mw && strcmp(mw, "0") != 0;
  if (read_rate("GMT_FAKE_PAGEABLE_GBPS", 4, &gmt__fake.pageable_bps) != 0 ||
      read_rate("GMT_FAKE_PINNED_GBPS", 20, &gmt__fake.pinned_bps) != 0 ||
      read_cost("GMT_FAKE_REGISTER_MS_PER_GIB", 46, &gmt__fake.register_npb) != 0 ||
      read_cost("GMT_FAKE_FAULT_MS_PER_GIB", 200, &gmt__fake.fault_npb) != 0 ||
      read_cost("GMT_FAKE_HOSTALLOC_MS_PER_GIB", 374, &gmt__fake.hostalloc_npb) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

/* ---- the shared ledger, by this process's device ordinals ---- */

CUresult gmt__fake_charge(int dev, uint64_t bytes)
{
  int r = gmt__ledger_charge(gmt__fake.phys[dev], bytes);
  if (r == -ENOMEM)
    return CUDA_ERROR_OUT_OF_MEMORY;
  return r == 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

void gmt__fake_uncharge(int dev, uint64_t bytes)
{
  gmt__ledger_uncharge(gmt__fake.phys[dev], bytes);
}

void gmt__fake_meminfo(int dev, uint64_t *free_b, uint64_t *total_b)
{
  uint64_t used = gmt__ledger_used(gmt__fake.phys[dev]);
  *total_b = gmt__machine.mem_bytes;
  *free_b = used >= gmt__machine.mem_bytes ? 0 : gmt__machine.mem_bytes - used;
}

/* Contexts take GMT_FAKE_CONTEXT_MIB (above) on their device. */
void gmt__fake_mark_ctx(int dev)
{
  int phys = gmt__fake.phys[dev];
  gmt__ledger_mark_ctx(phys);
  /* A card too full for it gives the context nothing: tests that ask for
   * context memory leave room for it. */
  if (ctx_bytes && !(atomic_fetch_or(&ctx_charged, 1u << phys) & (1u << phys)))
    (void)gmt__ledger_charge(phys, ctx_bytes);
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
  gmt__ledger_forget();
  atomic_store(&ctx_charged, 0); /* the child's contexts are its own */
  gmt__fake.inited = 0;
}

static void install_atfork(void)
{
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

__attribute__((destructor)) static void fake_unload(void)
{
  if (gmt__fake.inited)
    gmt__queue_exit();   /* queued work runs before the process goes */
  gmt__ledger_release(); /* give the slot back */
}

CUresult gmt__fake_init(void)
{
  pthread_once(&atfork_once, install_atfork);
  if (gmt__fake.inited)
    return CUDA_SUCCESS;
  CUresult r = read_env();
  if (r != CUDA_SUCCESS)
    return r;
  if (gmt__ledger_open(1) != 0)
    return CUDA_ERROR_OPERATING_SYSTEM;
  gmt__fake.inited = 1;
  gmt__fake_log("init: %d of %d device(s) visible, %llu bytes each, state in %s", gmt__fake.ndev,
                gmt__machine.ndev, (unsigned long long)gmt__machine.mem_bytes, gmt__machine.dir);
  return CUDA_SUCCESS;
}
