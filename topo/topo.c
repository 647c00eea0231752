/* Building the topology (gmt_topo.h): NVML for the GPUs and how each pair
 * is linked, /sys for NUMA nodes, CPU lists, NICs and NVMe, and /sys alone
 * for the GPUs when NVML is missing or fails. The NVML table is a
 * parameter, so a test plays any machine without a driver. */
#include "gmt_topo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sysfs.h"

#define CPU_WORDS 64 /* 4096 CPUs in nvmlDeviceGetCpuAffinity's mask */

const char *gmt_topo_level_name(gmt_topo_level_t level)
{
  switch (level) {
  case GMT_TOPO_SELF: return "X";
  case GMT_TOPO_NVLINK: return "NV";
  case GMT_TOPO_PIX: return "PIX";
  case GMT_TOPO_PXB: return "PXB";
  case GMT_TOPO_PHB: return "PHB";
  case GMT_TOPO_NODE: return "NODE";
  case GMT_TOPO_SYS: return "SYS";
  default: return "?";
  }
}

static const char *nvml_strerror(const gmt_nvml_t *nvml, int rc)
{
  const char *s = nvml->ErrorString ? nvml->ErrorString(rc) : NULL;
  return s ? s : "NVML error";
}

/* nvmlGpuTopologyLevel_t to ours. INTERNAL (two GPUs on one board) is
 * printed PIX, as nvidia-smi does. */
static gmt_topo_level_t from_nvml_level(int level)
{
  switch (level) {
  case GMT_NVML_TOPOLOGY_INTERNAL:
  case GMT_NVML_TOPOLOGY_SINGLE: return GMT_TOPO_PIX;
  case GMT_NVML_TOPOLOGY_MULTIPLE: return GMT_TOPO_PXB;
  case GMT_NVML_TOPOLOGY_HOSTBRIDGE: return GMT_TOPO_PHB;
  case GMT_NVML_TOPOLOGY_NODE: return GMT_TOPO_NODE;
  case GMT_NVML_TOPOLOGY_SYSTEM: return GMT_TOPO_SYS;
  default: return GMT_TOPO_UNKNOWN;
  }
}

/* A CPU bit mask (unsigned longs, CPU 0 in bit 0 of word 0) as a list of
 * ranges, "0-3,8": what /sys's local_cpulist reads like. */
static void mask_to_cpulist(const unsigned long *mask, unsigned words, char *buf, size_t len)
{
  const unsigned bits = 8 * sizeof(unsigned long);
  size_t used = 0;
  buf[0] = '\0';
  for (unsigned cpu = 0; cpu < words * bits;) {
    if (!(mask[cpu / bits] >> (cpu % bits) & 1UL)) {
      cpu++;
      continue;
    }
    unsigned last = cpu;
    while (last + 1 < words * bits && (mask[(last + 1) / bits] >> ((last + 1) % bits) & 1UL))
      last++;
    int w = last == cpu ? snprintf(buf + used, len - used, "%s%u", used ? "," : "", cpu)
                        : snprintf(buf + used, len - used, "%s%u-%u", used ? "," : "", cpu, last);
    if (w < 0 || (size_t)w >= len - used) {
      buf[used] = '\0'; /* cut at the last whole range */
      return;
    }
    used += (size_t)w;
    cpu = last + 1;
  }
}

/* One GPU's facts from NVML, with /sys for what NVML does not say. */
static void nvml_gpu(const gmt_nvml_t *nvml, const char *root, gmt_nvml_device_t dev,
                     gmt_topo_gpu_t *g)
{
  gmt_nvml_pci_info_t pci;
  gmt_nvml_memory_t mem;
  unsigned cur, pending, node;
  unsigned long mask[CPU_WORDS];

  if (nvml->DeviceGetUUID(dev, g->uuid, sizeof g->uuid) != GMT_NVML_SUCCESS)
    g->uuid[0] = '\0';
  if (!nvml->DeviceGetName || nvml->DeviceGetName(dev, g->name, sizeof g->name) != 0)
    g->name[0] = '\0';
  memset(&pci, 0, sizeof pci);
  if (nvml->DeviceGetPciInfo_v3(dev, &pci) == GMT_NVML_SUCCESS) {
    pci.busId[sizeof pci.busId - 1] = '\0';
    if (gmt__topo_bus_id_norm(pci.busId, g->bus_id) < 0)
      snprintf(g->bus_id, sizeof g->bus_id, "%04x:%02x:%02x.0", pci.domain & 0xffff, pci.bus & 0xff,
               pci.device & 0x1f);
  }
  if (nvml->DeviceGetMemoryInfo(dev, &mem) == GMT_NVML_SUCCESS)
    g->memory_total = mem.total;
  if (nvml->DeviceGetMigMode && nvml->DeviceGetMigMode(dev, &cur, &pending) == GMT_NVML_SUCCESS)
    g->mig = cur == GMT_NVML_DEVICE_MIG_ENABLE;
  if (nvml->DeviceGetNumaNodeId && nvml->DeviceGetNumaNodeId(dev, &node) == GMT_NVML_SUCCESS &&
      node < 1u << 16)
    g->numa_node = (int)node;
  else if (g->bus_id[0])
    g->numa_node = gmt__sysfs_pci_numa(root, g->bus_id);
  memset(mask, 0, sizeof mask);
  if (nvml->DeviceGetCpuAffinity &&
      nvml->DeviceGetCpuAffinity(dev, CPU_WORDS, mask) == GMT_NVML_SUCCESS)
    mask_to_cpulist(mask, CPU_WORDS, g->cpus, sizeof g->cpus);
  if (!g->cpus[0] && g->bus_id[0])
    gmt__sysfs_pci_cpulist(root, g->bus_id, g->cpus, sizeof g->cpus);
}

static int gpu_by_bus(const gmt_topo_t *t, const char *bus_id)
{
  for (int i = 0; i < t->n_gpus; i++)
    if (t->gpus[i].bus_id[0] && !strcmp(t->gpus[i].bus_id, bus_id))
      return i;
  return -1;
}

/* Active NVLinks: to another GPU counted per pair; to anything else (an
 * NVSwitch on HGX boards) counted per GPU, and two GPUs that both reach
 * switches are linked by the smaller count, as nvidia-smi shows NV18
 * between every pair of an H100 HGX. */
static void nvml_nvlinks(const gmt_nvml_t *nvml, gmt_nvml_device_t *dev, gmt_topo_t *t)
{
  int direct[GMT_TOPO_MAX_GPUS][GMT_TOPO_MAX_GPUS]; /* 16 KiB */
  int via_switch[GMT_TOPO_MAX_GPUS] = {0};
  if (!nvml->DeviceGetNvLinkState || !nvml->DeviceGetNvLinkRemotePciInfo_v2)
    return;
  memset(direct, 0, sizeof direct);
  for (int i = 0; i < t->n_gpus; i++) {
    if (!dev[i])
      continue;
    for (unsigned l = 0; l < GMT_NVML_NVLINK_MAX_LINKS; l++) {
      int active = 0;
      gmt_nvml_pci_info_t pci;
      char bus[16];
      if (nvml->DeviceGetNvLinkState(dev[i], l, &active) != GMT_NVML_SUCCESS ||
          active != GMT_NVML_FEATURE_ENABLED)
        continue;
      memset(&pci, 0, sizeof pci);
      if (nvml->DeviceGetNvLinkRemotePciInfo_v2(dev[i], l, &pci) != GMT_NVML_SUCCESS)
        continue;
      pci.busId[sizeof pci.busId - 1] = '\0';
      int j = gmt__topo_bus_id_norm(pci.busId, bus) == 0 ? gpu_by_bus(t, bus) : -1;
      if (j >= 0 && j != i)
        direct[i][j]++;
      else if (j < 0)
        via_switch[i]++;
    }
  }
  for (int i = 0; i < t->n_gpus; i++)
    for (int j = 0; j < t->n_gpus; j++) {
      if (i == j)
        continue;
      int n = direct[i][j] > direct[j][i] ? direct[i][j] : direct[j][i];
      if (n == 0 && via_switch[i] && via_switch[j])
        n = via_switch[i] < via_switch[j] ? via_switch[i] : via_switch[j];
      if (n > 0) {
        t->links[i][j].level = GMT_TOPO_NVLINK;
        t->links[i][j].nvlinks = n;
      }
    }
}

/* The GPUs and their links from NVML (initialized): 0, or -1 with
 * t->nvml_error set when NVML cannot even count them. */
static int from_nvml(gmt_topo_t *t, const char *root, const gmt_nvml_t *nvml)
{
  gmt_nvml_device_t dev[GMT_TOPO_MAX_GPUS] = {0};
  unsigned count = 0;
  int rc = nvml->DeviceGetCount_v2(&count);
  if (rc != GMT_NVML_SUCCESS) {
    snprintf(t->nvml_error, sizeof t->nvml_error, "nvmlDeviceGetCount_v2: %s (%d)",
             nvml_strerror(nvml, rc), rc);
    return -1;
  }
  t->n_gpus = count > GMT_TOPO_MAX_GPUS ? GMT_TOPO_MAX_GPUS : (int)count;
  for (int i = 0; i < t->n_gpus; i++) {
    gmt_topo_gpu_t *g = &t->gpus[i];
    g->index = i;
    g->numa_node = -1;
    g->mig = -1;
    if (nvml->DeviceGetHandleByIndex_v2((unsigned)i, &dev[i]) != GMT_NVML_SUCCESS) {
      dev[i] = NULL; /* listed with what is known: its index */
      continue;
    }
    nvml_gpu(nvml, root, dev[i], g);
  }
  for (int i = 0; i < t->n_gpus; i++)
    for (int j = 0; j < t->n_gpus; j++) {
      gmt_topo_link_t *l = &t->links[i][j];
      int level;
      if (i == j) {
        l->level = GMT_TOPO_SELF;
      } else if (dev[i] && dev[j] &&
                 nvml->DeviceGetTopologyCommonAncestor(dev[i], dev[j], &level) ==
                     GMT_NVML_SUCCESS) {
        l->level = from_nvml_level(level);
      } else if (t->gpus[i].bus_id[0] && t->gpus[j].bus_id[0]) {
        l->level = gmt__sysfs_pci_level(root, t->gpus[i].bus_id, t->gpus[i].numa_node,
                                        t->gpus[j].bus_id, t->gpus[j].numa_node);
      } else {
        l->level = GMT_TOPO_UNKNOWN;
      }
    }
  nvml_nvlinks(nvml, dev, t);
  return 0;
}

/* The GPUs and their links from /sys alone. */
static void from_sysfs(gmt_topo_t *t, const char *root)
{
  char bus[GMT_TOPO_MAX_GPUS][16];
  t->n_gpus = gmt__sysfs_gpus(root, bus, GMT_TOPO_MAX_GPUS);
  for (int i = 0; i < t->n_gpus; i++) {
    gmt_topo_gpu_t *g = &t->gpus[i];
    memset(g, 0, sizeof *g);
    g->index = i;
    g->mig = -1;
    memcpy(g->bus_id, bus[i], sizeof g->bus_id);
    g->numa_node = gmt__sysfs_pci_numa(root, g->bus_id);
    gmt__sysfs_pci_cpulist(root, g->bus_id, g->cpus, sizeof g->cpus);
  }
  for (int i = 0; i < t->n_gpus; i++)
    for (int j = 0; j < t->n_gpus; j++)
      t->links[i][j].level = gmt__sysfs_pci_level(root, t->gpus[i].bus_id, t->gpus[i].numa_node,
                                                  t->gpus[j].bus_id, t->gpus[j].numa_node);
}

/* A GPU whose NUMA node neither NVML nor /sys gives (a VM's /sys says
 * -1): the node whose CPU list is the GPU's CPU affinity, as nvidia-smi's
 * "NUMA Affinity" reads it. */
static void numa_from_cpus(gmt_topo_t *t)
{
  for (int i = 0; i < t->n_gpus; i++) {
    gmt_topo_gpu_t *g = &t->gpus[i];
    for (int k = 0; g->numa_node < 0 && g->cpus[0] && k < t->n_nodes; k++)
      if (strcmp(t->nodes[k].cpus, g->cpus) == 0)
        g->numa_node = t->nodes[k].node;
  }
}

int gmt_topo_build(const char *sysfs_root, const gmt_nvml_t *nvml, const char *nvml_why,
                   gmt_topo_t **out)
{
  const char *root = sysfs_root && sysfs_root[0] ? sysfs_root : getenv("GMT_SYSFS_ROOT");
  if (!root || !root[0])
    root = "/sys";
  gmt_topo_t *t = calloc(1, sizeof *t);
  if (!t)
    return -ENOMEM;
  snprintf(t->sysfs_root, sizeof t->sysfs_root, "%s", root);
  t->n_nodes = gmt__sysfs_numa_nodes(root, t->nodes, GMT_TOPO_MAX_NODES);
  t->n_nics = gmt__sysfs_class_devs(root, "net", t->nics, GMT_TOPO_MAX_DEVS);
  t->n_nvme = gmt__sysfs_class_devs(root, "nvme", t->nvme, GMT_TOPO_MAX_DEVS);

  if (!nvml) {
    snprintf(t->nvml_error, sizeof t->nvml_error, "%s", nvml_why ? nvml_why : "NVML not loaded");
  } else {
    int rc = nvml->Init_v2();
    if (rc != GMT_NVML_SUCCESS) {
      snprintf(t->nvml_error, sizeof t->nvml_error, "nvmlInit_v2: %s (%d)", nvml_strerror(nvml, rc),
               rc);
    } else {
      if (from_nvml(t, root, nvml) == 0)
        t->nvml = 1;
      nvml->Shutdown();
    }
  }
  if (!t->nvml) {
    memset(t->gpus, 0, sizeof t->gpus);
    memset(t->links, 0, sizeof t->links);
    from_sysfs(t, root);
  }
  numa_from_cpus(t);
  *out = t;
  return 0;
}

int gmt_topo_discover(gmt_topo_t **out)
{
  gmt_nvml_t nvml;
  char why[256] = "";
  int loaded = gmt_nvml_load(NULL, &nvml, why, sizeof why) == 0;
  int rc = gmt_topo_build(NULL, loaded ? &nvml : NULL, why, out);
  if (loaded)
    gmt_nvml_unload(&nvml);
  return rc;
}

void gmt_topo_free(gmt_topo_t *topo)
{
  free(topo);
}
