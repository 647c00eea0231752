/* The caching pinned pool (docs/pinning.md): with pin advice on, a block
 * the program frees with cuMemFreeHost stays pinned here, and its next
 * allocation of the same size class, flags and context gets the block back
 * without paying cuMemHostAlloc again (about 374 ms/GiB on an H100) nor
 * cuMemFreeHost (94 ms/GiB). NVIDIA cuCascade's fixed-size blocks: a
 * request is rounded up to a class that wastes at most 1/8 of it, so a
 * loop whose sizes vary a little still hits.
 *
 * Pure logic, no CUDA: the caller (hostpin.c) holds the lock, calls the
 * driver, and passes the time; test/unit/test_hostpool.c checks it. */
#ifndef GMT_HOOK_HOSTPOOL_H
#define GMT_HOOK_HOSTPOOL_H

#include <stddef.h>
#include <stdint.h>

/* Smaller blocks cost little to pin, and a program with many of them
 * would fill the table: they are not cached. */
#define GMT_HOSTPOOL_MIN_BYTES ((size_t)1 << 20)

typedef struct {
  void *p;
  size_t bytes; /* the class: what was really allocated */
  unsigned flags;
  const void *ctx;        /* the context it belongs to (it dies with it) */
  uint64_t idle_since_ms; /* when it was cached */
  int cached;             /* 1: freed by the program, kept pinned here */
} gmt_hostpool_block_t;

typedef struct {
  gmt_hostpool_block_t *b; /* the pool's blocks, live and cached */
  size_t n, cap;
  uint64_t cached_bytes;
  uint64_t max_cached_bytes; /* more than this is freed, oldest first */
  uint64_t idle_ms;          /* a block cached this long is freed */
  uint64_t hits, misses;     /* allocations served from the cache or not */
} gmt_hostpool_t;

/* The class of an n-byte request, or 0 when such a request is not pooled
 * (too small, or so large that rounding would overflow). */
size_t gmt__hostpool_class(size_t n);

/* A cached block of class cls with these flags in ctx, now live again, or
 * NULL (counted as a miss). */
void *gmt__hostpool_take(gmt_hostpool_t *pl, size_t cls, unsigned flags, const void *ctx);

/* p, of class cls, was just allocated for the program: it becomes a live
 * block of the pool. -ENOMEM leaves it out (then it is freed as usual). */
int gmt__hostpool_made(gmt_hostpool_t *pl, void *p, size_t cls, unsigned flags, const void *ctx);

/* The program frees p: 1 when p is a live block of the pool, now cached
 * (*out is it, for the caller to sync its context); 0 when p is not the
 * pool's, and the caller frees it for real. */
int gmt__hostpool_give(gmt_hostpool_t *pl, void *p, uint64_t now_ms, gmt_hostpool_block_t *out);

/* Undoes a give that the caller could not complete (the context's sync
 * failed): p is live again. */
void gmt__hostpool_ungive(gmt_hostpool_t *pl, void *p);

/* Takes out up to max cached blocks to free for real into out: every one
 * with all, else those idle for idle_ms and then the oldest while more
 * than max_cached_bytes are cached. Returns how many. */
size_t gmt__hostpool_evict(gmt_hostpool_t *pl, uint64_t now_ms, int all, gmt_hostpool_block_t *out,
                           size_t max);

/* Forgets every block, live or cached, for which gone(p, arg) says 1 (the
 * driver freed it with its context). Returns the bytes of those that were
 * cached. */
uint64_t gmt__hostpool_forget(gmt_hostpool_t *pl, int (*gone)(const gmt_hostpool_block_t *, void *),
                              void *arg);

/* Forgets every block without freeing any (a forked child). */
void gmt__hostpool_reset(gmt_hostpool_t *pl);

#endif
