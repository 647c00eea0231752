/* Held Reserves and the processes asked for their slack (slack_policy.h). */
#include "slack_policy.h"

bool gmt_slack_hold(const gmt_slack_pod_t *pod, uint64_t bytes, uint64_t waited_ms)
{
  /* Past the quota whatever the others give back: no wait. */
  if (pod->used > pod->limit || bytes > pod->limit - pod->used)
    return false;
  if (waited_ms >= GMT_SLACK_HOLD_MS)
    return false;
  if (pod->others_slack == 0 && waited_ms >= GMT_SLACK_SETTLE_MS)
    return false;
  return true;
}

bool gmt_slack_ask(bool holding, uint64_t used, uint64_t reserved)
{
  return holding && reserved > used;
}
