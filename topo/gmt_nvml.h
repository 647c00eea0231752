/* The few NVML entry points gmt's topology reads, as a table of function
 * pointers: loaded from libnvidia-ml.so.1 with dlopen at run time (gmt
 * never links NVML, so it runs on nodes without a driver), or filled by a
 * test that plays a machine.
 *
 * No nvml.h is needed to build: the types below are the parts of NVIDIA's
 * nvml.h that these calls touch, with the real C signatures (nvmlReturn_t
 * and the enums are int; nvmlDevice_t an opaque pointer). Sources: the
 * nvml.h copy in Deep-Spark/ix-device-plugin
 * (vendor/gitee.com/deep-spark/go-ixml/pkg/ixml/api.h), xmrig's
 * src/backend/cuda/wrappers/nvml_lite.h for nvmlPciInfo_t's layout, and
 * NVIDIA's NVML API reference for nvmlGpuTopologyLevel_t's values. This is
 * the one place to change when a shared NVML header arrives. */
#ifndef GMT_NVML_H
#define GMT_NVML_H

#include <stddef.h>

typedef struct gmt_nvml_device_st *gmt_nvml_device_t; /* nvmlDevice_t */

enum {
  GMT_NVML_SUCCESS = 0,             /* NVML_SUCCESS */
  GMT_NVML_ERROR_NOT_SUPPORTED = 3, /* NVML_ERROR_NOT_SUPPORTED */
  GMT_NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  GMT_NVML_FEATURE_ENABLED = 1,   /* nvmlEnableState_t */
  GMT_NVML_DEVICE_MIG_ENABLE = 1, /* NVML_DEVICE_MIG_ENABLE */
  GMT_NVML_NVLINK_MAX_LINKS = 18, /* NVML_NVLINK_MAX_LINKS (Hopper) */
  GMT_NVML_UUID_SIZE = 96,        /* NVML_DEVICE_UUID_V2_BUFFER_SIZE */
  GMT_NVML_NAME_SIZE = 96,        /* NVML_DEVICE_NAME_V2_BUFFER_SIZE */
};

/* nvmlGpuTopologyLevel_t */
enum {
  GMT_NVML_TOPOLOGY_INTERNAL = 0,
  GMT_NVML_TOPOLOGY_SINGLE = 10,
  GMT_NVML_TOPOLOGY_MULTIPLE = 20,
  GMT_NVML_TOPOLOGY_HOSTBRIDGE = 30,
  GMT_NVML_TOPOLOGY_NODE = 40,
  GMT_NVML_TOPOLOGY_SYSTEM = 50,
};

/* nvmlPciInfo_t (filled by nvmlDeviceGetPciInfo_v3). */
typedef struct {
  char busIdLegacy[16]; /* NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE */
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32]; /* NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE: "00000000:17:00.0" */
} gmt_nvml_pci_info_t;

/* nvmlMemory_t (v1, from nvmlDeviceGetMemoryInfo), in bytes. */
typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} gmt_nvml_memory_t;

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
