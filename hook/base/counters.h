/* Counters that the hot paths bump without a lock. */
#ifndef GMT_HOOK_COUNTERS_H
#define GMT_HOOK_COUNTERS_H

#include <stdatomic.h>
#include <stdint.h>

/* Kernel launches since start (or since fork in a child): the launch path
 * only ever does a relaxed increment of this. */
extern _Atomic uint64_t gmt__launches;

/* Nanoseconds the process's launches waited for the GPU time token since
 * start, and since when (CLOCK_MONOTONIC ns) the oldest of the waits going
 * on now (gmt__token_waiters of them) began: token.c writes them, the
 * reporter reads them (ProcessCounters.token_wait_us, token_waiting_us). */
extern _Atomic uint64_t gmt__token_wait_ns;
extern _Atomic int64_t gmt__token_waiting_since_ns;
extern _Atomic int gmt__token_waiters;
/* Nanoseconds its launches waited while the bell rang (token.c), since
 * start: ProcessCounters.bell_wait_us. */
extern _Atomic uint64_t gmt__bell_wait_ns;
/* Devices on which the process holds a token grant now (one not given
 * back yet, its queued work draining included): token.c's, read by the
 * reporter (a target to move out that comes meanwhile is stale). */
extern _Atomic int gmt__token_held;
/* When (gmt_now_ms) a grant of this process was last cut short, 0 once
 * a grant came since (token.c): another pod waits for the GPU now, one
 * waking or a latency pod, and a move out asked for meanwhile is on its
 * way (report.c then leaves PyTorch's cache release out). */
extern _Atomic uint64_t gmt__token_cut_ms;

#endif
