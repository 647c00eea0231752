/* How gmt-pmgr shares its pod's GPU time token among the pod's processes
 * (pmgr_token.c is the loop and wire around it): who is answered from a
 * grant, when a grant goes back to the scheduler and what is asked for
 * next, how long a stalled process is waited for, and what the pod does
 * while the scheduler cannot grant. Pure: the clock and the pod's state
 * come in, decisions go out as a gmt_tshare_act_t for the caller to apply,
 * so that test/unit/test_token_share.c covers the order of each decision on
 * a fake clock.
 *
 * The scheduler grants a token to a pod, not to a process: a process that
 * asks while the pod's grant still has time left gets the rest of it at
 * once. A grant ends upstream only when every process that shared it is
 * done with it: it came back for more (its quota spent and its queued work
 * run), released it (idle), or exited. Then one call goes to the
 * scheduler: a request for all the processes waiting (burst the largest of
 * theirs, overuse their sum), which ends the grant and puts the pod among
 * the candidates for the next, or a release saying how long the grant went
 * unused. So the scheduler never starts the next grant behind this pod's
 * queued work, and a pod that goes idle early hands the GPU on at once. A
 * process that neither comes back nor releases (stalled) is waited for at
 * most GMT_TOKEN_DRAIN_MAX_MS past the quota.
 *
 * When the scheduler cannot be reached (a failed call, or the heartbeat
 * saying it is down while a request waits), the pod keeps running within
 * its last shares: local grants of the base quota, each followed by a
 * pause that keeps the pod's duty cycle within its LIMIT. */
#ifndef GMT_CLIENT_TOKEN_SHARE_H
#define GMT_CLIENT_TOKEN_SHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmt_token_rules.h" /* GMT_TOKEN_BASE_QUOTA_MS: local grants; GMT_TOKEN_DRAIN_MAX_MS */

#define GMT_TSHARE_MARGIN_NS 1000000ull /* less left than this: spent */
#define GMT_TSHARE_MIN_LIMIT 0.01       /* local pauses stay finite */
/* The scheduler refuses a pod it thinks has no processes (ESRCH): right
 * after a process joins, its Token can overtake the heartbeat that lists
 * it. Asked again this often, for this long, before it counts as an
 * outage. */
#define GMT_TSHARE_ESRCH_RETRY_MS 20
#define GMT_TSHARE_ESRCH_FOR_NS 2000000000ull

/* A process's call waiting for the token. */
typedef struct gmt_tshare_waiter {
  struct gmt_tshare_waiter *next;
  void *call; /* the caller's, answered when the waiter is */
  uint32_t pid;
  double burst_ms;
} gmt_tshare_waiter_t;

/* The pod, across its devices. */
typedef struct gmt_tshare {
  bool outage; /* the scheduler cannot grant: local grants (said once) */
} gmt_tshare_t;

/* One device's token as the pod shares it. Zeroed, then
 * gmt_tshare_dev_init. */
typedef struct gmt_tshare_dev {
  gmt_tshare_t *pod;
  uint64_t expiry_ns; /* the pod's grant runs out; 0: none */
  bool local;         /* granted here during an outage */
  bool owed;          /* a grant of the scheduler's, not yet ended by a call upstream */
  uint64_t up_seq;    /* the Token request upstream, 0: none in flight */
  uint64_t rel_seq;   /* the release upstream, 0: none in flight */
  gmt_tshare_waiter_t *waiters, **wtail;
  uint32_t *sharers; /* processes answered from the current grant */
  size_t nsharers, capsharers;
  double overuse_ms;      /* to charge the pod with the next upstream call */
  uint64_t busy_until_ns; /* released sharers' work was done by then, 0: none released */
  uint64_t local_next_ns; /* outage: no local grant before this */
  uint64_t esrch_ns;      /* since when the scheduler says ESRCH, 0: it does not */
  bool hold_armed;        /* the caller's hold timer runs (act.hold) */
} gmt_tshare_dev_t;

/* What the caller knows at the time of an event. */
typedef struct gmt_tshare_in {
  uint64_t now_ns; /* monotonic */
  double limit;    /* the pod's LIMIT */
  bool allowed;    /* its devices= lets it use this device */
  bool unlisted;   /* the scheduler no longer lists the pod */
  bool schd_down;  /* the heartbeat finds the scheduler down */
  bool closing;    /* the pod manager stops */
} gmt_tshare_in_t;

enum { GMT_TSHARE_SEND_NONE, GMT_TSHARE_SEND_REQUEST, GMT_TSHARE_SEND_RELEASE };
enum { GMT_TSHARE_TIMER_KEEP, GMT_TSHARE_TIMER_START, GMT_TSHARE_TIMER_STOP };
/* Why waiters are refused. */
enum {
  GMT_TSHARE_REFUSED_BY_SCHD = 1, /* the scheduler's answer (act.refuse_rc, its words) */
  GMT_TSHARE_REFUSED_DEVICE,      /* outage: devices= does not allow the device */
  GMT_TSHARE_REFUSED_UNLISTED,    /* outage: the scheduler no longer lists the pod */
  GMT_TSHARE_REFUSED_LIMIT,       /* outage: LIMIT 0 */
};
/* Why an outage began. */
enum {
  GMT_TSHARE_OUTAGE_DOWN = 1, /* the heartbeat says the scheduler is down */
  GMT_TSHARE_OUTAGE_STOPPED,  /* it went down while a call waited on it */
  GMT_TSHARE_OUTAGE_FAILED,   /* the event's call failed (its error says how) */
};
/* The scheduler grants again. */
enum {
  GMT_TSHARE_AGAIN = 1,  /* after an outage */
  GMT_TSHARE_AGAIN_LATE, /* a request given up on was granted after all */
};

/* What the caller does after an event, in this order: say what happened
 * (the fields after send), answer the waiters in granted or refused and
 * free them, set the timers, then make the call upstream and report how
 * it went (gmt_tshare_sent or gmt_tshare_send_failed). Zeroed by each
 * event. */
typedef struct gmt_tshare_act {
  double share_ms;              /* answer the request at once with this quota (> 0) */
  gmt_tshare_waiter_t *granted; /* answer each with quota_ms */
  double quota_ms;
  gmt_tshare_waiter_t *refused; /* answer each with refuse_rc */
  int refuse_rc, refusal;
  int hold;         /* GMT_TSHARE_TIMER_START: the hold timer, hold_ms; on it, gmt_tshare_held */
  uint64_t hold_ms; /* (GMT_TSHARE_TIMER_STOP is not used) */
  int drain;        /* the drain timer, drain_ms; on it, gmt_tshare_drained */
  uint64_t drain_ms;
  int send; /* GMT_TSHARE_SEND_*: a call upstream for pid */
  uint32_t pid;
  double burst_ms, overuse_ms, idle_ms;
  int outage;          /* GMT_TSHARE_OUTAGE_*: one began */
  int again;           /* GMT_TSHARE_AGAIN*: it ended */
  size_t dropped;      /* sharers no longer waited for (the drain timer) */
  bool esrch_retry;    /* the scheduler does not list the pod's processes yet: asked again */
  uint32_t unrecorded; /* a sharer not recorded (out of memory), 0: none */
} gmt_tshare_act_t;

void gmt_tshare_dev_init(gmt_tshare_dev_t *d, gmt_tshare_t *pod);
/* Frees what d holds but its waiters (gmt_tshare_take first). */
void gmt_tshare_dev_free(gmt_tshare_dev_t *d);

/* Process pid asks for the token (it spent its share, or has none):
 * answered at once from the pod's grant (act->share_ms), or queued with
 * call (-ENOMEM: not queued). overuse_ms is what its last share ran
 * over, charged to the pod; burst_ms what it expects to need. */
int gmt_tshare_request(gmt_tshare_dev_t *d, const gmt_tshare_in_t *in, uint32_t pid,
                       double burst_ms, double overuse_ms, void *call, gmt_tshare_act_t *act);
/* pid gives its share back (idle, or exited: 0 and 0); its work was done
 * idle_ms ago. */
void gmt_tshare_release(gmt_tshare_dev_t *d, const gmt_tshare_in_t *in, uint32_t pid,
                        double overuse_ms, double idle_ms, gmt_tshare_act_t *act);
/* Takes pid's waiters (every waiter for pid 0) off the queue, in order. */
gmt_tshare_waiter_t *gmt_tshare_take(gmt_tshare_dev_t *d, uint32_t pid);

/* The call upstream that act asked for went out as seq (never 0). */
void gmt_tshare_sent(gmt_tshare_dev_t *d, const gmt_tshare_act_t *sent, uint64_t seq);
/* It could not go out. */
void gmt_tshare_send_failed(gmt_tshare_dev_t *d, const gmt_tshare_in_t *in,
                            const gmt_tshare_act_t *sent, gmt_tshare_act_t *act);
/* The scheduler's answer to call seq: rc (0, or its error) and the quota
 * it granted. */
void gmt_tshare_answered(gmt_tshare_dev_t *d, const gmt_tshare_in_t *in, bool release, uint64_t seq,
                         int rc, double quota_ms, gmt_tshare_act_t *act);
/* Whether a call upstream is in flight (the caller watches the heartbeat
 * meanwhile), and the heartbeat found the scheduler down during it. */
bool gmt_tshare_in_flight(const gmt_tshare_dev_t *d);
void gmt_tshare_lost(gmt_tshare_dev_t *d, const gmt_tshare_in_t *in, gmt_tshare_act_t *act);

/* Whether the pod holds a grant of the scheduler's on this device, which a
 * TokenWatch upstream can watch. */
bool gmt_tshare_watchable(const gmt_tshare_dev_t *d);
/* The scheduler cut the pod's grant short (TokenWatch): a process that
 * asks from now on is not answered from what was left of it. */
void gmt_tshare_revoked(gmt_tshare_dev_t *d, const gmt_tshare_in_t *in);

/* The hold timer and the drain timer ran out. */
void gmt_tshare_held(gmt_tshare_dev_t *d, const gmt_tshare_in_t *in, gmt_tshare_act_t *act);
void gmt_tshare_drained(gmt_tshare_dev_t *d, const gmt_tshare_in_t *in, gmt_tshare_act_t *act);

#endif
