/* Pinned host memory (see hostpin.h): a table of the ranges the program
 * pinned, so that a free or an unregister knows how many bytes went. The
 * calls are rare (pinning costs milliseconds a GiB), so one mutex and a
 * linear table are plenty; the count is read without the lock. */
#include "hostpin.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "driver.h"
#include "fork.h"
#include "log.h"
#include "pin.h"

typedef struct {
  void *p;
  uint64_t bytes;
} pin_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pin_t *g_pins;
static size_t g_n, g_cap;
static _Atomic uint64_t g_bytes;

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

static void unpinned(void *p)
{
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_n; i++) {
    if (g_pins[i].p != p)
      continue;
    atomic_fetch_sub_explicit(&g_bytes, g_pins[i].bytes, memory_order_relaxed);
    g_pins[i] = g_pins[--g_n];
    break;
  }
  pthread_mutex_unlock(&g_mu);
}

/* A driver that calls its own entry points is counted once, at the
 * outermost wrapper (driver.h, gmt__t_depth). */
#define PIN_CALL(call, on_success)                                                                 \
  do {                                                                                             \
    if (gmt__t_depth)                                                                              \
      return call;                                                                                 \
    gmt__t_depth++;                                                                                \
    CUresult rc = call;                                                                            \
    if (rc == CUDA_SUCCESS)                                                                        \
      on_success;                                                                                  \
    gmt__t_depth--;                                                                                \
    return rc;                                                                                     \
  } while (0)

GMT_EXPORT CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
  GMT_REAL(cuMemAllocHost);
  PIN_CALL(real(pp, bytesize), pinned(*pp, bytesize));
}

GMT_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
  GMT_REAL(cuMemAllocHost_v2);
  PIN_CALL(real(pp, bytesize), pinned(*pp, bytesize));
}

GMT_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags)
{
  GMT_REAL(cuMemHostAlloc);
  PIN_CALL(real(pp, bytesize, flags), pinned(*pp, bytesize));
}

GMT_EXPORT CUresult cuMemFreeHost(void *p)
{
  GMT_REAL(cuMemFreeHost);
  PIN_CALL(real(p), unpinned(p));
}

GMT_EXPORT CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int flags)
{
  GMT_REAL(cuMemHostRegister);
  if (!gmt__t_depth)
    gmt__pin_yield(p, bytesize);
  PIN_CALL(real(p, bytesize, flags), pinned(p, bytesize));
}

GMT_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int flags)
{
  GMT_REAL(cuMemHostRegister_v2);
  if (!gmt__t_depth)
    gmt__pin_yield(p, bytesize);
  PIN_CALL(real(p, bytesize, flags), pinned(p, bytesize));
}

GMT_EXPORT CUresult cuMemHostUnregister(void *p)
{
  GMT_REAL(cuMemHostUnregister);
  PIN_CALL(real(p), unpinned(p));
}

/* ---- fork ---- */

static void hostpin_prepare(void)
{
  pthread_mutex_lock(&g_mu);
}

static void hostpin_parent(void)
{
  pthread_mutex_unlock(&g_mu);
}

/* A child has none of the parent's pinned memory as CUDA memory: it
 * starts with nothing pinned. */
static void hostpin_child(void)
{
  pthread_mutex_init(&g_mu, NULL);
  g_n = 0;
  atomic_store_explicit(&g_bytes, 0, memory_order_relaxed);
}

static const gmt_fork_ops_t g_fork_ops = {hostpin_prepare, hostpin_parent, hostpin_child};

__attribute__((constructor)) static void hostpin_register(void)
{
  gmt__fork_register(GMT_LOCK_HOSTPIN, &g_fork_ops);
}
