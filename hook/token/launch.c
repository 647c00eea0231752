/* Kernel launches: every driver entry point that starts work on a device.
 * This is the hot path of a training job (tens of thousands of launches a
 * second). A wrapper first passes the token gate (token.c: on its fast
 * path one coarse clock read against the device's token expiry), then does one
 * relaxed atomic increment of the launch counter: no lock, no signal, no
 * syscall. The reporter and the token's idle thread notice the counter
 * move on their own. Memory copies are not gated by the token; launches,
 * copies and memsets all pass the swap gate (swap.h), which outside
 * mode=swap is one relaxed atomic load. */
#include "counters.h"
#include "driver.h"
#include "frame.h"
#include "queue.h"
#include "swap.h"
#include "token.h"

static inline void count(uint64_t n)
{
  atomic_fetch_add_explicit(&gmt__launches, n, memory_order_relaxed);
}

/* What a launch runs, for the queue bound's estimate of its GPU time
 * (queue.h): the kernel and its grid's size (one kernel serves shapes of
 * very different costs). */
static inline uint64_t kernel_key(CUfunction f, unsigned int x, unsigned int y, unsigned int z)
{
  return (uint64_t)(uintptr_t)f ^ ((uint64_t)x * y * z * 0x9E3779B97F4A7C15ull);
}

/* After the token gate (which fails the launch on a GPU the pod may not
 * use: devices=, token.h), the swap gate (swap.h): a mode=swap process's
 * memory is brought back, and held there across the launch. */
#define GMT_LAUNCH_BODY(name, stream, key, ...)                                                    \
  GMT_FRAME(name);                                                                                 \
  CUresult rc = gmt__token_check();                                                                \
  if (rc != CUDA_SUCCESS)                                                                          \
    return rc;                                                                                     \
  int held;                                                                                        \
  rc = gmt__swap_enter(&held, gmt__token_gate);                                                    \
  if (rc != CUDA_SUCCESS)                                                                          \
    return rc;                                                                                     \
  rc = real(__VA_ARGS__);                                                                          \
  gmt__swap_leave(held);                                                                           \
  if (rc == CUDA_SUCCESS) {                                                                        \
    count(1);                                                                                      \
    gmt__queue_after(stream, key);                                                                 \
  }                                                                                                \
  return rc

/* A stream's synchronize: a latency process's request has its answer (an
 * inference call's .item() ends in one), so the bell it rang is hushed
 * now rather than when its idle thread next looks (bell.h). */
#define GMT_SYNC_BODY(name, ...)                                                                   \
  GMT_FRAME(name);                                                                                 \
  gmt__token_syncing();                                                                            \
  CUresult rc = real(__VA_ARGS__);                                                                 \
  if (rc == CUDA_SUCCESS)                                                                          \
    gmt__token_synced();                                                                           \
  return rc

CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream s);

GMT_EXPORT CUresult cuStreamSynchronize(CUstream s)
{
  GMT_SYNC_BODY(cuStreamSynchronize, s);
}

GMT_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s)
{
  GMT_SYNC_BODY(cuStreamSynchronize_ptsz, s);
}

GMT_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                   unsigned int gridDimZ, unsigned int blockDimX,
                                   unsigned int blockDimY, unsigned int blockDimZ,
                                   unsigned int sharedMemBytes, CUstream hStream,
                                   void **kernelParams, void **extra)
{
  GMT_LAUNCH_BODY(cuLaunchKernel, hStream, kernel_key(f, gridDimX, gridDimY, gridDimZ), f, gridDimX,
                  gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,
                  kernelParams, extra);
}

GMT_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                        unsigned int gridDimZ, unsigned int blockDimX,
                                        unsigned int blockDimY, unsigned int blockDimZ,
                                        unsigned int sharedMemBytes, CUstream hStream,
                                        void **kernelParams, void **extra)
{
  GMT_LAUNCH_BODY(cuLaunchKernel_ptsz, hStream, kernel_key(f, gridDimX, gridDimY, gridDimZ), f,
                  gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
                  hStream, kernelParams, extra);
}

static inline uint64_t ex_key(const CUlaunchConfig *c, CUfunction f)
{
  return c ? kernel_key(f, c->gridDimX, c->gridDimY, c->gridDimZ) : kernel_key(f, 0, 0, 0);
}

GMT_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                                     void **kernelParams, void **extra)
{
  GMT_LAUNCH_BODY(cuLaunchKernelEx, config ? config->hStream : NULL, ex_key(config, f), config, f,
                  kernelParams, extra);
}

GMT_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                          void **kernelParams, void **extra)
{
  GMT_LAUNCH_BODY(cuLaunchKernelEx_ptsz, config ? config->hStream : NULL, ex_key(config, f), config,
                  f, kernelParams, extra);
}

GMT_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                              unsigned int gridDimY, unsigned int gridDimZ,
                                              unsigned int blockDimX, unsigned int blockDimY,
                                              unsigned int blockDimZ, unsigned int sharedMemBytes,
                                              CUstream hStream, void **kernelParams)
{
  GMT_LAUNCH_BODY(cuLaunchCooperativeKernel, hStream, kernel_key(f, gridDimX, gridDimY, gridDimZ),
                  f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
                  hStream, kernelParams);
}

GMT_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                                   unsigned int gridDimY, unsigned int gridDimZ,
                                                   unsigned int blockDimX, unsigned int blockDimY,
                                                   unsigned int blockDimZ,
                                                   unsigned int sharedMemBytes, CUstream hStream,
                                                   void **kernelParams)
{
  GMT_LAUNCH_BODY(cuLaunchCooperativeKernel_ptsz, hStream,
                  kernel_key(f, gridDimX, gridDimY, gridDimZ), f, gridDimX, gridDimY, gridDimZ,
                  blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams);
}

/* One kernel on each of numDevices devices: that many launches, each
 * device gated on its own. */
GMT_EXPORT CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *launchParamsList,
                                                         unsigned int numDevices,
                                                         unsigned int flags)
{
  GMT_FRAME(cuLaunchCooperativeKernelMultiDevice);
  for (unsigned int i = 0; launchParamsList && i < numDevices; i++) {
    CUresult g = gmt__token_check_stream(launchParamsList[i].hStream);
    if (g != CUDA_SUCCESS)
      return g;
  }
  int held;
  CUresult rc = gmt__swap_enter(&held, gmt__token_gate);
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = real(launchParamsList, numDevices, flags);
  gmt__swap_leave(held);
  if (rc == CUDA_SUCCESS)
    count(numDevices);
  return rc;
}

/* A graph launch counts once, whatever the graph holds. */
GMT_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
  GMT_LAUNCH_BODY(cuGraphLaunch, hStream, (uint64_t)(uintptr_t)hGraphExec, hGraphExec, hStream);
}

GMT_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
  GMT_LAUNCH_BODY(cuGraphLaunch_ptsz, hStream, (uint64_t)(uintptr_t)hGraphExec, hGraphExec,
                  hStream);
}
