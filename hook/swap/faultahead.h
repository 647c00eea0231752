/* Fresh host pages for a move out's new copies, faulted in ahead of it by
 * helper threads (pure: no driver). A copy's pages cost more to fault in
 * than to register and fill: 20 MiB took 5-6 ms to fault, 1 ms in the
 * driver and about 1 ms to copy on an H200, so a move out of 490 PyTorch
 * segments of which 388 had no copy prepared ran at 1.9 GB/s, one copy
 * after the other, while the other pod waited for the room (5.2 s). The
 * threads fault the next copies in, in the order the move takes them, at
 * most a window of bytes ahead of it. */
#ifndef GMT_HOOK_FAULTAHEAD_H
#define GMT_HOOK_FAULTAHEAD_H

#include <stddef.h>
#include <stdint.h>

/* A fresh private mapping of size bytes, huge pages asked for, not yet
 * faulted in: NULL when it cannot be had. */
void *gmt__fault_map(uint64_t size);

/* The pages of [p, p + n) faulted in, written (MADV_POPULATE_WRITE, else a
 * write to each page). */
void gmt__fault_pages(void *p, size_t n);

/* Places copy i's fresh mapping before its pages are faulted in (NUMA),
 * or NULL. */
typedef void (*gmt_fault_place_fn)(void *p, uint64_t size, size_t i, void *arg);

typedef struct gmt_fault_ahead gmt_fault_ahead_t;

/* Starts faulting in fresh mappings of sizes[i] bytes (0: none wanted),
 * in order, on up to threads threads, never more than window bytes past
 * the last taken. NULL when nothing is wanted or it cannot start (the
 * caller then makes each copy itself). */
gmt_fault_ahead_t *gmt__fault_ahead_start(const uint64_t *sizes, size_t n, int threads,
                                          uint64_t window, gmt_fault_place_fn place, void *arg);

/* Copy i's mapping, faulted in (waiting for it), now the caller's to
 * munmap: NULL when none was wanted, taken already, or it could not be
 * mapped. Taken in order, or the window holds the threads back. */
void *gmt__fault_ahead_take(gmt_fault_ahead_t *a, size_t i);

/* How many mappings have been faulted in so far. */
size_t gmt__fault_ahead_faulted(gmt_fault_ahead_t *a);

/* Stops the threads and unmaps what was not taken: how many were. */
size_t gmt__fault_ahead_end(gmt_fault_ahead_t *a);

#endif
