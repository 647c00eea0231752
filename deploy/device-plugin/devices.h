/* What gmt-device-plugin advertises to the kubelet, as pure functions of
 * the node (node.h): each resource's devices and their IDs, the
 * allocation it prefers, and what a container is told in Allocate.
 *
 * Two resources, each counted in units the Kubernetes scheduler adds up:
 *   gmt.io/gpu-memory  one device per --memory-unit (default 1 GiB) of each
 *                      GPU's space in gmt-schd's ledger, rounded down;
 *   gmt.io/gpu-share   100 devices per GPU: percent of its time.
 * A device's ID is "gpuI-K": unit K of the GPU of node index I. Every
 * device is Healthy while gmt-schd answers and Unhealthy when it does not
 * (the kubelet then counts none of them allocatable).
 *
 * Replies are built with malloc'd fields and freed with
 * protobuf_c_message_free_unpacked(msg, NULL). */
#ifndef GMT_DP_DEVICES_H
#define GMT_DP_DEVICES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "deviceplugin.pb-c.h"
#include "node.h"

#define GMT_DP_API_VERSION "v1beta1"
#define GMT_DP_HEALTHY "Healthy"
#define GMT_DP_UNHEALTHY "Unhealthy"
/* Percent: the units of a GPU's time. */
#define GMT_DP_SHARE_UNITS 100u
/* The most devices one resource lists: a list of this many is about
 * 0.5 MB, below gRPC's 4 MiB default message size. More units than that
 * (a small --memory-unit on many large GPUs) are left out, and said so. */
#define GMT_DP_MAX_DEVICES 16384u
/* The longest ID the kubelet takes (upstream's Device.ID). */
#define GMT_DP_ID_MAX 63

typedef enum gmt_dp_kind { GMT_DP_MEMORY = 0, GMT_DP_SHARE = 1, GMT_DP_KINDS = 2 } gmt_dp_kind_t;

/* One resource: its name for Kubernetes, its socket's name in the
 * kubelet's folder, and the environment variable Allocate sets. */
typedef struct gmt_dp_resource {
  gmt_dp_kind_t kind;
  const char *name;     /* "gmt.io/gpu-memory" */
  const char *endpoint; /* "gmt-gpu-memory.sock" */
  const char *env;      /* "GMT_GRANTED_GPU_MEMORY" */
} gmt_dp_resource_t;

const gmt_dp_resource_t *gmt_dp_resource(gmt_dp_kind_t kind);

/* The units of kind that GPU g has: its space / unit for memory (0 with no
 * space), GMT_DP_SHARE_UNITS for the share. */
uint64_t gmt_dp_units(const gmt_dp_gpu_t *g, gmt_dp_kind_t kind, uint64_t unit);

/* "gpuI-K" into buf (at least GMT_DP_ID_MAX + 1 bytes); and back: 0, or
 * -EINVAL for anything else (no sign, no leading zero, nothing after). */
void gmt_dp_id(char *buf, size_t len, int32_t gpu, uint64_t k);
int gmt_dp_parse_id(const char *id, int32_t *gpu, uint64_t *k);

/* The devices of kind on n, in the node's order, each Healthy or
 * Unhealthy as n is; none while n is not known. *left_out (may be NULL):
 * how many past GMT_DP_MAX_DEVICES. 0 or -ENOMEM. */
int gmt_dp_list(const gmt_dp_node_t *n, gmt_dp_kind_t kind, uint64_t unit,
                V1beta1__ListAndWatchResponse **out, uint64_t *left_out);

/* The IDs to give a container, from what the kubelet offers: every
 * must-include ID, then the GPU that already holds some of them, then the
 * GPU whose available units fit the rest most tightly (best fit: large
 * holes stay for large requests; lowest index on a tie), else the GPU
 * with the most, and so on; within a GPU, lowest unit first. IDs that are
 * not ours go last. At most allocation_size IDs (fewer when fewer are
 * offered). 0 or -ENOMEM. */
int gmt_dp_prefer(const V1beta1__ContainerPreferredAllocationRequest *req,
                  V1beta1__ContainerPreferredAllocationResponse **out);

/* A container's answer for the IDs the kubelet gave it: the environment
 *   GMT_GRANTED_GPU_MEMORY=BYTES      (units x unit)   or
 *   GMT_GRANTED_GPU_SHARE=PERCENT
 * and <that>_GPUS=the GPUs the units are on (UUIDs, else node indices,
 * comma-separated). For people and programs to read: the quota that binds
 * is the pod's line in resource-config.txt (docs/kubernetes.md). 0; or
 * -EINVAL with why in err when an ID is not one n advertises for kind; or
 * -ENOMEM. */
int gmt_dp_allocate(const gmt_dp_node_t *n, gmt_dp_kind_t kind, uint64_t unit,
                    const V1beta1__ContainerAllocateRequest *req,
                    V1beta1__ContainerAllocateResponse **out, char *err, size_t errlen);

#endif
