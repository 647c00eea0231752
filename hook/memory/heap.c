/* The program's large host buffers (see heap.h).
 *
 * Every wrapper first finds the real allocator. Until it has (dlsym may
 * itself allocate), allocations come from a small static arena whose
 * blocks are never given back. The fast paths are one load and one
 * compare: a small allocation is never tracked, and a free looks anything
 * up only while some buffer is tracked and the block is large. */
#include "heap.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "driver.h"
#include "fork.h"
#include "gmt_log.h"
#include "log.h"

#define TLS_IE __attribute__((tls_model("initial-exec")))
/* Used by the wrappers only, which a sanitizer build leaves out. */
#define WRAPPERS_ONLY __attribute__((unused))

typedef void *(*malloc_fn)(size_t);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void *(*reallocarray_fn)(void *, size_t, size_t);
typedef int (*posix_memalign_fn)(void **, size_t, size_t);
typedef void *(*memalign_fn)(size_t, size_t);
typedef void (*free_fn)(void *);
typedef size_t (*usable_fn)(void *);
typedef int (*munmap_fn)(void *, size_t);

static struct {
  malloc_fn malloc;
  calloc_fn calloc;
  realloc_fn realloc;
  reallocarray_fn reallocarray;
  posix_memalign_fn posix_memalign;
  memalign_fn aligned_alloc;
  memalign_fn memalign;
  free_fn free;
  usable_fn usable;
  munmap_fn munmap;
} r;

static _Atomic int g_ready; /* r is filled in */
#ifdef GMT_HEAP_NO_INTERPOSE
static _Atomic int g_tracking = 0; /* nothing is seen: nothing is tracked */
#else
static _Atomic int g_tracking = 1; /* buffers are tracked */
#endif
static _Atomic size_t g_count; /* buffers tracked now */
/* The lowest and highest start of a buffer tracked since the table was
 * last empty (written under the lock): a free outside them is not of a
 * tracked buffer, without asking the allocator its block's size
 * (malloc_usable_size from this free was 0.21% of a PyTorch inference
 * loop's samples on an H200, the hook's largest share). */
static _Atomic uintptr_t g_lo = UINTPTR_MAX, g_hi;

/* The table is empty (lock held, or a child alone after fork). */
static void bounds_reset(void)
{
  atomic_store_explicit(&g_lo, UINTPTR_MAX, memory_order_relaxed);
  atomic_store_explicit(&g_hi, 0, memory_order_relaxed);
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static __thread int t_resolving TLS_IE;
/* Set while this thread holds the heap lock: an allocation the driver
 * makes then (registering a buffer) is not tracked, or it would wait on
 * the lock its own thread holds. */
static __thread int t_locked TLS_IE;

/* ---- the bootstrap arena ---- */

static _Alignas(64) char g_boot[64 * 1024];
static _Atomic size_t g_boot_used;

WRAPPERS_ONLY static void *boot_alloc(size_t n)
{
  size_t need = (n + 16 + 15) & ~(size_t)15;
  size_t at = atomic_fetch_add(&g_boot_used, need);
  if (at + need > sizeof g_boot)
    return NULL;
  memcpy(g_boot + at, &n, sizeof n); /* its size, for a realloc */
  return g_boot + at + 16;           /* zero: the arena is never reused */
}

WRAPPERS_ONLY static int in_boot(const void *p)
{
  return (const char *)p >= g_boot && (const char *)p < g_boot + sizeof g_boot;
}

WRAPPERS_ONLY static size_t boot_size(const void *p)
{
  size_t n;
  memcpy(&n, (const char *)p - 16, sizeof n);
  return n;
}

/* ---- finding the real allocator ---- */

static void resolve(void)
{
  t_resolving = 1;
  gmt_dlsym_fn d = gmt__dlsym_next();
  /* Another library ahead of us owns malloc (an ASan runtime, an
   * allocator linked into the program): forward to it, and track
   * nothing, for its frees would not pass here. */
  void *first = d(RTLD_DEFAULT, "malloc");
  int own = first == (void *)malloc;
  void *h = own ? RTLD_NEXT : RTLD_DEFAULT;
  r.malloc = (malloc_fn)d(h, "malloc");
  r.calloc = (calloc_fn)d(h, "calloc");
  r.realloc = (realloc_fn)d(h, "realloc");
  r.reallocarray = (reallocarray_fn)d(h, "reallocarray");
  r.posix_memalign = (posix_memalign_fn)d(h, "posix_memalign");
  r.aligned_alloc = (memalign_fn)d(h, "aligned_alloc");
  r.memalign = (memalign_fn)d(h, "memalign");
  r.free = (free_fn)d(h, "free");
  r.usable = (usable_fn)d(h, "malloc_usable_size");
  r.munmap = (munmap_fn)d(RTLD_NEXT, "munmap");
  if (!own || !r.usable)
    atomic_store(&g_tracking, 0);
  t_resolving = 0;
  if (!r.malloc || !r.calloc || !r.realloc || !r.free || !r.posix_memalign || !r.memalign ||
      !r.aligned_alloc || !r.reallocarray || !r.munmap) {
    static const char msg[] = "gmt: cannot find the real allocator\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    abort();
  }
  atomic_store_explicit(&g_ready, 1, memory_order_release);
  if (!own)
    GMT_HOOK_DEBUG("another library owns malloc: host buffers are not tracked (no pin advice)");
}

/* 1 once r is usable; 0 on the thread that is finding it (use the arena). */
static inline int ready(void)
{
  if (__builtin_expect(atomic_load_explicit(&g_ready, memory_order_acquire), 1))
    return 1;
  if (t_resolving)
    return 0;
  pthread_once(&g_once, resolve);
  return 1;
}

/* ---- the table: live buffers sorted by address ---- */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static gmt_hostbuf_t *g_bufs;
static size_t g_n, g_cap;
static uint64_t g_next_id = 1;
static gmt_heap_site_t g_sites[GMT_HEAP_SITES];
static size_t g_nsites;
static gmt_heap_gone_fn g_gone;

void gmt__heap_lock(void)
{
  pthread_mutex_lock(&g_mu);
  t_locked = 1;
}

void gmt__heap_unlock(void)
{
  t_locked = 0;
  pthread_mutex_unlock(&g_mu);
}

void gmt__heap_set_gone(gmt_heap_gone_fn fn)
{
  gmt__heap_lock();
  g_gone = fn;
  gmt__heap_unlock();
}

int gmt__heap_any(void)
{
  return atomic_load_explicit(&g_count, memory_order_relaxed) != 0;
}

void gmt__heap_stop_tracking(void)
{
  atomic_store(&g_tracking, 0);
  gmt__heap_lock();
  g_n = 0;
  atomic_store(&g_count, 0);
  bounds_reset();
  gmt__heap_unlock();
}

/* First index whose buffer starts above p. */
static size_t upper(uintptr_t p)
{
  size_t lo = 0, hi = g_n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (g_bufs[mid].addr <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

gmt_hostbuf_t *gmt__heap_find_locked(const void *p, size_t n)
{
  uintptr_t a = (uintptr_t)p;
  size_t i = upper(a);
  if (i == 0)
    return NULL;
  gmt_hostbuf_t *b = &g_bufs[i - 1];
  return a - b->addr < b->size && n <= b->size - (a - b->addr) ? b : NULL;
}

gmt_hostbuf_t *gmt__heap_by_id_locked(const void *addr, uint64_t id)
{
  size_t i = upper((uintptr_t)addr);
  return i > 0 && g_bufs[i - 1].addr == (uintptr_t)addr && g_bufs[i - 1].id == id ? &g_bufs[i - 1]
                                                                                  : NULL;
}

void gmt__heap_each_locked(void (*fn)(gmt_hostbuf_t *b, void *arg), void *arg)
{
  for (size_t i = 0; i < g_n; i++)
    fn(&g_bufs[i], arg);
}

/* Takes buffer i out of the table into *out (lock held). The caller calls
 * gone() on it once the lock is let go. */
static void take_at(size_t i, gmt_hostbuf_t *out)
{
  *out = g_bufs[i];
  memmove(&g_bufs[i], &g_bufs[i + 1], (g_n - i - 1) * sizeof *g_bufs);
  g_n--;
  atomic_store_explicit(&g_count, g_n, memory_order_relaxed);
  if (!g_n)
    bounds_reset();
}

/* Without the lock: the owner's last word on a buffer that is going. */
static void gone(gmt_hostbuf_t *b, gmt_heap_gone_fn fn)
{
  if (fn)
    fn(b);
}

/* The site entry for pc (lock held): the one there, or a new one when di
 * (the module, looked up by the caller outside the lock) is given; NULL
 * when there is none or the table is full. */
static gmt_heap_site_t *site_locked(uintptr_t pc, const Dl_info *di)
{
  size_t mask = GMT_HEAP_SITES - 1;
  for (size_t k = 0, i = (pc >> 4) & mask; k < GMT_HEAP_SITES; k++, i = (i + 1) & mask) {
    gmt_heap_site_t *s = &g_sites[i];
    if (s->pc == pc)
      return s;
    if (s->pc)
      continue;
    if (!di || 2 * (g_nsites + 1) > GMT_HEAP_SITES)
      return NULL; /* keep it half empty so that a miss ends soon */
    s->pc = pc;
    if (di->dli_fname) {
      snprintf(s->module, sizeof s->module, "%s", di->dli_fname);
      s->offset = pc - (uintptr_t)di->dli_fbase;
    } else {
      s->offset = pc;
    }
    g_nsites++;
    return s;
  }
  return NULL;
}

/* Tracks [p, p+n) allocated at site pc, whose module di names (NULL:
 * look it up). */
static void track_at(void *p, size_t n, uintptr_t pc, Dl_info *named)
{
  if (!atomic_load_explicit(&g_tracking, memory_order_relaxed) || t_locked || !p)
    return;
  /* A new site's module comes from dladdr, which takes the loader's lock:
   * never under ours, and once per site. */
  Dl_info di = {0};
  if (named) {
    di = *named;
  } else {
    gmt__heap_lock();
    int known = site_locked(pc, NULL) != NULL;
    gmt__heap_unlock();
    if (!known && !dladdr((void *)pc, &di))
      di.dli_fname = NULL;
  }
  gmt_hostbuf_t old;
  int had_old = 0;
  gmt__heap_lock();
  gmt_heap_gone_fn fn = g_gone;
  if (!atomic_load_explicit(&g_tracking, memory_order_relaxed) || g_n >= GMT_HEAP_MAX_BUFFERS)
    goto out;
  if (g_n == g_cap) {
    size_t cap = g_cap ? g_cap * 2 : 256;
    gmt_hostbuf_t *nb = r.realloc(g_bufs, cap * sizeof *nb);
    if (!nb)
      goto out;
    g_bufs = nb;
    g_cap = cap;
  }
  size_t i = upper((uintptr_t)p);
  if (i > 0 && g_bufs[i - 1].addr == (uintptr_t)p) {
    take_at(--i, &old); /* its free went unseen (a path we do not wrap) */
    had_old = 1;
  }
  gmt_heap_site_t *s = site_locked(pc, &di);
  memmove(&g_bufs[i + 1], &g_bufs[i], (g_n - i) * sizeof *g_bufs);
  g_bufs[i] = (gmt_hostbuf_t){.addr = (uintptr_t)p,
                              .size = n,
                              .id = g_next_id++,
                              .born_ms = gmt_now_ms(),
                              .site = s,
                              .nth = s ? s->count++ : 0};
  g_n++;
  if ((uintptr_t)p < atomic_load_explicit(&g_lo, memory_order_relaxed))
    atomic_store_explicit(&g_lo, (uintptr_t)p, memory_order_relaxed);
  if ((uintptr_t)p > atomic_load_explicit(&g_hi, memory_order_relaxed))
    atomic_store_explicit(&g_hi, (uintptr_t)p, memory_order_relaxed);
  atomic_store_explicit(&g_count, g_n, memory_order_relaxed);
out:
  gmt__heap_unlock();
  if (had_old)
    gone(&old, fn);
}

/* Before p goes back to the allocator. */
WRAPPERS_ONLY static void untrack(void *p)
{
  if (!p || atomic_load_explicit(&g_count, memory_order_relaxed) == 0 || t_locked || in_boot(p))
    return;
  uintptr_t a = (uintptr_t)p;
  if (a < atomic_load_explicit(&g_lo, memory_order_relaxed) ||
      a > atomic_load_explicit(&g_hi, memory_order_relaxed))
    return;
  if (r.usable(p) < GMT_HEAP_MIN)
    return;
  gmt_hostbuf_t b;
  int found = 0;
  gmt__heap_lock();
  gmt_heap_gone_fn fn = g_gone;
  size_t i = upper((uintptr_t)p);
  if (i > 0 && g_bufs[i - 1].addr == (uintptr_t)p) {
    take_at(i - 1, &b);
    found = 1;
  }
  gmt__heap_unlock();
  if (found)
    gone(&b, fn);
}

WRAPPERS_ONLY static void track(void *p, size_t n, uintptr_t pc)
{
  track_at(p, n, pc, NULL);
}

#define CALLER ((uintptr_t)__builtin_return_address(0))

/* ---- gmt/alloc.h: buffers a program names ---- */

GMT_EXPORT void *gmt_host_alloc_v1(size_t n, const char *site)
{
  void *p = NULL;
#ifdef GMT_HEAP_NO_INTERPOSE
  (void)site;
  return posix_memalign(&p, 64, n ? n : 1) == 0 ? p : NULL;
#endif
  if (!ready() || r.posix_memalign(&p, 64, n ? n : 1) != 0)
    return NULL;
  /* The site's key is its name: a made-up pc with the top bit set (no
   * user code lives there), the module "gmt_host_alloc:NAME", offset 0. */
  char module[GMT_HEAP_MODULE_MAX];
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (const char *c = site ? site : ""; *c; c++)
    h = (h ^ (unsigned char)*c) * 1099511628211ull;
  snprintf(module, sizeof module, "gmt_host_alloc:%s", site ? site : "");
  Dl_info di = {.dli_fname = module, .dli_fbase = (void *)(uintptr_t)(h | 1ull << 63)};
  if (n >= GMT_HEAP_MIN) /* as for malloc: smaller ones are not worth pinning */
    track_at(p, n, (uintptr_t)(h | 1ull << 63), &di);
  return p;
}

GMT_EXPORT void gmt_host_free_v1(void *p)
{
  free(p);
}

#ifndef GMT_HEAP_NO_INTERPOSE
static void *realloc_from_boot(void *p, size_t n)
{
  void *q = r.malloc(n);
  if (q) {
    size_t old = boot_size(p);
    memcpy(q, p, old < n ? old : n);
  }
  return q;
}

GMT_EXPORT void *malloc(size_t n)
{
  if (!ready())
    return boot_alloc(n);
  void *p = r.malloc(n);
  if (n >= GMT_HEAP_MIN)
    track(p, n, CALLER);
  return p;
}

GMT_EXPORT void *calloc(size_t nm, size_t sz)
{
  if (!ready())
    return nm && sz > SIZE_MAX / nm ? NULL : boot_alloc(nm * sz);
  void *p = r.calloc(nm, sz);
  if (p && nm && sz >= GMT_HEAP_MIN / nm)
    track(p, nm * sz, CALLER);
  return p;
}

GMT_EXPORT void *realloc(void *p, size_t n)
{
  if (!ready()) {
    void *q = boot_alloc(n);
    if (q && p)
      memcpy(q, p, boot_size(p) < n ? boot_size(p) : n);
    return q;
  }
  if (in_boot(p))
    return realloc_from_boot(p, n);
  untrack(p); /* it may move, shrink or go: pinned memory must not */
  void *q = r.realloc(p, n);
  if (n >= GMT_HEAP_MIN)
    track(q, n, CALLER);
  return q;
}

GMT_EXPORT void *reallocarray(void *p, size_t nm, size_t sz)
{
  if (nm && sz > SIZE_MAX / nm) {
    errno = ENOMEM;
    return NULL;
  }
  if (!ready() || in_boot(p))
    return realloc(p, nm * sz);
  untrack(p);
  void *q = r.reallocarray(p, nm, sz);
  if (nm * sz >= GMT_HEAP_MIN)
    track(q, nm * sz, CALLER);
  return q;
}

GMT_EXPORT int posix_memalign(void **pp, size_t align, size_t n)
{
  if (!ready()) {
    if (align > 16)
      return ENOMEM;
    *pp = boot_alloc(n);
    return *pp ? 0 : ENOMEM;
  }
  int rc = r.posix_memalign(pp, align, n);
  if (rc == 0 && n >= GMT_HEAP_MIN)
    track(*pp, n, CALLER);
  return rc;
}

GMT_EXPORT void *aligned_alloc(size_t align, size_t n)
{
  if (!ready())
    return align <= 16 ? boot_alloc(n) : NULL;
  void *p = r.aligned_alloc(align, n);
  if (n >= GMT_HEAP_MIN)
    track(p, n, CALLER);
  return p;
}

GMT_EXPORT void *memalign(size_t align, size_t n)
{
  if (!ready())
    return align <= 16 ? boot_alloc(n) : NULL;
  void *p = r.memalign(align, n);
  if (n >= GMT_HEAP_MIN)
    track(p, n, CALLER);
  return p;
}

GMT_EXPORT void free(void *p)
{
  if (!p || in_boot(p))
    return;
  if (!ready())
    return; /* cannot be: p came from somewhere */
  untrack(p);
  r.free(p);
}

GMT_EXPORT int munmap(void *addr, size_t len)
{
  if (!ready())
    return (int)syscall(SYS_munmap, addr, len);
  /* One buffer at a time: each goes (is unregistered) without the lock. */
  uintptr_t a = (uintptr_t)addr, e = a + len;
  while (atomic_load_explicit(&g_count, memory_order_relaxed) && !t_locked) {
    gmt_hostbuf_t b;
    int found = 0;
    gmt__heap_lock();
    gmt_heap_gone_fn fn = g_gone;
    size_t i = upper(a);
    if (i > 0 && g_bufs[i - 1].addr + g_bufs[i - 1].size > a)
      i--; /* it starts below addr and reaches into the range */
    if (i < g_n && g_bufs[i].addr < e && g_bufs[i].addr + g_bufs[i].size > a) {
      take_at(i, &b);
      found = 1;
    }
    gmt__heap_unlock();
    if (!found)
      break;
    gone(&b, fn);
  }
  return r.munmap(addr, len);
}
#endif /* GMT_HEAP_NO_INTERPOSE */

/* ---- fork ---- */

/* The lock is not taken at fork: it is held across driver calls (a
 * registration), and the driver may hold its own locks by then. A child
 * forgets every buffer instead: none of them is registered in it. */
static void heap_child(void)
{
  pthread_mutex_init(&g_mu, NULL);
  t_locked = 0;
  g_n = 0;
  atomic_store(&g_count, 0);
  bounds_reset();
}

static const gmt_fork_ops_t g_fork_ops = {NULL, NULL, heap_child};

__attribute__((constructor)) static void heap_register(void)
{
  gmt__fork_register(GMT_LOCK_HEAP, &g_fork_ops);
}
