/* Reading /sys for the topology (sysfs.h). Only files and links that
 * unprivileged users may read; anything missing leaves a field unknown
 * rather than failing, since containers and VMs show partial trees. */
#include "sysfs.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_busid.h"

#define MAX_DEPTH 32

/* The first line of root/rel, without its newline: 0, or -errno. */
static int read_line(const char *root, const char *rel, char *buf, size_t len)
{
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  FILE *f = fopen(path, "r");
  if (!f)
    return -errno;
  if (!fgets(buf, (int)len, f)) {
    fclose(f);
    return -EIO;
  }
  fclose(f);
  buf[strcspn(buf, "\r\n")] = '\0';
  return 0;
}

static int is_bdf(const char *s)
{
  if (strlen(s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.')
    return 0;
  for (int i = 0; i < 12; i++)
    if (i != 4 && i != 7 && i != 10 && !isxdigit((unsigned char)s[i]))
      return 0;
  return 1;
}

int gmt__topo_bus_id_norm(const char *in, char out[16])
{
  gmt_busid_t b;
  /* The canonical form has a 4-digit domain; NVML pads it to 8 with zeros. */
  if (gmt_busid_parse(in, &b) < 0 || b.domain > 0xffff)
    return -EINVAL;
  snprintf(out, 16, "%04x:%02x:%02x.%x", b.domain, b.bus, b.device, b.function);
  return 0;
}

int gmt__sysfs_pci_numa(const char *root, const char *bus_id)
{
  char rel[128], buf[32];
  snprintf(rel, sizeof rel, "bus/pci/devices/%s/numa_node", bus_id);
  if (read_line(root, rel, buf, sizeof buf) < 0)
    return -1;
  char *end;
  long v = strtol(buf, &end, 10);
  return end == buf || v < 0 || v > INT_MAX ? -1 : (int)v;
}

void gmt__sysfs_pci_cpulist(const char *root, const char *bus_id, char *cpus, size_t len)
{
  char rel[128];
  snprintf(rel, sizeof rel, "bus/pci/devices/%s/local_cpulist", bus_id);
  if (read_line(root, rel, cpus, len) < 0)
    cpus[0] = '\0';
}

/* The canonical path of root/rel below root/devices, split at '/': the
 * count of components, or -1 when it does not resolve there. */
static int devices_path(const char *root, const char *rel, char (*comp)[NAME_MAX + 1], int max)
{
  char path[PATH_MAX], real[PATH_MAX], base[PATH_MAX];
  snprintf(path, sizeof path, "%s/devices", root);
  if (!realpath(path, base))
    return -1;
  snprintf(path, sizeof path, "%s/%s", root, rel);
  if (!realpath(path, real))
    return -1;
  size_t bl = strlen(base);
  if (strncmp(real, base, bl) != 0 || real[bl] != '/')
    return -1;
  int n = 0;
  for (char *save, *p = strtok_r(real + bl + 1, "/", &save); p && n < max;
       p = strtok_r(NULL, "/", &save))
    snprintf(comp[n++], NAME_MAX + 1, "%s", p);
  return n;
}

/* The PCI path of a device: its host bridge's component, then the PCI
 * devices from the root port down to the device itself. */
static int pci_path(const char *root, const char *bus_id, char (*comp)[NAME_MAX + 1], int max)
{
  char rel[128];
  snprintf(rel, sizeof rel, "bus/pci/devices/%s", bus_id);
  int n = devices_path(root, rel, comp, max);
  if (n < 2 || strcmp(comp[n - 1], bus_id) != 0)
    return -1;
  return n;
}

gmt_topo_level_t gmt__sysfs_pci_level(const char *root, const char *bus_a, int numa_a,
                                      const char *bus_b, int numa_b)
{
  char a[MAX_DEPTH][NAME_MAX + 1], b[MAX_DEPTH][NAME_MAX + 1];
  if (!strcmp(bus_a, bus_b))
    return GMT_TOPO_SELF;
  int na = pci_path(root, bus_a, a, MAX_DEPTH);
  int nb = pci_path(root, bus_b, b, MAX_DEPTH);
  if (na < 0 || nb < 0)
    return GMT_TOPO_UNKNOWN;
  if (strcmp(a[0], b[0]) != 0)
    return numa_a == numa_b ? GMT_TOPO_NODE : GMT_TOPO_SYS;
  /* Bridges are the components between the host and the device. */
  int common = 0;
  while (1 + common < na - 1 && 1 + common < nb - 1 && !strcmp(a[1 + common], b[1 + common]))
    common++;
  if (common == 0)
    return GMT_TOPO_PHB;
  int below_a = na - 2 - common, below_b = nb - 2 - common;
  return below_a <= 1 && below_b <= 1 ? GMT_TOPO_PIX : GMT_TOPO_PXB;
}

static int cmp_bus(const void *x, const void *y)
{
  return strcmp((const char *)x, (const char *)y);
}

int gmt__sysfs_gpus(const char *root, char (*bus)[16], int max)
{
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/bus/pci/devices", root);
  DIR *d = opendir(path);
  if (!d)
    return 0;
  int n = 0;
  for (struct dirent *e; n < max && (e = readdir(d));) {
    char rel[PATH_MAX], vendor[32], cls[32];
    if (!is_bdf(e->d_name))
      continue;
    snprintf(rel, sizeof rel, "bus/pci/devices/%s/vendor", e->d_name);
    if (read_line(root, rel, vendor, sizeof vendor) < 0 || strtoul(vendor, NULL, 16) != 0x10de)
      continue;
    snprintf(rel, sizeof rel, "bus/pci/devices/%s/class", e->d_name);
    if (read_line(root, rel, cls, sizeof cls) < 0)
      continue;
    unsigned long c = strtoul(cls, NULL, 16) >> 8;
    if (c != 0x0302 && c != 0x0300)
      continue;
    if (gmt__topo_bus_id_norm(e->d_name, bus[n]) == 0)
      n++;
  }
  closedir(d);
  qsort(bus, (size_t)n, sizeof bus[0], cmp_bus);
  return n;
}

static int cmp_dev(const void *x, const void *y)
{
  return strcmp(((const gmt_topo_dev_t *)x)->name, ((const gmt_topo_dev_t *)y)->name);
}

int gmt__sysfs_class_devs(const char *root, const char *cls, gmt_topo_dev_t *devs, int max)
{
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/class/%s", root, cls);
  DIR *d = opendir(path);
  if (!d)
    return 0;
  int n = 0;
  for (struct dirent *e; n < max && (e = readdir(d));) {
    char rel[PATH_MAX], comp[MAX_DEPTH][NAME_MAX + 1];
    if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof devs[n].name)
      continue;
    /* The device link may lead below the PCI function (virtio's
     * 0000:00:03.0/virtio2): the nearest PCI component is the device. */
    snprintf(rel, sizeof rel, "class/%s/%s/device", cls, e->d_name);
    int k = devices_path(root, rel, comp, MAX_DEPTH);
    while (k > 0 && !is_bdf(comp[k - 1]))
      k--;
    if (k <= 0)
      continue; /* virtual: lo, bridges, tunnels */
    int w = snprintf(devs[n].name, sizeof devs[n].name, "%s", e->d_name);
    if (w < 0 || (size_t)w >= sizeof devs[n].name)
      continue; /* a name longer than any a kernel gives a NIC or an NVMe */
    if (gmt__topo_bus_id_norm(comp[k - 1], devs[n].bus_id) < 0)
      continue;
    devs[n].numa_node = gmt__sysfs_pci_numa(root, devs[n].bus_id);
    n++;
  }
  closedir(d);
  qsort(devs, (size_t)n, sizeof devs[0], cmp_dev);
  return n;
}

static int cmp_node(const void *x, const void *y)
{
  return ((const gmt_topo_numa_t *)x)->node - ((const gmt_topo_numa_t *)y)->node;
}

int gmt__sysfs_numa_nodes(const char *root, gmt_topo_numa_t *nodes, int max)
{
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/devices/system/node", root);
  DIR *d = opendir(path);
  if (!d)
    return 0;
  int n = 0;
  for (struct dirent *e; n < max && (e = readdir(d));) {
    char rel[PATH_MAX], *end;
    if (strncmp(e->d_name, "node", 4) != 0 || !isdigit((unsigned char)e->d_name[4]))
      continue;
    long v = strtol(e->d_name + 4, &end, 10);
    if (*end || v > INT_MAX)
      continue;
    nodes[n].node = (int)v;
    snprintf(rel, sizeof rel, "devices/system/node/%s/cpulist", e->d_name);
    if (read_line(root, rel, nodes[n].cpus, sizeof nodes[n].cpus) < 0)
      nodes[n].cpus[0] = '\0';
    n++;
  }
  closedir(d);
  qsort(nodes, (size_t)n, sizeof nodes[0], cmp_node);
  return n;
}
