/* The few NVML entry points gmt's topology reads, as a table of function
 * pointers: loaded from libnvidia-ml.so.1 with dlopen at run time (gmt
 * never links NVML, so it runs on nodes without a driver), or filled by a
 * test that plays a machine.
 *
 * No nvml.h is needed to build: NVML's types, values and layouts are
 * proto/util/gmt_nvml_abi.h's (shared with the fake NVML and the hook); the
 * names below are this module's short aliases of them. */
#ifndef GMT_NVML_H
#define GMT_NVML_H

#include <stddef.h>

#include "gmt_nvml_abi.h"

typedef nvmlDevice_t gmt_nvml_device_t;
typedef nvmlPciInfo_t gmt_nvml_pci_info_t; /* filled by nvmlDeviceGetPciInfo_v3 */
typedef nvmlMemory_t gmt_nvml_memory_t;    /* v1, in bytes */
typedef nvmlUtilization_t gmt_nvml_utilization_t;
typedef nvmlProcessInfo_t gmt_nvml_process_info_t; /* _v3's */

enum {
  GMT_NVML_SUCCESS = NVML_SUCCESS,
  GMT_NVML_ERROR_NOT_SUPPORTED = NVML_ERROR_NOT_SUPPORTED,
  GMT_NVML_ERROR_LIBRARY_NOT_FOUND = NVML_ERROR_LIBRARY_NOT_FOUND,
  GMT_NVML_FEATURE_ENABLED = NVML_FEATURE_ENABLED,
  GMT_NVML_DEVICE_MIG_ENABLE = NVML_DEVICE_MIG_ENABLE,
  GMT_NVML_NVLINK_MAX_LINKS = NVML_NVLINK_MAX_LINKS,
  GMT_NVML_UUID_SIZE = NVML_DEVICE_UUID_V2_BUFFER_SIZE,
  GMT_NVML_NAME_SIZE = NVML_DEVICE_NAME_V2_BUFFER_SIZE,
  GMT_NVML_TOPOLOGY_INTERNAL = NVML_TOPOLOGY_INTERNAL,
  GMT_NVML_TOPOLOGY_SINGLE = NVML_TOPOLOGY_SINGLE,
  GMT_NVML_TOPOLOGY_MULTIPLE = NVML_TOPOLOGY_MULTIPLE,
  GMT_NVML_TOPOLOGY_HOSTBRIDGE = NVML_TOPOLOGY_HOSTBRIDGE,
  GMT_NVML_TOPOLOGY_NODE = NVML_TOPOLOGY_NODE,
  GMT_NVML_TOPOLOGY_SYSTEM = NVML_TOPOLOGY_SYSTEM,
};

/* Each member is named for the NVML symbol it holds. The ones marked
 * optional may be NULL (older drivers lack them); the others must be set. */
typedef struct gmt_nvml {
  int (*Init_v2)(void);
  int (*Shutdown)(void);
  const char *(*ErrorString)(int result); /* optional */
  int (*DeviceGetCount_v2)(unsigned int *count);
  int (*DeviceGetHandleByIndex_v2)(unsigned int index, gmt_nvml_device_t *device);
  int (*DeviceGetUUID)(gmt_nvml_device_t device, char *uuid, unsigned int length);
  int (*DeviceGetName)(gmt_nvml_device_t device, char *name, unsigned int length); /* optional */
  int (*DeviceGetPciInfo_v3)(gmt_nvml_device_t device, gmt_nvml_pci_info_t *pci);
  int (*DeviceGetMemoryInfo)(gmt_nvml_device_t device, gmt_nvml_memory_t *memory);
  int (*DeviceGetMigMode)(gmt_nvml_device_t device, unsigned int *current_mode,
                          unsigned int *pending_mode); /* optional */
  int (*DeviceGetCpuAffinity)(gmt_nvml_device_t device, unsigned int cpu_set_size,
                              unsigned long *cpu_set);                      /* optional */
  int (*DeviceGetNumaNodeId)(gmt_nvml_device_t device, unsigned int *node); /* optional */
  int (*DeviceGetTopologyCommonAncestor)(gmt_nvml_device_t device1, gmt_nvml_device_t device2,
                                         int *path_info); /* nvmlGpuTopologyLevel_t */
  int (*DeviceGetNvLinkState)(gmt_nvml_device_t device, unsigned int link,
                              int *is_active); /* optional; nvmlEnableState_t */
  int (*DeviceGetNvLinkRemotePciInfo_v2)(gmt_nvml_device_t device, unsigned int link,
                                         gmt_nvml_pci_info_t *pci); /* optional */
  /* Live numbers for the daemon's device view (server/devices.c). */
  int (*DeviceGetUtilizationRates)(gmt_nvml_device_t device,
                                   gmt_nvml_utilization_t *utilization); /* optional */
  int (*DeviceGetComputeRunningProcesses_v3)(gmt_nvml_device_t device, unsigned int *count,
                                             gmt_nvml_process_info_t *infos); /* optional */
  void *lib; /* the dlopen handle; NULL for a table a test filled */
} gmt_nvml_t;

/* dlopen()s `path` (NULL: $GMT_NVML_LIB, else "libnvidia-ml.so.1") and
 * fills *nvml. On failure returns -ENOENT (no library: "none" as the path
 * also says so) or -ENOSYS (a required symbol missing) and writes why into
 * why[why_len]. Does not call nvmlInit: gmt_topo_build does. */
int gmt_nvml_load(const char *path, gmt_nvml_t *nvml, char *why, size_t why_len);

/* dlclose()s a table gmt_nvml_load filled; a no-op on a test's table. */
void gmt_nvml_unload(gmt_nvml_t *nvml);

#endif
