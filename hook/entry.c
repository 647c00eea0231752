/* How a CUDA call reaches the hook, by every route a program takes:
 *
 *  - a direct call or a link against libcuda: the .so exports the driver's
 *    names, and LD_PRELOAD puts them first;
 *  - dlsym(libcuda_handle, "cu..."): dlsym itself is interposed, asks the
 *    real dlsym and hands out our wrapper when the answer is a wrapped
 *    real entry point;
 *  - dlsym(libnvidia-ml_handle or RTLD_DEFAULT, "nvmlDeviceGetMemoryInfo"
 *    or "_v2"): the same, through nvml.c (NVML's memory in the pod's view);
 *  - cuGetProcAddress / cuGetProcAddress_v2 (what the CUDA runtime uses for
 *    everything): the real one answers, and its pointer is swapped the
 *    same way. The driver picks the version for the (name, version, flags)
 *    request; we only map the address it chose to the wrapper of the
 *    symbol at that address, so signatures always match and there is no
 *    table of versions to keep up to date.
 *
 * This file sits on top of the hook: it names every wrapper (the map from
 * real entry points to wrappers) and owns cuInit, the first call after
 * which a process registers with its pod manager. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "devmap.h"
#include "driver.h"
#include "frame.h"
#include "hookmap.h"
#include "log.h"
#include "nvml.h"
#include "report.h"

#define GMT__SYM_WRAPPER(name) (void *)&name,
static void *const g_wrappers[] = {GMT_HOOK_SYMBOLS(GMT__SYM_WRAPPER)};
#undef GMT__SYM_WRAPPER
#define GMT_NWRAPPED (sizeof(g_wrappers) / sizeof(g_wrappers[0]))

static const char *wrapper_name(const void *w)
{
  for (size_t i = 0; i < GMT_NWRAPPED; i++)
    if (g_wrappers[i] == w)
      return gmt__sym_name((int)i);
  return "?";
}

/* ---- real entry point -> wrapper ---- */

static pthread_once_t g_map_once = PTHREAD_ONCE_INIT;
static gmt_hookmap_t g_map;

/* Built once the driver is loaded, and only read after. */
static void build_map(void)
{
  int rc = gmt__hookmap_init(&g_map, GMT_NWRAPPED);
  for (size_t i = 0; rc == 0 && i < GMT_NWRAPPED; i++) {
    int r = gmt__hookmap_add(&g_map, gmt__real((int)i), g_wrappers[i]);
    if (r == -EEXIST)
      GMT_HOOK_DEBUG("%s shares its address with another wrapped name", gmt__sym_name((int)i));
    else if (r < 0)
      rc = r;
  }
  if (rc < 0) {
    /* Without the map dlsym and cuGetProcAddress hand out real pointers:
     * the program still runs, only unseen. */
    fprintf(stderr, "gmt: cannot build the entry point map (%d); some calls go unseen\n", rc);
    gmt__hookmap_close(&g_map);
  }
}

/* What to hand out for p, a pointer the real driver gave (driver loaded). */
static void *swap(void *p)
{
  pthread_once(&g_map_once, build_map);
  return gmt__hookmap_swap(&g_map, p);
}

/* ---- dlsym ---- */

GMT_NO_SANITIZE __attribute__((used)) void *gmt__dlsym_hooked(void *handle, const char *name)
{
  void *p = gmt__dlsym_next()(handle, name);
  /* NVML's memory queries (pynvml by ctypes, vLLM), whatever the handle
   * (libnvidia-ml's, RTLD_DEFAULT): nvml.c swaps in its wrapper when the
   * answer lives in libnvidia-ml. Only "nvml" names go on to code that
   * may be instrumented; a sanitizer starting asks for none. */
  if (p && name && name[0] == 'n' && name[1] == 'v' && name[2] == 'm' && name[3] == 'l')
    return gmt__nvml_dlsym(name, p);
  if (!p || !name || name[0] != 'c' || name[1] != 'u' || !gmt__driver_ready_if_mapped())
    return p;
  void *w = swap(p);
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
GMT_EXPORT void *dlsym(void *handle, const char *name)
{
  return gmt__dlsym_hooked(handle, name);
}
#endif

/* ---- cuGetProcAddress ---- */

static void swap_proc(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
  void *p = *pfn;
  void *w = swap(p);
  *pfn = w;
  if (w != p)
    GMT_HOOK_DEBUG("cuGetProcAddress(%s, %d, %llu) -> wrapper %s", symbol ? symbol : "(null)",
                   version, (unsigned long long)flags, wrapper_name(w));
}

GMT_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                     cuuint64_t flags)
{
  GMT_FRAME(cuGetProcAddress);
  CUresult rc = real(symbol, pfn, cudaVersion, flags);
  if (rc == CUDA_SUCCESS && pfn && *pfn)
    swap_proc(symbol, pfn, cudaVersion, flags);
  return rc;
}

GMT_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                        cuuint64_t flags,
                                        CUdriverProcAddressQueryResult *symbolStatus)
{
  GMT_FRAME(cuGetProcAddress_v2);
  CUresult rc = real(symbol, pfn, cudaVersion, flags, symbolStatus);
  if (rc == CUDA_SUCCESS && pfn && *pfn)
    swap_proc(symbol, pfn, cudaVersion, flags);
  return rc;
}

/* ---- cuInit ---- */

GMT_EXPORT CUresult cuInit(unsigned int Flags)
{
  GMT_FRAME(cuInit);
  CUresult rc = real(Flags);
  GMT_HOOK_DEBUG("cuInit(%u) = %d", Flags, (int)rc);
  /* A process whose driver cannot start has nothing to report. */
  if (rc == CUDA_SUCCESS && !GMT_FRAME_INSIDE()) {
    gmt__report_ensure();
    gmt__devmap_ensure(); /* before the first token or reservation names a GPU */
  }
  return rc;
}
