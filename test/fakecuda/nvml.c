/* The fake libnvidia-ml.so.1: NVML's device queries over the same fake
 * machine as the fake libcuda (machine.c): the same devices, UUIDs and bus
 * ids, and memory used from the same machine-wide ledger, so that what a
 * process allocates through the fake libcuda shows here from any process.
 * Like the real NVML it numbers every device of the machine and ignores
 * CUDA_VISIBLE_DEVICES.
 *
 * What the ledger cannot know is documented where it is answered: a
 * process is listed on a device once it has a context or memory there,
 * with the bytes it allocated (no context memory); utilization is 100 while
 * a kernel of any process runs on the device and 0 otherwise; memory
 * utilization is 0; no device is in MIG mode. */
#include "gmt_busid.h"
#include "gmt_nvml_abi.h"
#include "machine.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_DRIVER_VERSION "580.00.00"

struct nvmlDevice_st {
  int index;
};

static struct nvmlDevice_st devices[GMT_FAKE_MAX_DEVICES];
static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
static int init_refs;

static nvmlReturn_t init(unsigned int flags)
{
  if (flags & ~(unsigned)(NVML_INIT_FLAG_NO_GPUS | NVML_INIT_FLAG_NO_ATTACH))
    return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t r = NVML_SUCCESS;
  pthread_mutex_lock(&init_mu);
  if (init_refs == 0) {
    /* The environment is read at the first init, as the fake libcuda reads
     * it at cuInit: a bad GMT_FAKE_* fails here, its reason on stderr. */
    if (gmt__machine_load("fakenvml") != 0)
      r = NVML_ERROR_UNKNOWN;
    else if (gmt__ledger_open(0) != 0)
      r = NVML_ERROR_OPERATING_SYSTEM;
    for (int i = 0; i < GMT_FAKE_MAX_DEVICES; i++)
      devices[i].index = i;
  }
  if (r == NVML_SUCCESS)
    init_refs++;
  pthread_mutex_unlock(&init_mu);
  return r;
}

nvmlReturn_t nvmlInit_v2(void)
{
  return init(0);
}
nvmlReturn_t nvmlInit(void)
{
  return init(0);
}
nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
  return init(flags);
}

nvmlReturn_t nvmlShutdown(void)
{
  pthread_mutex_lock(&init_mu);
  nvmlReturn_t r = NVML_SUCCESS;
  if (init_refs == 0)
    r = NVML_ERROR_UNINITIALIZED;
  else if (--init_refs == 0)
    gmt__ledger_forget();
  pthread_mutex_unlock(&init_mu);
  return r;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
  switch (result) {
  case NVML_SUCCESS: return "Success";
  case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
  case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
  case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
  case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
  case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
  case NVML_ERROR_NOT_FOUND: return "Not Found";
  case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
  case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
  case NVML_ERROR_OPERATING_SYSTEM: return "Operating System Error";
  case NVML_ERROR_MEMORY: return "Insufficient Memory";
  case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument Version Mismatch";
  case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
  default: return "Unknown Error";
  }
}

static int inited(void)
{
  return __atomic_load_n(&init_refs, __ATOMIC_ACQUIRE) > 0;
}

/* The device behind a handle, or -1 for one that is not ours. */
static int dev_of(nvmlDevice_t d)
{
  if (!d || d < devices || d >= devices + gmt__machine.ndev)
    return -1;
  return d->index;
}

#define NEED_DEVICE(h, dev)                                                                        \
  int dev = dev_of(h);                                                                             \
  do {                                                                                             \
    if (!inited())                                                                                 \
      return NVML_ERROR_UNINITIALIZED;                                                             \
    if (dev < 0)                                                                                   \
      return NVML_ERROR_INVALID_ARGUMENT;                                                          \
  } while (0)

/* s into buf of length n, NVML's way: too small is an error, not a cut. */
static nvmlReturn_t put_str(const char *s, char *buf, unsigned int n)
{
  if (!buf)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (strlen(s) + 1 > n)
    return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(buf, s, strlen(s) + 1);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
  if (!inited())
    return NVML_ERROR_UNINITIALIZED;
  return put_str(FAKE_DRIVER_VERSION, version, length);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
  if (!inited())
    return NVML_ERROR_UNINITIALIZED;
  if (!deviceCount)
    return NVML_ERROR_INVALID_ARGUMENT;
  *deviceCount = (unsigned)gmt__machine.ndev;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
  if (!inited())
    return NVML_ERROR_UNINITIALIZED;
  if (!device || index >= (unsigned)gmt__machine.ndev)
    return NVML_ERROR_INVALID_ARGUMENT;
  *device = &devices[index];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
  if (!inited())
    return NVML_ERROR_UNINITIALIZED;
  if (!uuid || !device)
    return NVML_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < gmt__machine.ndev; i++) {
    char u[48];
    gmt__machine_uuid_str(i, u, sizeof u);
    if (strcasecmp(u, uuid) == 0) {
      *device = &devices[i];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
  if (!inited())
    return NVML_ERROR_UNINITIALIZED;
  gmt_busid_t b;
  if (!device || gmt_busid_parse(pciBusId, &b) < 0)
    return NVML_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < gmt__machine.ndev; i++)
    if (b.domain == 0 && b.bus == gmt__machine_bus(i) && b.device == 0 && b.function == 0) {
      *device = &devices[i];
      return NVML_SUCCESS;
    }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
  NEED_DEVICE(device, dev);
  if (!index)
    return NVML_ERROR_INVALID_ARGUMENT;
  *index = (unsigned)dev;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
  NEED_DEVICE(device, dev);
  return put_str(GMT_FAKE_DEVICE_NAME, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
  NEED_DEVICE(device, dev);
  char u[48];
  gmt__machine_uuid_str(dev, u, sizeof u);
  return put_str(u, uuid, length);
}

static void pci_info(int dev, nvmlPciInfo_t *pci)
{
  memset(pci, 0, sizeof *pci);
  pci->domain = 0;
  pci->bus = gmt__machine_bus(dev);
  pci->device = 0;
  pci->pciDeviceId = GMT_FAKE_PCI_DEVICE_ID;
  pci->pciSubSystemId = GMT_FAKE_PCI_SUBSYS_ID;
  snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", pci->bus);
  snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
  NEED_DEVICE(device, dev);
  if (!pci)
    return NVML_ERROR_INVALID_ARGUMENT;
  pci_info(dev, pci);
  return NVML_SUCCESS;
}

/* Free and used as cuMemGetInfo tells them: from the ledger; nothing is
 * reserved for the driver on the fake. */
static void mem_info(int dev, unsigned long long *total, unsigned long long *free_b,
                     unsigned long long *used)
{
  uint64_t u = gmt__ledger_used(dev), t = gmt__machine.mem_bytes;
  *total = t;
  *used = u > t ? t : u;
  *free_b = t - *used;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
  NEED_DEVICE(device, dev);
  if (!memory)
    return NVML_ERROR_INVALID_ARGUMENT;
  mem_info(dev, &memory->total, &memory->free, &memory->used);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
  NEED_DEVICE(device, dev);
  if (!memory)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != nvmlMemory_v2)
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  memory->reserved = 0;
  mem_info(dev, &memory->total, &memory->free, &memory->used);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node)
{
  NEED_DEVICE(device, dev);
  if (!node)
    return NVML_ERROR_INVALID_ARGUMENT;
  *node = (unsigned)gmt__machine.numa[dev];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int cpuSetSize,
                                      unsigned long *cpuSet)
{
  NEED_DEVICE(device, dev);
  if (!cpuSet || cpuSetSize == 0)
    return NVML_ERROR_INVALID_ARGUMENT;
  memset(cpuSet, 0, cpuSetSize * sizeof *cpuSet);
  int first, count;
  gmt__machine_cpus(dev, &first, &count);
  const unsigned bits = 8 * sizeof *cpuSet;
  for (int c = first; c < first + count; c++)
    if ((unsigned)c / bits < cpuSetSize)
      cpuSet[(unsigned)c / bits] |= 1ul << ((unsigned)c % bits);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                  unsigned int *pendingMode)
{
  NEED_DEVICE(device, dev);
  if (!currentMode || !pendingMode)
    return NVML_ERROR_INVALID_ARGUMENT;
  *currentMode = *pendingMode = NVML_DEVICE_MIG_DISABLE;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t *pathInfo)
{
  NEED_DEVICE(device1, a);
  int b = dev_of(device2);
  if (b < 0 || !pathInfo)
    return NVML_ERROR_INVALID_ARGUMENT;
  *pathInfo = (nvmlGpuTopologyLevel_t)gmt__machine.level[a][b];
  return NVML_SUCCESS;
}

/* The device at the other end of dev's link number `link`: links are
 * numbered across dev's peers in device order, each peer taking as many
 * as it has; -1 when the link is not connected. */
static int link_peer(int dev, unsigned link)
{
  unsigned n = 0;
  for (int p = 0; p < gmt__machine.ndev; p++) {
    n += (unsigned)gmt__machine.nvlink[dev][p];
    if (link < n)
      return p;
  }
  return -1;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t *isActive)
{
  NEED_DEVICE(device, dev);
  if (!isActive || link >= NVML_NVLINK_MAX_LINKS)
    return NVML_ERROR_INVALID_ARGUMENT;
  *isActive = link_peer(dev, link) >= 0 ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t *pci)
{
  NEED_DEVICE(device, dev);
  if (!pci || link >= NVML_NVLINK_MAX_LINKS)
    return NVML_ERROR_INVALID_ARGUMENT;
  int peer = link_peer(dev, link);
  if (peer < 0)
    return NVML_ERROR_NOT_SUPPORTED;
  pci_info(peer, pci);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
  NEED_DEVICE(device, dev);
  if (!utilization)
    return NVML_ERROR_INVALID_ARGUMENT;
  utilization->gpu = gmt__machine_dev_busy(dev) ? 100 : 0;
  utilization->memory = 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos)
{
  NEED_DEVICE(device, dev);
  if (!infoCount || (*infoCount > 0 && !infos))
    return NVML_ERROR_INVALID_ARGUMENT;
  struct gmt__ledger_proc procs[GMT_FAKE_MAX_SLOTS];
  int n = gmt__ledger_procs(dev, procs, GMT_FAKE_MAX_SLOTS);
  unsigned room = *infoCount;
  *infoCount = (unsigned)n;
  if ((unsigned)n > room)
    return NVML_ERROR_INSUFFICIENT_SIZE;
  for (int i = 0; i < n; i++) {
    infos[i].pid = (unsigned)procs[i].pid;
    infos[i].usedGpuMemory = procs[i].used;
    infos[i].gpuInstanceId = 0xFFFFFFFFu;
    infos[i].computeInstanceId = 0xFFFFFFFFu;
  }
  return NVML_SUCCESS;
}
