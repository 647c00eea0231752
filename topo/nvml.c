/* Loading NVML at run time (gmt_nvml.h): dlopen and dlsym, nothing else.
 * gmt must start on nodes without a driver, so NVML is never linked. */
#include "gmt_nvml.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_LIB "libnvidia-ml.so.1"

/* dlsym's void * to a function pointer: POSIX allows it, ISO C does not
 * say, so go through memcpy as dlsym(3) suggests for -Wpedantic builds. */
static void resolve(void *lib, const char *name, void *slot, size_t size)
{
  void *sym = dlsym(lib, name);
  memcpy(slot, &sym, size);
}

#define RESOLVE(t, lib, member) resolve(lib, "nvml" #member, &(t)->member, sizeof((t)->member))

int gmt_nvml_load(const char *path, gmt_nvml_t *nvml, char *why, size_t why_len)
{
  memset(nvml, 0, sizeof *nvml);
  if (!path || !path[0])
    path = getenv("GMT_NVML_LIB");
  if (!path || !path[0])
    path = DEFAULT_LIB;
  if (!strcmp(path, "none")) {
    snprintf(why, why_len, "NVML turned off (GMT_NVML_LIB=none)");
    return -ENOENT;
  }
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    snprintf(why, why_len, "cannot load %s: %s", path, e ? e : "unknown error");
    return -ENOENT;
  }
  RESOLVE(nvml, lib, Init_v2);
  RESOLVE(nvml, lib, Shutdown);
  RESOLVE(nvml, lib, ErrorString);
  RESOLVE(nvml, lib, DeviceGetCount_v2);
  RESOLVE(nvml, lib, DeviceGetHandleByIndex_v2);
  RESOLVE(nvml, lib, DeviceGetUUID);
  RESOLVE(nvml, lib, DeviceGetName);
  RESOLVE(nvml, lib, DeviceGetPciInfo_v3);
  RESOLVE(nvml, lib, DeviceGetMemoryInfo);
  RESOLVE(nvml, lib, DeviceGetMigMode);
  RESOLVE(nvml, lib, DeviceGetCpuAffinity);
  RESOLVE(nvml, lib, DeviceGetNumaNodeId);
  RESOLVE(nvml, lib, DeviceGetTopologyCommonAncestor);
  RESOLVE(nvml, lib, DeviceGetNvLinkState);
  RESOLVE(nvml, lib, DeviceGetNvLinkRemotePciInfo_v2);
  RESOLVE(nvml, lib, DeviceGetUtilizationRates);
  RESOLVE(nvml, lib, DeviceGetComputeRunningProcesses_v3);
  const char *missing = !nvml->Init_v2                     ? "nvmlInit_v2"
                        : !nvml->Shutdown                  ? "nvmlShutdown"
                        : !nvml->DeviceGetCount_v2         ? "nvmlDeviceGetCount_v2"
                        : !nvml->DeviceGetHandleByIndex_v2 ? "nvmlDeviceGetHandleByIndex_v2"
                        : !nvml->DeviceGetUUID             ? "nvmlDeviceGetUUID"
                        : !nvml->DeviceGetPciInfo_v3       ? "nvmlDeviceGetPciInfo_v3"
                        : !nvml->DeviceGetMemoryInfo       ? "nvmlDeviceGetMemoryInfo"
                        : !nvml->DeviceGetTopologyCommonAncestor
                            ? "nvmlDeviceGetTopologyCommonAncestor"
                            : NULL;
  if (missing) {
    snprintf(why, why_len, "%s has no %s", path, missing);
    dlclose(lib);
    memset(nvml, 0, sizeof *nvml);
    return -ENOSYS;
  }
  nvml->lib = lib;
  return 0;
}

void gmt_nvml_unload(gmt_nvml_t *nvml)
{
  if (nvml->lib)
    dlclose(nvml->lib);
  memset(nvml, 0, sizeof *nvml);
}
