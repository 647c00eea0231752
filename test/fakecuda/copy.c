/* Copies and memsets of the fake driver. Device addresses resolve through
 * the address table, piece by piece, so a copy may start inside an
 * allocation or span several mappings of a reserved range. Async variants
 * complete before they return: the fake has no queues. */
#include "fakecuda.h"

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

static CUresult xfer_locked(struct end dst, struct end src, size_t n)
{
  if ((dst.dev == 0 && !dst.h) || (src.dev == 0 && !src.h))
    return CUDA_ERROR_INVALID_VALUE;
  /* Check both whole ranges first so a bad copy writes nothing. */
  for (int side = 0; side < 2; side++) {
    struct end e = side ? src : dst;
    if (e.dev && !dev_range_ok(e.d, n))
      return CUDA_ERROR_INVALID_VALUE;
  }
  while (n) {
    size_t a = n, b = n;
    char *dp = dst.dev ? gmt__mem_resolve(dst.d, &a) : dst.h;
    char *sp = src.dev ? gmt__mem_resolve(src.d, &b) : src.h;
    size_t k = n;
    if (a < k)
      k = a;
    if (b < k)
      k = b;
    memmove(dp, sp, k);
    n -= k;
    if (dst.dev)
      dst.d += k;
    else
      dst.h += k;
    if (src.dev)
      src.d += k;
    else
      src.h += k;
  }
  return CUDA_SUCCESS;
}

static CUresult xfer(struct end dst, struct end src, size_t n, CUstream s, int check_stream)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  gmt__fake_lock();
  int dev = 0;
  CUresult r = check_stream ? gmt__stream_dev_locked(s, &dev) : gmt__ctx_dev_locked(&dev);
  if (r == CUDA_SUCCESS && n)
    r = xfer_locked(dst, src, n);
  gmt__fake_unlock();
  return r;
}

#define HTOD(d, h, n) xfer(dev_end(d), host_end(h), n, NULL, 0)
#define DTOH(h, d, n) xfer(host_end(h), dev_end(d), n, NULL, 0)
#define DTOD(d, s, n) xfer(dev_end(d), dev_end(s), n, NULL, 0)

CUresult cuMemcpyHtoD(CUdeviceptr_v1 dst, const void *src, unsigned int n)
{
  GMT_FAKE_RET(HTOD(dst, src, n));
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
  GMT_FAKE_RET(HTOD(dst, src, n));
}
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n)
{
  GMT_FAKE_RET(HTOD(dst, src, n));
}
CUresult cuMemcpyDtoH(void *dst, CUdeviceptr_v1 src, unsigned int n)
{
  GMT_FAKE_RET(DTOH(dst, src, n));
}
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
  GMT_FAKE_RET(DTOH(dst, src, n));
}
CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n)
{
  GMT_FAKE_RET(DTOH(dst, src, n));
}
CUresult cuMemcpyDtoD(CUdeviceptr_v1 dst, CUdeviceptr_v1 src, unsigned int n)
{
  GMT_FAKE_RET(DTOD(dst, src, n));
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
  GMT_FAKE_RET(DTOD(dst, src, n));
}
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
  GMT_FAKE_RET(DTOD(dst, src, n));
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
  GMT_FAKE_RET(xfer(dev_end(dst), host_end(src), n, s, 1));
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
  GMT_FAKE_RET(xfer(host_end(dst), dev_end(src), n, s, 1));
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
  GMT_FAKE_RET(xfer(dev_end(dst), dev_end(src), n, s, 1));
}

static CUresult uva_copy(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, int check_stream)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  gmt__fake_lock();
  struct end d = uva_end(dst), e = uva_end(src);
  gmt__fake_unlock();
  return xfer(d, e, n, s, check_stream);
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
  GMT_FAKE_RET(uva_copy(dst, src, n, NULL, 0));
}
CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
  GMT_FAKE_RET(uva_copy(dst, src, n, NULL, 0));
}
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
  GMT_FAKE_RET(uva_copy(dst, src, n, s, 1));
}
CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
  GMT_FAKE_RET(uva_copy(dst, src, n, s, 1));
}

/* Set n elements of `width` bytes each to the pattern at `val`. */
static CUresult memset_dev(CUdeviceptr d, const void *val, unsigned width, size_t n, CUstream s,
                           int check_stream)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (d % width)
    return CUDA_ERROR_INVALID_VALUE;
  gmt__fake_lock();
  int dev = 0;
  CUresult r = check_stream ? gmt__stream_dev_locked(s, &dev) : gmt__ctx_dev_locked(&dev);
  size_t bytes = n * width;
  if (r == CUDA_SUCCESS && !dev_range_ok(d, bytes))
    r = CUDA_ERROR_INVALID_VALUE;
  for (size_t done = 0; r == CUDA_SUCCESS && done < bytes;) {
    size_t avail = 0;
    char *p = gmt__mem_resolve(d + done, &avail);
    size_t k = bytes - done < avail ? bytes - done : avail;
    if (width == 1) {
      memset(p, *(const unsigned char *)val, k);
    } else {
      for (size_t i = 0; i < k; i++)
        p[i] = ((const char *)val)[(done + i) % width];
    }
    done += k;
  }
  gmt__fake_unlock();
  return r;
}

CUresult cuMemsetD8(CUdeviceptr_v1 d, unsigned char uc, unsigned int n)
{
  GMT_FAKE_RET(memset_dev(d, &uc, 1, n, NULL, 0));
}
CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char uc, size_t n)
{
  GMT_FAKE_RET(memset_dev(d, &uc, 1, n, NULL, 0));
}
CUresult cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char uc, size_t n)
{
  GMT_FAKE_RET(memset_dev(d, &uc, 1, n, NULL, 0));
}
CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short us, size_t n)
{
  GMT_FAKE_RET(memset_dev(d, &us, 2, n, NULL, 0));
}
CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int ui, size_t n)
{
  GMT_FAKE_RET(memset_dev(d, &ui, 4, n, NULL, 0));
}
CUresult cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int ui, size_t n)
{
  GMT_FAKE_RET(memset_dev(d, &ui, 4, n, NULL, 0));
}
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char uc, size_t n, CUstream s)
{
  GMT_FAKE_RET(memset_dev(d, &uc, 1, n, s, 1));
}
CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char uc, size_t n, CUstream s)
{
  GMT_FAKE_RET(memset_dev(d, &uc, 1, n, s, 1));
}
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int ui, size_t n, CUstream s)
{
  GMT_FAKE_RET(memset_dev(d, &ui, 4, n, s, 1));
}
CUresult cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int ui, size_t n, CUstream s)
{
  GMT_FAKE_RET(memset_dev(d, &ui, 4, n, s, 1));
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

static CUresult copy_pitched(struct pitched dst, struct pitched src, size_t width, size_t height,
                             size_t depth, CUstream s, int check_stream)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  gmt__fake_lock();
  int dev = 0;
  CUresult r = check_stream ? gmt__stream_dev_locked(s, &dev) : gmt__ctx_dev_locked(&dev);
  for (size_t z = 0; r == CUDA_SUCCESS && z < depth; z++)
    for (size_t y = 0; r == CUDA_SUCCESS && y < height; y++) {
      struct end d, e;
      if ((r = pitched_end(&dst, y, z, width, &d)) == CUDA_SUCCESS &&
          (r = pitched_end(&src, y, z, width, &e)) == CUDA_SUCCESS && width)
        r = xfer_locked(d, e, width);
    }
  gmt__fake_unlock();
  return r;
}

static CUresult copy_2d(const CUDA_MEMCPY2D *c, CUstream s, int check_stream)
{
  if (!c)
    return CUDA_ERROR_INVALID_VALUE;
  struct pitched dst = {c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes,
                        c->dstY,          0,          c->dstPitch,  0};
  struct pitched src = {c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes,
                        c->srcY,          0,          c->srcPitch,  0};
  return copy_pitched(dst, src, c->WidthInBytes, c->Height, 1, s, check_stream);
}

static CUresult copy_3d(const CUDA_MEMCPY3D *c, CUstream s, int check_stream)
{
  if (!c)
    return CUDA_ERROR_INVALID_VALUE;
  struct pitched dst = {c->dstMemoryType, c->dstHost, c->dstDevice, c->dstXInBytes,
                        c->dstY,          c->dstZ,    c->dstPitch,  c->dstHeight};
  struct pitched src = {c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes,
                        c->srcY,          c->srcZ,    c->srcPitch,  c->srcHeight};
  return copy_pitched(dst, src, c->WidthInBytes, c->Height, c->Depth, s, check_stream);
}

CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *c)
{
  GMT_FAKE_RET(copy_2d(c, NULL, 0));
}
CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *c)
{
  GMT_FAKE_RET(copy_2d(c, NULL, 0));
}
CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *c)
{
  GMT_FAKE_RET(copy_2d(c, NULL, 0));
}
CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *c)
{
  GMT_FAKE_RET(copy_2d(c, NULL, 0));
}
CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *c, CUstream s)
{
  GMT_FAKE_RET(copy_2d(c, s, 1));
}
CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *c, CUstream s)
{
  GMT_FAKE_RET(copy_2d(c, s, 1));
}
CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *c)
{
  GMT_FAKE_RET(copy_3d(c, NULL, 0));
}
CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *c)
{
  GMT_FAKE_RET(copy_3d(c, NULL, 0));
}
CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *c, CUstream s)
{
  GMT_FAKE_RET(copy_3d(c, s, 1));
}
CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *c, CUstream s)
{
  GMT_FAKE_RET(copy_3d(c, s, 1));
}
