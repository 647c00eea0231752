/* The program's own physical memory in swap mode (see vmmtab.h): two
 * unsorted arrays, since a program holds few handles and mappings (PyTorch's
 * expandable segments: one per 20 MiB or 2 MiB granule) and every walk is
 * on a call that costs the driver more. */
#include "vmmtab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Values gmt gives the program when the driver's collides with one it
 * holds: a tag in the top bits, which the driver's handles have not been
 * seen to use, and anyway checked against the table. */
#define GMT_VMM_VALUE_TAG 0x676d740000000000ULL /* "gmt" */

void gmt__vmmtab_init(gmt_vmmtab_t *t)
{
  memset(t, 0, sizeof(*t));
}

void gmt__vmmtab_close(gmt_vmmtab_t *t)
{
  for (size_t i = 0; i < t->nm; i++)
    free(t->m[i].acc);
  free(t->m);
  free(t->h);
  gmt__vmmtab_init(t);
}

gmt_vmm_handle_t *gmt__vmmtab_find(gmt_vmmtab_t *t, uint64_t prog)
{
  for (size_t i = 0; i < t->nh; i++)
    if (t->h[i].prog == prog)
      return &t->h[i];
  return NULL;
}

gmt_vmm_handle_t *gmt__vmmtab_find_key(gmt_vmmtab_t *t, uint64_t key)
{
  for (size_t i = 0; i < t->nh; i++)
    if (t->h[i].key == key)
      return &t->h[i];
  return NULL;
}

uint64_t gmt__vmmtab_new_value(gmt_vmmtab_t *t, uint64_t real)
{
  uint64_t v = real;
  while (!v || gmt__vmmtab_find(t, v))
    v = GMT_VMM_VALUE_TAG | (++t->serial & 0xffffffffffULL);
  return v;
}

/* Room for one more of n in *v of *cap elements of size each. */
static int grow(void **v, size_t n, size_t *cap, size_t size)
{
  if (n < *cap)
    return 0;
  size_t ncap = *cap ? 2 * *cap : 16;
  void *nv = realloc(*v, ncap * size);
  if (!nv)
    return -ENOMEM;
  *v = nv;
  *cap = ncap;
  return 0;
}

int gmt__vmmtab_add(gmt_vmmtab_t *t, const gmt_vmm_handle_t *h)
{
  if (gmt__vmmtab_find(t, h->prog))
    return -EEXIST;
  if (grow((void **)&t->h, t->nh, &t->caph, sizeof(*t->h)) < 0)
    return -ENOMEM;
  t->h[t->nh++] = *h;
  return 0;
}

int gmt__vmmtab_remove(gmt_vmmtab_t *t, uint64_t prog)
{
  gmt_vmm_handle_t *h = gmt__vmmtab_find(t, prog);
  if (!h)
    return -ENOENT;
  *h = t->h[--t->nh];
  return 0;
}

int gmt__vmmtab_map(gmt_vmmtab_t *t, uint64_t va, uint64_t len, uint64_t offset, uint64_t prog)
{
  if (!gmt__vmmtab_find(t, prog))
    return -ENOENT;
  for (size_t i = 0; i < t->nm; i++)
    if (va < t->m[i].va + t->m[i].len && t->m[i].va < va + len)
      return -EEXIST;
  if (grow((void **)&t->m, t->nm, &t->capm, sizeof(*t->m)) < 0)
    return -ENOMEM;
  t->m[t->nm++] = (gmt_vmm_map_t){.va = va, .len = len, .offset = offset, .prog = prog};
  return 0;
}

size_t gmt__vmmtab_unmap(gmt_vmmtab_t *t, uint64_t va, uint64_t len, uint64_t *progs, size_t cap)
{
  size_t n = 0;
  for (size_t i = 0; i < t->nm;) {
    gmt_vmm_map_t *m = &t->m[i];
    if (m->va >= va && m->va + m->len <= va + len) {
      if (n < cap)
        progs[n] = m->prog;
      n++;
      free(m->acc);
      *m = t->m[--t->nm];
    } else {
      i++;
    }
  }
  return n;
}

gmt_vmm_span_t gmt__vmmtab_span(gmt_vmmtab_t *t, uint64_t va, uint64_t len)
{
  gmt_vmm_span_t sp = {0};
  for (size_t i = 0; i < t->nm; i++) {
    const gmt_vmm_map_t *m = &t->m[i];
    if (!(va < m->va + m->len && m->va < va + len))
      continue;
    const gmt_vmm_handle_t *h = gmt__vmmtab_find(t, m->prog);
    if (h && !h->real)
      sp.out++;
    else
      sp.in++;
    sp.partial += !(m->va >= va && m->va + m->len <= va + len);
  }
  return sp;
}

const gmt_vmm_map_t *gmt__vmmtab_map_at(const gmt_vmmtab_t *t, uint64_t addr)
{
  for (size_t i = 0; i < t->nm; i++)
    if (addr - t->m[i].va < t->m[i].len)
      return &t->m[i];
  return NULL;
}

size_t gmt__vmmtab_nmaps(const gmt_vmmtab_t *t, uint64_t prog)
{
  size_t n = 0;
  for (size_t i = 0; i < t->nm; i++)
    n += t->m[i].prog == prog;
  return n;
}

/* Records a (clipped to m already) on m. */
static int record(gmt_vmm_map_t *m, const gmt_vmm_access_t *a)
{
  if (a->off == 0 && a->len == m->len) {
    size_t j = 0;
    for (size_t i = 0; i < m->nacc; i++)
      if (m->acc[i].loc_type != a->loc_type || m->acc[i].loc_id != a->loc_id)
        m->acc[j++] = m->acc[i];
    m->nacc = j;
  }
  if (grow((void **)&m->acc, m->nacc, &m->capacc, sizeof(*m->acc)) < 0)
    return -ENOMEM;
  m->acc[m->nacc++] = *a;
  return 0;
}

int gmt__vmmtab_access(gmt_vmmtab_t *t, uint64_t va, uint64_t len, const gmt_vmm_access_t *d,
                       size_t n)
{
  int touched = 0;
  for (size_t i = 0; i < t->nm; i++) {
    gmt_vmm_map_t *m = &t->m[i];
    uint64_t lo = va > m->va ? va : m->va;
    uint64_t hi = va + len < m->va + m->len ? va + len : m->va + m->len;
    if (lo >= hi)
      continue;
    for (size_t k = 0; k < n; k++) {
      gmt_vmm_access_t a = d[k];
      a.off = lo - m->va;
      a.len = hi - lo;
      if (record(m, &a) < 0)
        return -ENOMEM;
    }
    touched++;
  }
  return touched;
}
