/* The node's topology (topo/): /sys read from a fake tree each test writes
 * into a temporary folder (two NUMA nodes, GPUs under one PCIe switch,
 * under nested switches, on other root ports, host bridges and sockets, a
 * NIC, an NVMe), and NVML played by a stub table (a 4-GPU, 2-socket
 * machine with one NVLink pair). */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "gmt_nvml.h"
#include "gmt_topo.h"

static char root[256]; /* the fake /sys */

static void mkdirs(const char *rel)
{
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  for (char *p = path + strlen(root) + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      mkdir(path, 0755);
      *p = '/';
    }
  mkdir(path, 0755);
}

static void put(const char *rel, const char *text)
{
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* root/link -> root/target */
static void link_to(const char *link, const char *target)
{
  char l[PATH_MAX], t[PATH_MAX];
  snprintf(l, sizeof l, "%s/%s", root, link);
  snprintf(t, sizeof t, "%s/%s", root, target);
  assert_int_equal(symlink(t, l), 0);
}

/* A PCI function at devices/<path> (its last component is its bus id),
 * linked from bus/pci/devices as the kernel does. */
static void pci(const char *path, const char *vendor, const char *cls, int numa, const char *cpus)
{
  char rel[PATH_MAX], v[32];
  const char *bdf = strrchr(path, '/') + 1;
  snprintf(rel, sizeof rel, "devices/%s", path);
  mkdirs(rel);
  snprintf(rel, sizeof rel, "devices/%s/vendor", path);
  put(rel, vendor);
  snprintf(rel, sizeof rel, "devices/%s/class", path);
  put(rel, cls);
  snprintf(rel, sizeof rel, "devices/%s/numa_node", path);
  snprintf(v, sizeof v, "%d\n", numa);
  put(rel, v);
  if (cpus) {
    snprintf(rel, sizeof rel, "devices/%s/local_cpulist", path);
    put(rel, cpus);
  }
  char target[PATH_MAX];
  snprintf(rel, sizeof rel, "bus/pci/devices/%s", bdf);
  snprintf(target, sizeof target, "devices/%s", path);
  link_to(rel, target);
}

#define BRIDGE "0x8086\n", "0x060400\n"
#define NV_3D "0x10de\n", "0x030200\n"

/* GPU bus ids in the fake tree and how they sit:
 *   03:00.0, 04:00.0  one PCIe switch (02:08.0, 02:10.0 below 01:00.0)   PIX
 *   08:00.0           a second switch below the first one (vs 03: PXB)
 *   05:00.0           another root port of host bridge pci0000:00       PHB
 *   41:00.0           host bridge pci0000:40, NUMA node 0               NODE
 *   81:00.0           host bridge pci0000:80, NUMA node 1               SYS */
static int setup_tree(void **state)
{
  (void)state;
  snprintf(root, sizeof root, "/tmp/gmt-topo-XXXXXX");
  assert_non_null(mkdtemp(root));
  mkdirs("bus/pci/devices");
  mkdirs("class/net");
  mkdirs("class/nvme");
  mkdirs("devices/system/node/node0");
  mkdirs("devices/system/node/node1");
  put("devices/system/node/node0/cpulist", "0-7\n");
  put("devices/system/node/node1/cpulist", "8-15\n");

  pci("pci0000:00/0000:00:01.0", BRIDGE, 0, NULL);
  pci("pci0000:00/0000:00:01.0/0000:01:00.0", BRIDGE, 0, NULL);
  pci("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0", BRIDGE, 0, NULL);
  pci("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0", BRIDGE, 0, NULL);
  pci("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:18.0", BRIDGE, 0, NULL);
  pci("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0", NV_3D, 0, "0-7\n");
  /* the GPU's audio function: NVIDIA, but not a GPU */
  pci("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.1", "0x10de\n", "0x040300\n", 0,
      NULL);
  pci("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:04:00.0", "0x10de\n", "0x030000\n", 0,
      "0-7\n");
  pci("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:18.0/0000:06:00.0", BRIDGE, 0, NULL);
  pci("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:18.0/0000:06:00.0/0000:07:00.0", BRIDGE, 0,
      NULL);
  pci("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:18.0/0000:06:00.0/0000:07:00.0/0000:08:00.0",
      NV_3D, 0, "0-7\n");
  pci("pci0000:00/0000:00:02.0", BRIDGE, 0, NULL);
  pci("pci0000:00/0000:00:02.0/0000:05:00.0", NV_3D, 0, "0-7\n");
  /* a VGA controller, but not NVIDIA's */
  pci("pci0000:00/0000:00:05.0", "0x8086\n", "0x030000\n", 0, NULL);
  pci("pci0000:40/0000:40:01.0", BRIDGE, 0, NULL);
  pci("pci0000:40/0000:40:01.0/0000:41:00.0", NV_3D, 0, "0-7\n");
  pci("pci0000:80/0000:80:01.0", BRIDGE, 1, NULL);
  pci("pci0000:80/0000:80:01.0/0000:81:00.0", NV_3D, 1, "8-15\n");

  /* A NIC on socket 1, a virtio NIC whose device is below its PCI
   * function, lo (virtual), and an NVMe on node 0. */
  pci("pci0000:80/0000:80:02.0", BRIDGE, 1, NULL);
  pci("pci0000:80/0000:80:02.0/0000:82:00.0", "0x15b3\n", "0x020700\n", 1, NULL);
  mkdirs("devices/pci0000:80/0000:80:02.0/0000:82:00.0/net/ib0");
  link_to("devices/pci0000:80/0000:80:02.0/0000:82:00.0/net/ib0/device",
          "devices/pci0000:80/0000:80:02.0/0000:82:00.0");
  link_to("class/net/ib0", "devices/pci0000:80/0000:80:02.0/0000:82:00.0/net/ib0");
  pci("pci0000:00/0000:00:03.0", "0x1af4\n", "0x020000\n", -1, NULL);
  mkdirs("devices/pci0000:00/0000:00:03.0/virtio2/net/eth0");
  link_to("devices/pci0000:00/0000:00:03.0/virtio2/net/eth0/device",
          "devices/pci0000:00/0000:00:03.0/virtio2");
  link_to("class/net/eth0", "devices/pci0000:00/0000:00:03.0/virtio2/net/eth0");
  mkdirs("devices/virtual/net/lo");
  link_to("class/net/lo", "devices/virtual/net/lo");
  pci("pci0000:40/0000:40:03.0", BRIDGE, 0, NULL);
  pci("pci0000:40/0000:40:03.0/0000:42:00.0", "0x144d\n", "0x010802\n", 0, NULL);
  mkdirs("devices/pci0000:40/0000:40:03.0/0000:42:00.0/nvme/nvme0");
  link_to("devices/pci0000:40/0000:40:03.0/0000:42:00.0/nvme/nvme0/device",
          "devices/pci0000:40/0000:40:03.0/0000:42:00.0");
  link_to("class/nvme/nvme0", "devices/pci0000:40/0000:40:03.0/0000:42:00.0/nvme/nvme0");
  return 0;
}

static int teardown_tree(void **state)
{
  (void)state;
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static int gpu_at(const gmt_topo_t *t, const char *bus_id)
{
  for (int i = 0; i < t->n_gpus; i++)
    if (!strcmp(t->gpus[i].bus_id, bus_id))
      return i;
  fail_msg("no GPU at %s", bus_id);
  return -1;
}

static gmt_topo_level_t level(const gmt_topo_t *t, const char *a, const char *b)
{
  int i = gpu_at(t, a), j = gpu_at(t, b);
  assert_int_equal(t->links[i][j].level, t->links[j][i].level);
  return t->links[i][j].level;
}

static void test_topo_sysfs_finds_only_nvidia_gpus_in_bus_order(void **state)
{
  (void)state;
  gmt_topo_t *t;
  assert_int_equal(gmt_topo_build(root, NULL, "no NVML in this test", &t), 0);
  assert_int_equal(t->nvml, 0);
  assert_string_equal(t->nvml_error, "no NVML in this test");
  assert_int_equal(t->n_gpus, 6);
  const char *want[] = {"0000:03:00.0", "0000:04:00.0", "0000:05:00.0",
                        "0000:08:00.0", "0000:41:00.0", "0000:81:00.0"};
  for (int i = 0; i < 6; i++) {
    assert_string_equal(t->gpus[i].bus_id, want[i]);
    assert_int_equal(t->gpus[i].index, i);
    assert_string_equal(t->gpus[i].uuid, "");
    assert_int_equal(t->gpus[i].mig, -1);
    assert_true(t->gpus[i].memory_total == 0);
  }
  assert_int_equal(t->gpus[0].numa_node, 0);
  assert_string_equal(t->gpus[0].cpus, "0-7");
  assert_int_equal(t->gpus[5].numa_node, 1);
  assert_string_equal(t->gpus[5].cpus, "8-15");
  gmt_topo_free(t);
}

/* /sys without a NUMA node for a GPU (a VM's -1): the node whose CPU
 * list is the GPU's CPU affinity; none when no node's list matches. */
static void test_topo_numa_from_the_cpu_list_when_sysfs_has_none(void **state)
{
  (void)state;
  put("devices/pci0000:80/0000:80:01.0/0000:81:00.0/numa_node", "-1\n");
  put("devices/pci0000:40/0000:40:01.0/0000:41:00.0/numa_node", "-1\n");
  put("devices/pci0000:40/0000:40:01.0/0000:41:00.0/local_cpulist", "0-3\n");
  gmt_topo_t *t;
  assert_int_equal(gmt_topo_build(root, NULL, "no NVML in this test", &t), 0);
  int i81 = gpu_at(t, "0000:81:00.0"), i41 = gpu_at(t, "0000:41:00.0");
  assert_true(i81 >= 0 && i41 >= 0);
  assert_int_equal(t->gpus[i81].numa_node, 1);
  assert_int_equal(t->gpus[i41].numa_node, -1);
  gmt_topo_free(t);
}

static void test_topo_sysfs_levels_follow_pci_paths(void **state)
{
  (void)state;
  gmt_topo_t *t;
  assert_int_equal(gmt_topo_build(root, NULL, "off", &t), 0);
  assert_int_equal(level(t, "0000:03:00.0", "0000:03:00.0"), GMT_TOPO_SELF);
  assert_int_equal(level(t, "0000:03:00.0", "0000:04:00.0"), GMT_TOPO_PIX);
  assert_int_equal(level(t, "0000:03:00.0", "0000:08:00.0"), GMT_TOPO_PXB);
  assert_int_equal(level(t, "0000:04:00.0", "0000:08:00.0"), GMT_TOPO_PXB);
  assert_int_equal(level(t, "0000:03:00.0", "0000:05:00.0"), GMT_TOPO_PHB);
  assert_int_equal(level(t, "0000:08:00.0", "0000:05:00.0"), GMT_TOPO_PHB);
  assert_int_equal(level(t, "0000:03:00.0", "0000:41:00.0"), GMT_TOPO_NODE);
  assert_int_equal(level(t, "0000:05:00.0", "0000:41:00.0"), GMT_TOPO_NODE);
  assert_int_equal(level(t, "0000:03:00.0", "0000:81:00.0"), GMT_TOPO_SYS);
  assert_int_equal(level(t, "0000:41:00.0", "0000:81:00.0"), GMT_TOPO_SYS);
  gmt_topo_free(t);
}

static void test_topo_sysfs_nics_and_nvme_with_numa(void **state)
{
  (void)state;
  gmt_topo_t *t;
  assert_int_equal(gmt_topo_build(root, NULL, "off", &t), 0);
  assert_int_equal(t->n_nics, 2); /* lo has no device */
  assert_string_equal(t->nics[0].name, "eth0");
  assert_string_equal(t->nics[0].bus_id, "0000:00:03.0");
  assert_int_equal(t->nics[0].numa_node, -1);
  assert_string_equal(t->nics[1].name, "ib0");
  assert_string_equal(t->nics[1].bus_id, "0000:82:00.0");
  assert_int_equal(t->nics[1].numa_node, 1);
  assert_int_equal(t->n_nvme, 1);
  assert_string_equal(t->nvme[0].name, "nvme0");
  assert_string_equal(t->nvme[0].bus_id, "0000:42:00.0");
  assert_int_equal(t->nvme[0].numa_node, 0);
  assert_int_equal(t->n_nodes, 2);
  assert_int_equal(t->nodes[0].node, 0);
  assert_string_equal(t->nodes[0].cpus, "0-7");
  assert_int_equal(t->nodes[1].node, 1);
  assert_string_equal(t->nodes[1].cpus, "8-15");
  gmt_topo_free(t);
}

static void test_topo_missing_sysfs_is_empty_not_an_error(void **state)
{
  (void)state;
  gmt_topo_t *t;
  assert_int_equal(gmt_topo_build("/nonexistent/gmt-sysfs", NULL, "off", &t), 0);
  assert_int_equal(t->n_gpus + t->n_nics + t->n_nvme + t->n_nodes, 0);
  gmt_topo_free(t);
}

static void test_topo_sysfs_root_from_environment(void **state)
{
  (void)state;
  gmt_topo_t *t;
  setenv("GMT_SYSFS_ROOT", root, 1);
  assert_int_equal(gmt_topo_build(NULL, NULL, "off", &t), 0);
  unsetenv("GMT_SYSFS_ROOT");
  assert_string_equal(t->sysfs_root, root);
  assert_int_equal(t->n_gpus, 6);
  gmt_topo_free(t);
}

/* ---- NVML, played by a stub: 4 GPUs, 2 sockets. GPUs 0 and 1 (socket 0)
 * share 4 NVLinks; GPUs 2 and 3 (socket 1) share a host bridge; GPU 2
 * also has one NVLink to a non-GPU (an NVSwitch), GPU 3 none; GPU 3 is in
 * MIG mode; GPU 2's CPU affinity is not supported (from /sys then). */
static const char *stub_bus[4] = {"00000000:1A:00.0", "00000000:1B:00.0", "00000000:9A:00.0",
                                  "00000000:9B:00.0"};
static int stub_init_rc, stub_inits, stub_shutdowns;

static int dev_index(gmt_nvml_device_t d)
{
  int i = (int)(uintptr_t)d - 1;
  assert_in_range(i, 0, 3);
  return i;
}

static int s_init(void)
{
  stub_inits++;
  return stub_init_rc;
}
static int s_shutdown(void)
{
  stub_shutdowns++;
  return 0;
}
static const char *s_error_string(int rc)
{
  return rc == 9 ? "Driver Not Loaded" : "Unknown Error";
}
static int s_count(unsigned *n)
{
  *n = 4;
  return 0;
}
static int s_handle(unsigned i, gmt_nvml_device_t *d)
{
  if (i >= 4)
    return 2;
  *d = (gmt_nvml_device_t)(uintptr_t)(i + 1);
  return 0;
}
static int s_uuid(gmt_nvml_device_t d, char *buf, unsigned len)
{
  snprintf(buf, len, "GPU-0000000%d-stub", dev_index(d));
  return 0;
}
static int s_pci(gmt_nvml_device_t d, gmt_nvml_pci_info_t *p)
{
  memset(p, 0, sizeof *p);
  snprintf(p->busId, sizeof p->busId, "%s", stub_bus[dev_index(d)]);
  return 0;
}
static int s_memory(gmt_nvml_device_t d, gmt_nvml_memory_t *m)
{
  m->total = (80ULL << 30) + (unsigned long long)dev_index(d);
  m->free = m->total;
  m->used = 0;
  return 0;
}
static int s_mig(gmt_nvml_device_t d, unsigned *cur, unsigned *pending)
{
  *cur = *pending = dev_index(d) == 3;
  return 0;
}
static int s_affinity(gmt_nvml_device_t d, unsigned words, unsigned long *set)
{
  int i = dev_index(d);
  memset(set, 0, words * sizeof *set);
  if (i == 2)
    return GMT_NVML_ERROR_NOT_SUPPORTED;
  if (i < 2)
    set[0] = 0xffUL | 1UL << 16; /* 0-7,16 */
  else
    set[0] = 0xff00UL;
  return 0;
}
static int s_ancestor(gmt_nvml_device_t a, gmt_nvml_device_t b, int *lvl)
{
  int i = dev_index(a), j = dev_index(b);
  if (i / 2 != j / 2)
    *lvl = GMT_NVML_TOPOLOGY_SYSTEM;
  else
    *lvl = i < 2 ? GMT_NVML_TOPOLOGY_SINGLE : GMT_NVML_TOPOLOGY_HOSTBRIDGE;
  return 0;
}
static int s_nvlink_state(gmt_nvml_device_t d, unsigned link, int *active)
{
  int i = dev_index(d);
  if (i == 3)
    return GMT_NVML_ERROR_NOT_SUPPORTED;
  *active = (i < 2 && link < 4) || (i == 2 && link == 0) ? GMT_NVML_FEATURE_ENABLED : 0;
  return 0;
}
static int s_nvlink_remote(gmt_nvml_device_t d, unsigned link, gmt_nvml_pci_info_t *p)
{
  int i = dev_index(d);
  (void)link;
  memset(p, 0, sizeof *p);
  snprintf(p->busId, sizeof p->busId, "%s", i == 2 ? "00000000:C0:00.0" : stub_bus[1 - i]);
  return 0;
}

static gmt_nvml_t stub_nvml(void)
{
  gmt_nvml_t n = {
      .Init_v2 = s_init,
      .Shutdown = s_shutdown,
      .ErrorString = s_error_string,
      .DeviceGetCount_v2 = s_count,
      .DeviceGetHandleByIndex_v2 = s_handle,
      .DeviceGetUUID = s_uuid,
      .DeviceGetPciInfo_v3 = s_pci,
      .DeviceGetMemoryInfo = s_memory,
      .DeviceGetMigMode = s_mig,
      .DeviceGetCpuAffinity = s_affinity,
      .DeviceGetTopologyCommonAncestor = s_ancestor,
      .DeviceGetNvLinkState = s_nvlink_state,
      .DeviceGetNvLinkRemotePciInfo_v2 = s_nvlink_remote,
  };
  stub_init_rc = 0;
  stub_inits = stub_shutdowns = 0;
  return n;
}

/* /sys for the stub's GPUs: NUMA nodes 0, 0, 1, 1 (NVML gives none). */
static int setup_nvml_tree(void **state)
{
  (void)state;
  snprintf(root, sizeof root, "/tmp/gmt-topo-XXXXXX");
  assert_non_null(mkdtemp(root));
  mkdirs("bus/pci/devices");
  pci("pci0000:00/0000:00:01.0", BRIDGE, 0, NULL);
  pci("pci0000:00/0000:00:01.0/0000:1a:00.0", NV_3D, 0, "0-7\n");
  pci("pci0000:00/0000:00:01.0/0000:1b:00.0", NV_3D, 0, "0-7\n");
  pci("pci0000:80/0000:80:01.0", BRIDGE, 1, NULL);
  pci("pci0000:80/0000:80:01.0/0000:9a:00.0", NV_3D, 1, "8-15\n");
  pci("pci0000:80/0000:80:01.0/0000:9b:00.0", NV_3D, 1, "8-15\n");
  return 0;
}

static void test_topo_nvml_gives_gpus_and_sysfs_numa(void **state)
{
  (void)state;
  gmt_nvml_t n = stub_nvml();
  gmt_topo_t *t;
  assert_int_equal(gmt_topo_build(root, &n, NULL, &t), 0);
  assert_int_equal(stub_inits, 1);
  assert_int_equal(stub_shutdowns, 1);
  assert_int_equal(t->nvml, 1);
  assert_int_equal(t->n_gpus, 4);
  const char *bus[] = {"0000:1a:00.0", "0000:1b:00.0", "0000:9a:00.0", "0000:9b:00.0"};
  const int numa[] = {0, 0, 1, 1};
  for (int i = 0; i < 4; i++) {
    char uuid[64];
    snprintf(uuid, sizeof uuid, "GPU-0000000%d-stub", i);
    assert_int_equal(t->gpus[i].index, i);
    assert_string_equal(t->gpus[i].uuid, uuid);
    assert_string_equal(t->gpus[i].bus_id, bus[i]);
    assert_true(t->gpus[i].memory_total == (80ULL << 30) + (uint64_t)i);
    assert_int_equal(t->gpus[i].numa_node, numa[i]);
    assert_int_equal(t->gpus[i].mig, i == 3);
  }
  assert_string_equal(t->gpus[0].cpus, "0-7,16"); /* NVML's mask */
  assert_string_equal(t->gpus[2].cpus, "8-15");   /* NVML said no: /sys */
  assert_string_equal(t->gpus[3].cpus, "8-15");
  gmt_topo_free(t);
}

static void test_topo_nvml_levels_and_nvlink_pair(void **state)
{
  (void)state;
  gmt_nvml_t n = stub_nvml();
  gmt_topo_t *t;
  assert_int_equal(gmt_topo_build(root, &n, NULL, &t), 0);
  for (int i = 0; i < 4; i++)
    assert_int_equal(t->links[i][i].level, GMT_TOPO_SELF);
  assert_int_equal(t->links[0][1].level, GMT_TOPO_NVLINK);
  assert_int_equal(t->links[1][0].level, GMT_TOPO_NVLINK);
  assert_int_equal(t->links[0][1].nvlinks, 4);
  /* GPU 2's one link leads to a switch that GPU 3 does not reach */
  assert_int_equal(t->links[2][3].level, GMT_TOPO_PHB);
  assert_int_equal(t->links[2][3].nvlinks, 0);
  for (int i = 0; i < 2; i++)
    for (int j = 2; j < 4; j++) {
      assert_int_equal(t->links[i][j].level, GMT_TOPO_SYS);
      assert_int_equal(t->links[j][i].level, GMT_TOPO_SYS);
    }
  gmt_topo_free(t);
}

static void test_topo_nvml_init_failure_falls_back_to_sysfs(void **state)
{
  (void)state;
  gmt_nvml_t n = stub_nvml();
  gmt_topo_t *t;
  stub_init_rc = 9;
  assert_int_equal(gmt_topo_build(root, &n, NULL, &t), 0);
  assert_int_equal(stub_shutdowns, 0);
  assert_int_equal(t->nvml, 0);
  assert_non_null(strstr(t->nvml_error, "nvmlInit_v2"));
  assert_non_null(strstr(t->nvml_error, "Driver Not Loaded"));
  assert_int_equal(t->n_gpus, 4);
  assert_string_equal(t->gpus[2].bus_id, "0000:9a:00.0");
  assert_string_equal(t->gpus[2].uuid, "");
  /* /sys: 1a and 1b sit below one root port, 9a on the other socket */
  assert_int_equal(t->links[0][1].level, GMT_TOPO_PIX);
  assert_int_equal(t->links[0][2].level, GMT_TOPO_SYS);
  gmt_topo_free(t);
}

static void test_nvml_load_says_why_it_failed(void **state)
{
  (void)state;
  gmt_nvml_t n;
  char why[256];
  assert_int_equal(gmt_nvml_load("none", &n, why, sizeof why), -ENOENT);
  assert_non_null(strstr(why, "GMT_NVML_LIB=none"));
  assert_int_equal(gmt_nvml_load("/nonexistent/libnvidia-ml.so.1", &n, why, sizeof why), -ENOENT);
  assert_non_null(strstr(why, "/nonexistent/libnvidia-ml.so.1"));
  assert_null(n.Init_v2);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_topo_sysfs_finds_only_nvidia_gpus_in_bus_order,
                                      setup_tree, teardown_tree),
      cmocka_unit_test_setup_teardown(test_topo_numa_from_the_cpu_list_when_sysfs_has_none,
                                      setup_tree, teardown_tree),
      cmocka_unit_test_setup_teardown(test_topo_sysfs_levels_follow_pci_paths, setup_tree,
                                      teardown_tree),
      cmocka_unit_test_setup_teardown(test_topo_sysfs_nics_and_nvme_with_numa, setup_tree,
                                      teardown_tree),
      cmocka_unit_test_setup_teardown(test_topo_sysfs_root_from_environment, setup_tree,
                                      teardown_tree),
      cmocka_unit_test(test_topo_missing_sysfs_is_empty_not_an_error),
      cmocka_unit_test_setup_teardown(test_topo_nvml_gives_gpus_and_sysfs_numa, setup_nvml_tree,
                                      teardown_tree),
      cmocka_unit_test_setup_teardown(test_topo_nvml_levels_and_nvlink_pair, setup_nvml_tree,
                                      teardown_tree),
      cmocka_unit_test_setup_teardown(test_topo_nvml_init_failure_falls_back_to_sysfs,
                                      setup_nvml_tree, teardown_tree),
      cmocka_unit_test(test_nvml_load_says_why_it_failed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
