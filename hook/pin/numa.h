/* Pinned memory near its GPU (docs/devices.md, "Pinned memory near its
 * GPU"). On a machine of several sockets a copy between a GPU and pinned
 * host memory on the other socket crosses the sockets' link; the pages of
 * a pinned buffer cannot move once pinned, so they must be taken on the
 * GPU's NUMA node when they are first allocated. The policy is always
 * MPOL_PREFERRED, never a bind: memory never fails for want of one node.
 * A thread whose own policy is not MPOL_DEFAULT (numactl, a program's
 * set_mempolicy) is left alone, and so is what it allocates. Raw system
 * calls: the hook needs no libnuma. GMT_NUMA=0 turns all of it off. */
#ifndef GMT_HOOK_NUMA_H
#define GMT_HOOK_NUMA_H

#include <stddef.h>

/* The NUMA node of CUDA device `ordinal` (as this process numbers its
 * devices): /sys's numa_node of its PCI bus id (under GMT_SYSFS_ROOT,
 * default /sys), read once per device. -1 when unknown (no driver, a VM's
 * /sys saying -1, no such file) or when GMT_NUMA=0. Calls the driver. */
int gmt__numa_node(int ordinal);

/* The NUMA node of the calling thread's current context's device; -1
 * without a context, or as gmt__numa_node. */
int gmt__numa_ctx_node(void);

/* What gmt__numa_prefer set, for gmt__numa_restore. */
typedef struct {
  int set;  /* 1: the thread's policy was changed */
  int mode; /* the policy it had (MPOL_DEFAULT when set) */
} gmt_numa_saved_t;

/* Around a call that allocates and pins pages in the calling thread (the
 * driver's cuMemHostAlloc): makes the thread's policy MPOL_PREFERRED for
 * node, when node >= 0 and the thread's policy is MPOL_DEFAULT;
 * gmt__numa_restore puts back what prefer saved. Nothing fails: a kernel
 * or sandbox that refuses the calls leaves the policy as it was. */
void gmt__numa_prefer(int node, gmt_numa_saved_t *saved);
void gmt__numa_restore(const gmt_numa_saved_t *saved);

/* mbind(MPOL_PREFERRED node) of [p, p+n), a fresh mapping of the hook's
 * own whose pages are not touched yet, when node >= 0 and the calling
 * thread's policy is MPOL_DEFAULT. 1 when placed, else 0. */
int gmt__numa_place(void *p, size_t n, int node);

#endif
