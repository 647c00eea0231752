/* When a process's grant on a device is busy and when it is idle: the rule
 * of docs/protocol.md ("Token"), as pure functions of the clock and the
 * launch counter the caller passes in, so that unit tests cover it
 * (test/unit/test_busy.c). token.c owns the locks, the driver calls and
 * the RPCs, and applies what these say.
 *
 * A token buys GPU time actually used. A launch returns long before its
 * kernel runs, so a process that waits in a synchronize for its own queued
 * work is busy, not idle: the grant is idle only once no launch has come
 * for GMT_BUSY_IDLE_NS *and* the work queued before that is done, counted
 * from whichever came last. Whether the work is done is found by waiting
 * for it on the idle thread (never on a launch's path); when it ended is
 * what usage, overuse and the burst estimate are measured from. */
#ifndef GMT_HOOK_BUSY_H
#define GMT_HOOK_BUSY_H

#include <stdint.h>

#include "gmt_token_rules.h" /* GMT_BUSY_IDLE_NS, GMT_BUSY_TICK_NS */

#define GMT_BUSY_WAITED_NS 100000LL /* a wait this long found work queued */
#define GMT_BUSY_EMA_WEIGHT 0.3     /* of a new burst in the estimate */

/* One device's grant as the idle thread sees it. Zeroed: no grant. */
typedef struct gmt_busy {
  int64_t grant_ns;          /* the grant came */
  int64_t expiry_ns;         /* it runs out */
  int64_t busy_start_ns;     /* start of the busy period, 0: none yet */
  int busy_cut;              /* a quota ran out during it: not a natural burst */
  int64_t drained_ns;        /* the queued work was done at this time, 0: unknown */
  uint64_t drained_launches; /* the launch counter then */
  double burst_ema_ms;       /* kept across grants; 0 until one is measured */
  /* This grant's rule: quiet this long with the work done is idle, and
   * the idle thread looks this often (GMT_BUSY_IDLE_NS and GMT_BUSY_TICK_NS,
   * or a latency grant's shorter ones: gmt__busy_grant). */
  int64_t idle_ns, tick_ns;
  /* A swap process's turn (gmt__busy_turn): not idle before then unless
   * quiet for GMT_BUSY_TURN_IDLE_NS, since giving the grant back lets the
   * other pod in, and the moves each way that follow cost more than a
   * gap between two steps. */
  int64_t keep_until_ns;
  /* The most the process held on the device by the scheduler's leave
   * during the turn (gmt__busy_held). */
  uint64_t turn_bytes;
} gmt_busy_t;

enum {
  GMT_BUSY_WAIT = 0,  /* busy, or quiet for too short a time */
  GMT_BUSY_DRAIN = 1, /* quiet: find out whether the queued work is done */
  GMT_BUSY_IDLE = 2,  /* quiet long enough with the work done: give it back */
};

/* What to do now. launches is the launch counter now and last_ns when it
 * was last seen to move. */
int gmt__busy_next(const gmt_busy_t *b, uint64_t launches, int64_t last_ns, int64_t now);

/* A wait for the queued work ran from start_ns to end_ns, with the launch
 * counter at before and after. When nothing was launched meanwhile the
 * work is done, and it ended at end_ns if the wait waited, else before
 * start_ns, no earlier than last_ns (the counter's last move). */
void gmt__busy_drained(gmt_busy_t *b, uint64_t before, uint64_t after, int64_t last_ns,
                       int64_t start_ns, int64_t end_ns);

/* A new grant of quota_ms at now (a busy period goes on across grants
 * that follow each other). idle_us: the grant's own idle time
 * (TokenReply.idle_us: a latency pod's), 0 for the batch rule. */
void gmt__busy_grant(gmt_busy_t *b, int64_t now, double quota_ms, uint32_t idle_us);

/* The grant just made must run turn_ms to pay for the memory moves that
 * began it (a swap pod's turn, TokenReply.turn_ms as gmt-schd planned
 * it): it is not idle before then, unless quiet for GMT_BUSY_TURN_IDLE_NS
 * (a job that finished in its turn held the GPU idle for the rest of it,
 * 5 s of two AdamW jobs' 19 s on an H200). 0: no turn. */
void gmt__busy_turn(gmt_busy_t *b, double turn_ms);

/* The process holds bytes on the device now (its swap memory granted).
 * A turn is kept for the moves that giving it back would cause: once the
 * process holds less than 1/GMT_BUSY_TURN_LIGHT of the most it held in
 * the turn (a job that finished and freed its memory, and stays), little
 * would move, and the turn's rule ends: the grant is idle as any other
 * (a finished AdamW job held the GPU 250 ms idle before the next, H200). */
#define GMT_BUSY_TURN_LIGHT 8 /* an eighth */
void gmt__busy_held(gmt_busy_t *b, uint64_t bytes);

/* How long the idle thread sleeps before its next look: a latency
 * grant's tick while one may be held (latency); GMT_BUSY_ALONE_TICK_NS
 * while the one grant held has the device to itself (alone,
 * TokenReply.alone) and the last look saw the process launching (the look
 * that finds it quiet comes at most that late, and the ones after it at
 * the batch tick); else GMT_BUSY_TICK_NS. */
int64_t gmt__busy_sleep_ns(int latency, int alone, int launching);

/* What a grant that ends reports to the pod manager. */
typedef struct gmt_busy_end {
  double overuse_ms; /* the work ran this long past the quota */
  double idle_ms;    /* the grant went unused this long before now */
} gmt_busy_end_t;

/* The grant ends at now. idle: given back by the idle thread (the busy
 * period ended with the work: a natural burst when the quota did not cut
 * it). Otherwise the quota ran out under a launch that waited for the
 * queue (gmt__busy_drained first): the busy period goes on. */
gmt_busy_end_t gmt__busy_end(gmt_busy_t *b, int64_t now, int idle);

/* How long a latency process's bell rings on after its work is done,
 * given how long it took to launch again after its work was done the last
 * time (gap_ns) and the stay that followed that (last_ns). A server with
 * requests queued launches the next within tens of microseconds, and a
 * batch kernel slipped into that gap (several ms for a training step's
 * products) delays every request queued behind it. After a short gap:
 * twice it and a nap of the batch side's; after a gap of max_ns or more
 * (GMT_BELL_STAY_MAX_US unless GMT_BELL_STAY_US says) half the last stay,
 * so that the first of a burst of requests after an idle spell still
 * keeps its followers together, and a server whose requests come singly
 * soon stays no more. Never past max_ns. */
int64_t gmt__busy_stay_ns(int64_t gap_ns, int64_t last_ns, int64_t max_ns);

#endif
