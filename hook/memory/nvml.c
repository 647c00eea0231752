/* NVML's memory queries, nvmlDeviceGetMemoryInfo and _v2 (what nvidia-smi,
 * pynvml and vLLM read), answered in the pod's view as cuMemGetInfo is:
 * the card's numbers from the real NVML, then gmt__alloc_meminfo (alloc.c)
 * turns them into the pod's quota and use. A process that belongs to no
 * pod gets the real answer unchanged.
 *
 * The hook neither links nor loads NVML: the real functions are looked up
 * in the libnvidia-ml the program has loaded (by soname, RTLD_NOLOAD, with
 * the real dlsym), or taken from what dlsym found for the program
 * (entry.c), so a process that never uses NVML never maps it.
 *
 * Which device: NVML numbers every device of the machine and ignores
 * CUDA_VISIBLE_DEVICES, CUDA numbers the visible ones; the two meet at the
 * PCI bus id (NVML's nvmlDeviceGetPciInfo_v3, CUDA's cuDeviceGetPCIBusId).
 * A device CUDA lists gets the pod's view under its CUDA ordinal; one that
 * CUDA, initialized, does not list (hidden from this process) gets the
 * card's numbers, since the pod cannot allocate there; while CUDA is not
 * initialized in the process (or the bus id cannot be read) every device
 * gets the pod's view. The quota is the pod's total across devices, so on
 * a machine of many GPUs each shows the whole quota and the whole use. */
#include "nvml.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "devmap.h"
#include "driver.h"
#include "frame.h"
#include "gmt_nvml_abi.h"
#include "log.h"

#define NVML_SONAME "libnvidia-ml.so.1"

enum { FN_MEM, FN_MEM_V2, FN_PCI, FN_COUNT };

static const char *const g_names[FN_COUNT] = {
    "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetPciInfo_v3"};

static _Atomic(void *) g_real[FN_COUNT];

/* The real NVML function id, NULL when the program has no libnvidia-ml
 * loaded or it lacks the name. A handle's lookup searches NVML itself,
 * not the global scope, so this never finds our own export. */
static void *real_fn(int id)
{
  void *f = atomic_load_explicit(&g_real[id], memory_order_acquire);
  if (f)
    return f;
  void *h = dlopen(NVML_SONAME, RTLD_NOW | RTLD_NOLOAD);
  if (!h)
    return NULL;
  f = gmt__dlsym_next()(h, g_names[id]);
  dlclose(h);
  if (f)
    atomic_store_explicit(&g_real[id], f, memory_order_release);
  return f;
}

/* ---- NVML device -> CUDA ordinal ---- */

enum { ORD_UNKNOWN = -1, ORD_HIDDEN = -2 };

/* NVML's busId ("00000000:18:00.0") and CUDA's ("0000:18:00.0") name the
 * same device in two spellings: compared as numbers (gmt_busid.h). */
static int cuda_ordinal(nvmlDevice_t dev)
{
  if (!gmt__driver_ready())
    return ORD_UNKNOWN; /* never loads the driver */
  nvmlReturn_t (*pci_info)(nvmlDevice_t, nvmlPciInfo_t *) =
      (nvmlReturn_t(*)(nvmlDevice_t, nvmlPciInfo_t *))real_fn(FN_PCI);
  nvmlPciInfo_t pci;
  gmt_busid_t want, have;
  char ids[GMT_DEVMAP_MAX_GPUS][GMT_BUSID_SIZE];
  memset(&pci, 0, sizeof pci);
  if (!pci_info || pci_info(dev, &pci) != NVML_SUCCESS || gmt_busid_parse(pci.busId, &want) < 0)
    return ORD_UNKNOWN;
  int n = gmt__devmap_bus_ids(ids, GMT_DEVMAP_MAX_GPUS);
  if (n < 0)
    return ORD_UNKNOWN; /* the count fails before cuInit */
  for (int i = 0; i < n; i++)
    if (gmt_busid_parse(ids[i], &have) == 0 && gmt_busid_equal(&have, &want))
      return i;
  return ORD_HIDDEN;
}

/* The real numbers of dev in *total, *free_b, *used turned into the pod's
 * (see alloc.h); left alone outside a pod or for a hidden device. Only
 * outermost on this thread, as the driver's wrappers are: alloc.c's view
 * may call into the driver. */
static void pod_view(nvmlDevice_t dev, unsigned long long *total, unsigned long long *free_b,
                     unsigned long long *used)
{
  if (GMT_FRAME_INSIDE())
    return;
  GMT_FRAME_IN();
  int ord = cuda_ordinal(dev);
  uint64_t t = *total, f = *free_b, u = 0;
  int rc = ord == ORD_HIDDEN ? -ENODEV : gmt__alloc_meminfo(ord >= 0 ? ord : 0, &f, &t, &u);
  GMT_FRAME_OUT();
  if (rc < 0)
    return;
  GMT_HOOK_DEBUG("nvml: device %d: total %llu -> %llu, used %llu -> %llu", ord, *total,
                 (unsigned long long)t, *used, (unsigned long long)u);
  *total = t;
  *free_b = f;
  *used = u;
}

/* ---- the wrappers ---- */

GMT_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
  nvmlReturn_t (*real)(nvmlDevice_t, nvmlMemory_t *) =
      (nvmlReturn_t(*)(nvmlDevice_t, nvmlMemory_t *))real_fn(FN_MEM);
  if (!real)
    return NVML_ERROR_UNINITIALIZED; /* no NVML loaded: nothing was initialized */
  nvmlReturn_t rc = real(device, memory);
  if (rc == NVML_SUCCESS && memory)
    pod_view(device, &memory->total, &memory->free, &memory->used);
  return rc;
}

/* `version` stays the caller's and `reserved` the real one (memory the
 * driver and firmware keep, outside any pod's use). */
GMT_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
  nvmlReturn_t (*real)(nvmlDevice_t, nvmlMemory_v2_t *) =
      (nvmlReturn_t(*)(nvmlDevice_t, nvmlMemory_v2_t *))real_fn(FN_MEM_V2);
  if (!real)
    return NVML_ERROR_UNINITIALIZED;
  nvmlReturn_t rc = real(device, memory);
  if (rc == NVML_SUCCESS && memory)
    pod_view(device, &memory->total, &memory->free, &memory->used);
  return rc;
}

/* ---- dlsym ---- */

/* True when p is a function of a loaded libnvidia-ml (the program may have
 * opened it by another path than the soname). */
static int in_nvml(void *p)
{
  Dl_info info;
  if (!dladdr(p, &info) || !info.dli_fname)
    return 0;
  const char *base = strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  return strncmp(base, "libnvidia-ml.so", strlen("libnvidia-ml.so")) == 0;
}

void *gmt__nvml_dlsym(const char *name, void *real)
{
  void *w = NULL;
  int id = -1;
  if (!strcmp(name, g_names[FN_MEM])) {
    w = (void *)&nvmlDeviceGetMemoryInfo;
    id = FN_MEM;
  } else if (!strcmp(name, g_names[FN_MEM_V2])) {
    w = (void *)&nvmlDeviceGetMemoryInfo_v2;
    id = FN_MEM_V2;
  }
  if (!w || real == w || !in_nvml(real))
    return real;
  /* The first library found is the one the wrappers call. */
  void *none = NULL;
  atomic_compare_exchange_strong_explicit(&g_real[id], &none, real, memory_order_acq_rel,
                                          memory_order_acquire);
  GMT_HOOK_DEBUG("dlsym(%s) -> wrapper", name);
  return w;
}
