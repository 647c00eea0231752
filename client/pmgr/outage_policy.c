/* The pod's memory while gmt-schd is away, and the held Reserves' timer
 * (outage_policy.h). */
#include "outage_policy.h"
#include "gmt_rpc_kinds.h"

uint64_t gmt_outage_used(const gmt_outage_count_t *c)
{
  uint64_t used = c->reported + c->up;
  return used > c->down ? used - c->down : 0;
}

bool gmt_outage_fits(const gmt_outage_count_t *c, uint64_t bytes)
{
  uint64_t used = gmt_outage_used(c);
  return used <= c->limit && bytes <= c->limit - used;
}

bool gmt_held_admit(const gmt_slack_pod_t *pod, uint64_t bytes, uint64_t since_ms, uint64_t now_ms,
                    bool full)
{
  return !full && gmt_slack_hold(pod, bytes, now_ms > since_ms ? now_ms - since_ms : 0);
}

gmt_outage_verdict_t gmt_outage_reserve(const gmt_outage_reserve_t *r)
{
  if (r->unlisted)
    return GMT_OUTAGE_NOPOD;
  if (!r->device_allowed)
    return GMT_OUTAGE_DEVICE;
  bool may_hold = gmt_held_admit(&r->slack, r->bytes, r->since_ms, r->now_ms, r->held_full);
  if (r->others_held && may_hold)
    return GMT_OUTAGE_HOLD_BEHIND;
  if (gmt_outage_fits(&r->count, r->bytes))
    return GMT_OUTAGE_GRANT;
  return may_hold ? GMT_OUTAGE_HOLD : GMT_OUTAGE_REFUSE;
}

void gmt_held_took(gmt_held_pass_t *pass, uint64_t bytes)
{
  pass->room -= bytes < pass->room ? bytes : pass->room;
}

gmt_held_action_t gmt_held_step(gmt_held_pass_t *pass, const gmt_held_view_t *h, int *timeout_ms)
{
  uint64_t now = pass->now_ms;
  if (h->in_flight) {
    gmt_held_took(pass, h->bytes);
    return GMT_HELD_WAIT;
  }
  if (h->caller_gone)
    return GMT_HELD_CANCEL;
  if (!gmt_held_admit(&h->slack, h->bytes, h->since_ms, now, false))
    return h->tried_ms ? GMT_HELD_REFUSE : GMT_HELD_ASK;
  if (pass->blocked)
    return GMT_HELD_WAIT;
  if (pass->outage) {
    if (gmt_outage_fits(&h->count, h->bytes))
      return GMT_HELD_GRANT;
    pass->blocked = true;
    return GMT_HELD_WAIT;
  }
  /* Room by the replies: tried when they said something new since its
   * last try. No room: the first such is tried blind now and then, and
   * those behind it wait. */
  bool fits = h->bytes <= pass->room;
  bool due = !h->tried_ms || now - h->tried_ms >= GMT_HELD_RETRY_MS;
  pass->blocked = !fits;
  if (!(fits ? due || h->tried_news != pass->news : due)) {
    pass->blocked = true;
    return GMT_HELD_WAIT;
  }
  uint64_t end = h->since_ms + GMT_SLACK_HOLD_MS + GMT_HELD_LAST_TRY_MS;
  uint64_t left = end > now ? end - now : 1;
  *timeout_ms = left < GMT_RPC_PMGR_WAIT_MS ? (int)left : GMT_RPC_PMGR_WAIT_MS;
  return GMT_HELD_TRY;
}
