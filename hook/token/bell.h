/* The node's bell in this process (gmt_bell.h; docs/protocol.md "The
 * bell"): a latency process rings its GPU's slot at its launches and
 * hushes it when its work is done; a batch process whose grant heeds the
 * bell (TokenReply.bell_max_us) waits at its launches while it rings.
 * Devices are the process's ordinals; the slots are the node's GPUs. */
#ifndef GMT_HOOK_BELL_H
#define GMT_HOOK_BELL_H

#include <stdint.h>

/* A grant whose terms involve the bell came at now: fetch it from beside
 * the pod manager's ipc socket (or GMT_BELL, a socket's path) if this
 * process has none, or its last fetch is old (a restarted gmt-schd makes
 * a new bell). Off the launch path's fast side: a connect and a recvmsg,
 * bounded by GMT_BELL_IO_TIMEOUT_MS. */
void gmt__bell_need(int64_t now_ns);

/* Whether this process has the bell (TokenRequest.bell). */
int gmt__bell_have(void);

/* A latency process launches on dev at now: it rings for
 * GMT_BELL_RING_US more (written at most every quarter of that). */
void gmt__bell_ring(int dev, int64_t now_ns);

/* Its idle thread waits for its queued work on dev: the ring lasts
 * GMT_BELL_DRAIN_US more, until the hush that follows the wait. */
void gmt__bell_ring_drain(int dev, int64_t now_ns);

/* Its work on dev was found done at now: the ring stops, unless another
 * process rang longer meanwhile; when this process launched again soon
 * after its last hush (gmt__busy_stay_ns: a server with requests queued)
 * the slot says more may follow for a little while (gmt_bell_stay). */
void gmt__bell_hush(int dev, int64_t now_ns);

/* A batch launch on dev whose kernels take kernel_ns of late (0: not
 * known): waits while the bell rings, and through a stay the kernel would
 * outlast (gmt_bell_wait_until), for at most budget_ns. Returns how long
 * it waited (0: quiet, or no bell). */
int64_t gmt__bell_heed(int dev, int64_t budget_ns, int64_t kernel_ns);

#endif
