/* Device memory: every driver call that creates or frees it, and the
 * memory query. Each allocation is charged to the pod's quota before the
 * driver is called (reserve.c) and fails with CUDA_ERROR_OUT_OF_MEMORY,
 * without reaching the driver, when the quota has no room (with
 * CUDA_ERROR_INVALID_DEVICE on a GPU the pod's devices= leaves out); an allocation
 * the driver then fails gives its charge back, and every free does. What
 * is charged:
 *  - cuMemAlloc*, cuMemAllocManaged, cuMemCreate (device location): the
 *    bytes asked for;
 *  - cuMemAllocPitch*: pitch x height (reserved first as the width rounded
 *    up to GMT_PITCH_ALIGN, then corrected to the pitch the driver chose);
 *  - arrays: width x height x depth x channels x element size, summed
 *    over the mipmap levels;
 *  - stream-ordered allocations: what each pool really holds
 *    (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), reconciled at every async
 *    allocation and free, trim and memory query, so freed blocks a pool
 *    keeps stay charged and blocks it reuses are not charged twice.
 * The device of a charge is the current context's (the quota is the pod's
 * total across devices, so this only affects the per-device breakdown).
 *
 * In mode=swap, cuMemAlloc* and cuMemAllocPitch* are charged the same but
 * backed by the driver's virtual memory (swap.c), so that their bytes can
 * leave the GPU and come back, and so is the program's own cuMemCreate
 * memory (swapvmm.c); every other path allocates as in strict mode. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "alloc.h"
#include "driver.h"
#include "frame.h"
#include "fork.h"
#include "gmt.pb-c.h"
#include "gmt_error.h"
#include "log.h"
#include "report.h"
#include "reserve.h"
#include "state.h"
#include "swap.h"
#include "swapvmm.h"
#include "token.h"

#define GMT_PITCH_ALIGN 512u
#define GMT_MAX_POOLS 64

static void pools_reconcile(void);

/* Charges bytes on dev: 0, GMT_EQUOTA when the pod's quota has no room,
 * GMT_EDEVICE when dev is not one of the pod's GPUs (devices=).
 * A quota refusal may only mean that a pool gave memory back unseen (a
 * synchronize trimmed it) that we still count: the pools are brought in
 * line and the charge asked for once more. */
static int charge(int dev, uint64_t bytes)
{
  int rc = gmt__reserve(dev, bytes);
  if (rc != GMT_EQUOTA)
    return rc;
  pools_reconcile();
  return gmt__reserve(dev, bytes);
}

/* A wrapper that records: outermost on this thread only (a driver calling
 * its own exported entry points is one call, not two), and the process is
 * registered first (a forked child that never calls cuInit again). */
#define GMT_ENTER(...)                                                                             \
  do {                                                                                             \
    GMT_FRAME_NESTED(__VA_ARGS__);                                                                 \
    gmt__report_ensure();                                                                          \
    GMT_FRAME_IN();                                                                                \
  } while (0)
#define GMT_LEAVE() GMT_FRAME_OUT()

/* Charges bytes on dev or leaves the wrapper with an out-of-memory error
 * (CUDA_ERROR_INVALID_DEVICE on a GPU the pod may not use). */
#define GMT_CHARGE(dev, bytes)                                                                     \
  do {                                                                                             \
    int charged_ = charge((dev), (bytes));                                                         \
    if (charged_ != 0) {                                                                           \
      GMT_HOOK_DEBUG("%s: %llu bytes refused: %s", __func__, (unsigned long long)(bytes),          \
                     gmt_strerror(charged_));                                                      \
      GMT_LEAVE();                                                                                 \
      return charged_ == GMT_EDEVICE ? CUDA_ERROR_INVALID_DEVICE : CUDA_ERROR_OUT_OF_MEMORY;       \
    }                                                                                              \
  } while (0)

enum {
  KIND_DEVICE = GMT__ALLOC_KIND__ALLOC_KIND_DEVICE,
  KIND_MANAGED = GMT__ALLOC_KIND__ALLOC_KIND_MANAGED,
  KIND_ASYNC = GMT__ALLOC_KIND__ALLOC_KIND_ASYNC,
  KIND_PHYSICAL = GMT__ALLOC_KIND__ALLOC_KIND_PHYSICAL,
  KIND_ARRAY = GMT__ALLOC_KIND__ALLOC_KIND_ARRAY,
};

/* After the driver answered a charged allocation: records it, or gives the
 * charge back when it failed. A live entry it replaced (a free we did not
 * see) gives its charge back too. */
static void settle(CUresult rc, int ns, uint64_t handle, uint64_t size, int kind, int dev)
{
  if (rc != CUDA_SUCCESS || !handle) {
    gmt__unreserve(dev, size);
    return;
  }
  gmt_hook_event_t old;
  if (gmt__state_alloc(ns, handle, size, kind, dev, &old) && old.kind != KIND_ASYNC)
    gmt__unreserve(old.device, old.size);
}

/* ---- linear allocations ---- */

/* mode=swap: the allocation backed by swap.c, its last byte at most
 * max_addr. CUDA_ERROR_NOT_SUPPORTED: allocate as in strict mode. */
static CUresult swap_alloc(CUdeviceptr *p, uint64_t bytes, int dev, uint64_t max_addr)
{
  if (!atomic_load_explicit(&gmt__swap_on, memory_order_relaxed))
    return CUDA_ERROR_NOT_SUPPORTED;
  return gmt__swap_alloc(p, bytes, dev, max_addr, gmt__token_gate);
}

GMT_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
  GMT_FRAME(cuMemAlloc);
  GMT_ENTER(dptr, bytesize);
  int dev = gmt__current_device();
  GMT_CHARGE(dev, bytesize);
  CUdeviceptr p = 0;
  CUresult rc = dptr ? swap_alloc(&p, bytesize, dev, UINT32_MAX) : CUDA_ERROR_NOT_SUPPORTED;
  if (rc == CUDA_SUCCESS)
    *dptr = (CUdeviceptr_v1)p;
  else if (rc == CUDA_ERROR_NOT_SUPPORTED)
    rc = real(dptr, bytesize);
  settle(rc, GMT_NS_PTR, dptr ? *dptr : 0, bytesize, KIND_DEVICE, dev);
  GMT_LEAVE();
  return rc;
}

GMT_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
  GMT_FRAME(cuMemAlloc_v2);
  GMT_ENTER(dptr, bytesize);
  int dev = gmt__current_device();
  GMT_CHARGE(dev, bytesize);
  CUresult rc = dptr ? swap_alloc(dptr, bytesize, dev, UINT64_MAX) : CUDA_ERROR_NOT_SUPPORTED;
  if (rc == CUDA_ERROR_NOT_SUPPORTED)
    rc = real(dptr, bytesize);
  settle(rc, GMT_NS_PTR, dptr ? *dptr : 0, bytesize, KIND_DEVICE, dev);
  GMT_LEAVE();
  return rc;
}

/* The pitch is the driver's choice: reserve the width rounded as drivers
 * pitch it, then settle on pitch x height, freeing the allocation again if
 * a larger pitch does not fit. */
static uint64_t pitch_guess(uint64_t width, uint64_t height)
{
  return (width + GMT_PITCH_ALIGN - 1) / GMT_PITCH_ALIGN * GMT_PITCH_ALIGN * height;
}

static CUresult pitch_settle(CUresult rc, uint64_t ptr, uint64_t pitch, uint64_t height,
                             uint64_t guess, int dev, CUresult (*free_fn)(CUdeviceptr))
{
  if (rc != CUDA_SUCCESS || !ptr) {
    gmt__unreserve(dev, guess);
    return rc;
  }
  uint64_t bytes = pitch * height;
  if (bytes > guess && charge(dev, bytes - guess) != 0) {
    free_fn((CUdeviceptr)ptr);
    gmt__unreserve(dev, guess);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (bytes < guess)
    gmt__unreserve(dev, guess - bytes);
  settle(rc, GMT_NS_PTR, ptr, bytes, KIND_DEVICE, dev);
  return rc;
}

/* mode=swap's pitched allocation: gmt picks the pitch as drivers do (the
 * width rounded up to GMT_PITCH_ALIGN), so pitch x height is the guess. */
static CUresult swap_pitch(CUdeviceptr *p, uint64_t *pitch, uint64_t width, uint64_t height,
                           unsigned int elem, int dev, uint64_t max_addr)
{
  if (!atomic_load_explicit(&gmt__swap_on, memory_order_relaxed))
    return CUDA_ERROR_NOT_SUPPORTED;
  if (!p || !width || !height || (elem != 4 && elem != 8 && elem != 16))
    return CUDA_ERROR_INVALID_VALUE;
  *pitch = pitch_guess(width, 1);
  return gmt__swap_alloc(p, *pitch * height, dev, max_addr, gmt__token_gate);
}

static CUresult free_swap(CUdeviceptr p)
{
  int owned = 0;
  return gmt__swap_free(p, &owned);
}

static CUresult free_v2(CUdeviceptr p)
{
  __typeof__(&cuMemFree_v2) f = GMT_REAL(cuMemFree_v2);
  return f ? f(p) : CUDA_ERROR_NOT_FOUND;
}

static CUresult free_v1(CUdeviceptr p)
{
  __typeof__(&cuMemFree) f = GMT_REAL(cuMemFree);
  return f ? f((CUdeviceptr_v1)p) : CUDA_ERROR_NOT_FOUND;
}

GMT_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch,
                                    unsigned int WidthInBytes, unsigned int Height,
                                    unsigned int ElementSizeBytes)
{
  GMT_FRAME(cuMemAllocPitch);
  GMT_ENTER(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
  int dev = gmt__current_device();
  uint64_t guess = pitch_guess(WidthInBytes, Height);
  GMT_CHARGE(dev, guess);
  CUdeviceptr p = 0;
  uint64_t pitch = 0;
  CUresult rc = dptr && pPitch ? swap_pitch(&p, &pitch, WidthInBytes, Height, ElementSizeBytes, dev,
                                            UINT32_MAX)
                               : CUDA_ERROR_NOT_SUPPORTED;
  if (rc == CUDA_SUCCESS) {
    *dptr = (CUdeviceptr_v1)p;
    *pPitch = (unsigned int)pitch;
    rc = pitch_settle(rc, p, pitch, Height, guess, dev, free_swap);
  } else if (rc == CUDA_ERROR_NOT_SUPPORTED) {
    rc = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    rc = pitch_settle(rc, dptr && pPitch ? *dptr : 0, pPitch ? *pPitch : 0, Height, guess, dev,
                      free_v1);
  } else {
    gmt__unreserve(dev, guess);
  }
  GMT_LEAVE();
  return rc;
}

GMT_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                       size_t Height, unsigned int ElementSizeBytes)
{
  GMT_FRAME(cuMemAllocPitch_v2);
  GMT_ENTER(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
  int dev = gmt__current_device();
  uint64_t guess = pitch_guess(WidthInBytes, Height);
  GMT_CHARGE(dev, guess);
  uint64_t pitch = 0;
  CUresult rc =
      pPitch ? swap_pitch(dptr, &pitch, WidthInBytes, Height, ElementSizeBytes, dev, UINT64_MAX)
             : CUDA_ERROR_NOT_SUPPORTED;
  if (rc == CUDA_SUCCESS) {
    *pPitch = (size_t)pitch;
    rc = pitch_settle(rc, *dptr, pitch, Height, guess, dev, free_swap);
  } else if (rc == CUDA_ERROR_NOT_SUPPORTED) {
    rc = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    rc = pitch_settle(rc, dptr && pPitch ? *dptr : 0, pPitch ? *pPitch : 0, Height, guess, dev,
                      free_v2);
  } else {
    gmt__unreserve(dev, guess);
  }
  GMT_LEAVE();
  return rc;
}

GMT_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
  GMT_FRAME(cuMemAllocManaged);
  GMT_ENTER(dptr, bytesize, flags);
  int dev = gmt__current_device();
  GMT_CHARGE(dev, bytesize);
  CUresult rc = real(dptr, bytesize, flags);
  settle(rc, GMT_NS_PTR, dptr ? *dptr : 0, bytesize, KIND_MANAGED, dev);
  GMT_LEAVE();
  return rc;
}

/* ---- memory pools: charged what they hold ---- */

typedef struct {
  CUmemoryPool pool;
  int dev;
  uint64_t charged;
} pool_t;

/* Guards the table; held across attribute reads and gmt__unreserve, never
 * across a charge (which may reconcile the pools) or an RPC. */
static pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pool_t g_pools[GMT_MAX_POOLS];
static int g_npools;

static int pool_attr(CUmemoryPool pool, CUmemPool_attribute attr, uint64_t *out)
{
  __typeof__(&cuMemPoolGetAttribute) get = GMT_REAL(cuMemPoolGetAttribute);
  cuuint64_t v = 0;
  if (!get || get(pool, attr, &v) != CUDA_SUCCESS)
    return -1;
  *out = v;
  return 0;
}

/* The pool's entry, made on first sight (lock held); NULL when full. */
static pool_t *pool_entry(CUmemoryPool pool, int dev)
{
  for (int i = 0; i < g_npools; i++)
    if (g_pools[i].pool == pool)
      return &g_pools[i];
  if (g_npools == GMT_MAX_POOLS)
    return NULL;
  g_pools[g_npools] = (pool_t){.pool = pool, .dev = dev};
  return &g_pools[g_npools++];
}

/* Lowers each pool's charge to what it holds now (lock held). Raising is
 * left to the allocation path, which may reserve. */
static void pools_shrink_locked(void)
{
  for (int i = 0; i < g_npools; i++) {
    pool_t *p = &g_pools[i];
    uint64_t r;
    if (pool_attr(p->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &r) < 0)
      r = 0; /* destroyed behind our back: nothing we can still see */
    if (r < p->charged) {
      gmt__unreserve(p->dev, p->charged - r);
      p->charged = r;
    }
  }
}

/* Brings each pool's charge in line with what the pool holds now. */
static void pools_reconcile(void)
{
  pthread_mutex_lock(&g_pool_mu);
  pools_shrink_locked();
  pthread_mutex_unlock(&g_pool_mu);
}

/* Brings pool's charge up to what it holds; GMT_EQUOTA when the quota has
 * no room for the growth (then nothing more is charged). */
static int pool_grow(CUmemoryPool pool, int dev)
{
  pthread_mutex_lock(&g_pool_mu);
  pool_t *p = pool_entry(pool, dev);
  uint64_t r = 0, grow = 0;
  if (p && pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &r) == 0 && r > p->charged)
    grow = r - p->charged;
  pthread_mutex_unlock(&g_pool_mu);
  if (!grow)
    return 0;
  if (charge(dev, grow) != 0)
    return GMT_EQUOTA;
  pthread_mutex_lock(&g_pool_mu);
  p->charged += grow;
  pthread_mutex_unlock(&g_pool_mu);
  return 0;
}

static CUmemoryPool stream_pool(int dev)
{
  __typeof__(&cuDeviceGetMemPool) get = GMT_REAL(cuDeviceGetMemPool);
  CUmemoryPool p = NULL;
  if (!get || get(&p, dev) != CUDA_SUCCESS)
    return NULL;
  return p;
}

typedef CUresult (*async_free_fn)(CUdeviceptr, CUstream);

/* One stream-ordered allocation of bytesize from pool (NULL: the device's
 * current pool). Before the call, the part the pool's free space cannot
 * serve is reserved, so that an allocation over the quota never reaches
 * the driver; after it the pool's charge is set to what it holds. */
static CUresult pool_alloc(CUresult rc_call(void *), void *call_arg, CUdeviceptr *dptr,
                           size_t bytesize, CUmemoryPool pool, CUstream stream,
                           async_free_fn free_fn)
{
  int dev = gmt__current_device();
  CUmemoryPool p = pool ? pool : stream_pool(dev);
  uint64_t r0 = 0, u0 = 0;
  pthread_mutex_lock(&g_pool_mu);
  pools_shrink_locked(); /* a synchronize may have trimmed it */
  if (p) {
    pool_attr(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &r0);
    pool_attr(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &u0);
  }
  pthread_mutex_unlock(&g_pool_mu);
  uint64_t cached = r0 > u0 ? r0 - u0 : 0;
  uint64_t provisional = bytesize > cached ? bytesize - cached : 0;
  if (provisional && charge(dev, provisional) != 0) {
    GMT_HOOK_DEBUG("async alloc: %llu bytes over the pod's quota", (unsigned long long)bytesize);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult rc = rc_call(call_arg);
  /* The provisional hold becomes slack, from which the pool's real growth
   * is charged next. */
  gmt__unreserve(dev, provisional);
  if (!p)
    goto record;
  if (pool_grow(p, dev) != 0 && rc == CUDA_SUCCESS) {
    /* The pool grew by more than the quota allows: undo the allocation and
     * hand what the pool took back to the device. */
    free_fn(*dptr, stream);
    __typeof__(&cuStreamSynchronize) sync = GMT_REAL(cuStreamSynchronize);
    __typeof__(&cuMemPoolTrimTo) trim = GMT_REAL(cuMemPoolTrimTo);
    if (sync)
      sync(stream);
    if (trim)
      trim(p, (size_t)r0);
    pools_reconcile();
    pool_grow(p, dev); /* whatever it still holds stays charged if it fits */
    *dptr = 0;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
record:
  if (rc == CUDA_SUCCESS && *dptr)
    gmt__state_alloc(GMT_NS_PTR, (uint64_t)*dptr, bytesize, KIND_ASYNC, dev, NULL);
  return rc;
}

typedef struct {
  void *real;
  CUdeviceptr *dptr;
  size_t bytesize;
  CUmemoryPool pool;
  CUstream stream;
} async_args_t;

static CUresult call_alloc_async(void *a)
{
  async_args_t *x = a;
  return ((CUresult(*)(CUdeviceptr *, size_t, CUstream))x->real)(x->dptr, x->bytesize, x->stream);
}

static CUresult call_alloc_from_pool(void *a)
{
  async_args_t *x = a;
  return ((CUresult(*)(CUdeviceptr *, size_t, CUmemoryPool, CUstream))x->real)(x->dptr, x->bytesize,
                                                                               x->pool, x->stream);
}

static CUresult real_free_async(CUdeviceptr p, CUstream s)
{
  __typeof__(&cuMemFreeAsync) f = GMT_REAL(cuMemFreeAsync);
  return f ? f(p, s) : CUDA_ERROR_NOT_FOUND;
}

static CUresult real_free_async_ptsz(CUdeviceptr p, CUstream s)
{
  __typeof__(&cuMemFreeAsync_ptsz) f = GMT_REAL(cuMemFreeAsync_ptsz);
  return f ? f(p, s) : real_free_async(p, s);
}

#define GMT_ASYNC_BODY(name, callfn, freefn, pool_, ...)                                           \
  GMT_FRAME(name);                                                                                 \
  GMT_ENTER(__VA_ARGS__);                                                                          \
  gmt__swap_vmm_pool_note();                                                                       \
  async_args_t a = {(void *)real, dptr, bytesize, pool_, hStream};                                 \
  CUresult rc =                                                                                    \
      dptr ? pool_alloc(callfn, &a, dptr, bytesize, pool_, hStream, freefn) : real(__VA_ARGS__);   \
  GMT_LEAVE();                                                                                     \
  return rc

GMT_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
  GMT_ASYNC_BODY(cuMemAllocAsync, call_alloc_async, real_free_async, NULL, dptr, bytesize, hStream);
}

GMT_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
  GMT_ASYNC_BODY(cuMemAllocAsync_ptsz, call_alloc_async, real_free_async_ptsz, NULL, dptr, bytesize,
                 hStream);
}

GMT_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                            CUstream hStream)
{
  GMT_ASYNC_BODY(cuMemAllocFromPoolAsync, call_alloc_from_pool, real_free_async, pool, dptr,
                 bytesize, pool, hStream);
}

GMT_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                 CUmemoryPool pool, CUstream hStream)
{
  GMT_ASYNC_BODY(cuMemAllocFromPoolAsync_ptsz, call_alloc_from_pool, real_free_async_ptsz, pool,
                 dptr, bytesize, pool, hStream);
}

GMT_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
  GMT_FRAME(cuMemPoolTrimTo);
  GMT_ENTER(pool, minBytesToKeep);
  CUresult rc = real(pool, minBytesToKeep);
  if (rc == CUDA_SUCCESS)
    pools_reconcile();
  GMT_LEAVE();
  return rc;
}

/* Live blocks of a destroyed pool are given back by the driver when they
 * are freed; from here on they are no longer charged (the pool cannot be
 * asked any more). */
GMT_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
  GMT_FRAME(cuMemPoolDestroy);
  GMT_ENTER(pool);
  CUresult rc = real(pool);
  if (rc == CUDA_SUCCESS) {
    pthread_mutex_lock(&g_pool_mu);
    for (int i = 0; i < g_npools; i++) {
      if (g_pools[i].pool != pool)
        continue;
      gmt__unreserve(g_pools[i].dev, g_pools[i].charged);
      g_pools[i] = g_pools[--g_npools];
      break;
    }
    pthread_mutex_unlock(&g_pool_mu);
  }
  GMT_LEAVE();
  return rc;
}

/* ---- frees ---- */

/* After a successful free: the charge goes back to the slack, or for a
 * block of a pool the pool's charge follows what the pool still holds. */
static void uncharge(int ns, uint64_t handle)
{
  gmt_hook_event_t e;
  if (!gmt__state_free(ns, handle, &e))
    return;
  if (e.kind == KIND_ASYNC)
    pools_reconcile();
  else
    gmt__unreserve(e.device, e.size);
}

/* cuMemFree may free what cuMemAllocAsync made and the other way round:
 * both look the address up in the one pointer space. */
#define GMT_FREE_BODY(name, ns, addr, ...)                                                         \
  GMT_FRAME(name);                                                                                 \
  GMT_ENTER(__VA_ARGS__);                                                                          \
  CUresult rc = real(__VA_ARGS__);                                                                 \
  if (rc == CUDA_SUCCESS)                                                                          \
    uncharge(ns, (uint64_t)(addr));                                                                \
  GMT_LEAVE();                                                                                     \
  return rc

/* A pointer free: a mode=swap allocation is swap.c's to free (an async
 * free of one is made at once, which its stream's order allows). */
#define GMT_PTR_FREE_BODY(name, ...)                                                               \
  GMT_FRAME(name);                                                                                 \
  GMT_ENTER(__VA_ARGS__);                                                                          \
  int owned = 0;                                                                                   \
  CUresult rc = gmt__swap_free((CUdeviceptr)dptr, &owned);                                         \
  if (!owned)                                                                                      \
    rc = real(__VA_ARGS__);                                                                        \
  if (rc == CUDA_SUCCESS)                                                                          \
    uncharge(GMT_NS_PTR, (uint64_t)dptr);                                                          \
  GMT_LEAVE();                                                                                     \
  return rc

GMT_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
  GMT_PTR_FREE_BODY(cuMemFree, dptr);
}

GMT_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
  GMT_PTR_FREE_BODY(cuMemFree_v2, dptr);
}

GMT_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
  GMT_PTR_FREE_BODY(cuMemFreeAsync, dptr, hStream);
}

GMT_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
  GMT_PTR_FREE_BODY(cuMemFreeAsync_ptsz, dptr, hStream);
}

/* ---- virtual memory management (PyTorch expandable segments) ---- */

/* The physical allocation is what holds device memory; cuMemMap of it
 * adds none, so only cuMemCreate / cuMemRelease are counted. In mode=swap
 * the program's physical memory moves like gmt's own allocations
 * (swapvmm.h): every entry point that names a handle or a mapping of one
 * is swapvmm.c's there, since the handle the program holds is no longer
 * the driver's once it has moved. */
GMT_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                const CUmemAllocationProp *prop, unsigned long long flags)
{
  GMT_FRAME(cuMemCreate);
  GMT_ENTER(handle, size, prop, flags);
  if (!prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    CUresult rc = real(handle, size, prop, flags); /* host memory: not the quota's */
    GMT_LEAVE();
    return rc;
  }
  int dev = prop->location.id;
  GMT_CHARGE(dev, size);
  CUresult rc = gmt__swap_vmm_on() ? gmt__swap_vmm_create(handle, size, prop, flags)
                                   : real(handle, size, prop, flags);
  settle(rc, GMT_NS_PHYSICAL, handle ? (uint64_t)*handle : 0, size, KIND_PHYSICAL, dev);
  GMT_LEAVE();
  return rc;
}

/* In mode=swap a handle's charge goes back once its memory is gone, which
 * may be at an unmap after its release (swapvmm.h). */
static void physical_gone(uint64_t handle)
{
  uncharge(GMT_NS_PHYSICAL, handle);
}

GMT_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
  GMT_FRAME(cuMemRelease);
  GMT_ENTER(handle);
  CUresult rc;
  if (gmt__swap_vmm_on()) {
    rc = gmt__swap_vmm_release(handle, physical_gone);
  } else {
    rc = real(handle);
    if (rc == CUDA_SUCCESS)
      uncharge(GMT_NS_PHYSICAL, (uint64_t)handle);
  }
  GMT_LEAVE();
  return rc;
}

/* The rest only route a swap process's calls to swapvmm.c. */
#define GMT_VMM_BODY(name, swapcall, ...)                                                          \
  GMT_FRAME(name);                                                                                 \
  GMT_FRAME_NESTED(__VA_ARGS__);                                                                   \
  if (!gmt__swap_vmm_on())                                                                         \
    return real(__VA_ARGS__);                                                                      \
  GMT_FRAME_IN();                                                                                  \
  CUresult rc = swapcall;                                                                          \
  GMT_FRAME_OUT();                                                                                 \
  return rc

GMT_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                             CUmemGenericAllocationHandle handle, unsigned long long flags)
{
  GMT_VMM_BODY(cuMemMap, gmt__swap_vmm_map(ptr, size, offset, handle, flags), ptr, size, offset,
               handle, flags);
}

GMT_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
  GMT_VMM_BODY(cuMemUnmap, gmt__swap_vmm_unmap(ptr, size, physical_gone), ptr, size);
}

GMT_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
  GMT_VMM_BODY(cuMemAddressFree, gmt__swap_vmm_address_free(ptr, size, physical_gone), ptr, size);
}

GMT_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                   size_t count)
{
  GMT_VMM_BODY(cuMemSetAccess, gmt__swap_vmm_set_access(ptr, size, desc, count), ptr, size, desc,
               count);
}

GMT_EXPORT CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location,
                                   CUdeviceptr ptr)
{
  GMT_VMM_BODY(cuMemGetAccess, gmt__swap_vmm_get_access(flags, location, ptr), flags, location,
               ptr);
}

GMT_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
  GMT_VMM_BODY(cuMemRetainAllocationHandle, gmt__swap_vmm_retain(handle, addr), handle, addr);
}

GMT_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                           CUmemGenericAllocationHandle handle)
{
  GMT_VMM_BODY(cuMemGetAllocationPropertiesFromHandle, gmt__swap_vmm_props(prop, handle), prop,
               handle);
}

GMT_EXPORT CUresult cuMemExportToShareableHandle(void *shareableHandle,
                                                 CUmemGenericAllocationHandle handle,
                                                 CUmemAllocationHandleType handleType,
                                                 unsigned long long flags)
{
  GMT_VMM_BODY(cuMemExportToShareableHandle,
               gmt__swap_vmm_export(shareableHandle, handle, handleType, flags), shareableHandle,
               handle, handleType, flags);
}

/* ---- arrays ---- */

/* Bytes of one element of one channel; formats that pack several channels
 * or planes are counted at their nominal sample size, close enough for
 * accounting. */
static uint64_t format_bytes(CUarray_format f)
{
  switch (f) {
  case CU_AD_FORMAT_UNSIGNED_INT8:
  case CU_AD_FORMAT_SIGNED_INT8:
  case CU_AD_FORMAT_UNORM_INT8X1:
  case CU_AD_FORMAT_SNORM_INT8X1:
  case CU_AD_FORMAT_NV12: return 1;
  case CU_AD_FORMAT_UNSIGNED_INT16:
  case CU_AD_FORMAT_SIGNED_INT16:
  case CU_AD_FORMAT_HALF:
  case CU_AD_FORMAT_UNORM_INT8X2:
  case CU_AD_FORMAT_SNORM_INT8X2:
  case CU_AD_FORMAT_UNORM_INT16X1:
  case CU_AD_FORMAT_SNORM_INT16X1: return 2;
  case CU_AD_FORMAT_UNORM_INT16X4:
  case CU_AD_FORMAT_SNORM_INT16X4: return 8;
  default: return 4;
  }
}

static uint64_t array_bytes(uint64_t w, uint64_t h, uint64_t d, CUarray_format f,
                            unsigned int channels)
{
  return (w ? w : 1) * (h ? h : 1) * (d ? d : 1) * (channels ? channels : 1) * format_bytes(f);
}

#define GMT_ARRAY_BODY(name, bytes_expr, ...)                                                      \
  GMT_FRAME(name);                                                                                 \
  GMT_ENTER(__VA_ARGS__);                                                                          \
  if (!desc) {                                                                                     \
    CUresult rc0 = real(__VA_ARGS__);                                                              \
    GMT_LEAVE();                                                                                   \
    return rc0;                                                                                    \
  }                                                                                                \
  int dev = gmt__current_device();                                                                 \
  uint64_t bytes = (bytes_expr);                                                                   \
  GMT_CHARGE(dev, bytes);                                                                          \
  CUresult rc = real(__VA_ARGS__);                                                                 \
  settle(rc, GMT_NS_ARRAY, pHandle ? (uint64_t)(uintptr_t)*pHandle : 0, bytes, KIND_ARRAY, dev);   \
  GMT_LEAVE();                                                                                     \
  return rc

GMT_EXPORT CUresult cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *desc)
{
  GMT_ARRAY_BODY(cuArrayCreate,
                 array_bytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels),
                 pHandle, desc);
}

GMT_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc)
{
  GMT_ARRAY_BODY(cuArrayCreate_v2,
                 array_bytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels),
                 pHandle, desc);
}

GMT_EXPORT CUresult cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *desc)
{
  GMT_ARRAY_BODY(
      cuArray3DCreate,
      array_bytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels), pHandle,
      desc);
}

GMT_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc)
{
  GMT_ARRAY_BODY(
      cuArray3DCreate_v2,
      array_bytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels), pHandle,
      desc);
}

GMT_EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
  GMT_FREE_BODY(cuArrayDestroy, GMT_NS_ARRAY, (uintptr_t)hArray, hArray);
}

/* Each level halves every dimension that is still above one. */
static uint64_t mipmap_bytes(const CUDA_ARRAY3D_DESCRIPTOR *desc, unsigned int levels)
{
  uint64_t bytes = 0, w = desc->Width, h = desc->Height, d = desc->Depth;
  for (unsigned int l = 0; l < (levels ? levels : 1); l++) {
    bytes += array_bytes(w, h, d, desc->Format, desc->NumChannels);
    w = w > 1 ? w / 2 : w;
    h = h > 1 ? h / 2 : h;
    d = d > 1 ? d / 2 : d;
  }
  return bytes;
}

GMT_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                           const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                           unsigned int numMipmapLevels)
{
  GMT_FRAME(cuMipmappedArrayCreate);
  GMT_ENTER(pHandle, desc, numMipmapLevels);
  if (!desc) {
    CUresult rc0 = real(pHandle, desc, numMipmapLevels);
    GMT_LEAVE();
    return rc0;
  }
  int dev = gmt__current_device();
  uint64_t bytes = mipmap_bytes(desc, numMipmapLevels);
  GMT_CHARGE(dev, bytes);
  CUresult rc = real(pHandle, desc, numMipmapLevels);
  settle(rc, GMT_NS_MIPMAP, pHandle ? (uint64_t)(uintptr_t)*pHandle : 0, bytes, KIND_ARRAY, dev);
  GMT_LEAVE();
  return rc;
}

GMT_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
  GMT_FREE_BODY(cuMipmappedArrayDestroy, GMT_NS_MIPMAP, (uintptr_t)hMipmappedArray,
                hMipmappedArray);
}

/* ---- memory query ---- */

/* See alloc.h. What the pod holds leaves out this process's own slack,
 * which it can still allocate; pools are brought in line first, so that
 * memory a pool gave back unseen does not count. */
int gmt__alloc_meminfo(int device, uint64_t *free_b, uint64_t *total_b, uint64_t *used_b)
{
  uint64_t used = 0, limit = 0;
  gmt__report_ensure();
  pools_reconcile();
  int rc = gmt__reserve_meminfo(device, &used, &limit);
  if (rc < 0)
    return rc;
  uint64_t total = limit < *total_b ? limit : *total_b;
  uint64_t free = total > used ? total - used : 0;
  *total_b = total;
  *free_b = free < *free_b ? free : *free_b;
  if (used_b)
    *used_b = used < total ? used : total;
  return 0;
}

GMT_EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
  GMT_FRAME(cuMemGetInfo);
  GMT_FRAME_NESTED(free, total);
  /* The v1 numbers saturate at 4 GiB: ask the v2 entry point for the real
   * ones, then saturate ours. */
  __typeof__(&cuMemGetInfo_v2) v2 = GMT_REAL(cuMemGetInfo_v2);
  if (!v2 || !free || !total)
    return real(free, total);
  size_t f = 0, t = 0;
  GMT_FRAME_IN();
  CUresult rc = v2(&f, &t);
  uint64_t fb = f, tb = t;
  if (rc == CUDA_SUCCESS)
    gmt__alloc_meminfo(gmt__current_device(), &fb, &tb, NULL);
  GMT_FRAME_OUT();
  if (rc == CUDA_SUCCESS) {
    *free = fb > UINT32_MAX ? UINT32_MAX : (unsigned int)fb;
    *total = tb > UINT32_MAX ? UINT32_MAX : (unsigned int)tb;
  }
  return rc;
}

GMT_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
  GMT_FRAME(cuMemGetInfo_v2);
  GMT_FRAME_NESTED(free, total);
  GMT_FRAME_IN();
  CUresult rc = real(free, total);
  if (rc == CUDA_SUCCESS && free && total) {
    uint64_t fb = *free, tb = *total;
    gmt__alloc_meminfo(gmt__current_device(), &fb, &tb, NULL);
    *free = (size_t)fb;
    *total = (size_t)tb;
  }
  GMT_FRAME_OUT();
  return rc;
}

/* ---- fork ---- */

/* The pool lock is not taken at fork (see fork.h): it is held across
 * driver calls. The child holds no pool memory (and reserve.c forgets its
 * charges), so it only starts the table over. */
static void pools_child(void)
{
  g_npools = 0;
  pthread_mutex_init(&g_pool_mu, NULL);
}

static const gmt_fork_ops_t g_fork_ops = {.child = pools_child};

__attribute__((constructor)) static void pools_register(void)
{
  gmt__fork_register(GMT_LOCK_POOLS, &g_fork_ops);
}
