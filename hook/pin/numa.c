/* Pinned memory near its GPU (numa.h): each device's NUMA node from /sys,
 * cached, and the memory policy calls that place pages there. The node of
 * a device is read with topo/sysfs.c, the same code `gmt topo` uses (the
 * hook links that file alone, never NVML's side). */
#include "numa.h"

#include <errno.h>
#include <linux/mempolicy.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "driver.h"
#include "log.h"
#include "sysfs.h"

#define MAX_GPUS 64
/* Nodes the masks can name: the kernel's largest NODES_SHIFT is 10. */
#define MAX_NODES 1024
#define MASK_LONGS (MAX_NODES / (8 * sizeof(unsigned long)))
/* The kernel reads maxnode - 1 bits of a mask (an old off-by-one that
 * every caller, numactl's included, pays with one more). */
#define MASK_MAXNODE ((unsigned long)MAX_NODES + 1)

/* Per CUDA ordinal: 0 not read yet, 1 unknown, node + 2. Reading twice
 * (two threads at once) gives the same answer, so no lock. */
static _Atomic int g_node[MAX_GPUS];
static _Atomic int g_on = -1; /* GMT_NUMA: -1 not read yet */
static _Atomic int g_said;    /* a refused call, said once */

static int numa_on(void)
{
  int on = atomic_load_explicit(&g_on, memory_order_relaxed);
  if (on < 0) {
    const char *e = getenv("GMT_NUMA");
    on = !(e && strcmp(e, "0") == 0);
    atomic_store_explicit(&g_on, on, memory_order_relaxed);
  }
  return on;
}

static int read_node(int ordinal)
{
  __typeof__(&cuDeviceGet) get = GMT_REAL(cuDeviceGet);
  __typeof__(&cuDeviceGetPCIBusId) bus_id = GMT_REAL(cuDeviceGetPCIBusId);
  CUdevice d;
  char raw[32], id[16];
  /* The driver writes "0000:3B:00.0"; /sys names it "0000:3b:00.0". */
  if (!get || !bus_id || get(&d, ordinal) != CUDA_SUCCESS ||
      bus_id(raw, (int)sizeof raw, d) != CUDA_SUCCESS || gmt__topo_bus_id_norm(raw, id) < 0)
    return -1;
  const char *root = getenv("GMT_SYSFS_ROOT");
  int node = gmt__sysfs_pci_numa(root && *root ? root : "/sys", id);
  if (node >= MAX_NODES)
    node = -1;
  GMT_HOOK_DEBUG("CUDA device %d (%s) is on NUMA node %d%s", ordinal, id, node,
                 node < 0 ? " (unknown: pinned memory is placed as without gmt)" : "");
  return node;
}

int gmt__numa_node(int ordinal)
{
  if (ordinal < 0 || !numa_on())
    return -1;
  if (ordinal >= MAX_GPUS)
    return read_node(ordinal);
  int v = atomic_load_explicit(&g_node[ordinal], memory_order_relaxed);
  if (v == 0) {
    v = read_node(ordinal) + 2;
    atomic_store_explicit(&g_node[ordinal], v, memory_order_relaxed);
  }
  return v - 2;
}

int gmt__numa_ctx_node(void)
{
  if (!numa_on())
    return -1;
  __typeof__(&cuCtxGetDevice) get = GMT_REAL(cuCtxGetDevice);
  CUdevice d;
  if (!get || get(&d) != CUDA_SUCCESS)
    return -1;
  return gmt__numa_node((int)d);
}

static void refused(const char *what, int err)
{
  if (!atomic_exchange_explicit(&g_said, 1, memory_order_relaxed))
    GMT_HOOK_DEBUG("%s refused (%s): pinned memory is placed as without gmt", what, strerror(err));
}

/* The calling thread's policy mode, or -1 when it cannot be read (a
 * seccomp profile without CAP_SYS_NICE refuses the mempolicy calls). */
static int thread_mode(void)
{
  int mode = -1;
  if (syscall(SYS_get_mempolicy, &mode, NULL, 0UL, NULL, 0UL) != 0) {
    refused("get_mempolicy", errno);
    return -1;
  }
  return mode;
}

static void node_mask(int node, unsigned long mask[MASK_LONGS])
{
  memset(mask, 0, MASK_LONGS * sizeof *mask);
  mask[(size_t)node / (8 * sizeof *mask)] |= 1UL << ((size_t)node % (8 * sizeof *mask));
}

void gmt__numa_prefer(int node, gmt_numa_saved_t *saved)
{
  *saved = (gmt_numa_saved_t){0, -1};
  if (node < 0 || node >= MAX_NODES)
    return;
  int errno_was = errno;
  saved->mode = thread_mode();
  if (saved->mode == MPOL_DEFAULT) {
    unsigned long mask[MASK_LONGS];
    node_mask(node, mask);
    if (syscall(SYS_set_mempolicy, MPOL_PREFERRED, mask, MASK_MAXNODE) == 0)
      saved->set = 1;
    else
      refused("set_mempolicy", errno); /* EINVAL: a node outside the cpuset */
  }
  errno = errno_was;
}

void gmt__numa_restore(const gmt_numa_saved_t *saved)
{
  if (!saved->set)
    return;
  int errno_was = errno;
  if (syscall(SYS_set_mempolicy, MPOL_DEFAULT, NULL, 0UL) != 0)
    GMT_HOOK_DEBUG("cannot put this thread's memory policy back to the default: %s",
                   strerror(errno));
  errno = errno_was;
}

int gmt__numa_place(void *p, size_t n, int node)
{
  if (!p || !n || node < 0 || node >= MAX_NODES)
    return 0;
  int errno_was = errno, placed = 0;
  if (thread_mode() == MPOL_DEFAULT) {
    unsigned long mask[MASK_LONGS];
    node_mask(node, mask);
    placed = syscall(SYS_mbind, p, n, MPOL_PREFERRED, mask, MASK_MAXNODE, 0U) == 0;
    if (!placed)
      refused("mbind", errno);
  }
  errno = errno_was;
  return placed;
}
