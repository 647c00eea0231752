/* gmt/alloc.h: host buffers that pin advice may pin, for programs that opt
 * in (docs/pinning.md, "The C API").
 *
 *   void *p = gmt_host_alloc(64 << 20, "loader.batch");
 *   ...copies to and from the GPU...
 *   gmt_host_free(p);
 *
 * The memory is ordinary host memory, as from malloc, 64-byte aligned. Under
 * gmt (libgmthook.so preloaded, the pod's pin= not off) a buffer of 1 MiB
 * or more is known by the site name given, not by the code that allocated
 * it (as a malloc'd one is), so a profile recorded for it holds from one
 * build of the program to the next; gmt pins it as the pod's mode says.
 * Without gmt, these are posix_memalign and free.
 *
 * Header only: it finds the hook at the first call (link with -ldl on a
 * glibc older than 2.34). Free a buffer from gmt_host_alloc only with
 * gmt_host_free. */
#ifndef GMT_ALLOC_H
#define GMT_ALLOC_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>

typedef void *(*gmt_host_alloc_fn)(size_t size, const char *site);
typedef void (*gmt_host_free_fn)(void *p);

static inline void *gmt__fallback_alloc(size_t size, const char *site)
{
  void *p = NULL;
  (void)site;
  return posix_memalign(&p, 64, size ? size : 1) == 0 ? p : NULL;
}

static inline void gmt__host_api(gmt_host_alloc_fn *a, gmt_host_free_fn *f)
{
  /* Looked up once; two threads racing here find the same answer. */
  static gmt_host_alloc_fn s_alloc;
  static gmt_host_free_fn s_free;
  gmt_host_alloc_fn fa = __atomic_load_n(&s_alloc, __ATOMIC_ACQUIRE);
  if (!fa) {
    gmt_host_free_fn ff = (gmt_host_free_fn)dlsym(RTLD_DEFAULT, "gmt_host_free_v1");
    fa = (gmt_host_alloc_fn)dlsym(RTLD_DEFAULT, "gmt_host_alloc_v1");
    if (!fa || !ff) {
      fa = gmt__fallback_alloc;
      ff = free;
    }
    __atomic_store_n(&s_free, ff, __ATOMIC_RELAXED);
    __atomic_store_n(&s_alloc, fa, __ATOMIC_RELEASE);
  }
  *a = fa;
  *f = __atomic_load_n(&s_free, __ATOMIC_RELAXED);
}

/* size bytes known to gmt as site (a short stable name); NULL when out of
 * memory. */
static inline void *gmt_host_alloc(size_t size, const char *site)
{
  gmt_host_alloc_fn a;
  gmt_host_free_fn f;
  gmt__host_api(&a, &f);
  return a(size, site);
}

static inline void gmt_host_free(void *p)
{
  gmt_host_alloc_fn a;
  gmt_host_free_fn f;
  gmt__host_api(&a, &f);
  f(p);
}

#endif
