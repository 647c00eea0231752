/* What a pod manager lets its pod's processes allocate while gmt-schd
 * cannot be reached, and when a Reserve held for the pod's slack is tried
 * again, granted, or given its refusal (client/pmgr/pmgr_memory.c applies it).
 * Pure functions of their inputs, the time among them: no loop, no wire,
 * so that test/unit/test_outage_policy.c covers the order of each decision
 * on a fake clock.
 *
 * In an outage the pod manager counts the pod's memory itself: what each
 * process last reported holding, plus what was granted and given back here
 * since, summed against the pod's GPU_MEM as last heard. So the quota
 * holds for the pod's processes together through an outage, not for each
 * alone. */
#ifndef GMT_CLIENT_OUTAGE_POLICY_H
#define GMT_CLIENT_OUTAGE_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "slack_policy.h"

/* A held Reserve is tried again at least this often when the replies show
 * no room for it (room the pod manager does not see: a process's exit
 * reclaimed by the scheduler). */
#define GMT_HELD_RETRY_MS 200
/* A try still with the scheduler when the hold ends gets this much more;
 * the answer then stays inside the hook's bound on a Reserve (1.5 s). */
#define GMT_HELD_LAST_TRY_MS 150
_Static_assert(GMT_SLACK_HOLD_MS + GMT_HELD_LAST_TRY_MS <= 1200,
               "a held Reserve is answered well before the hook gives up (1500 ms)");

/* The pod's memory as its pod manager counts it. */
typedef struct {
  uint64_t limit;    /* its GPU_MEM as last heard */
  uint64_t reported; /* what its processes last reported holding */
  uint64_t up, down; /* granted and given back here since those reports */
} gmt_outage_count_t;

/* What the count says the pod holds (never below 0). */
uint64_t gmt_outage_used(const gmt_outage_count_t *c);
/* Whether bytes more fit under the limit. */
bool gmt_outage_fits(const gmt_outage_count_t *c, uint64_t bytes);

/* Whether a Reserve that came at since_ms may be held at now_ms for the
 * pod's slack (gmt_slack_hold(), on the time it has waited), when the held
 * are not already as many as a pod manager keeps (full). */
bool gmt_held_admit(const gmt_slack_pod_t *pod, uint64_t bytes, uint64_t since_ms, uint64_t now_ms,
                    bool full);

/* A Reserve while gmt-schd is unreachable. */
typedef struct {
  gmt_outage_count_t count;
  gmt_slack_pod_t slack; /* the pod as its reports say, for gmt_slack_hold() */
  uint64_t bytes;
  uint64_t since_ms, now_ms; /* when the pod manager had it first; now */
  bool unlisted;             /* gmt-schd no longer lists the pod: its limit is unknown */
  bool device_allowed;       /* its devices= names the GPU */
  bool others_held;          /* Reserves already wait for slack */
  bool held_full;            /* as many are held as a pod manager keeps */
} gmt_outage_reserve_t;

typedef enum {
  GMT_OUTAGE_NOPOD,       /* refused: no memory beyond what the pod holds */
  GMT_OUTAGE_DEVICE,      /* refused: not one of its GPUs */
  GMT_OUTAGE_HOLD_BEHIND, /* held behind the others, untried */
  GMT_OUTAGE_GRANT,       /* granted from the count */
  GMT_OUTAGE_HOLD,        /* refused by the count, held for slack */
  GMT_OUTAGE_REFUSE,      /* refused by the count: over the quota */
} gmt_outage_verdict_t;

/* In this order: a pod gmt-schd no longer lists gets nothing (NOPOD); a
 * GPU its devices= does not name, nothing (DEVICE); while others wait,
 * one that may be held waits behind them, never overtaking (HOLD_BEHIND);
 * one that fits the count is granted (GRANT); else it is held when it may
 * be (HOLD), or refused (REFUSE). */
gmt_outage_verdict_t gmt_outage_reserve(const gmt_outage_reserve_t *r);

/* One pass of the held Reserves' timer, over them in arrival order. */
typedef struct {
  uint64_t now_ms;
  bool outage;   /* gmt-schd unreachable: the count decides */
  uint64_t room; /* under the limit in the ledger, as the last reply passed back said */
  uint64_t news; /* how many such replies have come */
  bool blocked;  /* an earlier one does not fit: those behind it wait */
} gmt_held_pass_t;

/* A held Reserve as the pass sees it. */
typedef struct {
  uint64_t bytes;
  uint64_t since_ms;        /* when the pod manager had it first */
  uint64_t tried_ms;        /* its last try with gmt-schd or the count, 0: none yet */
  uint64_t tried_news;      /* the pass's news then */
  bool in_flight;           /* a try is with gmt-schd */
  bool caller_gone;         /* its process closed its connection */
  gmt_slack_pod_t slack;    /* the pod as its reports say */
  gmt_outage_count_t count; /* the count, read in an outage only */
} gmt_held_view_t;

typedef enum {
  GMT_HELD_WAIT,   /* stays held, nothing now */
  GMT_HELD_CANCEL, /* its caller has gone: dropped */
  GMT_HELD_ASK,    /* the hold ended untried: asked once, as if it came now */
  GMT_HELD_REFUSE, /* the hold ended: answered with its last refusal */
  GMT_HELD_GRANT,  /* in an outage, fits the count: granted from it */
  GMT_HELD_TRY,    /* asked of gmt-schd again, within *timeout_ms */
} gmt_held_action_t;

/* What the pass does with h, in this order: one in flight waits (its bytes
 * taken from the room); one whose caller has gone is dropped; one the
 * slack policy no longer holds is answered (ASK untried, else REFUSE);
 * behind one that does not fit, the rest wait; in an outage the count
 * grants it or it blocks those behind; else it is tried when the room
 * fits it and a reply has come since its last try or GMT_HELD_RETRY_MS
 * have passed, and tried blind every GMT_HELD_RETRY_MS when the room does
 * not fit it (those behind wait). A try waits until GMT_HELD_LAST_TRY_MS
 * after the hold's end, GMT_RPC_PMGR_WAIT_MS at most, 1 ms at least. */
gmt_held_action_t gmt_held_step(gmt_held_pass_t *pass, const gmt_held_view_t *h, int *timeout_ms);

/* A try of bytes went to gmt-schd: the room the pass has left. */
void gmt_held_took(gmt_held_pass_t *pass, uint64_t bytes);

#endif
