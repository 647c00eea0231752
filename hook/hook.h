/* libgmthook internals shared by its files: the list of driver entry points
 * it wraps, how a wrapper reaches the real function, the per-process state
 * and the reporter. Nothing here is exported from the .so. */
#ifndef GMT_HOOK_H
#define GMT_HOOK_H

/* Old and new versions of an entry point (cuMemAlloc / cuMemAlloc_v2,
 * cuLaunchKernel / cuLaunchKernel_ptsz, cuGetProcAddress 4 / 5 args) each
 * keep their own real signature. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Every driver entry point the hook exports and swaps in for the real one.
 * The wrapper of each is a function of the same name in hook/ (entry.c,
 * alloc.c, launch.c); the real one is looked up by name in the driver, so
 * there is no table of versions to keep: whatever address the driver hands
 * out for any request is mapped back to the wrapper of the symbol at that
 * address. */
#define GMT_HOOK_SYMBOLS(X)                                                      \
  X(cuInit)                                                                      \
  X(cuGetProcAddress)                                                            \
  X(cuGetProcAddress_v2)                                                         \
  X(cuMemAlloc)                                                                  \
  X(cuMemAlloc_v2)                                                               \
  X(cuMemAllocPitch)                                                             \
  X(cuMemAllocPitch_v2)                                                          \
  X(cuMemAllocManaged)                                                           \
  X(cuMemAllocAsync)                                                             \
  X(cuMemAllocAsync_ptsz)                                                        \
  X(cuMemAllocFromPoolAsync)                                                     \
  X(cuMemAllocFromPoolAsync_ptsz)                                                \
  X(cuMemFree)                                                                   \
  X(cuMemFree_v2)                                                                \
  X(cuMemFreeAsync)                                                              \
  X(cuMemFreeAsync_ptsz)                                                         \
  X(cuMemCreate)                                                                 \
  X(cuMemRelease)                                                                \
  X(cuArrayCreate)                                                               \
  X(cuArrayCreate_v2)                                                            \
  X(cuArray3DCreate)                                                             \
  X(cuArray3DCreate_v2)                                                          \
  X(cuArrayDestroy)                                                              \
  X(cuMipmappedArrayCreate)                                                      \
  X(cuMipmappedArrayDestroy)                                                     \
  X(cuMemGetInfo)                                                                \
  X(cuMemGetInfo_v2)                                                             \
  X(cuMemPoolTrimTo)                                                             \
  X(cuMemPoolDestroy)                                                            \
  X(cuLaunchKernel)                                                              \
  X(cuLaunchKernel_ptsz)                                                         \
  X(cuLaunchKernelEx)                                                            \
  X(cuLaunchKernelEx_ptsz)                                                       \
  X(cuLaunchCooperativeKernel)                                                   \
  X(cuLaunchCooperativeKernel_ptsz)                                              \
  X(cuLaunchCooperativeKernelMultiDevice)                                        \
  X(cuGraphLaunch)                                                               \
  X(cuGraphLaunch_ptsz)

/* Entry points the hook calls for itself but does not wrap. */
#define GMT_HOOK_INTERNAL_SYMBOLS(X)                                             \
  X(cuCtxGetDevice)                                                              \
  X(cuCtxGetCurrent)                                                             \
  X(cuCtxSynchronize)                                                            \
  X(cuCtxPushCurrent_v2)                                                         \
  X(cuCtxPopCurrent_v2)                                                          \
  X(cuStreamGetCtx)                                                              \
  X(cuDeviceGetMemPool)                                                          \
  X(cuMemPoolGetAttribute)                                                       \
  X(cuStreamSynchronize)

enum {
#define GMT__SYM_ENUM(name) GMT_SYM_##name,
  GMT_HOOK_SYMBOLS(GMT__SYM_ENUM) GMT_HOOK_INTERNAL_SYMBOLS(GMT__SYM_ENUM)
#undef GMT__SYM_ENUM
  GMT_SYM_COUNT
};

/* ---- entry.c: the real driver ---- */

/* The real function for symbol id, loading the driver on first use; NULL
 * when the driver has no such symbol or could not be loaded. */
void *gmt__real(int id);

/* Declares `real`, the real function of `name` with its own type, and
 * returns CUDA_ERROR_NOT_FOUND from the wrapper when the driver lacks it. */
#define GMT_REAL(name)                                                           \
  __typeof__(&name) real = (__typeof__(&name))gmt__real(GMT_SYM_##name);         \
  if (!real)                                                                     \
  return CUDA_ERROR_NOT_FOUND

/* Nonzero while this thread is inside a wrapper that records something:
 * a driver that calls its own exported entry points then reaches the real
 * function without being counted twice (and without taking our locks
 * again). */
extern __thread int gmt__t_depth;

/* ---- debug output (GMT_HOOK_DEBUG=1) ---- */

extern int gmt__debug;
void gmt__say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define GMT_HOOK_DEBUG(...)                                                      \
  do {                                                                           \
    if (gmt__debug)                                                              \
      gmt__say(__VA_ARGS__);                                                     \
  } while (0)

/* ---- state.c: what this process holds ---- */

/* Where an address lives: device pointers and the handles of cuMemCreate,
 * CUarray and CUmipmappedArray are different spaces that may overlap. */
enum {
  GMT_NS_PTR = 0,
  GMT_NS_PHYSICAL = 1,
  GMT_NS_ARRAY = 2,
  GMT_NS_MIPMAP = 3,
};

/* One recorded allocation or free, as it goes into a report. */
typedef struct {
  uint64_t address;
  uint64_t size;
  int32_t device;
  uint8_t kind; /* Gmt__AllocKind */
  uint8_t free;
} gmt_hook_event_t;

#define GMT_HOOK_EVENT_CAP 4096

/* Kernel launches since start (or since fork in a child): the launch path
 * only ever does a relaxed increment of this. */
extern _Atomic uint64_t gmt__launches;

/* Records an allocation; returns 1 when it replaced one we thought live
 * (its free went unseen), described in *replaced (may be NULL). */
int gmt__state_alloc(int ns, uint64_t address, uint64_t size, int kind, int device,
                     gmt_hook_event_t *replaced);
/* Forgets an allocation; returns 1 and what it was in *freed (may be
 * NULL) when address was live, 0 when it was not ours. */
int gmt__state_free(int ns, uint64_t address, gmt_hook_event_t *freed);

/* The totals as one report carries them. */
typedef struct {
  uint64_t memory_used;
  uint64_t allocs;
  uint64_t frees;
  uint64_t launches;
  uint64_t dropped; /* events lost to the bounded queue, ever */
  uint64_t memory_reserved; /* held in the ledger (reserve.c; set by the reporter) */
} gmt_hook_totals_t;

void gmt__state_totals(gmt_hook_totals_t *t);

/* Reporter side. wait_change waits at most poll_ms for an alloc or free
 * and returns 1 when there is something to report (one happened, or the
 * launch counter is no longer last_launches). take copies the totals and
 * moves up to cap queued events into ev, returning how many; untake puts
 * back the events of a report that failed, ahead of newer ones, dropping
 * the oldest when the queue is full. */
int gmt__state_wait_change(uint64_t last_launches, int poll_ms);
size_t gmt__state_take(gmt_hook_totals_t *t, gmt_hook_event_t *ev, size_t cap);
void gmt__state_untake(const gmt_hook_event_t *ev, size_t n);

/* ---- report.c: the pod manager ---- */

/* Registers this process with its pod manager on the first call (per
 * process: again in a forked child). Cheap after the first call. */
void gmt__report_ensure(void);

/* ---- alloc.c ---- */

/* The device the calling thread's context is on, 0 without one. */
int gmt__current_device(void);

#endif
