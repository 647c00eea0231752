/* The fake machine that the fake libcuda.so.1 and the fake
 * libnvidia-ml.so.1 both stand for: its devices, their memory, identities
 * and topology, read from the environment, and the machine-wide ledger of
 * device memory that every process shares through a file in GMT_FAKE_DIR.
 * Both libraries compile machine.c, each its own copy (nothing of it is
 * exported), so that they agree by construction.
 *
 * Devices here are physical indices, as NVML numbers them; the fake
 * libcuda maps its ordinals through CUDA_VISIBLE_DEVICES
 * (gmt__machine_visible) before it calls in.
 *
 * Environment:
 *   GMT_FAKE_DEVICES  device count, 0 to GMT_FAKE_MAX_DEVICES (default 1)
 *   GMT_FAKE_MEM      memory per device: bytes, or with K/M/G/T (default 16G)
 *   GMT_FAKE_DIR      folder of the ledger and device lock files, shared by
 *                     every process of the machine (default /dev/shm)
 *   GMT_FAKE_TOPO     topology, items separated by ';', each key=value:
 *     numa=N0,N1,...       NUMA node of each device, one entry per device
 *                          (default: device index / 2)
 *     nvlink=A-B[:N],...   devices A and B joined by N NVLinks (default 1);
 *                          at most NVML_NVLINK_MAX_LINKS (18) a device
 *     pcie=A-B:LEVEL,...   the closest PCIe ancestor of A and B, LEVEL one of
 *                          single, multiple, hostbridge, node, system
 *                          (default: hostbridge on one NUMA node, system
 *                          across nodes; one host bridge per node)
 *   e.g. a 2-socket machine, 4 GPUs, NVLink pairs behind PCIe switches:
 *     GMT_FAKE_DEVICES=4
 *     GMT_FAKE_TOPO='numa=0,0,1,1;nvlink=0-1:4,2-3:4;pcie=0-1:single,2-3:single'
 *   A bad GMT_FAKE_TOPO is reported on stderr and fails initialization
 *   (cuInit: CUDA_ERROR_INVALID_VALUE, nvmlInit: NVML_ERROR_UNKNOWN), as a bad
 *   GMT_FAKE_MEM does: a test never runs on a topology it did not ask for.
 *
 * Identities: device d has UUID bytes fa 4e c0 da 00.. d ("GPU-fa4ec0da-0000-
 * 0000-0000-0000000000dd" as NVML writes it), PCI bus id 0000:(d+1):00.0. */
#ifndef GMT_FAKE_MACHINE_H
#define GMT_FAKE_MACHINE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define GMT_FAKE_MAX_DEVICES 16
#define GMT_FAKE_MAX_SLOTS 256
#define GMT_FAKE_NVLINK_MAX 18
#define GMT_FAKE_DEVICE_NAME "NVIDIA H100 (gmt fakecuda)"
/* PCI ids of an H100 SXM5: device 0x2330 of vendor 0x10de. */
#define GMT_FAKE_PCI_DEVICE_ID 0x233010deu
#define GMT_FAKE_PCI_SUBSYS_ID 0x16c110deu

/* PCIe levels, NVML's values (nvmlGpuTopologyLevel_t). */
enum {
  GMT__LEVEL_INTERNAL = 0,
  GMT__LEVEL_SINGLE = 10,
  GMT__LEVEL_MULTIPLE = 20,
  GMT__LEVEL_HOSTBRIDGE = 30,
  GMT__LEVEL_NODE = 40,
  GMT__LEVEL_SYSTEM = 50,
};

struct gmt__machine {
  int ndev;
  uint64_t mem_bytes; /* per device */
  char dir[PATH_MAX];
  int numa[GMT_FAKE_MAX_DEVICES];
  int level[GMT_FAKE_MAX_DEVICES][GMT_FAKE_MAX_DEVICES];  /* PCIe common ancestor */
  int nvlink[GMT_FAKE_MAX_DEVICES][GMT_FAKE_MAX_DEVICES]; /* links between a pair */
};
extern struct gmt__machine gmt__machine;

/* Reads the environment above into gmt__machine. On a bad value prints
 * "who: NAME='value': why" to stderr and returns -EINVAL. */
int gmt__machine_load(const char *who);
/* The topology part alone, from spec (NULL or "" for the defaults), for
 * ndev devices, into m (whose ndev is set); errors as above. */
int gmt__machine_topo(struct gmt__machine *m, const char *spec, const char *who);
/* The physical devices that CUDA_VISIBLE_DEVICES value `env` (NULL: unset,
 * every device) makes visible, in order, into phys; returns their count.
 * As the real driver reads it: a comma list of indices or UUIDs ("GPU-"
 * and a unique prefix of one); the first entry that names no device, or
 * one named before, ends the list; "" makes none visible. */
int gmt__machine_visible(const char *env, int phys[GMT_FAKE_MAX_DEVICES]);

void gmt__machine_uuid(int dev, unsigned char out[16]);
/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" into buf (41 bytes). */
void gmt__machine_uuid_str(int dev, char *buf, size_t n);
unsigned gmt__machine_bus(int dev);
/* Lock file whose flock serializes dev's kernels machine-wide, and whose
 * first 8 bytes say when the device's last kernel ends (CLOCK_MONOTONIC ns). */
void gmt__machine_dev_lock_path(int dev, char *buf, size_t n);
/* Whether a kernel is running on dev now, by its lock file. */
int gmt__machine_dev_busy(int dev);
/* When the kernel running (or last run) on dev ends, CLOCK_MONOTONIC ns;
 * 0 when none ever ran. */
uint64_t gmt__machine_dev_busy_until(int dev);
/* CPUs near dev's NUMA node: the host's CPUs split evenly among the fake
 * machine's nodes (all of them when it has fewer CPUs than nodes); *first
 * and *count say which. */
void gmt__machine_cpus(int dev, int *first, int *count);

/* ---- the ledger: one file of per-process slots, bytes used per device ---- */

/* Maps the ledger; with take_slot, takes a slot for this process (the
 * libcuda does; NVML only reads). 0, or -errno with the reason printed. */
int gmt__ledger_open(int take_slot);
/* Charges bytes to this process on dev: -ENOMEM when the machine-wide free
 * memory is short. */
int gmt__ledger_charge(int dev, uint64_t bytes);
void gmt__ledger_uncharge(int dev, uint64_t bytes);
/* This process has a context on dev: it shows in NVML's process list. */
void gmt__ledger_mark_ctx(int dev);
uint64_t gmt__ledger_used(int dev);
struct gmt__ledger_proc {
  int pid;
  uint64_t used;
};
/* Live processes that have a context or memory on dev: up to max into out;
 * returns how many there are. */
int gmt__ledger_procs(int dev, struct gmt__ledger_proc *out, int max);
/* After fork: the child forgets the parent's mapping and slot. */
void gmt__ledger_forget(void);
/* At exit: gives this process's slot back. */
void gmt__ledger_release(void);

#endif
