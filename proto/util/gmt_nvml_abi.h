/* The part of NVML's C ABI that gmt uses, with NVML's own names, values and
 * struct layouts, since no nvml.h is installed where gmt builds. The daemon
 * and the hook dlopen the real libnvidia-ml.so.1 and call it through these
 * declarations (topo/gmt_nvml.h's table of loaded entry points can take its
 * types from here); test/fakecuda builds a fake libnvidia-ml.so.1 that
 * exports exactly these functions.
 *
 * Where the layouts come from: NVIDIA's NVML API reference
 * (https://docs.nvidia.com/deploy/nvml-api/, "Device Structs": nvmlPciInfo_t,
 * nvmlMemory_t, nvmlMemory_v2_t, nvmlProcessInfo_t, nvmlUtilization_t;
 * "Return values"; nvmlGpuTopologyLevel_t), checked against the copies of
 * nvml.h that NCCL carries (src/include/nvmlwrap.h, "Extracted from
 * nvml.h") and nvidia-ml-py (NVML_NVLINK_MAX_LINKS 18). Only what is
 * declared here may be called: a function that is not here may not exist
 * in an older driver's library, so look it up with dlsym and cope. */
#ifndef GMT_NVML_ABI_H
#define GMT_NVML_ABI_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum nvmlReturn_enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

/* An opaque device handle, valid from nvmlInit until the last nvmlShutdown. */
typedef struct nvmlDevice_st *nvmlDevice_t;

/* nvmlInitWithFlags */
#define NVML_INIT_FLAG_NO_GPUS 1
#define NVML_INIT_FLAG_NO_ATTACH 2

/* Buffer sizes large enough for each string query. */
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16

/* The version word of a versioned struct: its size and version number. */
#define NVML_STRUCT_VERSION(data, ver)                                                             \
  (unsigned int)(sizeof(nvml##data##_v##ver##_t) | ((ver) << 24U))

/* Reported in a field whose value the driver does not know. */
#define NVML_VALUE_NOT_AVAILABLE (-1)

#define NVML_NVLINK_MAX_LINKS 18

typedef enum nvmlEnableState_enum {
  NVML_FEATURE_DISABLED = 0,
  NVML_FEATURE_ENABLED = 1
} nvmlEnableState_t;

/* nvmlDeviceGetMigMode */
#define NVML_DEVICE_MIG_DISABLE 0x0
#define NVML_DEVICE_MIG_ENABLE 0x1

/* How far apart two GPUs are on the PCIe tree: their closest common
 * ancestor. NVLink is not a level: see nvmlDeviceGetNvLinkState. */
typedef enum nvmlGpuLevel_enum {
  NVML_TOPOLOGY_INTERNAL = 0,    /* the same board */
  NVML_TOPOLOGY_SINGLE = 10,     /* one PCIe switch */
  NVML_TOPOLOGY_MULTIPLE = 20,   /* several PCIe switches, no host bridge */
  NVML_TOPOLOGY_HOSTBRIDGE = 30, /* one host bridge */
  NVML_TOPOLOGY_NODE = 40,       /* host bridges of one NUMA node */
  NVML_TOPOLOGY_SYSTEM = 50      /* across NUMA nodes (SMP interconnect) */
} nvmlGpuTopologyLevel_t;

typedef struct nvmlPciInfo_st {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE]; /* "0000:18:00.0" */
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId; /* device id << 16 | vendor id */
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE]; /* "00000000:18:00.0" */
} nvmlPciInfo_t;

typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
  unsigned int version; /* nvmlMemory_v2, set by the caller */
  unsigned long long total;
  unsigned long long reserved; /* for the driver and firmware */
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 NVML_STRUCT_VERSION(Memory, 2)

typedef struct nvmlUtilization_st {
  unsigned int gpu;    /* % of the last sample period a kernel ran */
  unsigned int memory; /* % of it device memory was read or written */
} nvmlUtilization_t;

/* What nvmlDeviceGetComputeRunningProcesses_v3 fills in. */
typedef struct nvmlProcessInfo_st {
  unsigned int pid;
  unsigned long long usedGpuMemory; /* NVML_VALUE_NOT_AVAILABLE when unknown */
  unsigned int gpuInstanceId;       /* 0xFFFFFFFF without MIG */
  unsigned int computeInstanceId;   /* 0xFFFFFFFF without MIG */
} nvmlProcessInfo_t;

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t result);
nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length);

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);
nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node);
/* cpuSet: cpuSetSize words of bits, CPU i at bit i % 64 of word i / 64
 * (unsigned long is 64 bits on the platforms gmt runs on). */
nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int cpuSetSize,
                                      unsigned long *cpuSet);
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                  unsigned int *pendingMode);
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t *pathInfo);
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t *isActive);
/* The PCI identity of the device at the other end of an active link. */
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization);
/* *infoCount in: room in infos; out: how many processes there are
 * (NVML_ERROR_INSUFFICIENT_SIZE when more than the room). */
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos);

#ifdef __cplusplus
}
#endif
#endif
