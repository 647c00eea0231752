/* The real driver (see driver.h): found by GMT_REAL_LIBCUDA or as
 * libcuda.so.1, loaded at the first CUDA call, each entry point looked up
 * in it by name. */
#include "driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "log.h"

__thread int gmt__t_depth;

static const char *const g_names[GMT_SYM_COUNT] = {
#define GMT__SYM_NAME(name) #name,
    GMT_HOOK_SYMBOLS(GMT__SYM_NAME) GMT_HOOK_INTERNAL_SYMBOLS(GMT__SYM_NAME)
#undef GMT__SYM_NAME
};

const char *gmt__sym_name(int id)
{
  return id >= 0 && id < GMT_SYM_COUNT ? g_names[id] : "?";
}

/* ---- the real dlsym ---- */

static _Atomic(gmt_dlsym_fn) g_real_dlsym;

/* Not static: the x86-64 dlsym stub in entry.c calls it. */
GMT_NO_SANITIZE __attribute__((used)) gmt_dlsym_fn gmt__dlsym_next(void)
{
  gmt_dlsym_fn f = atomic_load_explicit(&g_real_dlsym, memory_order_acquire);
  if (f)
    return f;
  /* dlvsym is not interposed, so this cannot recurse. Two threads racing
   * here find the same answer. */
  static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
  for (size_t i = 0; !f && i < sizeof(versions) / sizeof(versions[0]); i++)
    f = (gmt_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
  if (!f) {
    static const char msg[] = "gmt: cannot find the real dlsym\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
    (void)w;
    abort();
  }
  atomic_store_explicit(&g_real_dlsym, f, memory_order_release);
  return f;
}

/* ---- loading ---- */

enum { DRV_UNLOADED = 0, DRV_READY = 1, DRV_FAILED = 2 };

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static _Atomic int g_driver;
static void *g_handle;
static void *g_real[GMT_SYM_COUNT];
/* Set on the thread that is loading the driver: a driver constructor that
 * calls back into dlsym or an entry point then passes through instead of
 * waiting on itself. */
static __thread int t_loading;

static const char *driver_path(void)
{
  const char *p = getenv("GMT_REAL_LIBCUDA");
  return p && *p ? p : "libcuda.so.1";
}

static void load_driver(void)
{
  t_loading = 1;
  const char *path = driver_path();
  g_handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!g_handle) {
    const char *err = dlerror();
    fprintf(stderr, "gmt: cannot load the CUDA driver %s (%s); CUDA calls will fail\n", path,
            err ? err : "?");
    atomic_store_explicit(&g_driver, DRV_FAILED, memory_order_release);
    t_loading = 0;
    return;
  }
  gmt_dlsym_fn rd = gmt__dlsym_next();
  size_t found = 0;
  for (int i = 0; i < GMT_SYM_COUNT; i++) {
    /* A handle's lookup searches the driver, not the global scope, so this
     * finds the driver's own definition and not our export of the name. */
    g_real[i] = rd(g_handle, g_names[i]);
    found += g_real[i] != NULL;
  }
  GMT_HOOK_DEBUG("loaded %s: %zu of %d entry points found", path, found, GMT_SYM_COUNT);
  atomic_store_explicit(&g_driver, DRV_READY, memory_order_release);
  t_loading = 0;
}

static int ensure_driver(void)
{
  int s = atomic_load_explicit(&g_driver, memory_order_acquire);
  if (s != DRV_UNLOADED)
    return s;
  if (t_loading)
    return DRV_UNLOADED;
  pthread_once(&g_once, load_driver);
  return atomic_load_explicit(&g_driver, memory_order_acquire);
}

void *gmt__real(int id)
{
  return ensure_driver() == DRV_READY ? g_real[id] : NULL;
}

int gmt__driver_ready(void)
{
  return atomic_load_explicit(&g_driver, memory_order_acquire) == DRV_READY;
}

/* True when the program has the driver mapped already. */
static int driver_present(void)
{
  void *h = dlopen(driver_path(), RTLD_NOW | RTLD_NOLOAD);
  if (!h)
    return 0;
  dlclose(h);
  return 1;
}

int gmt__driver_ready_if_mapped(void)
{
  if (gmt__driver_ready())
    return 1;
  return !t_loading && driver_present() && ensure_driver() == DRV_READY;
}

/* ---- the calling thread ---- */

int gmt__current_device(void)
{
  __typeof__(&cuCtxGetDevice) get = GMT_REAL(cuCtxGetDevice);
  CUdevice d = 0;
  if (!get || get(&d) != CUDA_SUCCESS)
    return 0;
  return (int)d;
}

CUcontext gmt__current_ctx(void)
{
  __typeof__(&cuCtxGetCurrent) cur = GMT_REAL(cuCtxGetCurrent);
  CUcontext c = NULL;
  if (!cur || cur(&c) != CUDA_SUCCESS)
    return NULL;
  return c;
}

int gmt__ctx_enter(CUcontext ctx)
{
  __typeof__(&cuCtxPushCurrent_v2) push = GMT_REAL(cuCtxPushCurrent_v2);
  if (!ctx || gmt__current_ctx() == ctx)
    return 0;
  return push && push(ctx) == CUDA_SUCCESS ? 1 : -1;
}

void gmt__ctx_leave(int entered)
{
  __typeof__(&cuCtxPopCurrent_v2) pop = GMT_REAL(cuCtxPopCurrent_v2);
  CUcontext popped;
  if (entered == 1 && (!pop || pop(&popped) != CUDA_SUCCESS))
    GMT_HOOK_DEBUG("cannot pop a context pushed for the hook's own call");
}
