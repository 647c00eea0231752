/* cuGetProcAddress of the fake driver. Like the real one it maps (base name,
 * requested CUDA version, flags) to the address of an exported versioned
 * symbol, so a hook that swaps returned pointers by address meets exactly
 * the routes it meets on a GPU. The table below is the one place that knows
 * which version of a name each symbol serves. */
#include "fakecuda.h"
#include "fakecuda_symbols.h"

#include <string.h>

struct sym {
  const char *name; /* base name asked for */
  int version;      /* first version this row serves */
  const char *sym;
  void *addr;
  int pt_version; /* first version of the per-thread-stream variant */
  const char *pt_sym;
  void *pt_addr;
};

/* Rows of one name are adjacent, by ascending version. */
#define S(n, v, s)                                                                                 \
  {                                                                                                \
#n, v, #s, (void *)&s, 0, NULL, NULL                                                           \
  }
#define P(n, v, s, pv, ps)                                                                         \
  {                                                                                                \
#n, v, #s, (void *)&s, pv, #ps, (void *)&ps                                                    \
  }

static const struct sym table[] = {
    S(cuInit, 2000, cuInit),
    S(cuDriverGetVersion, 2020, cuDriverGetVersion),
    S(cuGetErrorString, 6000, cuGetErrorString),
    S(cuGetErrorName, 6000, cuGetErrorName),
    S(cuGetProcAddress, 11030, cuGetProcAddress),
    S(cuGetProcAddress, 12000, cuGetProcAddress_v2),
    /* devices */
    S(cuDeviceGet, 2000, cuDeviceGet),
    S(cuDeviceGetCount, 2000, cuDeviceGetCount),
    S(cuDeviceGetName, 2000, cuDeviceGetName),
    S(cuDeviceGetUuid, 9020, cuDeviceGetUuid),
    S(cuDeviceGetUuid, 11040, cuDeviceGetUuid_v2),
    S(cuDeviceGetPCIBusId, 4000, cuDeviceGetPCIBusId),
    S(cuDeviceGetByPCIBusId, 4000, cuDeviceGetByPCIBusId),
    S(cuDeviceTotalMem, 2000, cuDeviceTotalMem),
    S(cuDeviceTotalMem, 3020, cuDeviceTotalMem_v2),
    S(cuDeviceGetAttribute, 2000, cuDeviceGetAttribute),
    S(cuDeviceComputeCapability, 2000, cuDeviceComputeCapability),
    S(cuDevicePrimaryCtxRetain, 7000, cuDevicePrimaryCtxRetain),
    S(cuDevicePrimaryCtxRelease, 7000, cuDevicePrimaryCtxRelease),
    S(cuDevicePrimaryCtxRelease, 11000, cuDevicePrimaryCtxRelease_v2),
    S(cuDevicePrimaryCtxGetState, 7000, cuDevicePrimaryCtxGetState),
    S(cuDevicePrimaryCtxSetFlags, 7000, cuDevicePrimaryCtxSetFlags),
    S(cuDevicePrimaryCtxSetFlags, 11000, cuDevicePrimaryCtxSetFlags_v2),
    S(cuDevicePrimaryCtxReset, 7000, cuDevicePrimaryCtxReset),
    S(cuDevicePrimaryCtxReset, 11000, cuDevicePrimaryCtxReset_v2),
    /* contexts */
    S(cuCtxCreate, 2000, cuCtxCreate),
    S(cuCtxCreate, 3020, cuCtxCreate_v2),
    S(cuCtxCreate, 11040, cuCtxCreate_v3),
    S(cuCtxCreate, 12050, cuCtxCreate_v4),
    S(cuCtxDestroy, 2000, cuCtxDestroy),
    S(cuCtxDestroy, 4000, cuCtxDestroy_v2),
    S(cuCtxPushCurrent, 2000, cuCtxPushCurrent),
    S(cuCtxPushCurrent, 4000, cuCtxPushCurrent_v2),
    S(cuCtxPopCurrent, 2000, cuCtxPopCurrent),
    S(cuCtxPopCurrent, 4000, cuCtxPopCurrent_v2),
    S(cuCtxSetCurrent, 4000, cuCtxSetCurrent),
    S(cuCtxGetCurrent, 4000, cuCtxGetCurrent),
    S(cuCtxGetDevice, 2000, cuCtxGetDevice),
    S(cuCtxGetFlags, 7000, cuCtxGetFlags),
    S(cuCtxGetApiVersion, 3020, cuCtxGetApiVersion),
    S(cuCtxSynchronize, 2000, cuCtxSynchronize),
    S(cuCtxGetStreamPriorityRange, 5050, cuCtxGetStreamPriorityRange),
    /* device memory */
    S(cuMemAlloc, 2000, cuMemAlloc),
    S(cuMemAlloc, 3020, cuMemAlloc_v2),
    S(cuMemAllocPitch, 2000, cuMemAllocPitch),
    S(cuMemAllocPitch, 3020, cuMemAllocPitch_v2),
    S(cuMemFree, 2000, cuMemFree),
    S(cuMemFree, 3020, cuMemFree_v2),
    S(cuMemAllocManaged, 6000, cuMemAllocManaged),
    S(cuMemPrefetchAsync, 8000, cuMemPrefetchAsync),
    S(cuMemPrefetchAsync, 12020, cuMemPrefetchAsync_v2),
    S(cuMemGetAddressRange, 2000, cuMemGetAddressRange),
    S(cuMemGetAddressRange, 3020, cuMemGetAddressRange_v2),
    S(cuMemGetInfo, 2000, cuMemGetInfo),
    S(cuMemGetInfo, 3020, cuMemGetInfo_v2),
    S(cuArrayCreate, 2000, cuArrayCreate),
    S(cuArrayCreate, 3020, cuArrayCreate_v2),
    S(cuArray3DCreate, 2000, cuArray3DCreate),
    S(cuArray3DCreate, 3020, cuArray3DCreate_v2),
    S(cuArrayDestroy, 2000, cuArrayDestroy),
    S(cuMipmappedArrayCreate, 5000, cuMipmappedArrayCreate),
    S(cuMipmappedArrayDestroy, 5000, cuMipmappedArrayDestroy),
    /* host memory */
    S(cuMemAllocHost, 2000, cuMemAllocHost),
    S(cuMemAllocHost, 3020, cuMemAllocHost_v2),
    S(cuMemHostAlloc, 2020, cuMemHostAlloc),
    S(cuMemFreeHost, 2000, cuMemFreeHost),
    S(cuMemHostRegister, 4000, cuMemHostRegister),
    S(cuMemHostRegister, 6050, cuMemHostRegister_v2),
    S(cuMemHostUnregister, 4000, cuMemHostUnregister),
    S(cuMemHostGetFlags, 2030, cuMemHostGetFlags),
    /* copies and memsets */
    S(cuMemcpyHtoD, 2000, cuMemcpyHtoD),
    P(cuMemcpyHtoD, 3020, cuMemcpyHtoD_v2, 7000, cuMemcpyHtoD_v2_ptds),
    S(cuMemcpyDtoH, 2000, cuMemcpyDtoH),
    P(cuMemcpyDtoH, 3020, cuMemcpyDtoH_v2, 7000, cuMemcpyDtoH_v2_ptds),
    S(cuMemcpyDtoD, 2000, cuMemcpyDtoD),
    P(cuMemcpyDtoD, 3020, cuMemcpyDtoD_v2, 7000, cuMemcpyDtoD_v2_ptds),
    S(cuMemcpyHtoDAsync, 2000, cuMemcpyHtoDAsync),
    P(cuMemcpyHtoDAsync, 3020, cuMemcpyHtoDAsync_v2, 7000, cuMemcpyHtoDAsync_v2_ptsz),
    S(cuMemcpyDtoHAsync, 2000, cuMemcpyDtoHAsync),
    P(cuMemcpyDtoHAsync, 3020, cuMemcpyDtoHAsync_v2, 7000, cuMemcpyDtoHAsync_v2_ptsz),
    S(cuMemcpyDtoDAsync, 3000, cuMemcpyDtoDAsync),
    P(cuMemcpyDtoDAsync, 3020, cuMemcpyDtoDAsync_v2, 7000, cuMemcpyDtoDAsync_v2_ptsz),
    P(cuMemcpy, 4000, cuMemcpy, 7000, cuMemcpy_ptds),
    P(cuMemcpyAsync, 4000, cuMemcpyAsync, 7000, cuMemcpyAsync_ptsz),
    P(cuMemcpy2D, 3020, cuMemcpy2D_v2, 7000, cuMemcpy2D_v2_ptds),
    P(cuMemcpy2DUnaligned, 3020, cuMemcpy2DUnaligned_v2, 7000, cuMemcpy2DUnaligned_v2_ptds),
    P(cuMemcpy2DAsync, 3020, cuMemcpy2DAsync_v2, 7000, cuMemcpy2DAsync_v2_ptsz),
    P(cuMemcpy3D, 3020, cuMemcpy3D_v2, 7000, cuMemcpy3D_v2_ptds),
    P(cuMemcpy3DAsync, 3020, cuMemcpy3DAsync_v2, 7000, cuMemcpy3DAsync_v2_ptsz),
    S(cuMemsetD8, 2000, cuMemsetD8),
    P(cuMemsetD8, 3020, cuMemsetD8_v2, 7000, cuMemsetD8_v2_ptds),
    S(cuMemsetD16, 3020, cuMemsetD16_v2),
    P(cuMemsetD32, 3020, cuMemsetD32_v2, 7000, cuMemsetD32_v2_ptds),
    P(cuMemsetD8Async, 3020, cuMemsetD8Async, 7000, cuMemsetD8Async_ptsz),
    P(cuMemsetD32Async, 3020, cuMemsetD32Async, 7000, cuMemsetD32Async_ptsz),
    /* stream-ordered allocation */
    P(cuMemAllocAsync, 11020, cuMemAllocAsync, 11020, cuMemAllocAsync_ptsz),
    P(cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync, 11020, cuMemAllocFromPoolAsync_ptsz),
    P(cuMemFreeAsync, 11020, cuMemFreeAsync, 11020, cuMemFreeAsync_ptsz),
    S(cuDeviceGetDefaultMemPool, 11020, cuDeviceGetDefaultMemPool),
    S(cuDeviceGetMemPool, 11020, cuDeviceGetMemPool),
    S(cuDeviceSetMemPool, 11020, cuDeviceSetMemPool),
    S(cuMemPoolCreate, 11020, cuMemPoolCreate),
    S(cuMemPoolDestroy, 11020, cuMemPoolDestroy),
    S(cuMemPoolTrimTo, 11020, cuMemPoolTrimTo),
    S(cuMemPoolGetAttribute, 11020, cuMemPoolGetAttribute),
    S(cuMemPoolSetAttribute, 11020, cuMemPoolSetAttribute),
    /* virtual memory management */
    S(cuMemCreate, 10020, cuMemCreate),
    S(cuMemRelease, 10020, cuMemRelease),
    S(cuMemAddressReserve, 10020, cuMemAddressReserve),
    S(cuMemAddressFree, 10020, cuMemAddressFree),
    S(cuMemMap, 10020, cuMemMap),
    S(cuMemUnmap, 10020, cuMemUnmap),
    S(cuMemSetAccess, 10020, cuMemSetAccess),
    S(cuMemGetAllocationGranularity, 10020, cuMemGetAllocationGranularity),
    S(cuMemGetAllocationPropertiesFromHandle, 10020, cuMemGetAllocationPropertiesFromHandle),
    S(cuMemGetAccess, 10020, cuMemGetAccess),
    S(cuMemExportToShareableHandle, 10020, cuMemExportToShareableHandle),
    S(cuMemRetainAllocationHandle, 11000, cuMemRetainAllocationHandle),
    /* streams and events */
    S(cuStreamCreate, 2000, cuStreamCreate),
    S(cuStreamCreateWithPriority, 5050, cuStreamCreateWithPriority),
    S(cuStreamDestroy, 2000, cuStreamDestroy),
    S(cuStreamDestroy, 4000, cuStreamDestroy_v2),
    P(cuStreamSynchronize, 2000, cuStreamSynchronize, 7000, cuStreamSynchronize_ptsz),
    P(cuStreamQuery, 2000, cuStreamQuery, 7000, cuStreamQuery_ptsz),
    P(cuStreamWaitEvent, 3020, cuStreamWaitEvent, 7000, cuStreamWaitEvent_ptsz),
    S(cuEventCreate, 2000, cuEventCreate),
    P(cuEventRecord, 2000, cuEventRecord, 7000, cuEventRecord_ptsz),
    P(cuEventRecordWithFlags, 11010, cuEventRecordWithFlags, 11010, cuEventRecordWithFlags_ptsz),
    S(cuEventSynchronize, 2000, cuEventSynchronize),
    S(cuEventQuery, 2000, cuEventQuery),
    S(cuEventDestroy, 2000, cuEventDestroy),
    S(cuEventDestroy, 4000, cuEventDestroy_v2),
    S(cuEventElapsedTime, 2000, cuEventElapsedTime),
    S(cuEventElapsedTime, 12080, cuEventElapsedTime_v2),
    /* modules and kernels */
    S(cuModuleLoad, 2000, cuModuleLoad),
    S(cuModuleLoadData, 2000, cuModuleLoadData),
    S(cuModuleLoadDataEx, 2010, cuModuleLoadDataEx),
    S(cuModuleLoadFatBinary, 2000, cuModuleLoadFatBinary),
    S(cuModuleGetFunction, 2000, cuModuleGetFunction),
    S(cuModuleUnload, 2000, cuModuleUnload),
    S(cuLibraryLoadData, 12000, cuLibraryLoadData),
    S(cuLibraryUnload, 12000, cuLibraryUnload),
    S(cuLibraryGetKernel, 12000, cuLibraryGetKernel),
    S(cuKernelGetFunction, 12000, cuKernelGetFunction),
    S(cuFuncGetAttribute, 2020, cuFuncGetAttribute),
    S(cuFuncSetAttribute, 9000, cuFuncSetAttribute),
    /* launches */
    P(cuLaunchKernel, 4000, cuLaunchKernel, 7000, cuLaunchKernel_ptsz),
    P(cuLaunchKernelEx, 11060, cuLaunchKernelEx, 11060, cuLaunchKernelEx_ptsz),
    P(cuLaunchCooperativeKernel, 9000, cuLaunchCooperativeKernel, 9000,
      cuLaunchCooperativeKernel_ptsz),
    S(cuLaunchCooperativeKernelMultiDevice, 9000, cuLaunchCooperativeKernelMultiDevice),
    P(cuLaunchHostFunc, 10000, cuLaunchHostFunc, 10000, cuLaunchHostFunc_ptsz),
    /* graphs */
    S(cuGraphCreate, 10000, cuGraphCreate),
    S(cuGraphAddKernelNode, 10000, cuGraphAddKernelNode),
    S(cuGraphAddKernelNode, 12000, cuGraphAddKernelNode_v2),
    S(cuGraphInstantiate, 11000, cuGraphInstantiate_v2),
    S(cuGraphInstantiateWithFlags, 11040, cuGraphInstantiateWithFlags),
    P(cuGraphLaunch, 10000, cuGraphLaunch, 10000, cuGraphLaunch_ptsz),
    S(cuGraphExecDestroy, 10000, cuGraphExecDestroy),
    S(cuGraphDestroy, 10000, cuGraphDestroy),
};

#define NTABLE (sizeof table / sizeof table[0])

int gmt_fake_lookup(const char *name, int version, unsigned long long flags, const char **sym_name,
                    void **addr)
{
  if (sym_name)
    *sym_name = NULL;
  if (addr)
    *addr = NULL;
  if (!name)
    return CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  const struct sym *best = NULL;
  int known = 0;
  for (size_t i = 0; i < NTABLE; i++) {
    if (strcmp(table[i].name, name) != 0)
      continue;
    known = 1;
    if (table[i].version <= version)
      best = &table[i];
  }
  if (!known)
    return CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (!best)
    return CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
  /* Per-thread default stream only when asked for and when that variant
   * existed at the requested version; otherwise the legacy symbol. */
  int pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best->pt_sym &&
           version >= best->pt_version;
  if (sym_name)
    *sym_name = pt ? best->pt_sym : best->sym;
  if (addr)
    *addr = pt ? best->pt_addr : best->addr;
  return CU_GET_PROC_ADDRESS_SUCCESS;
}

const char *gmt_fake_symbol_at(size_t i, const char **base, int *version, const char **pt_sym)
{
  if (i >= NTABLE)
    return NULL;
  if (base)
    *base = table[i].name;
  if (version)
    *version = table[i].version;
  if (pt_sym)
    *pt_sym = table[i].pt_sym;
  return table[i].sym;
}

static CUresult get_proc(const char *symbol, void **pfn, int version, cuuint64_t flags,
                         CUdriverProcAddressQueryResult *status)
{
  if (!symbol || !pfn)
    return CUDA_ERROR_INVALID_VALUE;
  /* Only the two stream flags exist; anything else is a bad argument. */
  if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                            CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
    return CUDA_ERROR_INVALID_VALUE;
  const char *sym = NULL;
  int st = gmt_fake_lookup(symbol, version, flags, &sym, pfn);
  if (status)
    *status = (CUdriverProcAddressQueryResult)st;
  gmt__fake_log("getProcAddress %s v%d flags %llu -> %s", symbol, version,
                (unsigned long long)flags, sym ? sym : "(none)");
  return st == CU_GET_PROC_ADDRESS_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
  GMT_FAKE_RET(get_proc(symbol, pfn, cudaVersion, flags, symbolStatus));
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
  GMT_FAKE_RET(get_proc(symbol, pfn, cudaVersion, flags, NULL));
}
