/* Stream-ordered memory pools of the fake driver. A pool keeps freed blocks
 * reserved (still charged to the ledger) until a trim or a synchronize above
 * its release threshold gives them back, as the real driver does, so that a
 * hook can charge what a pool really holds rather than what is in use. */
#include "fakecuda.h"

#include <stdlib.h>
#include <string.h>

struct gmt__pool {
  int dev;
  int is_default;
  uint64_t threshold;
  uint64_t reserved, reserved_high, used, used_high;
  struct gmt__range **cache; /* freed blocks still reserved */
  size_t ncache, capcache;
  struct gmt__pool *next; /* all pools, for trims at synchronize */
};

static struct gmt__pool *pools;
static struct gmt__pool *default_pool[GMT_FAKE_MAX_DEVICES];
static struct gmt__pool *current_pool[GMT_FAKE_MAX_DEVICES];

static struct gmt__pool *pool_new_locked(int dev, int is_default)
{
  struct gmt__pool *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  if (gmt__handle_add(p, GMT__K_POOL) != 0) {
    free(p);
    return NULL;
  }
  p->dev = dev;
  p->is_default = is_default;
  p->next = pools;
  pools = p;
  return p;
}

static struct gmt__pool *default_locked(int dev)
{
  if (!default_pool[dev])
    default_pool[dev] = pool_new_locked(dev, 1);
  return default_pool[dev];
}

static struct gmt__pool *current_locked(int dev)
{
  return current_pool[dev] ? current_pool[dev] : default_locked(dev);
}

/* Release cached blocks, largest last-freed first, until reserved <= keep. */
static void trim_locked(struct gmt__pool *p, uint64_t keep)
{
  while (p->reserved > keep && p->ncache) {
    struct gmt__range *r = p->cache[--p->ncache];
    p->reserved -= r->size;
    gmt__mem_delete(r);
  }
}

void gmt__pool_sync_locked(void)
{
  for (struct gmt__pool *p = pools; p; p = p->next)
    trim_locked(p, p->threshold);
}

void gmt__pool_free_block_locked(struct gmt__range *r)
{
  struct gmt__pool *p = r->pool;
  if (!p) { /* its pool was destroyed: nothing holds it any more */
    gmt__mem_delete(r);
    return;
  }
  if (p->ncache == p->capcache) {
    size_t ncap = p->capcache ? p->capcache * 2 : 16;
    struct gmt__range **n = realloc(p->cache, ncap * sizeof *n);
    if (!n) { /* cannot cache it: give it back */
      p->used -= r->size;
      p->reserved -= r->size;
      gmt__mem_delete(r);
      return;
    }
    p->cache = n;
    p->capcache = ncap;
  }
  r->kind = GMT__MEM_POOL_CACHED;
  p->cache[p->ncache++] = r;
  p->used -= r->size;
}

static CUresult pool_alloc_locked(struct gmt__pool *p, size_t size, CUdeviceptr *out)
{
  size_t want = gmt__round_up(size, GMT_FAKE_ALIGN);
  /* Best fit among cached blocks no more than twice the request. */
  size_t best = SIZE_MAX;
  for (size_t i = 0; i < p->ncache; i++) {
    size_t s = p->cache[i]->size;
    if (s >= want && s / 2 <= want && (best == SIZE_MAX || s < p->cache[best]->size))
      best = i;
  }
  struct gmt__range *r = NULL;
  if (best != SIZE_MAX) {
    r = p->cache[best];
    p->cache[best] = p->cache[--p->ncache];
    r->kind = GMT__MEM_POOL;
  } else {
    CUresult res = gmt__mem_new(p->dev, GMT__MEM_POOL, want, want, 1, 0, 0, &r);
    if (res == CUDA_ERROR_OUT_OF_MEMORY && p->ncache) {
      trim_locked(p, 0); /* the real pool frees its cache before failing */
      res = gmt__mem_new(p->dev, GMT__MEM_POOL, want, want, 1, 0, 0, &r);
    }
    if (res != CUDA_SUCCESS)
      return res;
    r->pool = p;
    p->reserved += r->size;
    if (p->reserved > p->reserved_high)
      p->reserved_high = p->reserved;
  }
  p->used += r->size;
  if (p->used > p->used_high)
    p->used_high = p->used;
  *out = r->base;
  return CUDA_SUCCESS;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s,
                            int from_pool)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!dptr || size == 0)
    return CUDA_ERROR_INVALID_VALUE;
  gmt__fake_lock();
  int dev = 0;
  CUresult r = gmt__stream_dev_locked(s, &dev);
  struct gmt__pool *p = NULL;
  if (r == CUDA_SUCCESS) {
    if (from_pool)
      p = gmt__handle_ok(pool, GMT__K_POOL) ? (struct gmt__pool *)pool : NULL;
    else
      p = current_locked(dev);
    if (!p)
      r = from_pool ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (r == CUDA_SUCCESS)
    r = pool_alloc_locked(p, size, dptr);
  gmt__fake_unlock();
  gmt__fake_log("alloc async %zu bytes -> 0x%llx (%d)", size,
                r == CUDA_SUCCESS ? (unsigned long long)*dptr : 0ull, (int)r);
  return r;
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
  GMT_FAKE_RET(alloc_async(dptr, bytesize, NULL, hStream, 0));
}
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
  GMT_FAKE_RET(alloc_async(dptr, bytesize, NULL, hStream, 0));
}
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream hStream)
{
  GMT_FAKE_RET(alloc_async(dptr, bytesize, pool, hStream, 1));
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream)
{
  GMT_FAKE_RET(alloc_async(dptr, bytesize, pool, hStream, 1));
}

/* Free the block at p: back to its pool, or, for cuMemAlloc memory, which
 * the real driver accepts too, to the device (lock held). */
static void free_block_locked(struct gmt__range *rg)
{
  if (rg->kind == GMT__MEM_POOL)
    gmt__pool_free_block_locked(rg);
  else
    gmt__mem_delete(rg);
}

static int freeable(const struct gmt__range *rg)
{
  return rg &&
         (rg->kind == GMT__MEM_POOL || rg->kind == GMT__MEM_ALLOC || rg->kind == GMT__MEM_MANAGED);
}

/* A queued free, when its stream reaches it. The worker takes the fake's
 * lock here, which is why nothing waits for the queues holding it. */
static void free_op_run(struct gmt__op *op)
{
  gmt__fake_lock();
  struct gmt__range *rg = gmt__mem_find_base(op->val);
  if (freeable(rg)) /* else freed twice: the driver's error, long returned */
    free_block_locked(rg);
  gmt__fake_unlock();
}

static CUresult free_async(CUdeviceptr p, CUstream s)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  gmt__fake_lock();
  int dev = 0;
  struct gmt__queue *q = NULL;
  CUresult r = gmt__stream_queue_locked(s, &dev, &q);
  struct gmt__range *rg = r == CUDA_SUCCESS ? gmt__mem_find_base(p) : NULL;
  if (r == CUDA_SUCCESS && !freeable(rg))
    r = CUDA_ERROR_INVALID_VALUE;
  /* In stream order: the block goes back (to be reused or trimmed) once
   * the work queued before it in the stream has run; at once when there
   * is none, as a stream with nothing to do reaches the free at once. */
  if (r == CUDA_SUCCESS && !gmt__queue_would_wait(q)) {
    free_block_locked(rg);
  } else if (r == CUDA_SUCCESS) {
    struct gmt__op *op = gmt__op_new();
    if (op) {
      op->run = free_op_run;
      op->dev = dev;
      op->val = p;
    }
    r = op ? gmt__queue_submit(q, op, NULL) : CUDA_ERROR_OUT_OF_MEMORY;
  }
  gmt__fake_unlock();
  gmt__fake_log("free async 0x%llx (%d)", (unsigned long long)p, (int)r);
  return r;
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
  GMT_FAKE_RET(free_async(dptr, hStream));
}
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
  GMT_FAKE_RET(free_async(dptr, GMT_PTSZ(hStream)));
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
  GMT_FAKE_NEED_INIT();
  if (!pool_out)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  if (!gmt__fake_dev_ok(dev))
    GMT_FAKE_RET(CUDA_ERROR_INVALID_DEVICE);
  gmt__fake_lock();
  struct gmt__pool *p = default_locked(dev);
  gmt__fake_unlock();
  if (!p)
    GMT_FAKE_RET(CUDA_ERROR_OUT_OF_MEMORY);
  *pool_out = (CUmemoryPool)p;
  GMT_FAKE_RET(CUDA_SUCCESS);
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
  GMT_FAKE_NEED_INIT();
  if (!pool)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  if (!gmt__fake_dev_ok(dev))
    GMT_FAKE_RET(CUDA_ERROR_INVALID_DEVICE);
  gmt__fake_lock();
  struct gmt__pool *p = current_locked(dev);
  gmt__fake_unlock();
  if (!p)
    GMT_FAKE_RET(CUDA_ERROR_OUT_OF_MEMORY);
  *pool = (CUmemoryPool)p;
  GMT_FAKE_RET(CUDA_SUCCESS);
}

CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
  GMT_FAKE_NEED_INIT();
  if (!gmt__fake_dev_ok(dev))
    GMT_FAKE_RET(CUDA_ERROR_INVALID_DEVICE);
  gmt__fake_lock();
  struct gmt__pool *p = (struct gmt__pool *)pool;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  if (gmt__handle_ok(p, GMT__K_POOL) && p->dev == dev) {
    current_pool[dev] = p;
    r = CUDA_SUCCESS;
  }
  gmt__fake_unlock();
  GMT_FAKE_RET(r);
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
  GMT_FAKE_NEED_INIT();
  if (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  if (!gmt__fake_dev_ok(props->location.id))
    GMT_FAKE_RET(CUDA_ERROR_INVALID_DEVICE);
  gmt__fake_lock();
  struct gmt__pool *p = pool_new_locked(props->location.id, 0);
  gmt__fake_unlock();
  if (!p)
    GMT_FAKE_RET(CUDA_ERROR_OUT_OF_MEMORY);
  *pool = (CUmemoryPool)p;
  GMT_FAKE_RET(CUDA_SUCCESS);
}

CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
  GMT_FAKE_NEED_INIT();
  gmt__fake_lock();
  struct gmt__pool *p = (struct gmt__pool *)pool;
  if (!gmt__handle_ok(p, GMT__K_POOL) || p->is_default) {
    gmt__fake_unlock();
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  }
  trim_locked(p, 0);
  /* Live blocks outlive their pool and are given back when freed. */
  gmt__mem_detach_pool(p);
  for (struct gmt__pool **pp = &pools; *pp; pp = &(*pp)->next)
    if (*pp == p) {
      *pp = p->next;
      break;
    }
  if (current_pool[p->dev] == p)
    current_pool[p->dev] = NULL;
  gmt__handle_del(p);
  free(p->cache);
  free(p);
  gmt__fake_unlock();
  GMT_FAKE_RET(CUDA_SUCCESS);
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
  GMT_FAKE_NEED_INIT();
  gmt__fake_lock();
  struct gmt__pool *p = (struct gmt__pool *)pool;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  if (gmt__handle_ok(p, GMT__K_POOL)) {
    trim_locked(p, minBytesToKeep);
    r = CUDA_SUCCESS;
  }
  gmt__fake_unlock();
  GMT_FAKE_RET(r);
}

static int attr_is_u64(CUmemPool_attribute a)
{
  return a == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD || a == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT ||
         a == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH || a == CU_MEMPOOL_ATTR_USED_MEM_CURRENT ||
         a == CU_MEMPOOL_ATTR_USED_MEM_HIGH;
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
  GMT_FAKE_NEED_INIT();
  if (!value)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  gmt__fake_lock();
  struct gmt__pool *p = (struct gmt__pool *)pool;
  CUresult r = CUDA_SUCCESS;
  if (!gmt__handle_ok(p, GMT__K_POOL)) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else if (attr_is_u64(attr)) {
    cuuint64_t v = 0;
    switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: v = p->threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: v = p->reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: v = p->reserved_high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: v = p->used; break;
    default: v = p->used_high; break;
    }
    memcpy(value, &v, sizeof v);
  } else if (attr >= CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES &&
             attr <= CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES) {
    int one = 1;
    memcpy(value, &one, sizeof one);
  } else {
    r = CUDA_ERROR_INVALID_VALUE;
  }
  gmt__fake_unlock();
  GMT_FAKE_RET(r);
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
  GMT_FAKE_NEED_INIT();
  if (!value)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  gmt__fake_lock();
  struct gmt__pool *p = (struct gmt__pool *)pool;
  CUresult r = CUDA_SUCCESS;
  cuuint64_t v;
  if (!gmt__handle_ok(p, GMT__K_POOL)) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else if (attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) {
    memcpy(&v, value, sizeof v);
    p->threshold = v;
  } else if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH || attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH) {
    memcpy(&v, value, sizeof v);
    if (v != 0)
      r = CUDA_ERROR_INVALID_VALUE; /* only a reset to 0 is allowed */
    else if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
      p->reserved_high = p->reserved;
    else
      p->used_high = p->used;
  } else if (!(attr >= CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES &&
               attr <= CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES)) {
    r = CUDA_ERROR_INVALID_VALUE;
  }
  gmt__fake_unlock();
  GMT_FAKE_RET(r);
}

void gmt__pool_reset_child(void)
{
  /* The blocks themselves go with the address table. */
  while (pools) {
    struct gmt__pool *p = pools;
    pools = p->next;
    gmt__handle_del(p);
    free(p->cache);
    free(p);
  }
  memset(default_pool, 0, sizeof default_pool);
  memset(current_pool, 0, sizeof current_pool);
}
