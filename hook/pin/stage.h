/* Staged copies (docs/pinning.md, "Cold copies"): a synchronous copy of
 * 8 MiB or more between the device and pageable host memory (a buffer pin
 * advice left pageable) goes through gmt's own pinned staging buffers.
 * Several threads copy each chunk between the program's memory and a
 * staging buffer while the DMA of the chunk before runs: the driver's own
 * pageable path copies with one thread (8-15 GB/s on an H100), this one
 * reached 22-44 GB/s with 4-8 threads. Only while pin advice is on, with
 * GMT_STAGE_THREADS threads (default 4; 0 or fewer than 4 CPUs: off).
 *
 * The copy keeps the call's meaning: it runs on the stream the call would
 * use (the legacy default stream, or the thread's own for _ptds) and
 * returns once every byte is on the other side. Anything it cannot do
 * (another thread is staging, another context, a device range that is not
 * one allocation) leaves the copy to the driver. */
#ifndef GMT_HOOK_STAGE_H
#define GMT_HOOK_STAGE_H

#include <stddef.h>

#include "driver.h"

/* 1 when the copy was made here, its result in *rc; 0: the caller makes
 * it as usual. ptds: the per-thread default stream. */
int gmt__stage_htod(CUdeviceptr dst, const void *src, size_t n, int ptds, CUresult *rc);
int gmt__stage_dtoh(void *dst, CUdeviceptr src, size_t n, int ptds, CUresult *rc);

/* A context goes (ctx.c): the staging buffers go first. */
void gmt__stage_ctx_going(void);

/* Reporter thread: frees the staging buffers once unused for 5 s
 * (GMT_STAGE_IDLE_MS). 1 when it did (the pinned bytes changed). */
int gmt__stage_tick(void);

#endif
