/* The node's GPUs as gmt-schd knows them (docs/devices.md): the topology
 * read once at start (topo/, NVML by dlopen and /sys, no CUDA context),
 * and NVML kept loaded for live numbers (free memory, utilization, each
 * process's use). Loop thread only.
 *
 * A node without NVML (the CPU machines, a driverless node) still runs:
 * the GPUs then come from /sys, or there are none, and every lookup says
 * "unknown" (-1) so that callers keep their CUDA ordinals. */
#ifndef GMT_SERVER_DEVICES_H
#define GMT_SERVER_DEVICES_H

#include <stdbool.h>
#include <stdint.h>

#include "gmt_topo.h"

typedef struct gmt_devices {
  gmt_topo_t *topo; /* NULL: topology unknown (out of memory at start) */
  gmt_nvml_t nvml;  /* loaded and initialized when have_nvml */
  bool have_nvml;
  char nvml_why[256]; /* without NVML: why not */
} gmt_devices_t;

/* Reads the topology; never fails for want of NVML or GPUs. */
int gmt_devices_open(gmt_devices_t **out);
void gmt_devices_close(gmt_devices_t *d);

/* The node's index of the GPU at PCI bus id `bus_id` ("0000:17:00.0",
 * NVML's "00000000:17:00.0" or "17:00.0", any case: gmt_busid.h); -1 when
 * no known GPU has it. */
int gmt_devices_index_of_bus(const gmt_devices_t *d, const char *bus_id);

/* The GPU with the node's index `index`; NULL when there is none. */
const gmt_topo_gpu_t *gmt_devices_gpu(const gmt_devices_t *d, int index);

/* NVML's handle of the GPU with that index, for live numbers; NULL
 * without NVML or such a GPU. */
gmt_nvml_device_t gmt_devices_nvml_handle(const gmt_devices_t *d, int index);

#endif
