/* Memory tiers: a ledger per memory space, after NVIDIA cuCascade's
 * memory spaces and reservations (docs/tiers.md).
 *
 * A space is one place bytes can live: (GPU, device index), (HOST, NUMA
 * node) or (DISK, index of a --disk-tier path). Each has a capacity, a
 * reservation limit (at most the capacity) and downgrade thresholds. An
 * owner (a pod's process: pod name + pid) reserves bytes in a space chosen
 * by a strategy, then uses bytes inside its reservation; a limit policy
 * says what happens when it uses more than it reserved.
 *
 * A space is occupied by the larger of reserved and used bytes of each of
 * its reservations. New reservations fit under the limit; use beyond a
 * reservation (limit policy IGNORE) may pass the limit but never the
 * capacity. Counters are unsigned and never wrap: releasing twice, or
 * giving back more than was used, changes nothing that was not there.
 *
 * Pure bookkeeping: no loop, no threads, no wire. Time comes in as now_ms
 * (monotonic), so a request may wait for memory, bounded, and the caller
 * arms its own timer (gmt_tiers_next_deadline) to call gmt_tiers_expire.
 * Unit tested by test/unit/test_tiers.c. */
#ifndef GMT_SERVER_TIERS_H
#define GMT_SERVER_TIERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Fastest first: a lower tier has a larger number. */
typedef enum {
  GMT_TIER_GPU = 0,
  GMT_TIER_HOST = 1,
  GMT_TIER_DISK = 2,
} gmt_tier_t;
#define GMT_TIERS 3

/* cuCascade's defaults: start moving data down at 85% of the capacity,
 * stop at 65% (the gap keeps it from thrashing). */
#define GMT_TIERS_TRIGGER 0.85
#define GMT_TIERS_STOP 0.65

/* At most this many requests wait at once: each costs a retry on every
 * release. */
#define GMT_TIERS_MAX_WAITERS 4096

typedef struct gmt_tiers gmt_tiers_t;

/* How a request picks its space. "Room" is what a new reservation may
 * take: the limit less what is occupied. */
typedef enum {
  GMT_TIER_ANY_IN_TIER,        /* the space of tier with the most room */
  GMT_TIER_ANY_IN_TIER_PREFER, /* (tier, index) if it fits, else as ANY_IN_TIER */
  GMT_TIER_SPECIFIC,           /* (tier, index) or nothing */
  GMT_TIER_ANY_IN_TIERS,       /* tiers[0..ntiers) in order: the first that fits */
  GMT_TIER_TO_DOWNGRADE,       /* the tiers below tier, nearest first */
  GMT_TIER_TO_UPGRADE,         /* the tiers above tier, nearest first */
} gmt_tier_strategy_t;

/* What using more than the reservation does (gmt_tiers_use). */
typedef enum {
  GMT_TIER_LIMIT_FAIL,   /* -ENOSPC */
  GMT_TIER_LIMIT_IGNORE, /* allowed while the space stays within its capacity */
  GMT_TIER_LIMIT_GROW,   /* the reservation grows to 1.25x what is used, or as
                          * far as the space has room; -ENOSPC if not even
                          * what is used fits */
} gmt_tier_limit_policy_t;

typedef struct gmt_tier_resv {
  uint64_t id;     /* never 0 */
  gmt_tier_t tier; /* where it is */
  int index;       /* device, NUMA node or disk index */
  uint64_t bytes;  /* reserved */
  uint64_t used;   /* used inside it (may pass bytes under IGNORE) */
} gmt_tier_resv_t;

/* A waiting request's end, called exactly once: status 0 and its
 * reservation (resv->id is the id gmt_tiers_reserve gave), -ETIMEDOUT
 * (gmt_tiers_expire), or -ECANCELED (gmt_tiers_cancel, its owner
 * released, or gmt_tiers_free; resv->id only). It may call gmt_tiers_*
 * on t, but for gmt_tiers_free. */
typedef void (*gmt_tiers_wait_cb)(void *arg, int status, const gmt_tier_resv_t *resv);

typedef struct gmt_tier_request {
  gmt_tier_strategy_t strategy;
  /* ANY_IN_TIER*, SPECIFIC: the tier; TO_*: the tier the data is in. */
  gmt_tier_t tier;
  int index;                   /* PREFER: the preferred space; SPECIFIC: the space */
  gmt_tier_t tiers[GMT_TIERS]; /* ANY_IN_TIERS */
  size_t ntiers;
  uint64_t bytes;  /* above 0 */
  const char *pod; /* the owner: 1..GMT_POD_NAME_MAX characters, copied */
  uint32_t pid;
  gmt_tier_limit_policy_t policy;
  /* With wait_ms > 0 and cb: a request that does not fit now but would
   * once memory is freed waits until now_ms + wait_ms. */
  uint64_t wait_ms;
  gmt_tiers_wait_cb cb;
  void *arg;
} gmt_tier_request_t;

typedef struct gmt_tier_space_info {
  gmt_tier_t tier;
  int index;
  uint64_t capacity, limit;
  double trigger, stop;
  uint64_t reserved; /* sum of the reservations' bytes */
  uint64_t used;     /* sum of what is used inside them */
  uint64_t held;     /* held outside reservations (gmt_tiers_set_held) */
  uint64_t occupied; /* sum of the larger of the two, per reservation, and held */
  uint64_t pressure; /* gmt_tiers_pressure() */
  size_t nresv;      /* reservations in it */
} gmt_tier_space_info_t;

int gmt_tiers_new(gmt_tiers_t **out);
/* Cancels every waiting request (-ECANCELED; those callbacks must not call
 * into t), then frees. */
void gmt_tiers_free(gmt_tiers_t *t);

/* "gpu", "host", "disk" ("?" for anything else). */
const char *gmt_tier_name(gmt_tier_t tier);

/* Declares a space. limit 0 means the capacity, trigger and stop 0 mean
 * the defaults. -EINVAL: a bad tier, index < 0, capacity 0, limit above
 * capacity, or not 0 < stop < trigger <= 1; -EEXIST: declared already;
 * -ENOMEM. Waiting requests are tried again (the new space may fit them). */
int gmt_tiers_add_space(gmt_tiers_t *t, gmt_tier_t tier, int index, uint64_t capacity,
                        uint64_t limit, double trigger, double stop);

/* Reserves req->bytes in the space the strategy picks. Returns 0 with *out
 * filled; -EINPROGRESS when the request waits (out->id is its id: req->cb
 * says how it ends); -ENOSPC when it does not fit now (and does not wait);
 * -E2BIG when no candidate space could ever hold it (bytes above every
 * limit); -ENODEV when the strategy has no space to pick from; -EAGAIN when
 * GMT_TIERS_MAX_WAITERS wait already; -EINVAL, -ENOMEM. */
int gmt_tiers_reserve(gmt_tiers_t *t, const gmt_tier_request_t *req, uint64_t now_ms,
                      gmt_tier_resv_t *out);

/* The reservation id (0 or -ENOENT). */
int gmt_tiers_get(const gmt_tiers_t *t, uint64_t id, gmt_tier_resv_t *out);

/* Uses bytes more inside reservation id, as its limit policy allows: 0,
 * -ENOSPC (nothing changes) or -ENOENT. *out (may be NULL) is it after. */
int gmt_tiers_use(gmt_tiers_t *t, uint64_t id, uint64_t bytes, gmt_tier_resv_t *out);
/* Gives back up to bytes of what id uses, never below 0; *taken (may be
 * NULL) is how many it took. 0 or -ENOENT. */
int gmt_tiers_unuse(gmt_tiers_t *t, uint64_t id, uint64_t bytes, uint64_t *taken);

/* Frees reservation id and tries the waiting requests, oldest first: each
 * that fits now is granted (one that does not fit does not hold back
 * younger ones; its deadline bounds its wait). -ENOENT when id is not a
 * reservation (released already, or never made); a waiting request is
 * ended with gmt_tiers_cancel, not here. */
int gmt_tiers_release(gmt_tiers_t *t, uint64_t id);
/* Ends waiting request id with -ECANCELED: 0 or -ENOENT. */
int gmt_tiers_cancel(gmt_tiers_t *t, uint64_t id);

/* A process died (pid of pod) or a pod went away (every pid): frees its
 * reservations and cancels its waiting requests. Returns the bytes freed
 * (what its reservations occupied); pid 0 is no process: 0. */
uint64_t gmt_tiers_release_owner(gmt_tiers_t *t, const char *pod, uint32_t pid);
uint64_t gmt_tiers_release_pod(gmt_tiers_t *t, const char *pod);

/* Ends the waiting requests whose deadline is at or before now_ms with
 * -ETIMEDOUT. Returns how many. */
size_t gmt_tiers_expire(gmt_tiers_t *t, uint64_t now_ms);
/* The earliest deadline of a waiting request: true and *ms, or false when
 * none waits. */
bool gmt_tiers_next_deadline(const gmt_tiers_t *t, uint64_t *ms);
size_t gmt_tiers_nwaiting(const gmt_tiers_t *t);

/* The bytes to move out of (tier, index) to bring it down to stop x
 * capacity, once it is occupied to trigger x capacity or more; 0 below
 * the trigger (or for a space not declared). */
uint64_t gmt_tiers_pressure(const gmt_tiers_t *t, gmt_tier_t tier, int index);

/* Bytes the space holds outside any reservation, as whoever keeps them
 * counts them (a GPU space: the device ledger's reservations, rpc_tiers.c):
 * they occupy the space like a reservation, so they take room and make
 * pressure. Less held serves the waiters that now fit. -ENOENT when there
 * is no such space. */
int gmt_tiers_set_held(gmt_tiers_t *t, gmt_tier_t tier, int index, uint64_t bytes);

/* What a new reservation may take in the space now (its limit less what is
 * occupied); -ENOENT when there is no such space. */
int gmt_tiers_room(const gmt_tiers_t *t, gmt_tier_t tier, int index, uint64_t *room_out);

/* The spaces, in the order declared: i in [0, gmt_tiers_nspaces). 0 or
 * -ENOENT. */
size_t gmt_tiers_nspaces(const gmt_tiers_t *t);
int gmt_tiers_space_info(const gmt_tiers_t *t, size_t i, gmt_tier_space_info_t *out);
/* What an owner occupies in a tier; pid 0 counts every process of pod. */
uint64_t gmt_tiers_owner_bytes(const gmt_tiers_t *t, const char *pod, uint32_t pid,
                               gmt_tier_t tier);

/* Recounts every space from its reservations: 0, or -EFAULT when a total
 * is out of step (for tests and debug checks). */
int gmt_tiers_check(const gmt_tiers_t *t);

#endif
