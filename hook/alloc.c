/* Device memory: every driver call that creates or frees it, and the
 * memory query. For now each wrapper passes the call through and, when the
 * driver says CUDA_SUCCESS, records what was made or freed (state.c);
 * reservations against the pod's quota will sit in front of the real call
 * here. */
#include "hook.h"

#include "gmt.pb-c.h"

#define GMT_EXPORT __attribute__((visibility("default")))

int gmt__current_device(void) {
  CUresult (*get)(CUdevice *) = (CUresult(*)(CUdevice *))gmt__real(GMT_SYM_cuCtxGetDevice);
  CUdevice d = 0;
  if (!get || get(&d) != CUDA_SUCCESS)
    return 0;
  return (int)d;
}

/* A wrapper that records: outermost on this thread only (a driver calling
 * its own exported entry points is one call, not two), and the process is
 * registered first (a forked child that never calls cuInit again). */
#define GMT_ENTER(...)                                                           \
  do {                                                                           \
    if (gmt__t_depth)                                                            \
      return real(__VA_ARGS__);                                                  \
    gmt__report_ensure();                                                        \
    gmt__t_depth++;                                                              \
  } while (0)
#define GMT_LEAVE() gmt__t_depth--

enum {
  KIND_DEVICE = GMT__ALLOC_KIND__ALLOC_KIND_DEVICE,
  KIND_MANAGED = GMT__ALLOC_KIND__ALLOC_KIND_MANAGED,
  KIND_ASYNC = GMT__ALLOC_KIND__ALLOC_KIND_ASYNC,
  KIND_PHYSICAL = GMT__ALLOC_KIND__ALLOC_KIND_PHYSICAL,
  KIND_ARRAY = GMT__ALLOC_KIND__ALLOC_KIND_ARRAY,
};

static void record_ptr(CUresult rc, const CUdeviceptr *dptr, uint64_t size, int kind) {
  if (rc == CUDA_SUCCESS && dptr && *dptr)
    gmt__state_alloc(GMT_NS_PTR, (uint64_t)*dptr, size, kind, gmt__current_device());
}

/* ---- linear allocations ---- */

GMT_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize) {
  GMT_REAL(cuMemAlloc);
  GMT_ENTER(dptr, bytesize);
  CUresult rc = real(dptr, bytesize);
  if (rc == CUDA_SUCCESS && dptr && *dptr)
    gmt__state_alloc(GMT_NS_PTR, *dptr, bytesize, KIND_DEVICE, gmt__current_device());
  GMT_LEAVE();
  return rc;
}

GMT_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  GMT_REAL(cuMemAlloc_v2);
  GMT_ENTER(dptr, bytesize);
  CUresult rc = real(dptr, bytesize);
  record_ptr(rc, dptr, bytesize, KIND_DEVICE);
  GMT_LEAVE();
  return rc;
}

GMT_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch,
                                    unsigned int WidthInBytes, unsigned int Height,
                                    unsigned int ElementSizeBytes) {
  GMT_REAL(cuMemAllocPitch);
  GMT_ENTER(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
  CUresult rc = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
  if (rc == CUDA_SUCCESS && dptr && *dptr && pPitch)
    gmt__state_alloc(GMT_NS_PTR, *dptr, (uint64_t)*pPitch * Height, KIND_DEVICE,
                     gmt__current_device());
  GMT_LEAVE();
  return rc;
}

GMT_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                       size_t Height, unsigned int ElementSizeBytes) {
  GMT_REAL(cuMemAllocPitch_v2);
  GMT_ENTER(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
  CUresult rc = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
  if (pPitch)
    record_ptr(rc, dptr, (uint64_t)*pPitch * Height, KIND_DEVICE);
  GMT_LEAVE();
  return rc;
}

GMT_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
  GMT_REAL(cuMemAllocManaged);
  GMT_ENTER(dptr, bytesize, flags);
  CUresult rc = real(dptr, bytesize, flags);
  record_ptr(rc, dptr, bytesize, KIND_MANAGED);
  GMT_LEAVE();
  return rc;
}

/* ---- stream-ordered allocations (recorded when enqueued) ---- */

GMT_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  GMT_REAL(cuMemAllocAsync);
  GMT_ENTER(dptr, bytesize, hStream);
  CUresult rc = real(dptr, bytesize, hStream);
  record_ptr(rc, dptr, bytesize, KIND_ASYNC);
  GMT_LEAVE();
  return rc;
}

GMT_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  GMT_REAL(cuMemAllocAsync_ptsz);
  GMT_ENTER(dptr, bytesize, hStream);
  CUresult rc = real(dptr, bytesize, hStream);
  record_ptr(rc, dptr, bytesize, KIND_ASYNC);
  GMT_LEAVE();
  return rc;
}

GMT_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
                                            CUmemoryPool pool, CUstream hStream) {
  GMT_REAL(cuMemAllocFromPoolAsync);
  GMT_ENTER(dptr, bytesize, pool, hStream);
  CUresult rc = real(dptr, bytesize, pool, hStream);
  record_ptr(rc, dptr, bytesize, KIND_ASYNC);
  GMT_LEAVE();
  return rc;
}

GMT_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                 CUmemoryPool pool, CUstream hStream) {
  GMT_REAL(cuMemAllocFromPoolAsync_ptsz);
  GMT_ENTER(dptr, bytesize, pool, hStream);
  CUresult rc = real(dptr, bytesize, pool, hStream);
  record_ptr(rc, dptr, bytesize, KIND_ASYNC);
  GMT_LEAVE();
  return rc;
}

/* ---- frees ---- */

/* cuMemFree may free what cuMemAllocAsync made and the other way round:
 * both look the address up in the one pointer space. */
#define GMT_FREE_BODY(name, ns, addr, ...)                                       \
  GMT_REAL(name);                                                                \
  GMT_ENTER(__VA_ARGS__);                                                        \
  CUresult rc = real(__VA_ARGS__);                                               \
  if (rc == CUDA_SUCCESS)                                                        \
    gmt__state_free(ns, (uint64_t)(addr));                                       \
  GMT_LEAVE();                                                                   \
  return rc

GMT_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr) {
  GMT_FREE_BODY(cuMemFree, GMT_NS_PTR, dptr, dptr);
}

GMT_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  GMT_FREE_BODY(cuMemFree_v2, GMT_NS_PTR, dptr, dptr);
}

GMT_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  GMT_FREE_BODY(cuMemFreeAsync, GMT_NS_PTR, dptr, dptr, hStream);
}

GMT_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  GMT_FREE_BODY(cuMemFreeAsync_ptsz, GMT_NS_PTR, dptr, dptr, hStream);
}

/* ---- virtual memory management (PyTorch expandable segments) ---- */

/* The physical allocation is what holds device memory; cuMemMap of it
 * adds none, so only cuMemCreate / cuMemRelease are counted. */
GMT_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                const CUmemAllocationProp *prop, unsigned long long flags) {
  GMT_REAL(cuMemCreate);
  GMT_ENTER(handle, size, prop, flags);
  CUresult rc = real(handle, size, prop, flags);
  if (rc == CUDA_SUCCESS && handle && prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
    gmt__state_alloc(GMT_NS_PHYSICAL, (uint64_t)*handle, size, KIND_PHYSICAL,
                     prop->location.id);
  GMT_LEAVE();
  return rc;
}

GMT_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  GMT_FREE_BODY(cuMemRelease, GMT_NS_PHYSICAL, handle, handle);
}

/* ---- arrays ---- */

/* Bytes of one element of one channel; formats that pack several channels
 * or planes are counted at their nominal sample size, close enough for
 * accounting. */
static uint64_t format_bytes(CUarray_format f) {
  switch (f) {
  case CU_AD_FORMAT_UNSIGNED_INT8:
  case CU_AD_FORMAT_SIGNED_INT8:
  case CU_AD_FORMAT_UNORM_INT8X1:
  case CU_AD_FORMAT_SNORM_INT8X1:
  case CU_AD_FORMAT_NV12:
    return 1;
  case CU_AD_FORMAT_UNSIGNED_INT16:
  case CU_AD_FORMAT_SIGNED_INT16:
  case CU_AD_FORMAT_HALF:
  case CU_AD_FORMAT_UNORM_INT8X2:
  case CU_AD_FORMAT_SNORM_INT8X2:
  case CU_AD_FORMAT_UNORM_INT16X1:
  case CU_AD_FORMAT_SNORM_INT16X1:
    return 2;
  case CU_AD_FORMAT_UNORM_INT16X4:
  case CU_AD_FORMAT_SNORM_INT16X4:
    return 8;
  default:
    return 4;
  }
}

static uint64_t array_bytes(uint64_t w, uint64_t h, uint64_t d, CUarray_format f,
                            unsigned int channels) {
  return (w ? w : 1) * (h ? h : 1) * (d ? d : 1) * (channels ? channels : 1) * format_bytes(f);
}

static void record_array(CUresult rc, const CUarray *ph, uint64_t bytes) {
  if (rc == CUDA_SUCCESS && ph && *ph)
    gmt__state_alloc(GMT_NS_ARRAY, (uint64_t)(uintptr_t)*ph, bytes, KIND_ARRAY,
                     gmt__current_device());
}

GMT_EXPORT CUresult cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *desc) {
  GMT_REAL(cuArrayCreate);
  GMT_ENTER(pHandle, desc);
  CUresult rc = real(pHandle, desc);
  if (desc)
    record_array(rc, pHandle, array_bytes(desc->Width, desc->Height, 1, desc->Format,
                                          desc->NumChannels));
  GMT_LEAVE();
  return rc;
}

GMT_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc) {
  GMT_REAL(cuArrayCreate_v2);
  GMT_ENTER(pHandle, desc);
  CUresult rc = real(pHandle, desc);
  if (desc)
    record_array(rc, pHandle, array_bytes(desc->Width, desc->Height, 1, desc->Format,
                                          desc->NumChannels));
  GMT_LEAVE();
  return rc;
}

GMT_EXPORT CUresult cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *desc) {
  GMT_REAL(cuArray3DCreate);
  GMT_ENTER(pHandle, desc);
  CUresult rc = real(pHandle, desc);
  if (desc)
    record_array(rc, pHandle, array_bytes(desc->Width, desc->Height, desc->Depth, desc->Format,
                                          desc->NumChannels));
  GMT_LEAVE();
  return rc;
}

GMT_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc) {
  GMT_REAL(cuArray3DCreate_v2);
  GMT_ENTER(pHandle, desc);
  CUresult rc = real(pHandle, desc);
  if (desc)
    record_array(rc, pHandle, array_bytes(desc->Width, desc->Height, desc->Depth, desc->Format,
                                          desc->NumChannels));
  GMT_LEAVE();
  return rc;
}

GMT_EXPORT CUresult cuArrayDestroy(CUarray hArray) {
  GMT_FREE_BODY(cuArrayDestroy, GMT_NS_ARRAY, (uintptr_t)hArray, hArray);
}

GMT_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                           const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                           unsigned int numMipmapLevels) {
  GMT_REAL(cuMipmappedArrayCreate);
  GMT_ENTER(pHandle, desc, numMipmapLevels);
  CUresult rc = real(pHandle, desc, numMipmapLevels);
  if (rc == CUDA_SUCCESS && pHandle && *pHandle && desc) {
    /* Each level halves every dimension that is still above one. */
    uint64_t bytes = 0, w = desc->Width, h = desc->Height, d = desc->Depth;
    for (unsigned int l = 0; l < (numMipmapLevels ? numMipmapLevels : 1); l++) {
      bytes += array_bytes(w, h, d, desc->Format, desc->NumChannels);
      w = w > 1 ? w / 2 : w;
      h = h > 1 ? h / 2 : h;
      d = d > 1 ? d / 2 : d;
    }
    gmt__state_alloc(GMT_NS_MIPMAP, (uint64_t)(uintptr_t)*pHandle, bytes, KIND_ARRAY,
                     gmt__current_device());
  }
  GMT_LEAVE();
  return rc;
}

GMT_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  GMT_FREE_BODY(cuMipmappedArrayDestroy, GMT_NS_MIPMAP, (uintptr_t)hMipmappedArray,
                hMipmappedArray);
}

/* ---- memory query ---- */

/* Passed through for now; the pod's view of memory replaces the answer in
 * a later change (callers size their pools from it, so it must stay
 * consistent with what allocations then get). */
GMT_EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total) {
  GMT_REAL(cuMemGetInfo);
  return real(free, total);
}

GMT_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
  GMT_REAL(cuMemGetInfo_v2);
  return real(free, total);
}
