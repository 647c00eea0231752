/* What /sys says about PCI devices, NUMA nodes, NICs and NVMe, for
 * topo.c. Every path is read under a root (the real "/sys" or a test's
 * tree), and every bus id is the lowercase "0000:17:00.0" that
 * /sys/bus/pci/devices uses. */
#ifndef GMT_TOPO_SYSFS_H
#define GMT_TOPO_SYSFS_H

#include <stddef.h>

#include "gmt_topo.h"

/* "00000000:17:00.0" (NVML), "0000:17:00.0" or "17:00.0", any case (as
 * gmt_busid_parse takes them) -> "0000:17:00.0". Returns 0, or -EINVAL for
 * anything else, a domain past 16 bits included. */
int gmt__topo_bus_id_norm(const char *in, char out[16]);

/* The NUMA node /sys gives the PCI device (-1 when it says none or is
 * silent), and its local_cpulist into cpus ("" when absent). */
int gmt__sysfs_pci_numa(const char *root, const char *bus_id);
void gmt__sysfs_pci_cpulist(const char *root, const char *bus_id, char *cpus, size_t len);

/* How two PCI devices reach each other, from their canonical paths under
 * /sys/devices: a different root ("pci0000:00") is a different host bridge
 * (NODE on one NUMA node, SYS across); under one root, no shared bridge is
 * PHB, a shared bridge with at most one more on each side (a switch's
 * upstream port, then one downstream port each) is PIX, deeper is PXB.
 * UNKNOWN when either path cannot be resolved. */
gmt_topo_level_t gmt__sysfs_pci_level(const char *root, const char *bus_a, int numa_a,
                                      const char *bus_b, int numa_b);

/* NVIDIA (vendor 0x10de) display or 3D controllers (class 0x0300xx,
 * 0x0302xx) in /sys/bus/pci/devices, sorted by bus id: their count, at
 * most max, with the ids in bus[]. */
int gmt__sysfs_gpus(const char *root, char (*bus)[16], int max);

/* The devices of /sys/class/<cls> ("net", "nvme") whose device link leads
 * to a PCI device, sorted by name, with that device's bus id and NUMA node:
 * their count, at most max. */
int gmt__sysfs_class_devs(const char *root, const char *cls, gmt_topo_dev_t *devs, int max);

/* /sys/devices/system/node/node<N> with their cpulists, sorted by N. */
int gmt__sysfs_numa_nodes(const char *root, gmt_topo_numa_t *nodes, int max);

#endif
