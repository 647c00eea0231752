/* Page-locked host memory the process holds: what it allocated pinned
 * (cuMemAllocHost, cuMemHostAlloc) or registered (cuMemHostRegister) and
 * has not freed or unregistered. Reported to the pod (pinned_bytes): the
 * node's pinned budget is shared, and pinning a lot slows everyone's
 * pageable memory. */
#ifndef GMT_HOOK_HOSTPIN_H
#define GMT_HOOK_HOSTPIN_H

#include <stddef.h>
#include <stdint.h>

uint64_t gmt__hostpin_bytes(void);

/* The caching pool (hostpool.h): the bytes of freed blocks it keeps
 * pinned (part of gmt__hostpin_bytes), and the allocations it served. */
void gmt__hostpin_pool_stats(uint64_t *cached, uint64_t *reused);

/* Reporter thread: frees cached blocks idle too long. 1 when it did (the
 * pinned bytes changed). */
int gmt__hostpin_tick(void);

/* 1 when [p, p+n) overlaps memory the program holds pinned. */
int gmt__hostpin_overlaps(const void *p, size_t n);

/* gmt's own pinned memory (stage.c's buffers), counted as the program's:
 * bytes pinned at p, or (bytes 0) gone. */
void gmt__hostpin_note(void *p, uint64_t bytes);

/* Around a context's teardown (ctx.c): going frees the cached blocks and
 * holds the pool's frees back until gone, which forgets the blocks that
 * went with the context. */
void gmt__hostpin_ctx_going(void);
void gmt__hostpin_ctx_gone(void);

#endif
