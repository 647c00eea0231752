/* What alloc.c offers the rest of the hook: the pod's view of device
 * memory, which cuMemGetInfo (alloc.c) and NVML's memory queries (nvml.c)
 * both answer from. */
#ifndef GMT_HOOK_ALLOC_H
#define GMT_HOOK_ALLOC_H

#include <stdint.h>

/* Turns the card's numbers for device into the pod's, so that allocators
 * that size themselves from them (PyTorch, cuDNN workspaces, vLLM's
 * profiler) stay within the quota: total = min(quota, *total_b), free =
 * min(total - what the pod holds, *free_b), and *used_b (when not NULL) =
 * what the pod holds, at most total. The quota is the pod's total across
 * devices; device only names the request. Registers the process first.
 * 0 with the numbers replaced; -ENOTCONN (unhooked: no pod, or no quota
 * heard yet) with them left as the card's. */
int gmt__alloc_meminfo(int device, uint64_t *free_b, uint64_t *total_b, uint64_t *used_b);

#endif
