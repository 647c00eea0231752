/* The caching pinned pool (see hostpool.h). A program keeps few pinned
 * blocks of 1 MiB and up, so the table is a plain array scanned in full:
 * each scan costs far less than the driver call it saves. */
#include "hostpool.h"

#include <errno.h>
#include <stdlib.h>

size_t gmt__hostpool_class(size_t n)
{
  if (n < GMT_HOSTPOOL_MIN_BYTES)
    return 0;
  /* Eight classes per power of two: the step is an eighth of the largest
   * power of two not above n, so rounding up adds at most n/8. */
  int k = 63 - __builtin_clzll((unsigned long long)n);
  size_t step = (size_t)1 << (k - 3);
  if (n > SIZE_MAX - (step - 1))
    return 0;
  return (n + step - 1) & ~(step - 1);
}

void *gmt__hostpool_take(gmt_hostpool_t *pl, size_t cls, unsigned flags, const void *ctx)
{
  /* The most recently cached block is likeliest still in cache lines and
   * TLBs, and leaves the oldest to go idle. */
  gmt_hostpool_block_t *best = NULL;
  for (size_t i = 0; i < pl->n; i++) {
    gmt_hostpool_block_t *b = &pl->b[i];
    if (b->cached && b->bytes == cls && b->flags == flags && b->ctx == ctx &&
        (!best || b->idle_since_ms >= best->idle_since_ms))
      best = b;
  }
  if (!best) {
    pl->misses++;
    return NULL;
  }
  best->cached = 0;
  pl->cached_bytes -= best->bytes;
  pl->hits++;
  return best->p;
}

static gmt_hostpool_block_t *find(gmt_hostpool_t *pl, const void *p);

int gmt__hostpool_made(gmt_hostpool_t *pl, void *p, size_t cls, unsigned flags, const void *ctx)
{
  /* The driver gave out p again: the block we knew there went with a
   * context we did not see go. */
  gmt_hostpool_block_t *old = find(pl, p);
  if (old) {
    if (old->cached)
      pl->cached_bytes -= old->bytes;
    *old = (gmt_hostpool_block_t){p, cls, flags, ctx, 0, 0};
    return 0;
  }
  if (pl->n == pl->cap) {
    size_t cap = pl->cap ? pl->cap * 2 : 32;
    gmt_hostpool_block_t *b = realloc(pl->b, cap * sizeof *b);
    if (!b)
      return -ENOMEM;
    pl->b = b;
    pl->cap = cap;
  }
  pl->b[pl->n++] = (gmt_hostpool_block_t){p, cls, flags, ctx, 0, 0};
  return 0;
}

static gmt_hostpool_block_t *find(gmt_hostpool_t *pl, const void *p)
{
  for (size_t i = 0; i < pl->n; i++)
    if (pl->b[i].p == p)
      return &pl->b[i];
  return NULL;
}

int gmt__hostpool_give(gmt_hostpool_t *pl, void *p, uint64_t now_ms, gmt_hostpool_block_t *out)
{
  gmt_hostpool_block_t *b = find(pl, p);
  /* A cached block freed again is the program's double free: the driver
   * answers it, as without gmt. */
  if (!b || b->cached)
    return 0;
  b->cached = 1;
  b->idle_since_ms = now_ms;
  pl->cached_bytes += b->bytes;
  *out = *b;
  return 1;
}

void gmt__hostpool_ungive(gmt_hostpool_t *pl, void *p)
{
  gmt_hostpool_block_t *b = find(pl, p);
  if (!b || !b->cached)
    return;
  b->cached = 0;
  pl->cached_bytes -= b->bytes;
}

static void drop(gmt_hostpool_t *pl, size_t i)
{
  if (pl->b[i].cached)
    pl->cached_bytes -= pl->b[i].bytes;
  pl->b[i] = pl->b[--pl->n];
}

static size_t oldest_cached(const gmt_hostpool_t *pl)
{
  size_t at = pl->n;
  for (size_t i = 0; i < pl->n; i++)
    if (pl->b[i].cached && (at == pl->n || pl->b[i].idle_since_ms < pl->b[at].idle_since_ms))
      at = i;
  return at;
}

size_t gmt__hostpool_evict(gmt_hostpool_t *pl, uint64_t now_ms, int all, gmt_hostpool_block_t *out,
                           size_t max)
{
  size_t k = 0;
  while (k < max) {
    size_t i = oldest_cached(pl);
    if (i == pl->n)
      break;
    const gmt_hostpool_block_t *b = &pl->b[i];
    int idle = now_ms >= b->idle_since_ms && now_ms - b->idle_since_ms >= pl->idle_ms;
    if (!all && !idle && pl->cached_bytes <= pl->max_cached_bytes)
      break; /* the oldest is neither idle nor over the cap: none is */
    out[k++] = *b;
    drop(pl, i);
  }
  return k;
}

uint64_t gmt__hostpool_forget(gmt_hostpool_t *pl, int (*gone)(const gmt_hostpool_block_t *, void *),
                              void *arg)
{
  uint64_t cached = 0;
  for (size_t i = 0; i < pl->n;) {
    if (!gone(&pl->b[i], arg)) {
      i++;
      continue;
    }
    if (pl->b[i].cached)
      cached += pl->b[i].bytes;
    drop(pl, i);
  }
  return cached;
}

void gmt__hostpool_reset(gmt_hostpool_t *pl)
{
  pl->n = 0;
  pl->cached_bytes = 0;
}
