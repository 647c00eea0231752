/* Memory tiers: the table of the node's memory spaces, after NVIDIA
 * cuCascade's memory spaces (docs/tiers.md).
 *
 * A space is one place bytes can live: (GPU, device index), (HOST, NUMA
 * node) or (DISK, index of a --disk-tier path). Each has a capacity, a
 * limit (at most the capacity) on what may occupy it, and downgrade
 * thresholds. This table keeps those and nothing else.
 *
 * Who keeps which fact (each is kept once, by one bookkeeper):
 *   device quota, per pod, process and device: the device ledger
 *     (ledger.c, s->ledger; rpc_memory.c serves it);
 *   host memory pinned on advice, against --pinned-limit: the pinned
 *     ledger (a second ledger.c, s->pinned_ledger; rpc_pin.c);
 *   swap residency (what a mode=swap process has on each GPU): swap.c
 *     (rpc_swap.c), and what it moved to host memory and spill files: the
 *     process's reports (pods.c);
 *   the spaces (capacity, limit, thresholds): this table, a view over the
 *     others. What occupies a space is not stored here: rpc_tiers.c counts
 *     it from the bookkeepers above each time a space is looked at and
 *     passes it in, so room and pressure are never out of step.
 *
 * Pure: no loop, no threads, no wire. Unit tested by test/unit/test_tiers.c. */
#ifndef GMT_SERVER_TIERS_H
#define GMT_SERVER_TIERS_H

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

typedef struct gmt_tiers gmt_tiers_t;

typedef struct gmt_tier_space {
  gmt_tier_t tier;
  int index;
  uint64_t capacity, limit;
  double trigger, stop;               /* fractions of the capacity */
  uint64_t trigger_bytes, stop_bytes; /* the same in bytes */
} gmt_tier_space_t;

int gmt_tiers_new(gmt_tiers_t **out);
void gmt_tiers_free(gmt_tiers_t *t);

/* "gpu", "host", "disk" ("?" for anything else). */
const char *gmt_tier_name(gmt_tier_t tier);

/* Declares a space. limit 0 means the capacity, trigger and stop 0 mean
 * the defaults. -EINVAL: a bad tier, index < 0, capacity 0, limit above
 * capacity, or not 0 < stop < trigger <= 1; -EEXIST: declared already;
 * -ENOMEM. */
int gmt_tiers_add_space(gmt_tiers_t *t, gmt_tier_t tier, int index, uint64_t capacity,
                        uint64_t limit, double trigger, double stop);

/* The spaces, in the order declared: i in [0, gmt_tiers_nspaces), NULL
 * past the end. */
size_t gmt_tiers_nspaces(const gmt_tiers_t *t);
const gmt_tier_space_t *gmt_tiers_space(const gmt_tiers_t *t, size_t i);
/* The space (tier, index), or NULL when none was declared. */
const gmt_tier_space_t *gmt_tiers_find(const gmt_tiers_t *t, gmt_tier_t tier, int index);

/* What more may occupy the space when occupied bytes do already: its
 * limit less them, 0 once past it. */
uint64_t gmt_tier_room(const gmt_tier_space_t *sp, uint64_t occupied);
/* The bytes to move out of the space to bring it down to its stop, once
 * occupied reaches its trigger; 0 below the trigger. */
uint64_t gmt_tier_pressure(const gmt_tier_space_t *sp, uint64_t occupied);

#endif
