/* mode=swap in the scheduler: how many bytes of each swap process's
 * allocations are on each GPU now (its "resident" bytes, as the Resident
 * RPC tells them), whether a raise fits the device's space, and, when it
 * does not, which idle processes of other swap pods are asked to move
 * memory out (eviction targets: how much of theirs may stay).
 *
 * Pure bookkeeping and policy: no loop, no wire, no config. The caller
 * passes the space's limit, what else occupies it (the reservations of
 * pods not in swap mode), the clock, and who may be asked (a pod that
 * holds the device's token is running: never). docs/tiers.md, "Swap mode
 * in the scheduler", says the rules; test/unit/test_swap.c checks them. */
#ifndef GMT_SERVER_SWAP_H
#define GMT_SERVER_SWAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Devices a request may name (as the quota ledger's). */
#define GMT_SWAP_DEVICES 64
/* When a WAIT answer tells the requester to ask again. */
#define GMT_SWAP_RETRY_MS 25
/* Pressure asks only processes whose pod has not run on the device for
 * this long: one between two grants of its turn would come back at once. */
#define GMT_SWAP_PRESSURE_IDLE_MS 1000
/* How long an eviction target stands unmet before it is dropped. */
#define GMT_SWAP_TARGET_MS 10000
/* A process that told its resident bytes but was never listed by a
 * heartbeat is kept this long (its Resident may overtake the heartbeat
 * that lists it), as the quota ledger does. */
#define GMT_SWAP_GRACE_MS 2000

typedef struct gmt_swap gmt_swap_t;

int gmt_swap_new(gmt_swap_t **out);
void gmt_swap_free(gmt_swap_t *sw);

/* Whether the processes of pod may be asked to move memory off device now
 * (false while the pod holds the device's token). */
typedef bool (*gmt_swap_may_ask_fn)(void *arg, const char *pod, int device);

/* One device's space as the caller sees it at the request. */
typedef struct gmt_swap_space {
  uint64_t limit; /* what may be occupied */
  uint64_t base;  /* occupied by everything but swap processes' resident bytes */
  /* The requesting pod's quota (GPU_MEM, its total over every device):
   * what its processes have resident on every device together stays
   * within it, so that no pod makes others move out for more than it may
   * hold (0: nothing; UINT64_MAX: no bound). Requests only. */
  uint64_t quota;
  /* What may come to be occupied at once: base and the quotas of every
   * pod whose memory moves and may use the device (0: not known). At or
   * below limit every pod can hold all it may at once: nothing need move,
   * so pressure asks nobody (gmt_swap_pressure). */
  uint64_t committed;
  uint64_t now_ms;
  gmt_swap_may_ask_fn may_ask;
  /* When the pod last ran on device (its last token grant's end;
   * -INFINITY: never). NULL: victims by size alone. */
  double (*last_run)(void *arg, const char *pod, int device);
  /* Whether the pod waits for the device's token now: it has work, and
   * its memory moves by turns. NULL: every pod counts as waiting. */
  bool (*waits)(void *arg, const char *pod, int device);
  /* A pod that does not wait is asked only once it has run nothing on the
   * device, nor raised the process's bytes there, for this many ms (its
   * idle-out=; negative: never). NULL: 0. */
  double (*idle_out_ms)(void *arg, const char *pod);
  void *arg;
} gmt_swap_space_t;

typedef enum gmt_swap_reason {
  GMT_SWAP_ROOM,    /* granted */
  GMT_SWAP_WAIT,    /* not yet: ask again in retry_ms */
  GMT_SWAP_TOO_BIG, /* never: bytes above the space's limit */
  GMT_SWAP_PARTIAL, /* granted in part (gmt_swap_request_part): granted_total */
  GMT_SWAP_QUOTA,   /* never: the pod's resident bytes would pass space->quota */
} gmt_swap_reason_t;

typedef struct gmt_swap_answer {
  bool granted;
  gmt_swap_reason_t reason;
  uint32_t retry_ms;  /* WAIT: GMT_SWAP_RETRY_MS; else 0 */
  uint64_t room;      /* the space's limit less what is occupied after the answer */
  uint64_t shortfall; /* WAIT: the bytes missing */
  uint64_t coming;    /* WAIT: what targets already set will free */
  size_t asked;       /* WAIT, PARTIAL: targets set or lowered by this request */
  /* The process's resident bytes on device after the answer: bytes when
   * granted, what fits when PARTIAL, what it had otherwise. */
  uint64_t granted_total;
  /* The pod's resident bytes on every device after the answer. */
  uint64_t pod_total;
} gmt_swap_answer_t;

/* pid of pod wants bytes of its swap allocations on device, as a new total.
 * At or below what it has: granted (ROOM), and a target it had is met when
 * bytes are at or below it. Above: TOO_BIG when bytes alone pass
 * space->limit; QUOTA when the pod's resident bytes on every device, with
 * this new total, would pass space->quota (nobody is asked); granted when
 * base + every resident byte with this new total stays within space->limit
 * (fits exactly: granted); otherwise WAIT, and idle processes of other
 * pods (space->may_ask; of a pod that does not wait, only past its
 * idle-out) with resident bytes on device get targets, the least recently
 * run and the largest first, so that together with the targets already pending the
 * shortfall is covered, and when the requester's pod runs (may_ask is
 * false for it), as far as they have it, room for all the pod may still
 * grow to (space->quota less its resident bytes with this total; none
 * without a quota); when even all of them cannot cover it, none is
 * asked (the requester waits for memory to come back otherwise). A raise
 * ends a target the requester itself had. Returns 0, -EINVAL (device out
 * of range, pid 0, no pod) or -ENOMEM. */
int gmt_swap_request(gmt_swap_t *sw, const char *pod, uint32_t pid, int device, uint64_t bytes,
                     const gmt_swap_space_t *space, gmt_swap_answer_t *out);

/* As gmt_swap_request, but a raise that does not fit is granted in part
 * (PARTIAL) when at least at_least bytes more than the process has fit:
 * its total becomes what fits, and the targets for the rest are set as
 * for WAIT. So a process bringing back many allocations moves each one in
 * as soon as there is room for it, while the others still move out (a
 * turn's two moves overlap: docs/tiers.md, "Swap mode in the
 * scheduler"). at_least 0: all or nothing, as gmt_swap_request. */
int gmt_swap_request_part(gmt_swap_t *sw, const char *pod, uint32_t pid, int device, uint64_t bytes,
                          uint64_t at_least, const gmt_swap_space_t *space, gmt_swap_answer_t *out);

/* The space's pressure (cuCascade's downgrade thresholds): once what is
 * occupied on device (space->base and every resident byte) passes
 * trigger bytes on a space that is contested (space->committed past its
 * limit, or not known), idle processes (space->may_ask, idle-out as for
 * a request) of pods other than spare
 * (may be NULL: the pod that just raised, about to run) that have not run
 * there for GMT_SWAP_PRESSURE_IDLE_MS (space->last_run) are asked to move out,
 * the largest first, until what stays would be at most stop bytes, with
 * the targets already pending counted; as much as they have when that is
 * not enough. *excess: the bytes asked for beyond what was pending.
 * Returns how many processes were asked (0 below the trigger), -EINVAL
 * or -ENOMEM. */
long gmt_swap_pressure(gmt_swap_t *sw, const char *spare, int device, const gmt_swap_space_t *space,
                       uint64_t trigger, uint64_t stop, uint64_t *excess);

/* Prepared host copies (docs/tiers.md): whether the swap processes with
 * bytes on a device are to pin host copies ahead of their moves out. Yes
 * when what occupies it is past its stop threshold (occupied > stop) and
 * what may come to it could pass its limit (committed > limit: what
 * occupies it but swap processes, plus the quotas of the pods whose
 * memory moves), so that a turn will move memory out. */
bool gmt_swap_prepare_due(uint64_t occupied, uint64_t stop, uint64_t committed, uint64_t limit);

/* What pid has on device (0 when unknown), and the sum over every process
 * on device (saturating). */
uint64_t gmt_swap_resident(const gmt_swap_t *sw, const char *pod, uint32_t pid, int device);
uint64_t gmt_swap_device_total(const gmt_swap_t *sw, int device);
/* What pod's processes have on device together (saturating). */
uint64_t gmt_swap_pod_device_total(const gmt_swap_t *sw, const char *pod, int device);

/* Why a target was dropped, for the caller's log. */
typedef enum gmt_swap_drop {
  GMT_SWAP_DROP_MET,     /* resident bytes at or below it */
  GMT_SWAP_DROP_EXPIRED, /* GMT_SWAP_TARGET_MS passed */
  GMT_SWAP_DROP_RUNNING, /* its pod may not be asked now (it holds the token) */
  GMT_SWAP_DROP_GONE,    /* the process or its pod went away */
} gmt_swap_drop_t;

typedef void (*gmt_swap_drop_fn)(void *arg, const char *pod, uint32_t pid, int device,
                                 uint64_t keep, uint64_t resident, gmt_swap_drop_t why);

/* Drops the targets set more than GMT_SWAP_TARGET_MS before now_ms and
 * those of pods that may not be asked now (may_ask NULL: none of those).
 * fn (may be NULL) hears each. Returns how many. */
size_t gmt_swap_expire(gmt_swap_t *sw, uint64_t now_ms, gmt_swap_may_ask_fn may_ask, void *arg,
                       gmt_swap_drop_fn fn, void *fn_arg);

/* Whether pid of pod has a target on device, and its keep bytes. */
bool gmt_swap_target(const gmt_swap_t *sw, const char *pod, uint32_t pid, int device,
                     uint64_t *keep);

/* The targets of pod's processes as their pod manager is to pass them on:
 * one per process that has one, keep_bytes over all its devices (on a
 * device without a target, what it has there stays). Writes at most max
 * into out, sorted by pid; returns how many there are. */
typedef struct gmt_swap_evict {
  uint32_t pid;
  uint64_t keep_bytes;
} gmt_swap_evict_t;
size_t gmt_swap_evicts(const gmt_swap_t *sw, const char *pod, gmt_swap_evict_t *out, size_t max);

/* Told for each process forgotten, once per device it had bytes or a
 * target on: what it had there and whether a target was pending. */
typedef void (*gmt_swap_reclaim_fn)(void *arg, const char *pod, uint32_t pid, int device,
                                    uint64_t resident, bool had_target);

/* Keeps the processes of pod listed in pids (in any order) and forgets the
 * others, but those never listed and younger than GMT_SWAP_GRACE_MS.
 * Returns the resident bytes forgotten. */
uint64_t gmt_swap_retain(gmt_swap_t *sw, const char *pod, const uint32_t *pids, size_t npids,
                         uint64_t now_ms, gmt_swap_reclaim_fn fn, void *arg);
/* Forgets every process of the pods for which keep(arg, pod) is false (a
 * pod removed from the config, or no longer in swap mode). */
uint64_t gmt_swap_retain_pods(gmt_swap_t *sw, bool (*keep)(void *arg, const char *pod),
                              gmt_swap_reclaim_fn fn, void *arg);

/* After a restart of the scheduler: a process it does not know reports
 * bytes on device (its last report's swap_gpu). Taken as resident without
 * checking the space (the memory is on the card already), but no further
 * than quota, the pod's: a report cannot make the pod hold more than it
 * may; a known process is left as its own Resident calls said. Returns
 * the bytes added. */
uint64_t gmt_swap_adopt(gmt_swap_t *sw, const char *pod, uint32_t pid, int device, uint64_t bytes,
                        uint64_t quota, uint64_t now_ms);

#endif
