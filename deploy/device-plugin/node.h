/* The node as gmt-device-plugin advertises it: its GPUs, each one's memory
 * space in gmt-schd's ledger, and whether gmt-schd answers. Filled from a
 * Status reply (the one `gmt status` renders), so the plugin and the CLI
 * read the same fact. Pure: no I/O. */
#ifndef GMT_DP_NODE_H
#define GMT_DP_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmt.pb-c.h"

/* The most GPUs taken from one status; more are left out, and said so. */
#define GMT_DP_MAX_GPUS 64

typedef struct gmt_dp_gpu {
  int32_t index;  /* the node's index (NVML's), as gmt status names it */
  char uuid[96];  /* "GPU-..."; "" unknown */
  uint64_t space; /* the GPU space's limit: what reservations may take; 0 none */
} gmt_dp_gpu_t;

typedef struct gmt_dp_node {
  bool known;   /* gmt-schd has answered once: gpus[] is its last answer */
  bool healthy; /* its last Status came back within the bound */
  size_t n_gpus;
  gmt_dp_gpu_t gpus[GMT_DP_MAX_GPUS]; /* by index, lowest first */
} gmt_dp_node_t;

/* The GPUs of st into *out (known and healthy set): every device of
 * st->devices and every "gpu" space of st->host->tiers, by index, each
 * with its space's limit (0 where the GPU has no space: --gpu-capacity
 * DEV=off, or no NVML). Returns how many GPUs were left out past
 * GMT_DP_MAX_GPUS. */
size_t gmt_dp_node_from_status(const Gmt__StatusReply *st, gmt_dp_node_t *out);

/* The GPU of index in n, or NULL. */
const gmt_dp_gpu_t *gmt_dp_node_gpu(const gmt_dp_node_t *n, int32_t index);

/* Whether a and b advertise alike (the same GPUs, spaces and health). */
bool gmt_dp_node_equal(const gmt_dp_node_t *a, const gmt_dp_node_t *b);

#endif
