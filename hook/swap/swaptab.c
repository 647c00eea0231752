/* The table of swap allocations (see swaptab.h): an unsorted array, since
 * a process holds few large allocations in swap mode and every walk is on
 * a slow path (an allocation, a free, a move). */
#include "swaptab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void gmt__swaptab_init(gmt_swaptab_t *t)
{
  memset(t, 0, sizeof(*t));
}

void gmt__swaptab_close(gmt_swaptab_t *t)
{
  free(t->v);
  gmt__swaptab_init(t);
}

static gmt_swap_entry_t *find(const gmt_swaptab_t *t, uint64_t addr)
{
  for (size_t i = 0; i < t->n; i++)
    if (t->v[i].addr == addr)
      return &t->v[i];
  return NULL;
}

int gmt__swaptab_add(gmt_swaptab_t *t, const gmt_swap_entry_t *e)
{
  if (find(t, e->addr))
    return -EEXIST;
  if (t->n == t->cap) {
    size_t ncap = t->cap ? 2 * t->cap : 16;
    gmt_swap_entry_t *nv = realloc(t->v, ncap * sizeof(*nv));
    if (!nv)
      return -ENOMEM;
    t->v = nv;
    t->cap = ncap;
  }
  gmt_swap_entry_t *n = &t->v[t->n++];
  *n = *e;
  n->out = 0;
  n->host = NULL;
  if (n->kept) /* put back as it was (an undone free) */
    t->kept_bytes += n->size;
  else
    n->host_kind = GMT_SWAP_HOST_MALLOC;
  n->stamp = t->clock++;
  t->gpu_bytes += n->span;
  return 0;
}

gmt_swap_entry_t *gmt__swaptab_find(gmt_swaptab_t *t, uint64_t addr)
{
  return find(t, addr);
}

int gmt__swaptab_remove(gmt_swaptab_t *t, uint64_t addr, gmt_swap_entry_t *out)
{
  gmt_swap_entry_t *e = find(t, addr);
  if (!e)
    return -ENOENT;
  if (e->out) {
    t->out_bytes -= e->span;
    if (e->host_kind == GMT_SWAP_HOST_FILE)
      t->disk_bytes -= e->size;
    else
      t->host_bytes -= e->size;
    t->nout--;
  } else {
    t->gpu_bytes -= e->span;
    if (e->kept)
      t->kept_bytes -= e->size;
  }
  if (out)
    *out = *e;
  *e = t->v[--t->n];
  return 0;
}

size_t gmt__swaptab_pick_out(const gmt_swaptab_t *t, uint64_t keep, uint64_t *addrs, size_t cap)
{
  uint64_t gpu = t->gpu_bytes;
  size_t n = 0;
  uint64_t after = 0; /* stamps below this are taken already */
  while (gpu > keep && n < cap) {
    const gmt_swap_entry_t *oldest = NULL;
    for (size_t i = 0; i < t->n; i++) {
      const gmt_swap_entry_t *e = &t->v[i];
      if (!e->out && !e->stays && e->stamp >= after && (!oldest || e->stamp < oldest->stamp))
        oldest = e;
    }
    if (!oldest)
      break;
    addrs[n++] = oldest->addr;
    gpu -= oldest->span;
    after = oldest->stamp + 1;
  }
  return n;
}

size_t gmt__swaptab_of_ctx(const gmt_swaptab_t *t, const void *ctx, uint64_t *addrs, size_t cap)
{
  size_t n = 0;
  for (size_t i = 0; i < t->n && n < cap; i++)
    if (t->v[i].ctx == ctx)
      addrs[n++] = t->v[i].addr;
  return n;
}

size_t gmt__swaptab_out_on(const gmt_swaptab_t *t, int device, uint64_t *addrs, size_t cap,
                           uint64_t *bytes)
{
  size_t n = 0;
  *bytes = 0;
  for (size_t i = 0; i < t->n; i++)
    if (t->v[i].out && t->v[i].device == device) {
      if (n < cap)
        addrs[n++] = t->v[i].addr;
      *bytes += t->v[i].span;
    }
  return n;
}

void *gmt__swaptab_take_kept(gmt_swaptab_t *t, gmt_swap_entry_t *e)
{
  void *k = e->kept;
  if (k) {
    t->kept_bytes -= e->size;
    e->kept = NULL;
  }
  return k;
}

int gmt__swaptab_unprepared(const gmt_swaptab_t *t, gmt_swap_entry_t *out)
{
  const gmt_swap_entry_t *first = NULL;
  for (size_t i = 0; i < t->n; i++) {
    const gmt_swap_entry_t *e = &t->v[i];
    if (!e->out && !e->managed && !e->stays && !e->kept && (!first || e->stamp < first->stamp))
      first = e;
  }
  if (first)
    *out = *first;
  return first != NULL;
}

int gmt__swaptab_give_kept(gmt_swaptab_t *t, gmt_swap_entry_t *e, void *host, uint64_t size,
                           int kind, uint64_t now_ms)
{
  if (e->out || e->managed || e->kept || e->size != size || kind == GMT_SWAP_HOST_FILE)
    return -EBUSY;
  e->kept = host;
  e->host_kind = kind;
  e->kept_ms = now_ms;
  t->kept_bytes += size;
  return 0;
}

uint64_t gmt__swaptab_out_least(const gmt_swaptab_t *t, int device)
{
  uint64_t least = 0;
  for (size_t i = 0; i < t->n; i++)
    if (t->v[i].out && t->v[i].device == device && (!least || t->v[i].span < least))
      least = t->v[i].span;
  return least;
}

int gmt__swaptab_out_device(const gmt_swaptab_t *t)
{
  for (size_t i = 0; i < t->n; i++)
    if (t->v[i].out)
      return t->v[i].device;
  return -1;
}

void gmt__swaptab_mark_out(gmt_swaptab_t *t, gmt_swap_entry_t *e, void *host, int kind)
{
  if (e->out)
    return;
  e->out = 1;
  e->handle = 0;
  e->host = host;
  e->host_kind = kind;
  t->gpu_bytes -= e->span;
  t->out_bytes += e->span;
  if (kind == GMT_SWAP_HOST_FILE)
    t->disk_bytes += e->size;
  else
    t->host_bytes += e->size;
  t->nout++;
  t->outs++;
}

void gmt__swaptab_mark_in(gmt_swaptab_t *t, gmt_swap_entry_t *e, uint64_t handle, int keep,
                          uint64_t now_ms)
{
  if (!e->out)
    return;
  e->out = 0;
  e->handle = handle;
  if (e->host_kind == GMT_SWAP_HOST_FILE)
    t->disk_bytes -= e->size;
  else
    t->host_bytes -= e->size;
  if (keep && e->host_kind != GMT_SWAP_HOST_FILE) {
    e->kept = e->host;
    e->kept_ms = now_ms;
    t->kept_bytes += e->size;
  } else {
    e->host_kind = GMT_SWAP_HOST_MALLOC;
  }
  e->host = NULL;
  e->stamp = t->clock++;
  t->out_bytes -= e->span;
  t->gpu_bytes += e->span;
  t->nout--;
  t->ins++;
}
