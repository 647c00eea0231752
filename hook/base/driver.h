/* The real CUDA driver, as the hook's wrappers reach it: the list of entry
 * points the hook wraps or calls, loading the driver (lazily: a process
 * that never touches CUDA never loads it), the real function of each, and
 * what a wrapper needs to know about the calling thread. */
#ifndef GMT_HOOK_DRIVER_H
#define GMT_HOOK_DRIVER_H

/* Old and new versions of an entry point (cuMemAlloc / cuMemAlloc_v2,
 * cuLaunchKernel / cuLaunchKernel_ptsz, cuGetProcAddress 4 / 5 args) each
 * keep their own real signature. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <stddef.h>
#include <stdint.h>

/* Every driver entry point the hook exports and swaps in for the real one.
 * The wrapper of each is a function of the same name in hook/ (entry.c,
 * alloc.c, hostpin.c, ctx.c, copy.c, memops.c, launch.c), written in the
 * one frame of frame.h; the real one is looked up by name in the
 * driver, so there is no table of versions to keep: whatever address the driver hands out for any
 * request is mapped back to the wrapper of the symbol at that address. */
#define GMT_HOOK_SYMBOLS(X)                                                                        \
  X(cuInit)                                                                                        \
  X(cuGetProcAddress)                                                                              \
  X(cuGetProcAddress_v2)                                                                           \
  X(cuMemAlloc)                                                                                    \
  X(cuMemAlloc_v2)                                                                                 \
  X(cuMemAllocPitch)                                                                               \
  X(cuMemAllocPitch_v2)                                                                            \
  X(cuMemAllocManaged)                                                                             \
  X(cuMemAllocAsync)                                                                               \
  X(cuMemAllocAsync_ptsz)                                                                          \
  X(cuMemAllocFromPoolAsync)                                                                       \
  X(cuMemAllocFromPoolAsync_ptsz)                                                                  \
  X(cuMemFree)                                                                                     \
  X(cuMemFree_v2)                                                                                  \
  X(cuMemFreeAsync)                                                                                \
  X(cuMemFreeAsync_ptsz)                                                                           \
  X(cuMemCreate)                                                                                   \
  X(cuMemRelease)                                                                                  \
  X(cuMemMap)                                                                                      \
  X(cuMemUnmap)                                                                                    \
  X(cuMemSetAccess)                                                                                \
  X(cuMemGetAccess)                                                                                \
  X(cuMemAddressFree)                                                                              \
  X(cuMemRetainAllocationHandle)                                                                   \
  X(cuMemGetAllocationPropertiesFromHandle)                                                        \
  X(cuMemExportToShareableHandle)                                                                  \
  X(cuArrayCreate)                                                                                 \
  X(cuArrayCreate_v2)                                                                              \
  X(cuArray3DCreate)                                                                               \
  X(cuArray3DCreate_v2)                                                                            \
  X(cuArrayDestroy)                                                                                \
  X(cuMipmappedArrayCreate)                                                                        \
  X(cuMipmappedArrayDestroy)                                                                       \
  X(cuMemGetInfo)                                                                                  \
  X(cuMemGetInfo_v2)                                                                               \
  X(cuMemPoolTrimTo)                                                                               \
  X(cuMemPoolDestroy)                                                                              \
  X(cuMemAllocHost)                                                                                \
  X(cuMemAllocHost_v2)                                                                             \
  X(cuMemHostAlloc)                                                                                \
  X(cuMemFreeHost)                                                                                 \
  X(cuMemHostRegister)                                                                             \
  X(cuMemHostRegister_v2)                                                                          \
  X(cuMemHostUnregister)                                                                           \
  X(cuCtxDestroy)                                                                                  \
  X(cuCtxDestroy_v2)                                                                               \
  X(cuDevicePrimaryCtxRelease)                                                                     \
  X(cuDevicePrimaryCtxRelease_v2)                                                                  \
  X(cuDevicePrimaryCtxReset)                                                                       \
  X(cuDevicePrimaryCtxReset_v2)                                                                    \
  X(cuMemcpyHtoD_v2)                                                                               \
  X(cuMemcpyHtoD_v2_ptds)                                                                          \
  X(cuMemcpyDtoH_v2)                                                                               \
  X(cuMemcpyDtoH_v2_ptds)                                                                          \
  X(cuMemcpyHtoDAsync_v2)                                                                          \
  X(cuMemcpyHtoDAsync_v2_ptsz)                                                                     \
  X(cuMemcpyDtoHAsync_v2)                                                                          \
  X(cuMemcpyDtoHAsync_v2_ptsz)                                                                     \
  X(cuMemcpy)                                                                                      \
  X(cuMemcpy_ptds)                                                                                 \
  X(cuMemcpyAsync)                                                                                 \
  X(cuMemcpyAsync_ptsz)                                                                            \
  X(cuMemcpyHtoD)                                                                                  \
  X(cuMemcpyDtoH)                                                                                  \
  X(cuMemcpyDtoD)                                                                                  \
  X(cuMemcpyDtoD_v2)                                                                               \
  X(cuMemcpyDtoD_v2_ptds)                                                                          \
  X(cuMemcpyHtoDAsync)                                                                             \
  X(cuMemcpyDtoHAsync)                                                                             \
  X(cuMemcpyDtoDAsync)                                                                             \
  X(cuMemcpyDtoDAsync_v2)                                                                          \
  X(cuMemcpyDtoDAsync_v2_ptsz)                                                                     \
  X(cuMemcpyDtoA)                                                                                  \
  X(cuMemcpyDtoA_v2)                                                                               \
  X(cuMemcpyDtoA_v2_ptds)                                                                          \
  X(cuMemcpyAtoD)                                                                                  \
  X(cuMemcpyAtoD_v2)                                                                               \
  X(cuMemcpyAtoD_v2_ptds)                                                                          \
  X(cuMemcpy2D)                                                                                    \
  X(cuMemcpy2DUnaligned)                                                                           \
  X(cuMemcpy2D_v2)                                                                                 \
  X(cuMemcpy2D_v2_ptds)                                                                            \
  X(cuMemcpy2DUnaligned_v2)                                                                        \
  X(cuMemcpy2DUnaligned_v2_ptds)                                                                   \
  X(cuMemcpy2DAsync)                                                                               \
  X(cuMemcpy2DAsync_v2)                                                                            \
  X(cuMemcpy2DAsync_v2_ptsz)                                                                       \
  X(cuMemcpy3D)                                                                                    \
  X(cuMemcpy3D_v2)                                                                                 \
  X(cuMemcpy3D_v2_ptds)                                                                            \
  X(cuMemcpy3DAsync)                                                                               \
  X(cuMemcpy3DAsync_v2)                                                                            \
  X(cuMemcpy3DAsync_v2_ptsz)                                                                       \
  X(cuMemcpyPeer)                                                                                  \
  X(cuMemcpyPeer_ptds)                                                                             \
  X(cuMemcpyPeerAsync)                                                                             \
  X(cuMemcpyPeerAsync_ptsz)                                                                        \
  X(cuMemcpy3DPeer)                                                                                \
  X(cuMemcpy3DPeer_ptds)                                                                           \
  X(cuMemcpy3DPeerAsync)                                                                           \
  X(cuMemcpy3DPeerAsync_ptsz)                                                                      \
  X(cuMemcpyBatchAsync_v2)                                                                         \
  X(cuMemcpyBatchAsync_v2_ptsz)                                                                    \
  X(cuMemcpy3DBatchAsync_v2)                                                                       \
  X(cuMemcpy3DBatchAsync_v2_ptsz)                                                                  \
  X(cuMemsetD8)                                                                                    \
  X(cuMemsetD8_v2)                                                                                 \
  X(cuMemsetD8_v2_ptds)                                                                            \
  X(cuMemsetD2D8)                                                                                  \
  X(cuMemsetD2D8_v2)                                                                               \
  X(cuMemsetD2D8_v2_ptds)                                                                          \
  X(cuMemsetD8Async)                                                                               \
  X(cuMemsetD8Async_ptsz)                                                                          \
  X(cuMemsetD2D8Async)                                                                             \
  X(cuMemsetD2D8Async_ptsz)                                                                        \
  X(cuMemsetD16)                                                                                   \
  X(cuMemsetD16_v2)                                                                                \
  X(cuMemsetD16_v2_ptds)                                                                           \
  X(cuMemsetD2D16)                                                                                 \
  X(cuMemsetD2D16_v2)                                                                              \
  X(cuMemsetD2D16_v2_ptds)                                                                         \
  X(cuMemsetD16Async)                                                                              \
  X(cuMemsetD16Async_ptsz)                                                                         \
  X(cuMemsetD2D16Async)                                                                            \
  X(cuMemsetD2D16Async_ptsz)                                                                       \
  X(cuMemsetD32)                                                                                   \
  X(cuMemsetD32_v2)                                                                                \
  X(cuMemsetD32_v2_ptds)                                                                           \
  X(cuMemsetD2D32)                                                                                 \
  X(cuMemsetD2D32_v2)                                                                              \
  X(cuMemsetD2D32_v2_ptds)                                                                         \
  X(cuMemsetD32Async)                                                                              \
  X(cuMemsetD32Async_ptsz)                                                                         \
  X(cuMemsetD2D32Async)                                                                            \
  X(cuMemsetD2D32Async_ptsz)                                                                       \
  X(cuLaunchKernel)                                                                                \
  X(cuLaunchKernel_ptsz)                                                                           \
  X(cuLaunchKernelEx)                                                                              \
  X(cuLaunchKernelEx_ptsz)                                                                         \
  X(cuLaunchCooperativeKernel)                                                                     \
  X(cuLaunchCooperativeKernel_ptsz)                                                                \
  X(cuLaunchCooperativeKernelMultiDevice)                                                          \
  X(cuGraphLaunch)                                                                                 \
  X(cuGraphLaunch_ptsz)                                                                            \
  X(cuStreamSynchronize)                                                                           \
  X(cuStreamSynchronize_ptsz)

/* Entry points the hook calls for itself but does not wrap. */
#define GMT_HOOK_INTERNAL_SYMBOLS(X)                                                               \
  X(cuCtxGetDevice)                                                                                \
  X(cuCtxGetCurrent)                                                                               \
  X(cuCtxSynchronize)                                                                              \
  X(cuCtxPushCurrent_v2)                                                                           \
  X(cuCtxPopCurrent_v2)                                                                            \
  X(cuStreamGetCtx)                                                                                \
  X(cuDeviceGetMemPool)                                                                            \
  X(cuMemPoolGetAttribute)                                                                         \
  X(cuDeviceGet)                                                                                   \
  X(cuDeviceGetCount)                                                                              \
  X(cuDeviceGetPCIBusId)                                                                           \
  X(cuMemHostGetFlags)                                                                             \
  X(cuMemGetAddressRange_v2)                                                                       \
  X(cuEventCreate)                                                                                 \
  X(cuEventDestroy_v2)                                                                             \
  X(cuEventRecord)                                                                                 \
  X(cuEventRecord_ptsz)                                                                            \
  X(cuEventSynchronize)                                                                            \
  X(cuEventQuery)                                                                                  \
  X(cuEventElapsedTime_v2)                                                                         \
  X(cuStreamIsCapturing)                                                                           \
  X(cuMemGetAllocationGranularity)                                                                 \
  X(cuMemAddressReserve)                                                                           \
  X(cuMemPrefetchAsync)                                                                            \
  X(cuMemPrefetchAsync_v2)                                                                         \
  X(cuDevicePrimaryCtxGetState)                                                                    \
  X(cuDevicePrimaryCtxRetain)

enum {
#define GMT__SYM_ENUM(name) GMT_SYM_##name,
  GMT_HOOK_SYMBOLS(GMT__SYM_ENUM) GMT_HOOK_INTERNAL_SYMBOLS(GMT__SYM_ENUM)
#undef GMT__SYM_ENUM
      GMT_SYM_COUNT
};

/* A wrapper leaves the .so under the driver's name. */
#define GMT_EXPORT __attribute__((visibility("default")))

/* The real function for symbol id, loading the driver on first use; NULL
 * when the driver has no such symbol or could not be loaded. */
void *gmt__real(int id);

/* The real function of `name` with its own type, loading the driver on
 * first use; NULL when the driver lacks it. The one lookup by name: a
 * wrapper opens with it through GMT_FRAME (frame.h), the hook's own calls
 * use it as is. */
#define GMT_REAL(name) ((__typeof__(&name))gmt__real(GMT_SYM_##name))

/* The name of symbol id ("cuMemAlloc_v2"). */
const char *gmt__sym_name(int id);

/* 1 once the driver is loaded; never loads it. */
int gmt__driver_ready(void);

/* For dlsym: 1 when the driver is loaded, loading it first when the
 * program has it mapped already; 0 when the program has no driver (a
 * dlsym of a "cu" name there is not asking for an entry point: libcurl's
 * curl_* are "cu" too) or this thread is the one loading it (a driver
 * constructor calling back). */
int gmt__driver_ready_if_mapped(void);

/* Sanitizer runtimes look their interceptors up with dlsym(RTLD_NEXT)
 * while they start, before ASan's shadow memory exists: the dlsym path
 * must not be instrumented. */
#define GMT_NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))

/* The real dlsym (libc's, or the next interposer's). */
typedef void *(*gmt_dlsym_fn)(void *, const char *);
gmt_dlsym_fn gmt__dlsym_next(void);

/* Nonzero while this thread is inside a wrapper that records something:
 * a driver that calls its own exported entry points then reaches the real
 * function without being counted twice (and without taking our locks
 * again). */
extern __thread int gmt__t_depth;

/* The device the calling thread's context is on, 0 without one: a CUDA
 * ordinal, as this process sees its devices. */
int gmt__current_device(void);

/* The calling thread's current context, NULL without one. */
CUcontext gmt__current_ctx(void);

/* Makes ctx current for a call of the hook's own on a block or range that
 * belongs to it: 1 when it was pushed, 0 when it was current already,
 * -1 when it could not be. gmt__ctx_leave(what enter returned) undoes it. */
int gmt__ctx_enter(CUcontext ctx);
void gmt__ctx_leave(int entered);

#endif
