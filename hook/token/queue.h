/* A batch process's queued work, bounded while a latency pod may need the
 * GPU (TokenReply.queue_bound_us, docs/protocol.md "GPU time tokens"): the
 * latency pod then waits for the kernel that runs and little more, when
 * the scheduler cuts this process's grant short.
 *
 * An event is recorded after each launch on its stream; before the next
 * launch the hook waits until the GPU time of the launches still queued
 * fits within the bound (the one that runs always may). Each queued
 * launch counts what launches of its kind took of late (its kernel and
 * grid: measured between consecutive events), or what any launch took
 * for a kind not seen yet: a training step's kernels range from tens of
 * microseconds to 9 ms (an H200's fp32 GEMM of 8192), and one average of
 * them let 40 ms queue under a 10 ms bound. Off (no bound): one
 * thread-local read after a launch. */
#ifndef GMT_HOOK_QUEUE_H
#define GMT_HOOK_QUEUE_H

#include <stdint.h>

#include "driver.h"

/* Before a launch on device dev (token.c's gate, whose grant there bounds
 * the queue to bound_us > 0): waits while too much is queued. */
void gmt__queue_before(int dev, uint32_t bound_us);

/* After a launch on stream s succeeded, on the device the gate saw last
 * on this thread; key: what it ran (launch.c: its kernel and grid). */
void gmt__queue_after(CUstream s, uint64_t key);

/* The GPU time a launch on device dev has taken of late, in ns (0: not
 * known, or no bound): how long a batch kernel launched now would keep a
 * latency pod's next request waiting. */
int64_t gmt__queue_launch_ns(int dev);

/* In a forked child: the parent's events and locks are not the child's. */
void gmt__queue_child(void);

#endif
