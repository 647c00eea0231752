/* Memory copies and memsets that pin advice does not count (copy.c has
 * those): each is wrapped only for the swap gate (swap.h), so that every
 * driver entry point that can touch device memory finds a mode=swap
 * process's allocations on the GPU. The real call gets the same
 * arguments. A driver that calls its own entry points passes straight
 * through (frame.h), as do the hook's own moves. */
#include "driver.h"
#include "frame.h"
#include "swapgate.h"

#define GATED(name, params, args)                                                                  \
  GMT_EXPORT CUresult name params                                                                  \
  {                                                                                                \
    GMT_FRAME(name);                                                                               \
    GMT_FRAME_NESTED args;                                                                         \
    int held;                                                                                      \
    CUresult rc = gmt__swap_gate_enter(&held);                                                     \
    if (rc != CUDA_SUCCESS)                                                                        \
      return rc;                                                                                   \
    rc = real args;                                                                                \
    gmt__swap_leave(held);                                                                         \
    return rc;                                                                                     \
  }

GATED(cuMemcpyHtoD, (CUdeviceptr_v1 dst, const void *src, unsigned int n), (dst, src, n))
GATED(cuMemcpyDtoH, (void *dst, CUdeviceptr_v1 src, unsigned int n), (dst, src, n))
GATED(cuMemcpyDtoD, (CUdeviceptr_v1 dst, CUdeviceptr_v1 src, unsigned int n), (dst, src, n))
GATED(cuMemcpyDtoD_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n))
GATED(cuMemcpyDtoD_v2_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t n), (dst, src, n))
GATED(cuMemcpyHtoDAsync, (CUdeviceptr_v1 dst, const void *src, unsigned int n, CUstream s),
      (dst, src, n, s))
GATED(cuMemcpyDtoHAsync, (void *dst, CUdeviceptr_v1 src, unsigned int n, CUstream s),
      (dst, src, n, s))
GATED(cuMemcpyDtoDAsync, (CUdeviceptr_v1 dst, CUdeviceptr_v1 src, unsigned int n, CUstream s),
      (dst, src, n, s))
GATED(cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s),
      (dst, src, n, s))
GATED(cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s),
      (dst, src, n, s))
GATED(cuMemcpyDtoA, (CUarray dst, unsigned int off, CUdeviceptr_v1 src, unsigned int n),
      (dst, off, src, n))
GATED(cuMemcpyDtoA_v2, (CUarray dst, size_t off, CUdeviceptr src, size_t n), (dst, off, src, n))
GATED(cuMemcpyDtoA_v2_ptds, (CUarray dst, size_t off, CUdeviceptr src, size_t n),
      (dst, off, src, n))
GATED(cuMemcpyAtoD, (CUdeviceptr_v1 dst, CUarray src, unsigned int off, unsigned int n),
      (dst, src, off, n))
GATED(cuMemcpyAtoD_v2, (CUdeviceptr dst, CUarray src, size_t off, size_t n), (dst, src, off, n))
GATED(cuMemcpyAtoD_v2_ptds, (CUdeviceptr dst, CUarray src, size_t off, size_t n),
      (dst, src, off, n))
GATED(cuMemcpy2D, (const CUDA_MEMCPY2D_v1 *c), (c))
GATED(cuMemcpy2DUnaligned, (const CUDA_MEMCPY2D_v1 *c), (c))
GATED(cuMemcpy2D_v2, (const CUDA_MEMCPY2D *c), (c))
GATED(cuMemcpy2D_v2_ptds, (const CUDA_MEMCPY2D *c), (c))
GATED(cuMemcpy2DUnaligned_v2, (const CUDA_MEMCPY2D *c), (c))
GATED(cuMemcpy2DUnaligned_v2_ptds, (const CUDA_MEMCPY2D *c), (c))
GATED(cuMemcpy2DAsync, (const CUDA_MEMCPY2D_v1 *c, CUstream s), (c, s))
GATED(cuMemcpy2DAsync_v2, (const CUDA_MEMCPY2D *c, CUstream s), (c, s))
GATED(cuMemcpy2DAsync_v2_ptsz, (const CUDA_MEMCPY2D *c, CUstream s), (c, s))
GATED(cuMemcpy3D, (const CUDA_MEMCPY3D_v1 *c), (c))
GATED(cuMemcpy3D_v2, (const CUDA_MEMCPY3D *c), (c))
GATED(cuMemcpy3D_v2_ptds, (const CUDA_MEMCPY3D *c), (c))
GATED(cuMemcpy3DAsync, (const CUDA_MEMCPY3D_v1 *c, CUstream s), (c, s))
GATED(cuMemcpy3DAsync_v2, (const CUDA_MEMCPY3D *c, CUstream s), (c, s))
GATED(cuMemcpy3DAsync_v2_ptsz, (const CUDA_MEMCPY3D *c, CUstream s), (c, s))
GATED(cuMemcpyPeer, (CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n),
      (dst, dctx, src, sctx, n))
GATED(cuMemcpyPeer_ptds,
      (CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n),
      (dst, dctx, src, sctx, n))
GATED(cuMemcpyPeerAsync,
      (CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n, CUstream s),
      (dst, dctx, src, sctx, n, s))
GATED(cuMemcpyPeerAsync_ptsz,
      (CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n, CUstream s),
      (dst, dctx, src, sctx, n, s))
GATED(cuMemcpy3DPeer, (const CUDA_MEMCPY3D_PEER *c), (c))
GATED(cuMemcpy3DPeer_ptds, (const CUDA_MEMCPY3D_PEER *c), (c))
GATED(cuMemcpy3DPeerAsync, (const CUDA_MEMCPY3D_PEER *c, CUstream s), (c, s))
GATED(cuMemcpy3DPeerAsync_ptsz, (const CUDA_MEMCPY3D_PEER *c, CUstream s), (c, s))
GATED(cuMemcpyBatchAsync_v2,
      (CUdeviceptr * dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
       CUmemcpyAttributes *attrs, size_t *attrs_idxs, size_t nattrs, CUstream s),
      (dsts, srcs, sizes, count, attrs, attrs_idxs, nattrs, s))
GATED(cuMemcpyBatchAsync_v2_ptsz,
      (CUdeviceptr * dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
       CUmemcpyAttributes *attrs, size_t *attrs_idxs, size_t nattrs, CUstream s),
      (dsts, srcs, sizes, count, attrs, attrs_idxs, nattrs, s))
GATED(cuMemcpy3DBatchAsync_v2,
      (size_t nops, CUDA_MEMCPY3D_BATCH_OP *ops, unsigned long long flags, CUstream s),
      (nops, ops, flags, s))
GATED(cuMemcpy3DBatchAsync_v2_ptsz,
      (size_t nops, CUDA_MEMCPY3D_BATCH_OP *ops, unsigned long long flags, CUstream s),
      (nops, ops, flags, s))
GATED(cuMemsetD8, (CUdeviceptr_v1 d, unsigned char v, unsigned int n), (d, v, n))
GATED(cuMemsetD8_v2, (CUdeviceptr d, unsigned char v, size_t n), (d, v, n))
GATED(cuMemsetD8_v2_ptds, (CUdeviceptr d, unsigned char v, size_t n), (d, v, n))
GATED(cuMemsetD2D8,
      (CUdeviceptr_v1 d, unsigned int pitch, unsigned char v, unsigned int w, unsigned int h),
      (d, pitch, v, w, h))
GATED(cuMemsetD2D8_v2, (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h),
      (d, pitch, v, w, h))
GATED(cuMemsetD2D8_v2_ptds, (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h),
      (d, pitch, v, w, h))
GATED(cuMemsetD8Async, (CUdeviceptr d, unsigned char v, size_t n, CUstream s), (d, v, n, s))
GATED(cuMemsetD8Async_ptsz, (CUdeviceptr d, unsigned char v, size_t n, CUstream s), (d, v, n, s))
GATED(cuMemsetD2D8Async,
      (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h, CUstream s),
      (d, pitch, v, w, h, s))
GATED(cuMemsetD2D8Async_ptsz,
      (CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h, CUstream s),
      (d, pitch, v, w, h, s))
GATED(cuMemsetD16, (CUdeviceptr_v1 d, unsigned short v, unsigned int n), (d, v, n))
GATED(cuMemsetD16_v2, (CUdeviceptr d, unsigned short v, size_t n), (d, v, n))
GATED(cuMemsetD16_v2_ptds, (CUdeviceptr d, unsigned short v, size_t n), (d, v, n))
GATED(cuMemsetD2D16,
      (CUdeviceptr_v1 d, unsigned int pitch, unsigned short v, unsigned int w, unsigned int h),
      (d, pitch, v, w, h))
GATED(cuMemsetD2D16_v2, (CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h),
      (d, pitch, v, w, h))
GATED(cuMemsetD2D16_v2_ptds, (CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h),
      (d, pitch, v, w, h))
GATED(cuMemsetD16Async, (CUdeviceptr d, unsigned short v, size_t n, CUstream s), (d, v, n, s))
GATED(cuMemsetD16Async_ptsz, (CUdeviceptr d, unsigned short v, size_t n, CUstream s), (d, v, n, s))
GATED(cuMemsetD2D16Async,
      (CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h, CUstream s),
      (d, pitch, v, w, h, s))
GATED(cuMemsetD2D16Async_ptsz,
      (CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t h, CUstream s),
      (d, pitch, v, w, h, s))
GATED(cuMemsetD32, (CUdeviceptr_v1 d, unsigned int v, unsigned int n), (d, v, n))
GATED(cuMemsetD32_v2, (CUdeviceptr d, unsigned int v, size_t n), (d, v, n))
GATED(cuMemsetD32_v2_ptds, (CUdeviceptr d, unsigned int v, size_t n), (d, v, n))
GATED(cuMemsetD2D32,
      (CUdeviceptr_v1 d, unsigned int pitch, unsigned int v, unsigned int w, unsigned int h),
      (d, pitch, v, w, h))
GATED(cuMemsetD2D32_v2, (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h),
      (d, pitch, v, w, h))
GATED(cuMemsetD2D32_v2_ptds, (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h),
      (d, pitch, v, w, h))
GATED(cuMemsetD32Async, (CUdeviceptr d, unsigned int v, size_t n, CUstream s), (d, v, n, s))
GATED(cuMemsetD32Async_ptsz, (CUdeviceptr d, unsigned int v, size_t n, CUstream s), (d, v, n, s))
GATED(cuMemsetD2D32Async,
      (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h, CUstream s),
      (d, pitch, v, w, h, s))
GATED(cuMemsetD2D32Async_ptsz,
      (CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h, CUstream s),
      (d, pitch, v, w, h, s))
