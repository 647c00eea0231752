/* When a pod manager holds a refused Reserve while its pod's processes give
 * back their slack, and whom it asks (docs/protocol.md, "Memory"). Pure
 * functions of their inputs: no loop, no wire, so that
 * test/unit/test_slack_policy.c covers the order of each decision.
 *
 * Slack is what a process holds reserved in the ledger and does not use
 * (hook/memory/reserve.h: it reserves in chunks). Other processes' slack counts
 * against the pod's quota, so a Reserve that the pod's live allocations
 * leave room for can be refused; held for a moment while the slack comes
 * back, it is granted instead. The quota stays exact: the ledger still
 * decides every grant, and a request that the live allocations leave no
 * room for is refused at once. */
#ifndef GMT_CLIENT_SLACK_POLICY_H
#define GMT_CLIENT_SLACK_POLICY_H

#include <stdbool.h>
#include <stdint.h>

/* The longest a refused Reserve is held: well inside the hook's bound on
 * the call (1.5 s, hook/memory/reserve.c), like a token wait. */
#define GMT_SLACK_HOLD_MS 1000
/* With no slack reported by the other processes, a held Reserve waits this
 * long for reports to catch up (a chunk granted to another process shows
 * in its next report, 20 ms later at most while it allocates; idle slack
 * is given back after 100 ms), then is refused. */
#define GMT_SLACK_SETTLE_MS 250

/* The pod as its processes last reported. */
typedef struct {
  uint64_t limit;        /* its GPU_MEM */
  uint64_t used;         /* its processes' live allocations (memory_used) */
  uint64_t others_slack; /* the other processes' memory_reserved - memory_used, each at least 0 */
} gmt_slack_pod_t;

/* Whether a Reserve of bytes, refused for the quota waited_ms ago (0: just
 * now), is held for another try: in this order,
 *   used + bytes past the limit   no: past the quota, refused at once;
 *   waited_ms >= GMT_SLACK_HOLD_MS      no: the bound;
 *   no others' slack after GMT_SLACK_SETTLE_MS  no: nothing to wait for;
 *   otherwise                     yes. */
bool gmt_slack_hold(const gmt_slack_pod_t *pod, uint64_t bytes, uint64_t waited_ms);

/* Whether a process that just reported used and reserved bytes is asked to
 * give back its slack: while some Reserve of the pod is held, every
 * process that holds slack is asked (the ones without have nothing to
 * give). */
bool gmt_slack_ask(bool holding, uint64_t used, uint64_t reserved);

#endif
