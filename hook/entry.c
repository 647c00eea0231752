/* How a CUDA call reaches the hook, by every route a program takes:
 *
 *  - a direct call or a link against libcuda: the .so exports the driver's
 *    names, and LD_PRELOAD puts them first;
 *  - dlsym(libcuda_handle, "cu..."): dlsym itself is interposed, asks the
 *    real dlsym and hands out our wrapper when the answer is a wrapped
 *    real entry point;
 *  - cuGetProcAddress / cuGetProcAddress_v2 (what the CUDA runtime uses for
 *    everything): the real one answers, and its pointer is swapped the
 *    same way. The driver picks the version for the (name, version, flags)
 *    request; we only map the address it chose to the wrapper of the
 *    symbol at that address, so signatures always match and there is no
 *    table of versions to keep up to date.
 *
 * This file also loads the real driver (lazily: a process that never
 * touches CUDA never loads it) and owns cuInit. */
#include "fork.h"
#include "hook.h"
#include "hookmap.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GMT_EXPORT __attribute__((visibility("default")))

int gmt__debug;
__thread int gmt__t_depth;
_Atomic uint64_t gmt__launches;

/* ---- the symbol list ---- */

static const char *const g_names[GMT_SYM_COUNT] = {
#define GMT__SYM_NAME(name) #name,
    GMT_HOOK_SYMBOLS(GMT__SYM_NAME) GMT_HOOK_INTERNAL_SYMBOLS(GMT__SYM_NAME)
#undef GMT__SYM_NAME
};

#define GMT__SYM_WRAPPER(name) (void *)&name,
static void *const g_wrappers[] = {GMT_HOOK_SYMBOLS(GMT__SYM_WRAPPER)};
#undef GMT__SYM_WRAPPER
#define GMT_NWRAPPED (sizeof(g_wrappers) / sizeof(g_wrappers[0]))

/* ---- debug output ---- */

void gmt__say(const char *fmt, ...) {
  char line[512];
  int n = snprintf(line, sizeof(line), "gmt[%d]: ", (int)getpid());
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (m < 0)
    m = 0;
  size_t len = (size_t)n + (size_t)m;
  if (len > sizeof(line) - 2)
    len = sizeof(line) - 2;
  line[len++] = '\n';
  /* One write, so lines of several threads and processes do not mix. */
  ssize_t w = write(STDERR_FILENO, line, len);
  (void)w;
}

static const char *wrapper_name(const void *w) {
  for (size_t i = 0; i < GMT_NWRAPPED; i++)
    if (g_wrappers[i] == w)
      return g_names[i];
  return "?";
}

/* ---- the real dlsym ---- */

typedef void *(*dlsym_fn)(void *, const char *);
static _Atomic(dlsym_fn) g_real_dlsym;

/* Sanitizer runtimes look their interceptors up with dlsym(RTLD_NEXT)
 * while they start, before ASan's shadow memory exists: the dlsym path
 * must not be instrumented. */
#define GMT_NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))

/* Not static: the x86-64 dlsym stub below calls it. */
GMT_NO_SANITIZE __attribute__((used)) dlsym_fn gmt__dlsym_next(void) {
  dlsym_fn f = atomic_load_explicit(&g_real_dlsym, memory_order_acquire);
  if (f)
    return f;
  /* dlvsym is not interposed, so this cannot recurse. Two threads racing
   * here find the same answer. */
  static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
  for (size_t i = 0; !f && i < sizeof(versions) / sizeof(versions[0]); i++)
    f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
  if (!f) {
    static const char msg[] = "gmt: cannot find the real dlsym\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
    (void)w;
    abort();
  }
  atomic_store_explicit(&g_real_dlsym, f, memory_order_release);
  return f;
}

/* ---- the real driver ---- */

enum { DRV_UNLOADED = 0, DRV_READY = 1, DRV_FAILED = 2 };

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static _Atomic int g_driver;
static void *g_handle;
static void *g_real[GMT_SYM_COUNT];
static gmt_hookmap_t g_map;
/* Set on the thread that is loading the driver: a driver constructor that
 * calls back into dlsym or an entry point then passes through instead of
 * waiting on itself. */
static __thread int t_loading;

static const char *driver_path(void) {
  const char *p = getenv("GMT_REAL_LIBCUDA");
  return p && *p ? p : "libcuda.so.1";
}

static void load_driver(void) {
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
  dlsym_fn rd = gmt__dlsym_next();
  size_t found = 0;
  for (int i = 0; i < GMT_SYM_COUNT; i++) {
    /* A handle's lookup searches the driver, not the global scope, so this
     * finds the driver's own definition and not our export of the name. */
    g_real[i] = rd(g_handle, g_names[i]);
    found += g_real[i] != NULL;
  }
  int rc = gmt__hookmap_init(&g_map, GMT_NWRAPPED);
  for (size_t i = 0; rc == 0 && i < GMT_NWRAPPED; i++) {
    int r = gmt__hookmap_add(&g_map, g_real[i], g_wrappers[i]);
    if (r == -EEXIST)
      GMT_HOOK_DEBUG("%s shares its address with another wrapped name", g_names[i]);
    else if (r < 0)
      rc = r;
  }
  if (rc < 0) {
    /* Without the map dlsym and cuGetProcAddress hand out real pointers:
     * the program still runs, only unseen. */
    fprintf(stderr, "gmt: cannot build the entry point map (%d); some calls go unseen\n", rc);
    gmt__hookmap_close(&g_map);
  }
  GMT_HOOK_DEBUG("loaded %s: %zu of %d entry points found", path, found, GMT_SYM_COUNT);
  atomic_store_explicit(&g_driver, DRV_READY, memory_order_release);
  t_loading = 0;
}

static int ensure_driver(void) {
  int s = atomic_load_explicit(&g_driver, memory_order_acquire);
  if (s != DRV_UNLOADED)
    return s;
  if (t_loading)
    return DRV_UNLOADED;
  pthread_once(&g_once, load_driver);
  return atomic_load_explicit(&g_driver, memory_order_acquire);
}

void *gmt__real(int id) {
  return ensure_driver() == DRV_READY ? g_real[id] : NULL;
}

/* ---- dlsym ---- */

/* True when the program has the driver mapped already; dlsym of a "cu"
 * name in a program without it cannot be asking for a driver entry
 * point (libcurl's curl_* are "cu" too), and must not load the driver. */
static int driver_present(void) {
  void *h = dlopen(driver_path(), RTLD_NOW | RTLD_NOLOAD);
  if (!h)
    return 0;
  dlclose(h);
  return 1;
}

GMT_NO_SANITIZE __attribute__((used)) void *gmt__dlsym_hooked(void *handle,
                                                              const char *name) {
  void *p = gmt__dlsym_next()(handle, name);
  if (!p || !name || name[0] != 'c' || name[1] != 'u')
    return p;
  if (atomic_load_explicit(&g_driver, memory_order_acquire) != DRV_READY) {
    if (t_loading || !driver_present() || ensure_driver() != DRV_READY)
      return p;
  }
  void *w = gmt__hookmap_swap(&g_map, p);
  if (w != p)
    GMT_HOOK_DEBUG("dlsym(%s) -> wrapper %s", name, wrapper_name(w));
  return w;
}

#if defined(__x86_64__)
/* dlsym(RTLD_NEXT, ...) is answered relative to the object that called
 * dlsym, found from the return address. For it we jump to the real dlsym
 * with the caller's return address still on the stack, so that an
 * interposer loaded after us still gets the definition after itself
 * rather than its own. Every other handle goes through the C code. */
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        ".p2align 4\n"
        "dlsym:\n"
        "  .cfi_startproc\n"
        "  endbr64\n"
        "  cmpq $-1, %rdi\n"
        "  jne gmt__dlsym_hooked\n"
        "  pushq %rdi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  pushq %rsi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  subq $8, %rsp\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  call gmt__dlsym_next\n"
        "  addq $8, %rsp\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  popq %rsi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  popq %rdi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  jmp *%rax\n"
        "  .cfi_endproc\n"
        ".size dlsym, .-dlsym\n");
#else
/* Elsewhere RTLD_NEXT is answered relative to libgmthook, which is right
 * for every object loaded before it (LD_PRELOAD puts it near the front). */
GMT_EXPORT void *dlsym(void *handle, const char *name) {
  return gmt__dlsym_hooked(handle, name);
}
#endif

/* ---- cuGetProcAddress ---- */

static void swap_proc(const char *symbol, void **pfn, int version, cuuint64_t flags) {
  void *p = *pfn;
  void *w = gmt__hookmap_swap(&g_map, p);
  *pfn = w;
  if (w != p)
    GMT_HOOK_DEBUG("cuGetProcAddress(%s, %d, %llu) -> wrapper %s", symbol ? symbol : "(null)",
                   version, (unsigned long long)flags, wrapper_name(w));
}

GMT_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                     cuuint64_t flags) {
  GMT_REAL(cuGetProcAddress);
  CUresult rc = real(symbol, pfn, cudaVersion, flags);
  if (rc == CUDA_SUCCESS && pfn && *pfn)
    swap_proc(symbol, pfn, cudaVersion, flags);
  return rc;
}

GMT_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                        cuuint64_t flags,
                                        CUdriverProcAddressQueryResult *symbolStatus) {
  GMT_REAL(cuGetProcAddress_v2);
  CUresult rc = real(symbol, pfn, cudaVersion, flags, symbolStatus);
  if (rc == CUDA_SUCCESS && pfn && *pfn)
    swap_proc(symbol, pfn, cudaVersion, flags);
  return rc;
}

/* ---- cuInit ---- */

GMT_EXPORT CUresult cuInit(unsigned int Flags) {
  GMT_REAL(cuInit);
  CUresult rc = real(Flags);
  GMT_HOOK_DEBUG("cuInit(%u) = %d", Flags, (int)rc);
  /* A process whose driver cannot start has nothing to report. */
  if (rc == CUDA_SUCCESS && !gmt__t_depth)
    gmt__report_ensure();
  return rc;
}

/* ---- load time ---- */

/* A child counts its own launches; the driver stays mapped and the address
 * map stays right. */
static void launches_child(void) {
  atomic_store_explicit(&gmt__launches, 0, memory_order_relaxed);
}

static const gmt_fork_ops_t g_fork_ops = {.child = launches_child};

/* Runs in every process the hook is preloaded into, CUDA or not: reads
 * one variable and nothing else. */
__attribute__((constructor)) static void hook_ctor(void) {
  const char *d = getenv("GMT_HOOK_DEBUG");
  gmt__debug = d && *d && strcmp(d, "0") != 0;
  gmt__fork_register(GMT_LOCK_COUNTERS, &g_fork_ops);
}

/* With GMT_HOOK_DEBUG, what this process did, for checking by hand without
 * a pod manager. */
__attribute__((destructor)) static void hook_dtor(void) {
  if (!gmt__debug || atomic_load_explicit(&g_driver, memory_order_acquire) != DRV_READY)
    return;
  gmt_hook_totals_t t;
  gmt__state_totals(&t);
  gmt__say("exit: memory_used=%llu launches=%llu allocs=%llu frees=%llu dropped=%llu",
           (unsigned long long)t.memory_used, (unsigned long long)t.launches,
           (unsigned long long)t.allocs, (unsigned long long)t.frees,
           (unsigned long long)t.dropped);
}
