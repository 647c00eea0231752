/* Contexts that go: cuCtxDestroy, and the primary context's release and
 * reset. Pinned blocks, staging buffers and mode=swap allocations belong
 * to a context and die with it, so the modules that keep them let them go
 * first (hostpin.c's pool, stage.c, swap.c), and forget what went with it
 * after. A primary context's release ends it only at its last reference:
 * its swap allocations go once the driver says it is no longer active. */
#include <stdatomic.h>

#include "driver.h"
#include "frame.h"
#include "hostpin.h"
#include "stage.h"
#include "swap.h"

/* The primary context of dev while it is active (retained and released
 * again, so its count is as it was); NULL when not, or not in swap mode. */
static CUcontext primary_of(CUdevice dev)
{
  if (!atomic_load_explicit(&gmt__swap_on, memory_order_relaxed))
    return NULL;
  __typeof__(&cuDevicePrimaryCtxGetState) state = GMT_REAL(cuDevicePrimaryCtxGetState);
  __typeof__(&cuDevicePrimaryCtxRetain) retain = GMT_REAL(cuDevicePrimaryCtxRetain);
  __typeof__(&cuDevicePrimaryCtxRelease_v2) release = GMT_REAL(cuDevicePrimaryCtxRelease_v2);
  unsigned int flags = 0;
  int active = 0;
  CUcontext c = NULL;
  if (!state || !retain || !release || state(dev, &flags, &active) != CUDA_SUCCESS || !active ||
      retain(&c, dev) != CUDA_SUCCESS)
    return NULL;
  release(dev);
  return c;
}

static int primary_active(CUdevice dev)
{
  __typeof__(&cuDevicePrimaryCtxGetState) state = GMT_REAL(cuDevicePrimaryCtxGetState);
  unsigned int flags = 0;
  int active = 1;
  if (state)
    state(dev, &flags, &active);
  return active;
}

/* Before the call: what goes for sure; the context to check after. */
static CUcontext going_ctx(CUcontext c)
{
  gmt__swap_ctx_going(c);
  return NULL;
}

static CUcontext going_reset(CUdevice dev)
{
  gmt__swap_ctx_going(primary_of(dev));
  return NULL;
}

static CUcontext going_release(CUdevice dev)
{
  return primary_of(dev);
}

static void gone_ctx(CUcontext c, CUcontext checked)
{
  (void)c;
  (void)checked;
}

static void gone_release(CUdevice dev, CUcontext primary)
{
  if (primary && !primary_active(dev))
    gmt__swap_ctx_going(primary);
}

#define CTX_TEARDOWN(name, arg_t, going, gone)                                                     \
  GMT_EXPORT CUresult name(arg_t a)                                                                \
  {                                                                                                \
    GMT_FRAME(name);                                                                               \
    GMT_FRAME_NESTED(a);                                                                           \
    gmt__stage_ctx_going();                                                                        \
    gmt__hostpin_ctx_going();                                                                      \
    CUcontext checked = going(a);                                                                  \
    GMT_FRAME_IN();                                                                                \
    CUresult rc = real(a);                                                                         \
    GMT_FRAME_OUT();                                                                               \
    gone(a, checked);                                                                              \
    gmt__hostpin_ctx_gone();                                                                       \
    return rc;                                                                                     \
  }

CTX_TEARDOWN(cuCtxDestroy, CUcontext, going_ctx, gone_ctx)
CTX_TEARDOWN(cuCtxDestroy_v2, CUcontext, going_ctx, gone_ctx)
CTX_TEARDOWN(cuDevicePrimaryCtxRelease, CUdevice, going_release, gone_release)
CTX_TEARDOWN(cuDevicePrimaryCtxRelease_v2, CUdevice, going_release, gone_release)
CTX_TEARDOWN(cuDevicePrimaryCtxReset, CUdevice, going_reset, gone_release)
CTX_TEARDOWN(cuDevicePrimaryCtxReset_v2, CUdevice, going_reset, gone_release)
