/* The map from a real driver entry point's address to the hook's wrapper
 * of that symbol. It is built once after the driver is loaded and then only
 * read, from dlsym and cuGetProcAddress, so lookups take no lock: an open
 * addressing table with linear probing, at most half full.
 *
 * Pure logic, no CUDA: test/unit/test_hookmap.c checks it with made-up
 * addresses. */
#ifndef GMT_HOOKMAP_H
#define GMT_HOOKMAP_H

#include <stddef.h>

typedef struct {
  const void *real;
  void *wrapper;
} gmt_hookmap_slot_t;

typedef struct {
  gmt_hookmap_slot_t *slots;
  size_t mask; /* slots - 1, a power of two minus one */
  size_t count;
} gmt_hookmap_t;

/* Room for up to max_entries. */
int gmt__hookmap_init(gmt_hookmap_t *m, size_t max_entries);
void gmt__hookmap_close(gmt_hookmap_t *m);

/* Adds real -> wrapper. A NULL real (a symbol the driver lacks) is skipped
 * and returns 0. An address already present keeps its first wrapper
 * (the driver aliased two names with one signature) and returns -EEXIST;
 * a full map returns -ENOSPC. */
int gmt__hookmap_add(gmt_hookmap_t *m, const void *real, void *wrapper);

/* The wrapper for real, or NULL when real is not a wrapped entry point. */
void *gmt__hookmap_find(const gmt_hookmap_t *m, const void *real);

/* What to hand out instead of p: its wrapper, or p itself when unknown. */
static inline void *gmt__hookmap_swap(const gmt_hookmap_t *m, void *p)
{
  void *w = gmt__hookmap_find(m, p);
  return w ? w : p;
}

#endif
