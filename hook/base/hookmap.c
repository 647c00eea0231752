/* Real entry point address -> wrapper; see hookmap.h. */
#include "hookmap.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

static size_t hash_ptr(const void *p)
{
  /* Entry points are 16-byte aligned and close together: mix the bits so
   * neighbours spread over the table. */
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x;
}

int gmt__hookmap_init(gmt_hookmap_t *m, size_t max_entries)
{
  size_t n = 16;
  while (n < 2 * max_entries)
    n <<= 1;
  m->slots = calloc(n, sizeof(*m->slots));
  if (!m->slots)
    return -ENOMEM;
  m->mask = n - 1;
  m->count = 0;
  return 0;
}

void gmt__hookmap_close(gmt_hookmap_t *m)
{
  free(m->slots);
  m->slots = NULL;
  m->mask = 0;
  m->count = 0;
}

int gmt__hookmap_add(gmt_hookmap_t *m, const void *real, void *wrapper)
{
  if (!real)
    return 0;
  if (!m->slots)
    return -EINVAL;
  /* Keep it at most half full so a miss ends quickly. */
  if (2 * (m->count + 1) > m->mask + 1)
    return -ENOSPC;
  for (size_t i = hash_ptr(real) & m->mask;; i = (i + 1) & m->mask) {
    if (m->slots[i].real == real)
      return -EEXIST;
    if (!m->slots[i].real) {
      m->slots[i].real = real;
      m->slots[i].wrapper = wrapper;
      m->count++;
      return 0;
    }
  }
}

void *gmt__hookmap_find(const gmt_hookmap_t *m, const void *real)
{
  if (!real || !m->slots)
    return NULL;
  for (size_t i = hash_ptr(real) & m->mask;; i = (i + 1) & m->mask) {
    if (m->slots[i].real == real)
      return m->slots[i].wrapper;
    if (!m->slots[i].real)
      return NULL;
  }
}
