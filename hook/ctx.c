/* Contexts that go: cuCtxDestroy, and the primary context's release and
 * reset. Pinned blocks and staging buffers belong to a context and die
 * with it, so the modules that keep them let them go first (hostpin.c's
 * pool, stage.c), and forget what went with it after. */
#include "driver.h"
#include "hostpin.h"
#include "stage.h"

#define CTX_TEARDOWN(name, arg_t)                                                                  \
  GMT_EXPORT CUresult name(arg_t a)                                                                \
  {                                                                                                \
    GMT_REAL(name);                                                                                \
    if (gmt__t_depth)                                                                              \
      return real(a);                                                                              \
    gmt__stage_ctx_going();                                                                        \
    gmt__hostpin_ctx_going();                                                                      \
    gmt__t_depth++;                                                                                \
    CUresult rc = real(a);                                                                         \
    gmt__t_depth--;                                                                                \
    gmt__hostpin_ctx_gone();                                                                       \
    return rc;                                                                                     \
  }

CTX_TEARDOWN(cuCtxDestroy, CUcontext)
CTX_TEARDOWN(cuCtxDestroy_v2, CUcontext)
CTX_TEARDOWN(cuDevicePrimaryCtxRelease, CUdevice)
CTX_TEARDOWN(cuDevicePrimaryCtxRelease_v2, CUdevice)
CTX_TEARDOWN(cuDevicePrimaryCtxReset, CUdevice)
CTX_TEARDOWN(cuDevicePrimaryCtxReset_v2, CUdevice)
