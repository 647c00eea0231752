/* mode=um's driver steps (see swapum.h). Every call is the REAL driver's:
 * gmt's own wrappers would charge the quota again or wait at the gate. */
#include "swapum.h"

#define UM_PAGE ((uint64_t)2 << 20)

uint64_t gmt__um_span(uint64_t bytes)
{
  return (bytes + UM_PAGE - 1) / UM_PAGE * UM_PAGE;
}

CUresult gmt__um_card_free(uint64_t *free_bytes)
{
  __typeof__(&cuMemGetInfo_v2) info = GMT_REAL(cuMemGetInfo_v2);
  if (!info)
    return CUDA_ERROR_NOT_FOUND;
  size_t f = 0, t = 0;
  CUresult rc = info(&f, &t);
  if (rc == CUDA_SUCCESS)
    *free_bytes = f;
  return rc;
}

CUresult gmt__um_alloc(CUdeviceptr *p, uint64_t bytes)
{
  __typeof__(&cuMemAllocManaged) alloc = GMT_REAL(cuMemAllocManaged);
  return alloc ? alloc(p, (size_t)bytes, CU_MEM_ATTACH_GLOBAL) : CUDA_ERROR_NOT_FOUND;
}

CUresult gmt__um_move(CUdeviceptr p, uint64_t bytes, int dev)
{
  __typeof__(&cuMemPrefetchAsync_v2) prefetch = GMT_REAL(cuMemPrefetchAsync_v2);
  __typeof__(&cuMemPrefetchAsync) prefetch_v1 = GMT_REAL(cuMemPrefetchAsync);
  __typeof__(&cuCtxSynchronize) sync = GMT_REAL(cuCtxSynchronize);
  if (!sync || (!prefetch && !prefetch_v1))
    return CUDA_ERROR_NOT_FOUND;
  CUresult rc;
  if (prefetch) { /* CUDA 12.2 and later */
    CUmemLocation loc = {.type = dev < 0 ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE,
                         .id = dev < 0 ? 0 : dev};
    rc = prefetch(p, (size_t)bytes, loc, 0, NULL);
  } else {
    rc = prefetch_v1(p, (size_t)bytes, dev < 0 ? CU_DEVICE_CPU : dev, NULL);
  }
  return rc == CUDA_SUCCESS ? sync() : rc;
}

CUresult gmt__um_free(CUdeviceptr p)
{
  __typeof__(&cuMemFree_v2) mem_free = GMT_REAL(cuMemFree_v2);
  __typeof__(&cuCtxSynchronize) sync = GMT_REAL(cuCtxSynchronize);
  if (!mem_free || !sync)
    return CUDA_ERROR_NOT_FOUND;
  CUresult rc = sync(); /* work queued on it may still run */
  return rc == CUDA_SUCCESS ? mem_free(p) : rc;
}
