/* The GPU time token policy (Gemini): who gets a device's token next and for
 * how long. Pure bookkeeping over a clock the caller passes in (milliseconds
 * as a double, any monotonic origin): no I/O, no timers, no wire, so that it
 * is unit-tested with a fake clock. server/rpc_token.c owns the calls and
 * the timers and asks gmt_token_schedule() what to do.
 *
 * Per device: at most one holder, and the grants of the last window. A
 * pod's usage at time t is its grant time inside [t - W, t], where k grants
 * that overlap are each charged 1/k of the overlapped time. */
#ifndef GMT_SERVER_TOKEN_H
#define GMT_SERVER_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "gmt_token_rules.h"
#include "swap_turn.h"

/* The bounds the flags accept. */
#define GMT_TOKEN_WINDOW_MIN_MS 100
#define GMT_TOKEN_WINDOW_MAX_MS 3600000
#define GMT_TOKEN_LATENCY_IDLE_MAX_MS 1000
#define GMT_TOKEN_WAKE_QUEUE_MAX_MS 1000

typedef struct gmt_token_params {
  double window_ms;     /* W: the sliding window usage is measured over */
  double base_quota_ms; /* a grant's length when the pod has no burst estimate */
  double min_quota_ms;  /* the shortest grant (unless the limit leaves less) */
  /* A latency pod's grant goes back once it has been quiet this long with
   * its work done (TokenReply.idle_us; --latency-idle-ms). */
  double latency_idle_ms;
  /* A batch pod's queued work is bounded to this while a swap pod moved
   * out while idle may wake on its device (TokenReply.queue_bound_us;
   * --wake-queue-ms; 0: not bounded for that). */
  double wake_queue_ms;
  double alone_quota_ms; /* a grant's length, at least, with the device to itself */
  /* A mode=swap pod's turn: its moves are at most this share of it
   * (--swap-move-share; swap_turn.h). */
  double swap_move_share;
} gmt_token_params_t;

/* The defaults above. */
void gmt_token_params_default(gmt_token_params_t *p);

/* 0, or -EINVAL with the reason, naming the flag, in err. */
int gmt_token_params_check(const gmt_token_params_t *p, char *err, size_t errlen);

/* One device's token. */
typedef struct gmt_token_dev gmt_token_dev_t;

int gmt_token_dev_new(gmt_token_dev_t **out);
void gmt_token_dev_free(gmt_token_dev_t *d);

/* The pod holding the token, or NULL when it is free. */
const char *gmt_token_holder(const gmt_token_dev_t *d);
/* When the holder's grant runs out (start + quota). */
double gmt_token_grant_end(const gmt_token_dev_t *d);
/* How many finished grants (and overuse charges) are kept. */
size_t gmt_token_history(const gmt_token_dev_t *d);

/* When the pod's last finished grant ended (-INFINITY: never, or so long
 * ago that it was forgotten). */
double gmt_token_last_end(const gmt_token_dev_t *d, const char *pod);

/* The pod's usage in [now - W, now], the holder's running grant counted up
 * to now. */
double gmt_token_usage(const gmt_token_dev_t *d, const char *pod, double window_ms, double now);

/* Gemini's rule: eligible while LIMIT x W - usage > 0. */
bool gmt_token_eligible(double usage_ms, double limit, double window_ms);

/* The most GPU time the pod may be granted from now on: the largest q such
 * that its usage in the window ending at now + q, with [now, now + q)
 * granted, stays within LIMIT x W; at most LIMIT x W. It is LIMIT x W -
 * usage or more: at the limit it is what leaves the window at the back
 * while the grant runs, so that a pod with LIMIT 1.0 alone keeps the GPU
 * and one at LIMIT 0.5 gets exactly half in every window. */
double gmt_token_allowance(const gmt_token_dev_t *d, const char *pod, double limit,
                           double window_ms, double now);

/* A pod waiting for the token: one per pod, its calls merged. */
typedef struct gmt_token_cand {
  const char *pod;
  double request, limit; /* its shares now */
  double burst_ms;       /* largest burst its calls reported; 0: none */
  double arrival_ms;     /* when its oldest waiting call arrived */
  bool latency;          /* class=latency: goes before every batch pod that can run */
  bool waking;           /* a swap pod moved out while idle, asking again: may cut a turn short */
  bool watched;          /* its last grant was watched: a pod that comes can cut its next short */
  double turn_ms;        /* a swap pod's grant must run this long to pay for its moves; 0: none */
  /* Filled by gmt_token_choose(): */
  double usage_ms;
  double allowance_ms;
} gmt_token_cand_t;

/* Ranks candidates whose usage_ms and allowance_ms are filled: those that
 * can take a grant (allowance at least min(min quota, LIMIT x W)); among
 * them latency pods before batch pods; then those below their REQUEST first, by missing / (missing
 * + usage) descending with missing = REQUEST x W - usage; then the others by lowest usage; ties by
 * earliest arrival. Returns the index of the winner, or -1. */
int gmt_token_pick(const gmt_token_params_t *p, const gmt_token_cand_t *c, size_t n);

/* Whether c (its allowance filled) may take a grant now: false is a pod
 * held back at its LIMIT (or LIMIT 0). */
bool gmt_token_can_take(const gmt_token_params_t *p, const gmt_token_cand_t *c);

/* Fills usage_ms and allowance_ms of every candidate at now, then picks. */
int gmt_token_choose(const gmt_token_params_t *p, const gmt_token_dev_t *d, gmt_token_cand_t *c,
                     size_t n, double now);

/* A grant's length: the base quota without a burst estimate, else the burst
 * clamped to [min quota, LIMIT x W]; then at most the allowance, and at
 * least the min quota unless the allowance is smaller. */
double gmt_token_quota(const gmt_token_params_t *p, double burst_ms, double limit,
                       double allowance_ms);

/* With the token free and nobody able to take it: the earliest time after
 * now at which one of the candidates can (its allowance reaches
 * min(min quota, LIMIT x W)), or INFINITY if none ever will (LIMIT 0). */
double gmt_token_wake(const gmt_token_params_t *p, const gmt_token_dev_t *d,
                      const gmt_token_cand_t *c, size_t n, double now);

/* Whether the holder's grant should be cut short for c, a pod that asks
 * now: the grant has run its turn (a swap pod's turn_ms when it was
 * granted: cut sooner, the memory moves that began it would be wasted and
 * the next pod's start would move it all again) unless c is a latency pod
 * or a waking one (an idle pod's first launch waits for no turn),
 * c began waiting after the grant started (a pod that waited when it
 * was made had its turn at the choice; one that comes back from idle, or a
 * latency pod with new work, did not), the holder is not draining already,
 * and c, with its usage and allowance filled, would be chosen before the
 * holder as the holder stands now (its usage up to now). holder is the
 * holder's candidate (its shares and class; usage and allowance are filled
 * here). An idle pod that launches again then waits for what the holder
 * has queued, not for the rest of its grant. */
bool gmt_token_should_revoke(const gmt_token_params_t *p, const gmt_token_dev_t *d,
                             gmt_token_cand_t *c, gmt_token_cand_t *holder, double now);

/* Cuts the holder's grant short at now: it drains (gmt_token_drain), and
 * is charged as its work runs until it comes back or releases. */
void gmt_token_revoke(gmt_token_dev_t *d, double now);

/* The token (free) goes to pod from now for quota_ms. -ENOMEM. */
int gmt_token_grant(gmt_token_dev_t *d, const char *pod, double now, double quota_ms);

/* The holder gives the token back at now: its usage stops growing. Before
 * its grant runs out, or while it drains (then now may be past the planned
 * end: its work ran until then). No-op when free. -ENOMEM. */
int gmt_token_release(gmt_token_dev_t *d, double now);

/* The holder's quota ran out, but the work it queued under it still runs:
 * the grant goes on (nobody else gets the token, its usage keeps growing)
 * until the holder says its work is done (gmt_token_release), or the caller
 * gives up waiting (GMT_TOKEN_DRAIN_MAX_MS) and releases it. Time is GPU
 * time: a grant does not start behind its predecessor's queue. */
void gmt_token_drain(gmt_token_dev_t *d);
bool gmt_token_draining(const gmt_token_dev_t *d);

/* The holder's grant ran out: it is charged up to its planned end. -ENOMEM. */
int gmt_token_expire(gmt_token_dev_t *d);

/* The pod reports it ran overuse_ms past its last grant: charged as
 * [end of its last finished grant, + overuse), or as [now - overuse, now)
 * when no grant of it is known; never past now, at most W. A pod that
 * holds the token should have its grant ended first (a holder asking again
 * has come back: Gemini ends its grant then). -ENOMEM. */
int gmt_token_overuse(gmt_token_dev_t *d, const char *pod, double overuse_ms, double window_ms,
                      double now);

/* What a pod's Token call says about its last grant, charged: the rule
 * that decides what a grant costs, on the scheduler's side (what the
 * process measured is hook/token/busy.c's, summed over a pod's processes
 * by client/pmgr/token_share.c). From the holder the call ends its grant:
 * at now when it comes back for more (its queued work has run), or, for a
 * release, at now - idle_ms (its work was done then; idle_ms that is not
 * a positive number counts as 0), never before the grant's start nor,
 * unless it drains, past its planned end; the side grant's pod's call ends
 * the side grant the same way (gmt_token_side_end). From any other pod the
 * overuse_ms it reports, work that ran past a grant that did not wait for
 * it, is charged after its last grant (gmt_token_overuse); a holder's own
 * overuse is in its grant already. -ENOMEM. */
int gmt_token_report(gmt_token_dev_t *d, const char *pod, double now, bool release, double idle_ms,
                     double overuse_ms, double window_ms);

/* ---- a latency pod beside the holder (the bell, docs/protocol.md) ----
 *
 * While a batch pod holds the token with a grant that heeds the bell, a
 * latency pod that asks is granted beside it at once instead of cutting
 * it: its launches ring the bell and the holder waits at its own, so the
 * holder keeps its grant between requests and the GPU they leave idle.
 * A latency pod that holds the token when a batch pod asks steps aside
 * the same way. A side grant is charged as a grant: where it overlaps the
 * holder's, each is charged half. At most one side grant per device. */

/* The pod granted beside the holder, or NULL. */
const char *gmt_token_side(const gmt_token_dev_t *d);
/* When that grant runs out (0: none). */
double gmt_token_side_end_planned(const gmt_token_dev_t *d);
/* pod is granted beside the holder from now for quota_ms. -EBUSY: a side
 * grant is held, or pod holds the token; -ENOMEM. */
int gmt_token_side_grant(gmt_token_dev_t *d, const char *pod, double now, double quota_ms);
/* The holder's grant goes on beside: the token is free. -EBUSY: no holder,
 * it drains, or a side grant is held already. */
int gmt_token_step_aside(gmt_token_dev_t *d);
/* The side grant ends at now (no later than its planned end; gmt_token_report
 * ends it for its pod's release or return). -ENOMEM. */
int gmt_token_side_end(gmt_token_dev_t *d, double now);

/* Forgets what the window no longer needs. */
void gmt_token_prune(gmt_token_dev_t *d, double window_ms, double now);

/* ---- the decision: the steps above in their order ---- */

/* What the caller must do with its calls and its timer. */
typedef enum gmt_token_action {
  GMT_TOKEN_KEEP,  /* the token is held: nothing changes, the grant's end stands */
  GMT_TOKEN_GRANT, /* c[winner] holds it from now: answer that pod's calls with
                      quota_ms, and end the grant in quota_ms */
  GMT_TOKEN_WAKE,  /* nobody may run now: decide again at wake_ms */
  GMT_TOKEN_IDLE,  /* nobody waits, or none ever may run (LIMIT 0): no timer */
} gmt_token_action_t;

typedef struct gmt_token_decision {
  gmt_token_action_t action;
  int winner;      /* GRANT: the index of the pod in the candidates */
  double quota_ms; /* GRANT: the grant's length */
  double wake_ms;  /* WAKE: when, on the caller's clock */
  bool alone;      /* GRANT: the winner has the device to itself, watched */
} gmt_token_decision_t;

/* Whether pod has the device to itself: no other pod's grant or charge in
 * [now - W, now] (after gmt_token_prune). */
bool gmt_token_alone(const gmt_token_dev_t *d, const char *pod, double window_ms, double now);

/* One decision for a device whose waiting pods are c[0..n): a held token
 * decides nothing (KEEP); else the window is pruned, the candidates'
 * usage and allowance are filled and the winner picked (gmt_token_choose),
 * and then either the winner's quota is sized from its burst
 * (gmt_token_quota; at least alone_quota_ms within its allowance when it
 * waits alone, has the device to itself and its last grant was watched;
 * at least its turn_ms within its allowance, a swap pod's turn, which is
 * then not cut short by a batch pod before it has run) and its grant recorded (gmt_token_grant), so
 * that the next decision counts it, or, with no winner, the wake time is found (gmt_token_wake;
 * IDLE when there is none). Returns 0, or -ENOMEM when the grant could not be recorded: *out is
 * then the GRANT that was meant, the token still free (answer the winner's calls with the error,
 * decide again). */
int gmt_token_schedule(const gmt_token_params_t *p, gmt_token_dev_t *d, gmt_token_cand_t *c,
                       size_t n, double now, gmt_token_decision_t *out);

#endif
