/* Copies and memsets of the fake driver. Device addresses resolve through
 * the address table, piece by piece, so a copy may start inside an
 * allocation or span several mappings of a reserved range. A copy is
 * checked and resolved into pieces of host memory (where device memory
 * lives here) when it is issued, so a bad one fails at the call and writes
 * nothing; the pieces move when its stream's worker reaches it (queue.c).
 * As with the driver:
 *  - a synchronous copy or memset is work in the legacy default stream (the
 *    per-thread one for _ptds) and returns once it has run, after the work
 *    queued before it;
 *  - an async copy from pageable host memory takes its bytes at the call
 *    (the driver stages them), from page-locked memory when it runs;
 *  - an async copy into pageable host memory has landed when the call
 *    returns, into page-locked memory when it runs.
 * Frees of device and page-locked memory wait for queued work first
 * (memory.c, vmm.c, hostmem.c), so the worker never moves freed memory.
 * A host<->device copy also takes as long as its bytes take at the rate of
 * its host memory (gmt__fake.pageable_bps or pinned_bps), as on a GPU,
 * where pageable memory moves several times slower than page-locked. */
#include "fakecuda.h"

#include <stdlib.h>
#include <string.h>

/* One side of a copy: a device address, or a host pointer when dev is 0. */
struct end {
  int dev;
  CUdeviceptr d;
  char *h;
};

static struct end dev_end(CUdeviceptr d)
{
  return (struct end){1, d, NULL};
}
static struct end host_end(const void *h)
{
  return (struct end){0, 0, (char *)h};
}

/* Unified addressing: whatever is not device memory is a host pointer. */
static struct end uva_end(CUdeviceptr p)
{
  size_t avail;
  return gmt__mem_resolve(p, &avail) ? dev_end(p) : host_end((const void *)(uintptr_t)p);
}

/* [d, d+n) lies in one allocation (or one reserved range) and is backed
 * throughout: a copy never runs from one allocation into the next, even
 * when their addresses are adjacent, so overruns show up as errors. */
static int dev_range_ok(CUdeviceptr d, size_t n)
{
  struct gmt__range *r = gmt__mem_find(d);
  if (!r || n > r->size - (size_t)(d - r->base))
    return 0;
  for (size_t done = 0; done < n;) {
    size_t avail = 0;
    if (!gmt__mem_resolve(d + done, &avail))
      return 0;
    done += avail;
  }
  return 1;
}

/* ---- jobs: a copy or memset resolved at the call ---- */

struct piece {
  char *dst;
  const char *src; /* NULL when staged or for a memset */
  size_t off;      /* staged: where in the job's staging; memset: bytes before it */
  size_t n;
};

struct job {
  struct piece *p;
  size_t n, cap;
  char *staging; /* pageable source bytes taken at the call */
  size_t staged, cap_staging;
  int async;        /* issued by an async call */
  uint64_t cost_ns; /* how long its bytes take over PCIe */
  int wait;         /* the call returns once it has run */
  unsigned width;   /* memset: the element's width; 0 for a copy */
  unsigned char val[4];
};

static void job_free(struct job *j)
{
  if (!j)
    return;
  free(j->p);
  free(j->staging);
  free(j);
}

static CUresult job_piece(struct job *j, char *dst, const char *src, size_t off, size_t n)
{
  if (j->n == j->cap) {
    size_t ncap = j->cap ? j->cap * 2 : 4;
    struct piece *np = realloc(j->p, ncap * sizeof *np);
    if (!np)
      return CUDA_ERROR_OUT_OF_MEMORY;
    j->p = np;
    j->cap = ncap;
  }
  j->p[j->n++] = (struct piece){dst, src, off, n};
  return CUDA_SUCCESS;
}

static CUresult job_stage(struct job *j, const char *src, size_t n, size_t *off)
{
  if (n > j->cap_staging - j->staged) {
    size_t ncap = j->cap_staging ? j->cap_staging : 4096;
    while (ncap - j->staged < n)
      ncap *= 2;
    char *ns = realloc(j->staging, ncap);
    if (!ns)
      return CUDA_ERROR_OUT_OF_MEMORY;
    j->staging = ns;
    j->cap_staging = ncap;
  }
  memcpy(j->staging + j->staged, src, n);
  *off = j->staged;
  j->staged += n;
  return CUDA_SUCCESS;
}

/* Checks a copy of n bytes and adds its pieces (lock held). */
static CUresult job_xfer_locked(struct job *j, struct end dst, struct end src, size_t n)
{
  if ((dst.dev == 0 && !dst.h) || (src.dev == 0 && !src.h))
    return CUDA_ERROR_INVALID_VALUE;
  /* Check both whole ranges first so a bad copy writes nothing. */
  for (int side = 0; side < 2; side++) {
    struct end e = side ? src : dst;
    if (e.dev && !dev_range_ok(e.d, n))
      return CUDA_ERROR_INVALID_VALUE;
  }
  int staged = 0;
  size_t off = 0;
  if (!src.dev && j->async && !gmt__hostmem_pinned_locked(src.h, n)) {
    CUresult r = job_stage(j, src.h, n, &off);
    if (r != CUDA_SUCCESS)
      return r;
    staged = 1;
  }
  if (!dst.dev && !gmt__hostmem_pinned_locked(dst.h, n))
    j->wait = 1;
  if (dst.dev != src.dev) {
    const char *h = dst.dev ? src.h : dst.h;
    double bps = gmt__hostmem_pinned_locked(h, n) ? gmt__fake.pinned_bps : gmt__fake.pageable_bps;
    if (bps > 0)
      j->cost_ns += (uint64_t)((double)n * 1e9 / bps);
  }
  for (size_t done = 0; done < n;) {
    size_t a = n - done, b = n - done;
    char *dp = dst.dev ? gmt__mem_resolve(dst.d + done, &a) : dst.h + done;
    const char *sp = NULL;
    if (!staged)
      sp = src.dev ? gmt__mem_resolve(src.d + done, &b) : src.h + done;
    size_t k = n - done;
    if (a < k)
      k = a;
    if (b < k)
      k = b;
    CUresult r = job_piece(j, dp, sp, staged ? off + done : 0, k);
    if (r != CUDA_SUCCESS)
      return r;
    done += k;
  }
  return CUDA_SUCCESS;
}

static void job_run(struct gmt__op *op)
{
  const struct job *j = op->arg;
  /* GMT_FAKE_MEMSET_WAITS: behind the device's running kernel (fakecuda.h). */
  if (j->width && gmt__fake.memset_waits) {
    uint64_t end = gmt__machine_dev_busy_until(gmt__fake.phys[op->dev]);
    if (end > gmt__fake_now_ns())
      gmt__fake_run_until(end);
  }
  for (size_t i = 0; i < j->n; i++) {
    const struct piece *p = &j->p[i];
    if (j->width == 1) {
      memset(p->dst, j->val[0], p->n);
    } else if (j->width) {
      for (size_t k = 0; k < p->n; k++)
        p->dst[k] = (char)j->val[(p->off + k) % j->width];
    } else {
      memmove(p->dst, p->src ? p->src : j->staging + p->off, p->n);
    }
  }
  /* The link's time, on top of the memmove (which here stands for no
   * transfer time at all: it is as fast for either kind of memory). */
  if (j->cost_ns)
    gmt__fake_run_until(gmt__fake_now_ns() + j->cost_ns);
}

static void job_drop(struct gmt__op *op)
{
  job_free(op->arg);
}

/* Issue a copy or memset on stream s: build (with the lock held) checks it
 * and adds its pieces, then it is queued, and the call waits for it when
 * it must have run at return. */
static CUresult issue(CUstream s, int async, CUresult (*build)(struct job *, const void *),
                      const void *arg)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  struct job *j = calloc(1, sizeof *j);
  if (!j)
    return CUDA_ERROR_OUT_OF_MEMORY;
  j->async = async;
  j->wait = !async;
  gmt__fake_lock();
  int dev = 0;
  struct gmt__queue *q = NULL;
  CUresult r = gmt__stream_queue_locked(s, &dev, &q);
  if (r == CUDA_SUCCESS)
    r = build(j, arg);
  int wait = 0;
  uint64_t seq = 0;
  if (r != CUDA_SUCCESS || j->n == 0) {
    job_free(j); /* nothing to move */
  } else {
    struct gmt__op *op = gmt__op_new();
    if (!op) {
      job_free(j);
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      op->run = job_run;
      op->drop = job_drop;
      op->arg = j;
      op->dev = dev;
      wait = j->wait; /* the worker may free j as soon as it is queued */
      r = gmt__queue_submit(q, op, &seq);
    }
  }
  gmt__fake_unlock();
  if (r == CUDA_SUCCESS && wait)
    gmt__queue_wait(q, seq);
  return r;
}

/* ---- linear copies ---- */

struct copy_args {
  struct end dst, src;
  size_t n;
  int uva; /* dst.d and src.d are unified addresses */
};

static CUresult build_copy(struct job *j, const void *arg)
{
  const struct copy_args *c = arg;
  if (c->n == 0)
    return CUDA_SUCCESS;
  struct end d = c->uva ? uva_end(c->dst.d) : c->dst, e = c->uva ? uva_end(c->src.d) : c->src;
  return job_xfer_locked(j, d, e, c->n);
}

static CUresult xfer(struct end dst, struct end src, size_t n, CUstream s, int async)
{
  struct copy_args a = {dst, src, n, 0};
  return issue(s, async, build_copy, &a);
}

static CUresult uva_copy(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, int async)
{
  struct copy_args a = {dev_end(dst), dev_end(src), n, 1};
  return issue(s, async, build_copy, &a);
}

/* Synchronous copies: in the legacy stream, or the thread's (_ptds). */
#define LEGACY NULL
#define PTDS CU_STREAM_PER_THREAD
#define HTOD(d, h, n, s) xfer(dev_end(d), host_end(h), n, s, 0)
#define DTOH(h, d, n, s) xfer(host_end(h), dev_end(d), n, s, 0)
#define DTOD(d, e, n, s) xfer(dev_end(d), dev_end(e), n, s, 0)

CUresult cuMemcpyHtoD(CUdeviceptr_v1 dst, const void *src, unsigned int n)
{
  GMT_FAKE_RET(HTOD(dst, src, n, LEGACY));
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
  GMT_FAKE_RET(HTOD(dst, src, n, LEGACY));
}
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n)
{
  GMT_FAKE_RET(HTOD(dst, src, n, PTDS));
}
CUresult cuMemcpyDtoH(void *dst, CUdeviceptr_v1 src, unsigned int n)
{
  GMT_FAKE_RET(DTOH(dst, src, n, LEGACY));
}
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
  GMT_FAKE_RET(DTOH(dst, src, n, LEGACY));
}
CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n)
{
  GMT_FAKE_RET(DTOH(dst, src, n, PTDS));
}
CUresult cuMemcpyDtoD(CUdeviceptr_v1 dst, CUdeviceptr_v1 src, unsigned int n)
{
  GMT_FAKE_RET(DTOD(dst, src, n, LEGACY));
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
  GMT_FAKE_RET(DTOD(dst, src, n, LEGACY));
}
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
  GMT_FAKE_RET(DTOD(dst, src, n, PTDS));
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr_v1 dst, const void *src, unsigned int n, CUstream s)
{
  GMT_FAKE_RET(xfer(dev_end(dst), host_end(src), n, s, 1));
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
  GMT_FAKE_RET(xfer(dev_end(dst), host_end(src), n, s, 1));
}
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
  GMT_FAKE_RET(xfer(dev_end(dst), host_end(src), n, GMT_PTSZ(s), 1));
}
CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr_v1 src, unsigned int n, CUstream s)
{
  GMT_FAKE_RET(xfer(host_end(dst), dev_end(src), n, s, 1));
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
  GMT_FAKE_RET(xfer(host_end(dst), dev_end(src), n, s, 1));
}
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
  GMT_FAKE_RET(xfer(host_end(dst), dev_end(src), n, GMT_PTSZ(s), 1));
}
CUresult cuMemcpyDtoDAsync(CUdeviceptr_v1 dst, CUdeviceptr_v1 src, unsigned int n, CUstream s)
{
  GMT_FAKE_RET(xfer(dev_end(dst), dev_end(src), n, s, 1));
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
  GMT_FAKE_RET(xfer(dev_end(dst), dev_end(src), n, s, 1));
}
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
  GMT_FAKE_RET(xfer(dev_end(dst), dev_end(src), n, GMT_PTSZ(s), 1));
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
  GMT_FAKE_RET(uva_copy(dst, src, n, LEGACY, 0));
}
CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
  GMT_FAKE_RET(uva_copy(dst, src, n, PTDS, 0));
}
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
  GMT_FAKE_RET(uva_copy(dst, src, n, s, 1));
}
CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
  GMT_FAKE_RET(uva_copy(dst, src, n, GMT_PTSZ(s), 1));
}

/* ---- memsets ---- */

struct set_args {
  CUdeviceptr d;
  unsigned width;
  size_t n; /* elements */
  unsigned char val[4];
};

static CUresult build_set(struct job *j, const void *arg)
{
  const struct set_args *m = arg;
  size_t bytes = m->n * m->width;
  if (!dev_range_ok(m->d, bytes))
    return CUDA_ERROR_INVALID_VALUE;
  j->width = m->width;
  memcpy(j->val, m->val, sizeof j->val);
  for (size_t done = 0; done < bytes;) {
    size_t avail = 0;
    char *p = gmt__mem_resolve(m->d + done, &avail);
    size_t k = bytes - done < avail ? bytes - done : avail;
    CUresult r = job_piece(j, p, NULL, done, k);
    if (r != CUDA_SUCCESS)
      return r;
    done += k;
  }
  return CUDA_SUCCESS;
}

/* Set n elements of `width` bytes each to the pattern at `val`. */
static CUresult memset_dev(CUdeviceptr d, const void *val, unsigned width, size_t n, CUstream s,
                           int async)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (d % width)
    return CUDA_ERROR_INVALID_VALUE;
  struct set_args a = {d, width, n, {0}};
  memcpy(a.val, val, width);
  return issue(s, async, build_set, &a);
}

CUresult cuMemsetD8(CUdeviceptr_v1 d, unsigned char uc, unsigned int n)
{
  GMT_FAKE_RET(memset_dev(d, &uc, 1, n, LEGACY, 0));
}
CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char uc, size_t n)
{
  GMT_FAKE_RET(memset_dev(d, &uc, 1, n, LEGACY, 0));
}
CUresult cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char uc, size_t n)
{
  GMT_FAKE_RET(memset_dev(d, &uc, 1, n, PTDS, 0));
}
CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short us, size_t n)
{
  GMT_FAKE_RET(memset_dev(d, &us, 2, n, LEGACY, 0));
}
CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int ui, size_t n)
{
  GMT_FAKE_RET(memset_dev(d, &ui, 4, n, LEGACY, 0));
}
CUresult cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int ui, size_t n)
{
  GMT_FAKE_RET(memset_dev(d, &ui, 4, n, PTDS, 0));
}
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char uc, size_t n, CUstream s)
{
  GMT_FAKE_RET(memset_dev(d, &uc, 1, n, s, 1));
}
CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char uc, size_t n, CUstream s)
{
  GMT_FAKE_RET(memset_dev(d, &uc, 1, n, GMT_PTSZ(s), 1));
}
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int ui, size_t n, CUstream s)
{
  GMT_FAKE_RET(memset_dev(d, &ui, 4, n, s, 1));
}
CUresult cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int ui, size_t n, CUstream s)
{
  GMT_FAKE_RET(memset_dev(d, &ui, 4, n, GMT_PTSZ(s), 1));
}

/* ---- 2D and 3D copies: one row of WidthInBytes at a time ---- */

/* One side of a pitched copy, from a CUDA_MEMCPY2D or CUDA_MEMCPY3D. */
struct pitched {
  CUmemorytype type;
  const void *host;
  CUdeviceptr dev;
  size_t x, y, z, pitch, height; /* height: rows per slice (3D only) */
};

static CUresult pitched_end(const struct pitched *p, size_t row, size_t slice, size_t width,
                            struct end *out)
{
  if (width > p->pitch && p->pitch)
    return CUDA_ERROR_INVALID_VALUE;
  size_t off = ((p->z + slice) * p->height + p->y + row) * p->pitch + p->x;
  switch (p->type) {
  case CU_MEMORYTYPE_HOST: *out = host_end((const char *)p->host + off); return CUDA_SUCCESS;
  case CU_MEMORYTYPE_DEVICE: *out = dev_end(p->dev + off); return CUDA_SUCCESS;
  case CU_MEMORYTYPE_UNIFIED: *out = uva_end(p->dev + off); return CUDA_SUCCESS;
  default: return CUDA_ERROR_NOT_SUPPORTED; /* arrays: the fake copies none */
  }
}

struct pitched_args {
  struct pitched dst, src;
  size_t width, height, depth;
};

static CUresult build_pitched(struct job *j, const void *arg)
{
  const struct pitched_args *c = arg;
  CUresult r = CUDA_SUCCESS;
  for (size_t z = 0; r == CUDA_SUCCESS && z < c->depth; z++)
    for (size_t y = 0; r == CUDA_SUCCESS && y < c->height; y++) {
      struct end d, e;
      if ((r = pitched_end(&c->dst, y, z, c->width, &d)) == CUDA_SUCCESS &&
          (r = pitched_end(&c->src, y, z, c->width, &e)) == CUDA_SUCCESS && c->width)
        r = job_xfer_locked(j, d, e, c->width);
    }
  return r;
}

static CUresult copy_2d(const CUDA_MEMCPY2D *c, CUstream s, int async)
{
  if (!c)
    return CUDA_ERROR_INVALID_VALUE;
  struct pitched_args a = {
      {c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes, c->dstY, 0, c->dstPitch, 0},
      {c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY, 0, c->srcPitch, 0},
      c->WidthInBytes,
      c->Height,
      1};
  return issue(s, async, build_pitched, &a);
}

static CUresult copy_3d(const CUDA_MEMCPY3D *c, CUstream s, int async)
{
  if (!c)
    return CUDA_ERROR_INVALID_VALUE;
  struct pitched_args a = {{c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes, c->dstY,
                            c->dstZ, c->dstPitch, c->dstHeight},
                           {c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY,
                            c->srcZ, c->srcPitch, c->srcHeight},
                           c->WidthInBytes,
                           c->Height,
                           c->Depth};
  return issue(s, async, build_pitched, &a);
}

CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *c)
{
  GMT_FAKE_RET(copy_2d(c, LEGACY, 0));
}
CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *c)
{
  GMT_FAKE_RET(copy_2d(c, PTDS, 0));
}
CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *c)
{
  GMT_FAKE_RET(copy_2d(c, LEGACY, 0));
}
CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *c)
{
  GMT_FAKE_RET(copy_2d(c, PTDS, 0));
}
CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *c, CUstream s)
{
  GMT_FAKE_RET(copy_2d(c, s, 1));
}
CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *c, CUstream s)
{
  GMT_FAKE_RET(copy_2d(c, GMT_PTSZ(s), 1));
}
CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *c)
{
  GMT_FAKE_RET(copy_3d(c, LEGACY, 0));
}
CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *c)
{
  GMT_FAKE_RET(copy_3d(c, PTDS, 0));
}
CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *c, CUstream s)
{
  GMT_FAKE_RET(copy_3d(c, s, 1));
}
CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *c, CUstream s)
{
  GMT_FAKE_RET(copy_3d(c, GMT_PTSZ(s), 1));
}
