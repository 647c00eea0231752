/* The hook's side of the memory ledger: reservations against the pod's
 * quota, made before each device allocation and given back after each
 * free, in chunks so that the allocation path rarely makes an RPC.
 *
 * This process holds `held` bytes in the scheduler's ledger per device;
 * `charged` of them back live allocations and pool reservations, and the
 * rest is local slack:
 *  - an allocation takes from the slack; when the slack is short it
 *    reserves max(shortfall, GMT_RESERVE_CHUNK), and if the pod's quota
 *    refuses that, exactly the shortfall; refused again, gmt__reserve
 *    says GMT_EQUOTA (alloc.c then gives back what its memory pools no
 *    longer hold and asks once more, and failing that the allocation fails
 *    with CUDA_ERROR_OUT_OF_MEMORY without reaching the driver);
 *  - near the pod's limit (less than a chunk of room left when last
 *    heard) and for GMT_RESERVE_TIGHT_MS after a chunk was refused or the
 *    pod manager asked for slack back, it reserves exactly the shortfall;
 *  - a free returns its bytes to the slack (no RPC on the free path);
 *  - the reporter thread gives back slack above GMT_RESERVE_SLACK_KEEP at
 *    once, and all of it after GMT_RESERVE_IDLE_MS without allocations or
 *    frees, or while the pod manager asks for it (a Reserve of another
 *    process waits for room: gmt__reserve_give_back), so that another
 *    process of the pod can use it.
 * So the exact-limit rule (a reservation that fits exactly succeeds, one
 * byte more fails) holds for the pod's total in the ledger, and across
 * processes of one pod for their live allocations: a Reserve refused
 * while others hold slack waits at the pod manager (at most 1 s) until
 * they give it back (client/pmgr/slack_policy.h).
 *
 * When the pod manager cannot be reached, allocations are checked against
 * the pod's memory_limit as last heard (registration or a reply), counting
 * this process alone: a best effort, logged once, that never hangs. Back
 * in touch, the reporter drops what it granted itself as slack and
 * reserves for real what backs allocations. */
#ifndef GMT_HOOK_RESERVE_H
#define GMT_HOOK_RESERVE_H

#include <stddef.h>
#include <stdint.h>

#define GMT_RESERVE_CHUNK ((uint64_t)32 << 20)
#define GMT_RESERVE_SLACK_KEEP ((uint64_t)64 << 20)
#define GMT_RESERVE_IDLE_MS 100
/* Told that the pod is short of room (a chunk refused, or the pod manager
 * asking for slack back): for this long, reserve exactly what allocations
 * need and keep no slack. */
#define GMT_RESERVE_TIGHT_MS 1000
#define GMT_RESERVE_DEVICES 64

/* Charges bytes on device to this process, reserving as needed. 0,
 * GMT_EQUOTA when the pod's quota has no room for them, or GMT_EDEVICE
 * when the device is not among the pod's devices= (the scheduler said so;
 * once on stderr). A process that never heard its pod's limit (its pod
 * manager refused it or has not answered) gets 0, said once, or with
 * GMT_FAIL_CLOSED set waits for the limit at most GMT_FAIL_CLOSED_WAIT_MS
 * and then gets GMT_EQUOTA. */
int gmt__reserve(int device, uint64_t bytes);

/* Gives back bytes charged on device (a free, or an allocation that the
 * driver failed after it was charged): they become slack. */
void gmt__unreserve(int device, uint64_t bytes);

/* Bytes this process holds in the ledger, slack included: not what it
 * granted itself while offline, until the reporter has reserved that for
 * real once back (what it reports, so that a ledger rebuilt from reports
 * holds exactly this). */
uint64_t gmt__reserve_held(void);

/* The pod's reserved total and limit as the scheduler says (MemInfo),
 * less this process's own slack (reserved, but free for it to allocate).
 * -ENOTCONN when unhooked; this process's own use and the last known limit
 * when the pod manager cannot be reached. */
int gmt__reserve_meminfo(int device, uint64_t *pod_used, uint64_t *limit);

/* Whether GMT_FAIL_CLOSED is set: a process that never heard its pod's
 * limit fails its allocations rather than running unlimited. */
int gmt__reserve_fails_closed(void);

/* Whether this process has heard its pod's memory limit (registration or
 * a reply) since start: a process that has not is not known to any pod
 * manager, and with GMT_FAIL_CLOSED its launches fail too (token.c). */
int gmt__reserve_limit_heard(void);

/* What an allocation does while this process has not heard its pod's
 * limit (GMT_FAIL_CLOSED), in words for stderr: wait and fail, or run
 * unlimited. */
const char *gmt__reserve_unheard_plan(char *buf, size_t len);

/* The pod's limit from registration: the fallback while the pod manager
 * cannot be reached. */
void gmt__reserve_set_limit(uint64_t limit);

/* Reporter thread: gives back slack as described above. Returns 1 when
 * what this process holds is no longer `reported` (a report is due). */
int gmt__reserve_tick(uint64_t reported);

/* The pod manager asks for slack back (a Reserve of the pod waits for
 * room): the next gmt__reserve_tick gives all of it back, and for
 * GMT_RESERVE_TIGHT_MS reservations are exact and no slack is kept. */
void gmt__reserve_give_back(void);

#endif
