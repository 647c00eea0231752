/* Copies between host and device: the ones pin advice counts (pin.h). A
 * copy to or from a tracked host buffer is counted before it is made (and
 * may pin the buffer first); a synchronous one is timed. Nothing else
 * changes: the real call gets the same arguments. 2D and 3D copies and
 * batches are not counted (their buffers stay as they are; memops.c wraps
 * them for the swap gate). Each copy here passes the swap gate (swap.h)
 * first and holds it across the copy. */
#include "driver.h"
#include "frame.h"
#include "pin.h"
#include "stage.h"
#include "swapgate.h"

/* Per-thread default stream variants: the driver exports them, cuda.h
 * names them only through macros. */
CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n);
CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n);
CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream s);
CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream s);
CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n);
CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);

/* src, dst: the host side(s) to look up (NULL: device). staged: an
 * expression that makes the copy through stage.h and gives 1, setting rc,
 * or gives 0 (0: never staged); a host buffer gmt pinned is never staged.
 * A driver that calls its own entry points is counted once
 * (frame.h). */
#define COPY_BODY(name, src, dst, n, sync, staged, ...)                                            \
  do {                                                                                             \
    GMT_FRAME(name);                                                                               \
    GMT_FRAME_NESTED(__VA_ARGS__);                                                                 \
    int held;                                                                                      \
    CUresult rc = gmt__swap_gate_enter(&held);                                                     \
    if (rc != CUDA_SUCCESS)                                                                        \
      return rc;                                                                                   \
    GMT_FRAME_IN();                                                                                \
    gmt_pin_copy_t c;                                                                              \
    gmt__pin_copy_begin(&c, (const void *)(src), (const void *)(dst), n, sync);                    \
    if (c.pinned || !(staged))                                                                     \
      rc = real(__VA_ARGS__);                                                                      \
    gmt__pin_copy_end(&c, rc == CUDA_SUCCESS);                                                     \
    GMT_FRAME_OUT();                                                                               \
    gmt__swap_leave(held);                                                                         \
    return rc;                                                                                     \
  } while (0)

GMT_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
  COPY_BODY(cuMemcpyHtoD_v2, src, NULL, n, 1, gmt__stage_htod(dst, src, n, 0, &rc), dst, src, n);
}

GMT_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n)
{
  COPY_BODY(cuMemcpyHtoD_v2_ptds, src, NULL, n, 1, gmt__stage_htod(dst, src, n, 1, &rc), dst, src,
            n);
}

GMT_EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
  COPY_BODY(cuMemcpyDtoH_v2, NULL, dst, n, 1, gmt__stage_dtoh(dst, src, n, 0, &rc), dst, src, n);
}

GMT_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n)
{
  COPY_BODY(cuMemcpyDtoH_v2_ptds, NULL, dst, n, 1, gmt__stage_dtoh(dst, src, n, 1, &rc), dst, src,
            n);
}

GMT_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
  COPY_BODY(cuMemcpyHtoDAsync_v2, src, NULL, n, 0, 0, dst, src, n, s);
}

GMT_EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n,
                                              CUstream s)
{
  COPY_BODY(cuMemcpyHtoDAsync_v2_ptsz, src, NULL, n, 0, 0, dst, src, n, s);
}

GMT_EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
  COPY_BODY(cuMemcpyDtoHAsync_v2, NULL, dst, n, 0, 0, dst, src, n, s);
}

GMT_EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
  COPY_BODY(cuMemcpyDtoHAsync_v2_ptsz, NULL, dst, n, 0, 0, dst, src, n, s);
}

/* Unified addressing: either side may be host memory. */
GMT_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
  COPY_BODY(cuMemcpy, src, dst, n, 1, 0, dst, src, n);
}

GMT_EXPORT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
  COPY_BODY(cuMemcpy_ptds, src, dst, n, 1, 0, dst, src, n);
}

GMT_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
  COPY_BODY(cuMemcpyAsync, src, dst, n, 0, 0, dst, src, n, s);
}

GMT_EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
  COPY_BODY(cuMemcpyAsync_ptsz, src, dst, n, 0, 0, dst, src, n, s);
}
