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

/* What a GPU's default space leaves of the card for CUDA contexts, which
 * no quota counts (docs/devices.md, "Context memory"): a process's context
 * takes about 500 MiB on an H100 or H200 (driver 580, CUDA 13), so one
 * fits. Every more process on the card has its own, bounded then by the
 * card's own out-of-memory; --gpu-capacity declares less where many
 * processes share a card. */
#define GMT_TIERS_GPU_CONTEXT_RESERVE (512ull << 20)

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

/* Where a GPU space's capacity comes from. */
typedef enum {
  GMT_GPU_FROM_NVML = 0, /* the card's memory (NVML) less GMT_TIERS_GPU_CONTEXT_RESERVE */
  GMT_GPU_FROM_FLAG = 1, /* --gpu-capacity DEV=BYTES, or DEV=off */
} gmt_gpu_from_t;

/* A GPU as the plan below takes it (a card NVML knows, or a flag) and
 * as it gives it: dev the node's index; bytes its space, 0 for none;
 * card NVML's total memory, 0 unknown. */
typedef struct gmt_gpu_capacity {
  int dev;
  uint64_t bytes;
  uint64_t card;
  gmt_gpu_from_t from;
} gmt_gpu_capacity_t;

/* The GPU spaces to declare. cards: the cards NVML knows (dev, card);
 * flags: the --gpu-capacity flags (dev, bytes: 0 for off), one per
 * device. Each device either names gets one entry of out, by device,
 * ascending: a flag's bytes where a flag names it (from FLAG: bytes 0,
 * off, is no space), else the card less GMT_TIERS_GPU_CONTEXT_RESERVE
 * (from NVML: bytes 0, no space, for a card of unknown memory or no more
 * than the reserve); card is NVML's where it knows the device. out has
 * room for ncards + nflags; returns how many it holds. */
size_t gmt_tiers_gpu_plan(const gmt_gpu_capacity_t *cards, size_t ncards,
                          const gmt_gpu_capacity_t *flags, size_t nflags, gmt_gpu_capacity_t *out);

/* What more may occupy the space when occupied bytes do already: its
 * limit less them, 0 once past it. */
uint64_t gmt_tier_room(const gmt_tier_space_t *sp, uint64_t occupied);
/* The bytes to move out of the space to bring it down to its stop, once
 * occupied reaches its trigger; 0 below the trigger. */
uint64_t gmt_tier_pressure(const gmt_tier_space_t *sp, uint64_t occupied);

#endif
