/* Pin advice's decisions (docs/pinning.md, "the scheduler's side"): may a
 * host buffer be pinned, and which buffers of a program are hot. Pure
 * functions of their inputs: no loop, no wire, no store, so that
 * test/unit/test_pin_policy.c covers the order of each decision. */
#ifndef GMT_SERVER_PIN_POLICY_H
#define GMT_SERVER_PIN_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a profile says of one allocation site. */
typedef enum {
  GMT_PIN_SITE_UNKNOWN = 0, /* no profile row for it */
  GMT_PIN_SITE_COLD,
  GMT_PIN_SITE_HOT,
} gmt_pin_site_t;

/* An answer: pin or not, and why (a Gmt__PinReason). */
typedef struct {
  bool pin;
  int reason;
} gmt_pin_advice_t;

/* The answer to an Advise of bytes for a pod in mode (a Gmt__PinMode),
 * with room bytes left in the node's pinned budget. A pin fits when
 * bytes <= room: one that fits exactly is granted, one byte more is not.
 * In this order:
 *   bytes 0        no pin (nothing was asked), reason OFF;
 *   off            no, OFF;
 *   profile        PROFILE if it fits, else BUDGET;
 *   use            UNPROFILED for an unknown site, COLD for a cold one,
 *                  HOT for a hot one that fits, else BUDGET;
 *   adaptive       without pays_back no, COLD; else PAYS_BACK if it
 *                  fits, else BUDGET.
 * A mode this gmt does not know is taken as off. site matters in use mode
 * only, pays_back in adaptive mode only. */
gmt_pin_advice_t gmt_pin_decide(int mode, uint64_t bytes, bool pays_back, uint64_t room,
                                gmt_pin_site_t site);

/* One pod's part of the node's pinned budget (docs/pinning.md, "Shares"):
 * limit split evenly over pods (the pods that run whose pin= is not off,
 * for what a pod's pins may reach; every pod that runs, for what its
 * programs' own pins may count). 0 pods count as 1. */
uint64_t gmt_pin_share(uint64_t limit, size_t pods);

/* The room one pod's Advise may take: what the node's budget has left
 * (limit less node_used) and what the pod's share has left (share less
 * pod_used), whichever is smaller; 0 when either is spent. The used
 * bytes are the pins on advice and the pins programs made themselves,
 * as gmt-schd counts them. So no pod takes another's share, in one
 * request or in many; with one pod that pins, its share is the budget. */
uint64_t gmt_pin_room(uint64_t limit, uint64_t node_used, uint64_t share, uint64_t pod_used);

/* Below two passes of its bytes over the bus a buffer is never hot. A
 * pass at pinned speed (about 55 GB/s on an H100) instead of pageable
 * (about 12 GB/s, 8 to 14 measured) saves about 70 ms/GiB (55 at 14
 * GB/s), while registering costs about 46 ms/GiB (cudaHostRegister) and
 * unregistering costs more on top: one pass barely pays for the
 * registration alone, not for both, and two passes are where pinning
 * starts to pay (docs/design.md has the measurements). */
#define GMT_PIN_REUSE_FLOOR 2.0

/* One profiled buffer: its size and the bytes copied to and from it
 * (sums over the runs recorded, so their ratio is its reuse). */
typedef struct {
  uint64_t size;
  uint64_t h2d_bytes;
  uint64_t d2h_bytes;
} gmt_pin_usage_t;

/* A buffer's reuse: (h2d_bytes + d2h_bytes) / size, how many times its
 * bytes crossed the bus; 0 for a buffer of size 0. */
double gmt_pin_reuse(const gmt_pin_usage_t *u);

/* Which of one program's n buffers are hot, learned from the buffers
 * themselves: the threshold is the natural break in their reuse, the
 * largest gap between consecutive sorted log(reuse) values (ties: the
 * highest such gap, so that fewer buffers are called hot), and a buffer
 * is hot when its reuse is at or above that threshold and at or above
 * GMT_PIN_REUSE_FLOOR. When the largest gap is smaller than log(2) the
 * buffers have no two groups (they all sit on one side) and every buffer
 * at or above the floor is hot. Buffers with reuse 0 have no log: they
 * take no part in finding the break (they are below the floor anyway).
 * hot[i] is set for each row; *threshold (may be NULL) is the reuse from
 * which a buffer is hot (at least the floor). 0 or -ENOMEM. */
int gmt_pin_classify(const gmt_pin_usage_t *rows, size_t n, bool *hot, double *threshold);

#endif
