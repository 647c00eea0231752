/* gmt topo: the node's topology (topo/gmt_topo.h) as tables for people,
 * like nvidia-smi topo -m, or as JSON (docs/topology.md). It runs where it
 * is typed: no daemon, no CUDA context; NVML when the node has it, /sys
 * always. */
#include <ctype.h>
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>

#include "cmd.h"
#include "gmt_error.h"
#include "gmt_topo.h"

static void usage(FILE *f)
{
  fprintf(f, "usage: gmt topo [--json]\n"
             "\n"
             "Shows this node's GPUs (index, UUID, PCI bus id, memory, NUMA node,\n"
             "CPU affinity, MIG mode), how each pair is linked (NVLink, PCIe switch,\n"
             "host bridge, NUMA node, across sockets), the NUMA nodes, and the NICs\n"
             "and NVMe controllers with their NUMA nodes. GPU facts come from NVML\n"
             "(libnvidia-ml.so.1, or $GMT_NVML_LIB; none turns it off); without it\n"
             "from /sys alone ($GMT_SYSFS_ROOT, default /sys), and a note says why.\n"
             "Needs no daemon.\n"
             "\n"
             "  --json       print one line of JSON (see docs/topology.md)\n"
             "  -h, --help   show this help\n");
}

/* Names come from /sys and NVML: keep control characters off the terminal. */
static void put_safe(const char *s, int width)
{
  int n = 0;
  for (; s && *s; s++, n++)
    putchar(iscntrl((unsigned char)*s) ? '?' : *s);
  for (; n < width; n++)
    putchar(' ');
}

static void human(char *buf, size_t len, uint64_t bytes)
{
  if (bytes == 0) {
    snprintf(buf, len, "-");
    return;
  }
  snprintf(buf, len, "%.1f GiB", (double)bytes / (1024.0 * 1024 * 1024));
}

static void numa_str(char *buf, size_t len, int node)
{
  if (node < 0)
    snprintf(buf, len, "-");
  else
    snprintf(buf, len, "%d", node);
}

static void link_str(char *buf, size_t len, const gmt_topo_link_t *l)
{
  if (l->level == GMT_TOPO_NVLINK)
    snprintf(buf, len, "NV%d", l->nvlinks);
  else
    snprintf(buf, len, "%s", gmt_topo_level_name(l->level));
}

static void print_devs(const char *what, const gmt_topo_dev_t *d, int n)
{
  if (n == 0) {
    printf("\n%s: none found\n", what);
    return;
  }
  printf("\n%-16s  %-12s  %s\n", what, "BUS ID", "NUMA");
  for (int i = 0; i < n; i++) {
    char numa[16];
    numa_str(numa, sizeof numa, d[i].numa_node);
    put_safe(d[i].name, 16);
    printf("  %-12s  %s\n", d[i].bus_id, numa);
  }
}

static void print_table(const gmt_topo_t *t)
{
  if (t->nvml)
    printf("GPU facts from NVML; NUMA nodes, NICs and NVMe from %s.\n", t->sysfs_root);
  else
    printf("NVML not available (%s): GPUs as %s shows them, without UUID, memory or MIG mode.\n",
           t->nvml_error, t->sysfs_root);

  if (t->n_gpus == 0) {
    printf("\nno NVIDIA GPU found\n");
  } else {
    printf("\n%-4s  %-40s  %-12s  %-10s  %-4s  %-16s  %s\n", "GPU", "UUID", "BUS ID", "MEMORY",
           "NUMA", "CPUS", "MIG");
    for (int i = 0; i < t->n_gpus; i++) {
      const gmt_topo_gpu_t *g = &t->gpus[i];
      char mem[32], numa[16];
      human(mem, sizeof mem, g->memory_total);
      numa_str(numa, sizeof numa, g->numa_node);
      printf("%-4d  ", g->index);
      put_safe(g->uuid[0] ? g->uuid : "-", 40);
      printf("  %-12s  %-10s  %-4s  ", g->bus_id[0] ? g->bus_id : "-", mem, numa);
      put_safe(g->cpus[0] ? g->cpus : "-", 16);
      printf("  %s\n", g->mig < 0 ? "-" : g->mig ? "on" : "off");
    }

    printf("\n%-4s", "");
    for (int j = 0; j < t->n_gpus; j++)
      printf("  GPU%-3d", t->gpus[j].index);
    printf("\n");
    for (int i = 0; i < t->n_gpus; i++) {
      printf("GPU%-1d", t->gpus[i].index);
      for (int j = 0; j < t->n_gpus; j++) {
        char s[16];
        link_str(s, sizeof s, &t->links[i][j]);
        printf(j + 1 < t->n_gpus ? "  %-6s" : "  %s", s);
      }
      printf("\n");
    }
    printf("\nLegend:\n"
           "  X    = the GPU itself\n"
           "  NV#  = # NVLinks (direct, or through NVSwitches)\n"
           "  PIX  = at most one PCIe switch\n"
           "  PXB  = several PCIe switches, no host bridge\n"
           "  PHB  = a PCIe host bridge (the CPU's root complex)\n"
           "  NODE = between PCIe host bridges of one NUMA node\n"
           "  SYS  = across NUMA nodes (the sockets' interconnect)\n"
           "  ?    = unknown\n");
  }

  if (t->n_nodes) {
    printf("\n%-4s  %s\n", "NUMA", "CPUS");
    for (int i = 0; i < t->n_nodes; i++) {
      printf("%-4d  ", t->nodes[i].node);
      put_safe(t->nodes[i].cpus[0] ? t->nodes[i].cpus : "-", 0);
      putchar('\n');
    }
  }
  print_devs("NIC", t->nics, t->n_nics);
  print_devs("NVME", t->nvme, t->n_nvme);
}

static json_object *str_or_null(const char *s)
{
  return s && s[0] ? json_object_new_string(s) : NULL;
}

static json_object *node_or_null(int node)
{
  return node >= 0 ? json_object_new_int(node) : NULL;
}

static json_object *devs_json(const gmt_topo_dev_t *d, int n)
{
  json_object *arr = json_object_new_array();
  for (int i = 0; i < n; i++) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "name", json_object_new_string(d[i].name));
    json_object_object_add(o, "bus_id", json_object_new_string(d[i].bus_id));
    json_object_object_add(o, "numa_node", node_or_null(d[i].numa_node));
    json_object_array_add(arr, o);
  }
  return arr;
}

static const char *level_json(gmt_topo_level_t level)
{
  return level == GMT_TOPO_UNKNOWN ? "unknown" : gmt_topo_level_name(level);
}

static json_object *topo_json(const gmt_topo_t *t)
{
  json_object *root = json_object_new_object();
  json_object *nvml = json_object_new_object();
  json_object_object_add(nvml, "available", json_object_new_boolean(t->nvml));
  json_object_object_add(nvml, "error", t->nvml ? NULL : str_or_null(t->nvml_error));
  json_object_object_add(root, "nvml", nvml);
  json_object_object_add(root, "sysfs_root", json_object_new_string(t->sysfs_root));

  json_object *gpus = json_object_new_array();
  for (int i = 0; i < t->n_gpus; i++) {
    const gmt_topo_gpu_t *g = &t->gpus[i];
    json_object *o = json_object_new_object();
    json_object_object_add(o, "index", json_object_new_int(g->index));
    json_object_object_add(o, "uuid", str_or_null(g->uuid));
    json_object_object_add(o, "name", str_or_null(g->name));
    json_object_object_add(o, "bus_id", str_or_null(g->bus_id));
    json_object_object_add(o, "memory_total",
                           g->memory_total && g->memory_total <= INT64_MAX
                               ? json_object_new_int64((int64_t)g->memory_total)
                               : NULL);
    json_object_object_add(o, "numa_node", node_or_null(g->numa_node));
    json_object_object_add(o, "cpus", str_or_null(g->cpus));
    json_object_object_add(o, "mig", g->mig < 0 ? NULL : json_object_new_boolean(g->mig));
    json_object_array_add(gpus, o);
  }
  json_object_object_add(root, "gpus", gpus);

  json_object *links = json_object_new_array(), *matrix = json_object_new_array();
  for (int i = 0; i < t->n_gpus; i++) {
    json_object *row = json_object_new_array();
    for (int j = 0; j < t->n_gpus; j++) {
      const gmt_topo_link_t *l = &t->links[i][j];
      char s[16];
      link_str(s, sizeof s, l);
      json_object_array_add(row, json_object_new_string(l->level == GMT_TOPO_UNKNOWN ? "?" : s));
      if (j <= i)
        continue;
      json_object *o = json_object_new_object();
      json_object_object_add(o, "a", json_object_new_int(t->gpus[i].index));
      json_object_object_add(o, "b", json_object_new_int(t->gpus[j].index));
      json_object_object_add(o, "level", json_object_new_string(level_json(l->level)));
      json_object_object_add(o, "nvlinks", json_object_new_int(l->nvlinks));
      json_object_array_add(links, o);
    }
    json_object_array_add(matrix, row);
  }
  json_object_object_add(root, "links", links);
  json_object_object_add(root, "matrix", matrix);

  json_object *nodes = json_object_new_array();
  for (int i = 0; i < t->n_nodes; i++) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "node", json_object_new_int(t->nodes[i].node));
    json_object_object_add(o, "cpus", str_or_null(t->nodes[i].cpus));
    json_object_array_add(nodes, o);
  }
  json_object_object_add(root, "numa_nodes", nodes);
  json_object_object_add(root, "nics", devs_json(t->nics, t->n_nics));
  json_object_object_add(root, "nvme", devs_json(t->nvme, t->n_nvme));
  return root;
}

int gmt_cmd_topo(const gmt_cmd_ctx_t *ctx, int argc, char **argv)
{
  int json;
  (void)ctx; /* local: the scheduler is not asked */
  int done = gmt__cmd_json_args("topo", argc, argv, usage, &json);
  if (done >= 0)
    return done;
  gmt_topo_t *t;
  int rc = gmt_topo_discover(&t);
  if (rc < 0) {
    fprintf(stderr, "gmt topo: %s\n", gmt_strerror(rc));
    return 1;
  }
  if (json) {
    json_object *o = topo_json(t);
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                         JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
  } else {
    print_table(t);
  }
  gmt_topo_free(t);
  return 0;
}
