/* The node's topology, read without a CUDA context: its GPUs (index, UUID,
 * PCI bus id, memory, NUMA node, CPUs, MIG mode), the link between each
 * pair of GPUs, and its NICs and NVMe controllers with their NUMA nodes.
 *
 * topo/ is a library of its own (gmttopo) beside bpf/: the daemon (best-GPU
 * selection, per-device tokens, pinning on a GPU's NUMA node) and the CLI
 * (`gmt topo`, `gmt run`) both need these facts, and neither may include
 * the other's headers; proto/ is the wire and stays free of hardware. It
 * sits on nothing but libc and libdl.
 *
 * Sources: NVML (gmt_nvml.h, loaded at run time) for the GPUs and the
 * pairwise levels, and /sys, read under a root a test can move
 * ($GMT_SYSFS_ROOT, default "/sys"), for NUMA nodes, CPU lists, NICs and
 * NVMe, and for everything when NVML is missing or fails: then GPUs are
 * NVIDIA display/3D controllers on the PCI bus, links come from their
 * paths in /sys/devices, and `nvml_error` says why NVML was not used. */
#ifndef GMT_TOPO_H
#define GMT_TOPO_H

#include <stddef.h>
#include <stdint.h>

#include "gmt_nvml.h"

#define GMT_TOPO_MAX_GPUS 64
#define GMT_TOPO_MAX_DEVS 64 /* NICs, and NVMe controllers, each */
#define GMT_TOPO_MAX_NODES 64
#define GMT_TOPO_CPULIST 256

/* How two GPUs reach each other, best first; the names are nvidia-smi
 * topo -m's. */
typedef enum {
  GMT_TOPO_SELF = 0, /* X: the GPU itself */
  GMT_TOPO_NVLINK,   /* NV#: one or more NVLinks (direct or through NVSwitch) */
  GMT_TOPO_PIX,      /* at most one PCIe switch (NVML SINGLE, INTERNAL) */
  GMT_TOPO_PXB,      /* several PCIe switches, no host bridge (MULTIPLE) */
  GMT_TOPO_PHB,      /* through one PCIe host bridge (HOSTBRIDGE) */
  GMT_TOPO_NODE,     /* between host bridges of one NUMA node (NODE) */
  GMT_TOPO_SYS,      /* across NUMA nodes, over the sockets' link (SYSTEM) */
  GMT_TOPO_UNKNOWN,  /* neither NVML nor /sys could tell */
} gmt_topo_level_t;

typedef struct {
  int index;                     /* NVML's index; without NVML, the order by bus id */
  char uuid[GMT_NVML_UUID_SIZE]; /* "" unknown (no NVML) */
  char name[GMT_NVML_NAME_SIZE]; /* "" unknown */
  char bus_id[16];               /* "0000:17:00.0", as /sys/bus/pci/devices names it */
  uint64_t memory_total;         /* bytes; 0 unknown */
  int numa_node;                 /* -1 unknown or no NUMA */
  char cpus[GMT_TOPO_CPULIST];   /* CPU list ("0-15,32-47"); "" unknown */
  int mig;                       /* 1 on, 0 off, -1 unknown or not supported */
} gmt_topo_gpu_t;

typedef struct {
  gmt_topo_level_t level;
  int nvlinks; /* active NVLinks between the two (level NVLINK) */
} gmt_topo_link_t;

/* A NIC (name "eth0") or an NVMe controller ("nvme0") on the PCI bus. */
typedef struct {
  char name[64];
  char bus_id[16];
  int numa_node; /* -1 unknown */
} gmt_topo_dev_t;

typedef struct {
  int node;
  char cpus[GMT_TOPO_CPULIST];
} gmt_topo_numa_t;

typedef struct gmt_topo {
  int nvml;             /* 1: GPU facts and levels came from NVML */
  char nvml_error[256]; /* when nvml is 0: why not */
  char sysfs_root[256];
  int n_gpus;
  gmt_topo_gpu_t gpus[GMT_TOPO_MAX_GPUS];
  gmt_topo_link_t links[GMT_TOPO_MAX_GPUS][GMT_TOPO_MAX_GPUS];
  int n_nodes;
  gmt_topo_numa_t nodes[GMT_TOPO_MAX_NODES];
  int n_nics;
  gmt_topo_dev_t nics[GMT_TOPO_MAX_DEVS];
  int n_nvme;
  gmt_topo_dev_t nvme[GMT_TOPO_MAX_DEVS];
} gmt_topo_t;

/* Builds the topology from /sys under sysfs_root (NULL: $GMT_SYSFS_ROOT,
 * else "/sys") and from nvml, a loaded table (gmt_nvml_load) or a test's;
 * NULL, or an nvmlInit that fails, means /sys alone, with nvml_why (or
 * NVML's own error) kept in nvml_error. Calls nvmlInit_v2 and nvmlShutdown
 * itself. Returns 0 and *out (gmt_topo_free it), or -ENOMEM. A missing
 * /sys is not an error: the topology is then empty. */
int gmt_topo_build(const char *sysfs_root, const gmt_nvml_t *nvml, const char *nvml_why,
                   gmt_topo_t **out);

/* gmt_topo_build with NVML loaded from $GMT_NVML_LIB or libnvidia-ml.so.1
 * and unloaded again: what a program on a real node calls. */
int gmt_topo_discover(gmt_topo_t **out);

void gmt_topo_free(gmt_topo_t *topo);

/* "X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS", "?" */
const char *gmt_topo_level_name(gmt_topo_level_t level);

#endif
