/* Pinned host memory (see hostpin.h): a table of the ranges the program
 * pinned, so that a free or an unregister knows how many bytes went, and
 * the caching pool of its pinned blocks (hostpool.h) while pin advice is
 * on. The calls are rare (pinning costs milliseconds a GiB), so one mutex
 * and linear tables are plenty; the count is read without the lock. */
#include "hostpin.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "driver.h"
#include "frame.h"
#include "fork.h"
#include "gmt_log.h"
#include "hostpool.h"
#include "log.h"
#include "numa.h"
#include "pin.h"

/* A cached block not asked for again this long is freed: a loop that
 * frees and allocates each step comes back well within it. */
#define HOSTPOOL_IDLE_MS 5000
/* The most cached bytes, unless GMT_PIN_POOL_MIB says (0: no pool). */
#define HOSTPOOL_DEFAULT_MIB 1024
/* Blocks freed for real per call, at most (the rest at the next one). */
#define HOSTPOOL_EVICT_BATCH 8

typedef struct {
  void *p;
  uint64_t bytes;
} pin_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pin_t *g_pins;
static size_t g_n, g_cap;
static _Atomic uint64_t g_bytes;
static gmt_hostpool_t g_pool = {.idle_ms = HOSTPOOL_IDLE_MS,
                                .max_cached_bytes = (uint64_t)HOSTPOOL_DEFAULT_MIB << 20};
static int g_pool_off; /* GMT_PIN_POOL_MIB=0 */
/* Held while cached blocks are freed for real (by the reporter thread too)
 * and while a context goes: a block is never freed in a context that is
 * being destroyed. Taken before g_mu. */
static pthread_mutex_t g_free_mu = PTHREAD_MUTEX_INITIALIZER;

uint64_t gmt__hostpin_bytes(void)
{
  return atomic_load_explicit(&g_bytes, memory_order_relaxed);
}

static void pinned(void *p, uint64_t bytes)
{
  if (!p || !bytes)
    return;
  pthread_mutex_lock(&g_mu);
  if (g_n == g_cap) {
    size_t cap = g_cap ? g_cap * 2 : 64;
    pin_t *n = realloc(g_pins, cap * sizeof *n);
    if (!n) {
      pthread_mutex_unlock(&g_mu);
      GMT_HOOK_DEBUG("out of memory noting %llu pinned bytes", (unsigned long long)bytes);
      return; /* not counted, and so never uncounted */
    }
    g_pins = n;
    g_cap = cap;
  }
  g_pins[g_n++] = (pin_t){p, bytes};
  atomic_fetch_add_explicit(&g_bytes, bytes, memory_order_relaxed);
  pthread_mutex_unlock(&g_mu);
}

static void unpinned_locked(const void *p)
{
  for (size_t i = 0; i < g_n; i++) {
    if (g_pins[i].p != p)
      continue;
    atomic_fetch_sub_explicit(&g_bytes, g_pins[i].bytes, memory_order_relaxed);
    g_pins[i] = g_pins[--g_n];
    break;
  }
}

static int is_block(const gmt_hostpool_block_t *b, void *p)
{
  return b->p == p;
}

int gmt__hostpin_overlaps(const void *p, size_t n)
{
  const char *a = p;
  int hit = 0;
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_n && !hit; i++) {
    const char *b = g_pins[i].p;
    hit = a < b + g_pins[i].bytes && b < a + n;
  }
  pthread_mutex_unlock(&g_mu);
  return hit;
}

static void unpinned(void *p);

void gmt__hostpin_note(void *p, uint64_t bytes)
{
  if (bytes)
    pinned(p, bytes);
  else
    unpinned(p);
}

static void unpinned(void *p)
{
  pthread_mutex_lock(&g_mu);
  unpinned_locked(p);
  /* A pool block the driver freed (the sync before caching it failed). */
  gmt__hostpool_forget(&g_pool, (int (*)(const gmt_hostpool_block_t *, void *))is_block, p);
  pthread_mutex_unlock(&g_mu);
}

/* ---- the caching pool ---- */

void gmt__hostpin_pool_stats(uint64_t *cached, uint64_t *reused)
{
  pthread_mutex_lock(&g_mu);
  *cached = g_pool.cached_bytes;
  *reused = g_pool.hits;
  pthread_mutex_unlock(&g_mu);
}

static int pool_on(void)
{
  return !g_pool_off && gmt__pin_on();
}

/* The block is still the driver's: a context that went without our
 * seeing it took its blocks along. */
static int block_alive(const void *p)
{
  __typeof__(&cuMemHostGetFlags) flags = GMT_REAL(cuMemHostGetFlags);
  unsigned f = 0;
  return flags && flags(&f, (void *)p) == CUDA_SUCCESS;
}

/* Frees blocks the pool let go, outside g_mu, each in its context. */
static void free_blocks(const gmt_hostpool_block_t *b, size_t n)
{
  __typeof__(&cuMemFreeHost) fr = GMT_REAL(cuMemFreeHost);
  for (size_t i = 0; i < n; i++) {
    GMT_FRAME_IN();
    int entered = gmt__ctx_enter((CUcontext)b[i].ctx);
    CUresult rc = fr ? fr(b[i].p) : CUDA_ERROR_NOT_FOUND;
    gmt__ctx_leave(entered);
    GMT_FRAME_OUT();
    if (rc != CUDA_SUCCESS)
      GMT_HOOK_DEBUG("pinned pool: cuMemFreeHost of a cached block of %zu bytes failed (%d)",
                     b[i].bytes, (int)rc);
    pthread_mutex_lock(&g_mu);
    unpinned_locked(b[i].p);
    pthread_mutex_unlock(&g_mu);
  }
}

/* Frees what has been idle too long or is over the cap; with all, every
 * cached block (a context is about to go, or memory ran out). Returns how
 * many blocks went. */
static size_t pool_trim(int all)
{
  gmt_hostpool_block_t out[HOSTPOOL_EVICT_BATCH];
  size_t n, total = 0;
  pthread_mutex_lock(&g_free_mu);
  do {
    pthread_mutex_lock(&g_mu);
    n = gmt__hostpool_evict(&g_pool, gmt_now_ms(), all, out, HOSTPOOL_EVICT_BATCH);
    pthread_mutex_unlock(&g_mu);
    free_blocks(out, n);
    total += n;
  } while (n == HOSTPOOL_EVICT_BATCH);
  pthread_mutex_unlock(&g_free_mu);
  return total;
}

int gmt__hostpin_tick(void)
{
  pthread_mutex_lock(&g_mu);
  uint64_t cached = g_pool.cached_bytes;
  pthread_mutex_unlock(&g_mu);
  return cached && pool_trim(0) > 0;
}

static CUresult call_alloc(int sym, void **pp, size_t n, unsigned flags)
{
  void *real = gmt__real(sym);
  if (!real)
    return CUDA_ERROR_NOT_FOUND;
  switch (sym) {
  case GMT_SYM_cuMemAllocHost: return ((__typeof__(&cuMemAllocHost))real)(pp, (unsigned)n);
  case GMT_SYM_cuMemAllocHost_v2: return ((__typeof__(&cuMemAllocHost_v2))real)(pp, n);
  default: return ((__typeof__(&cuMemHostAlloc))real)(pp, n, flags);
  }
}

/* cuMemAllocHost(_v2) and cuMemHostAlloc (sym says which; the first two
 * have flags 0). With the pool on, a request of 1 MiB and up is rounded
 * to its class and served from the cache when a block of that class,
 * flags and context is there. */
static CUresult host_alloc(int sym, void **pp, size_t n, unsigned flags)
{
  if (GMT_FRAME_INSIDE())
    return call_alloc(sym, pp, n, flags);
  size_t cls = pp && pool_on() ? gmt__hostpool_class(n) : 0;
  if (sym == GMT_SYM_cuMemAllocHost && cls > UINT_MAX)
    cls = 0;
  CUcontext ctx = cls ? gmt__current_ctx() : NULL;
  if (!ctx)
    cls = 0; /* no context: the driver answers as it would */
  if (cls) {
    pthread_mutex_lock(&g_mu);
    void *p = gmt__hostpool_take(&g_pool, cls, flags, ctx);
    pthread_mutex_unlock(&g_mu);
    if (p) {
      *pp = p;
      return CUDA_SUCCESS;
    }
  }
  /* The driver takes and pins the pages inside the call, in this thread:
   * this thread's policy places them (numa.h). */
  gmt_numa_saved_t pol;
  gmt__numa_prefer(gmt__numa_ctx_node(), &pol);
  GMT_FRAME_IN();
  CUresult rc = call_alloc(sym, pp, cls ? cls : n, flags);
  if (rc == CUDA_ERROR_OUT_OF_MEMORY && cls) {
    /* The cache may hold what is missing; and the rounding may be. */
    GMT_FRAME_OUT();
    pool_trim(1);
    GMT_FRAME_IN();
    cls = 0;
    rc = call_alloc(sym, pp, n, flags);
  }
  GMT_FRAME_OUT();
  gmt__numa_restore(&pol);
  if (rc != CUDA_SUCCESS)
    return rc;
  pinned(*pp, cls ? cls : n);
  if (cls) {
    pthread_mutex_lock(&g_mu);
    if (gmt__hostpool_made(&g_pool, *pp, cls, flags, ctx) < 0)
      GMT_HOOK_DEBUG("pinned pool: out of memory; a block of %zu bytes is not cached", cls);
    pthread_mutex_unlock(&g_mu);
    pool_trim(0);
  }
  return rc;
}

/* cuMemFreeHost of a pool block: cached, after waiting as cuMemFreeHost
 * does for the context's queued work (a copy still reading the block must
 * not see its next user's bytes). 1 when kept. */
static int pool_give(void *p)
{
  gmt_hostpool_block_t b;
  pthread_mutex_lock(&g_mu);
  int kept = g_pool.n && gmt__hostpool_give(&g_pool, p, gmt_now_ms(), &b);
  pthread_mutex_unlock(&g_mu);
  if (!kept)
    return 0;
  __typeof__(&cuCtxSynchronize) csync = GMT_REAL(cuCtxSynchronize);
  GMT_FRAME_IN();
  int entered = gmt__ctx_enter((CUcontext)b.ctx);
  int ok = entered >= 0 && csync && csync() == CUDA_SUCCESS && block_alive(p);
  gmt__ctx_leave(entered);
  GMT_FRAME_OUT();
  if (!ok) {
    /* The driver frees it (or says what is wrong), as without gmt. */
    pthread_mutex_lock(&g_mu);
    gmt__hostpool_ungive(&g_pool, p);
    pthread_mutex_unlock(&g_mu);
    return 0;
  }
  pool_trim(0);
  return 1;
}

static int block_dead(const gmt_hostpool_block_t *b, void *arg)
{
  (void)arg;
  if (block_alive(b->p))
    return 0;
  unpinned_locked(b->p);
  return 1;
}

void gmt__hostpin_ctx_going(void)
{
  pool_trim(1);
  pthread_mutex_lock(&g_free_mu);
}

void gmt__hostpin_ctx_gone(void)
{
  pthread_mutex_lock(&g_mu);
  if (g_pool.n)
    gmt__hostpool_forget(&g_pool, block_dead, NULL);
  pthread_mutex_unlock(&g_mu);
  pthread_mutex_unlock(&g_free_mu);
}

/* The real call with args, then on_success when it succeeded. A driver
 * that calls its own entry points is counted once, at the outermost
 * wrapper (frame.h). */
#define PIN_CALL(args, on_success)                                                                 \
  do {                                                                                             \
    GMT_FRAME_NESTED args;                                                                         \
    GMT_FRAME_IN();                                                                                \
    CUresult rc = real args;                                                                       \
    if (rc == CUDA_SUCCESS)                                                                        \
      on_success;                                                                                  \
    GMT_FRAME_OUT();                                                                               \
    return rc;                                                                                     \
  } while (0)

GMT_EXPORT CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
  GMT_FRAME_TIMED(cuMemAllocHost); /* the real function: host_alloc's, by sym */
  return host_alloc(GMT_SYM_cuMemAllocHost, pp, bytesize, 0);
}

GMT_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
  GMT_FRAME_TIMED(cuMemAllocHost_v2);
  return host_alloc(GMT_SYM_cuMemAllocHost_v2, pp, bytesize, 0);
}

GMT_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags)
{
  GMT_FRAME_TIMED(cuMemHostAlloc);
  return host_alloc(GMT_SYM_cuMemHostAlloc, pp, bytesize, flags);
}

GMT_EXPORT CUresult cuMemFreeHost(void *p)
{
  GMT_FRAME(cuMemFreeHost);
  if (!GMT_FRAME_INSIDE() && p && pool_give(p))
    return CUDA_SUCCESS;
  PIN_CALL((p), unpinned(p));
}

GMT_EXPORT CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int flags)
{
  GMT_FRAME(cuMemHostRegister);
  if (!GMT_FRAME_INSIDE())
    gmt__pin_yield(p, bytesize);
  PIN_CALL((p, bytesize, flags), pinned(p, bytesize));
}

GMT_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int flags)
{
  GMT_FRAME(cuMemHostRegister_v2);
  if (!GMT_FRAME_INSIDE())
    gmt__pin_yield(p, bytesize);
  PIN_CALL((p, bytesize, flags), pinned(p, bytesize));
}

GMT_EXPORT CUresult cuMemHostUnregister(void *p)
{
  GMT_FRAME(cuMemHostUnregister);
  PIN_CALL((p), unpinned(p));
}

/* ---- fork ---- */

static void hostpin_prepare(void)
{
  pthread_mutex_lock(&g_free_mu);
  pthread_mutex_lock(&g_mu);
}

static void hostpin_parent(void)
{
  pthread_mutex_unlock(&g_mu);
  pthread_mutex_unlock(&g_free_mu);
}

/* A child has none of the parent's pinned memory as CUDA memory: it
 * starts with nothing pinned. */
static void hostpin_child(void)
{
  pthread_mutex_init(&g_mu, NULL);
  pthread_mutex_init(&g_free_mu, NULL);
  g_n = 0;
  atomic_store_explicit(&g_bytes, 0, memory_order_relaxed);
  gmt__hostpool_reset(&g_pool);
}

static const gmt_fork_ops_t g_fork_ops = {hostpin_prepare, hostpin_parent, hostpin_child};

__attribute__((constructor)) static void hostpin_register(void)
{
  const char *mib = getenv("GMT_PIN_POOL_MIB");
  if (mib && *mib) {
    char *end;
    unsigned long long v = strtoull(mib, &end, 10);
    if (*end || v > (UINT64_MAX >> 20))
      GMT_HOOK_DEBUG("GMT_PIN_POOL_MIB=%s is not a number of MiB; kept %d", mib,
                     HOSTPOOL_DEFAULT_MIB);
    else if (v == 0)
      g_pool_off = 1;
    else
      g_pool.max_cached_bytes = (uint64_t)v << 20;
  }
  /* Tests wait less than HOSTPOOL_IDLE_MS for a cached block to go. */
  const char *idle = getenv("GMT_PIN_POOL_IDLE_MS");
  if (idle && *idle)
    g_pool.idle_ms = strtoull(idle, NULL, 10);
  gmt__fork_register(GMT_LOCK_HOSTPIN, &g_fork_ops);
}
