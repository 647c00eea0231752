/* Each resource's devices, the allocation the plugin prefers and the
 * environment Allocate gives (devices.h). */
#include "devices.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const gmt_dp_resource_t resources[GMT_DP_KINDS] = {
    {GMT_DP_MEMORY, "gmt.io/gpu-memory", "gmt-gpu-memory.sock", "GMT_GRANTED_GPU_MEMORY"},
    {GMT_DP_SHARE, "gmt.io/gpu-share", "gmt-gpu-share.sock", "GMT_GRANTED_GPU_SHARE"},
};

const gmt_dp_resource_t *gmt_dp_resource(gmt_dp_kind_t kind)
{
  return kind >= 0 && kind < GMT_DP_KINDS ? &resources[kind] : NULL;
}

uint64_t gmt_dp_units(const gmt_dp_gpu_t *g, gmt_dp_kind_t kind, uint64_t unit)
{
  if (kind == GMT_DP_SHARE)
    return GMT_DP_SHARE_UNITS;
  return unit ? g->space / unit : 0;
}

void gmt_dp_id(char *buf, size_t len, int32_t gpu, uint64_t k)
{
  snprintf(buf, len, "gpu%" PRId32 "-%" PRIu64, gpu, k);
}

/* A decimal with no sign and no leading zero (but "0"), up to max; the
 * end in *end. */
static int parse_num(const char *s, uint64_t max, uint64_t *out, const char **end)
{
  if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] >= '0' && s[1] <= '9'))
    return -EINVAL;
  uint64_t v = 0;
  for (; *s >= '0' && *s <= '9'; s++) {
    if (v > (max - (uint64_t)(*s - '0')) / 10)
      return -EINVAL;
    v = v * 10 + (uint64_t)(*s - '0');
  }
  *out = v;
  *end = s;
  return 0;
}

int gmt_dp_parse_id(const char *id, int32_t *gpu, uint64_t *k)
{
  uint64_t g, u;
  const char *p;
  if (!id || strncmp(id, "gpu", 3) != 0 || parse_num(id + 3, INT32_MAX, &g, &p) < 0 || *p != '-' ||
      parse_num(p + 1, UINT64_MAX, &u, &p) < 0 || *p)
    return -EINVAL;
  *gpu = (int32_t)g;
  *k = u;
  return 0;
}

int gmt_dp_list(const gmt_dp_node_t *n, gmt_dp_kind_t kind, uint64_t unit,
                V1beta1__ListAndWatchResponse **out, uint64_t *left_out)
{
  uint64_t total = 0;
  for (size_t i = 0; n->known && i < n->n_gpus; i++)
    total += gmt_dp_units(&n->gpus[i], kind, unit);
  uint64_t listed = total < GMT_DP_MAX_DEVICES ? total : GMT_DP_MAX_DEVICES;
  if (left_out)
    *left_out = total - listed;

  V1beta1__ListAndWatchResponse *r = malloc(sizeof *r);
  if (!r)
    return -ENOMEM;
  v1beta1__list_and_watch_response__init(r);
  if (listed && !(r->devices = calloc(listed, sizeof *r->devices))) {
    free(r);
    return -ENOMEM;
  }
  const char *health = n->healthy ? GMT_DP_HEALTHY : GMT_DP_UNHEALTHY;
  for (size_t i = 0; i < n->n_gpus && r->n_devices < listed; i++) {
    uint64_t units = gmt_dp_units(&n->gpus[i], kind, unit);
    for (uint64_t k = 0; k < units && r->n_devices < listed; k++) {
      V1beta1__Device *d = malloc(sizeof *d);
      char id[GMT_DP_ID_MAX + 1];
      if (!d)
        goto nomem;
      v1beta1__device__init(d);
      r->devices[r->n_devices++] = d;
      gmt_dp_id(id, sizeof id, n->gpus[i].index, k);
      if (!(d->id = strdup(id)) || !(d->health = strdup(health)))
        goto nomem;
    }
  }
  *out = r;
  return 0;
nomem:
  protobuf_c_message_free_unpacked(&r->base, NULL);
  return -ENOMEM;
}

/* ---- the preferred allocation ---- */

typedef struct cand {
  const char *id;
  int32_t gpu;
  uint64_t k;
  int ours;  /* 1: an ID of ours; 0: left for last */
  int taken; /* must-include, or chosen */
} cand_t;

static int by_id(const void *a, const void *b)
{
  return strcmp(((const cand_t *)a)->id, ((const cand_t *)b)->id);
}

/* Ours first, then by GPU and unit. */
static int by_gpu(const void *a, const void *b)
{
  const cand_t *x = a, *y = b;
  if (x->ours != y->ours)
    return y->ours - x->ours;
  if (x->gpu != y->gpu)
    return x->gpu < y->gpu ? -1 : 1;
  if (x->k != y->k)
    return x->k < y->k ? -1 : 1;
  return strcmp(x->id, y->id);
}

static int push(V1beta1__ContainerPreferredAllocationResponse *r, const char *id)
{
  if (!(r->deviceids[r->n_deviceids] = strdup(id)))
    return -ENOMEM;
  r->n_deviceids++;
  return 0;
}

/* The IDs of one GPU among the candidates (sorted by GPU): c[start, end),
 * of which avail are not taken yet. */
typedef struct group {
  int32_t gpu;
  size_t start, end, avail;
} group_t;

/* Takes up to *need untaken IDs of group g, lowest unit first. */
static int take(cand_t *c, group_t *g, size_t *need,
                V1beta1__ContainerPreferredAllocationResponse *r)
{
  for (size_t i = g->start; i < g->end && *need; i++) {
    if (c[i].taken)
      continue;
    c[i].taken = 1;
    g->avail--;
    (*need)--;
    if (push(r, c[i].id) < 0)
      return -ENOMEM;
  }
  return 0;
}

/* The group to take from next for need IDs: the tightest that fits them
 * all, else the one with the most; NULL when none has any. Groups are in
 * GPU order, so a tie goes to the lowest index. */
static group_t *next_group(group_t *g, size_t ng, size_t need)
{
  group_t *fit = NULL, *most = NULL;
  for (size_t i = 0; i < ng; i++) {
    if (g[i].avail >= need && (!fit || g[i].avail < fit->avail))
      fit = &g[i];
    if (g[i].avail && (!most || g[i].avail > most->avail))
      most = &g[i];
  }
  return fit ? fit : most;
}

int gmt_dp_prefer(const V1beta1__ContainerPreferredAllocationRequest *req,
                  V1beta1__ContainerPreferredAllocationResponse **out)
{
  size_t n = req->n_available_deviceids;
  size_t size = req->allocation_size > 0 ? (size_t)req->allocation_size : 0;
  if (size > n + req->n_must_include_deviceids)
    size = n + req->n_must_include_deviceids;
  V1beta1__ContainerPreferredAllocationResponse *r = malloc(sizeof *r);
  cand_t *c = n ? calloc(n, sizeof *c) : NULL;
  if (!r || (n && !c)) {
    free(r);
    free(c);
    return -ENOMEM;
  }
  v1beta1__container_preferred_allocation_response__init(r);
  if (size && !(r->deviceids = calloc(size, sizeof *r->deviceids)))
    goto nomem;
  for (size_t i = 0; i < n; i++) {
    c[i].id = req->available_deviceids[i] ? req->available_deviceids[i] : "";
    c[i].ours = gmt_dp_parse_id(c[i].id, &c[i].gpu, &c[i].k) == 0;
  }

  /* The must-include IDs first, once each, in the kubelet's order
   * (seen: a sorted copy, whose first of equal IDs marks it pushed); the
   * GPU that holds the most of them is where the rest go first. */
  if (n)
    qsort(c, n, sizeof *c, by_id);
  size_t nm = req->n_must_include_deviceids;
  cand_t *seen = nm ? calloc(nm, sizeof *seen) : NULL;
  if (nm && !seen)
    goto nomem;
  for (size_t m = 0; m < nm; m++)
    seen[m].id = req->must_include_deviceids[m] ? req->must_include_deviceids[m] : "";
  if (nm)
    qsort(seen, nm, sizeof *seen, by_id);
  group_t homes[GMT_DP_MAX_GPUS]; /* per GPU: avail counts its must-include IDs */
  size_t nh = 0;
  for (size_t m = 0; m < nm && r->n_deviceids < size; m++) {
    cand_t key = {.id = req->must_include_deviceids[m] ? req->must_include_deviceids[m] : ""};
    cand_t *first = bsearch(&key, seen, nm, sizeof *seen, by_id);
    while (first > seen && by_id(first - 1, &key) == 0)
      first--;
    if (!key.id[0] || first->taken)
      continue;
    first->taken = 1;
    if (push(r, key.id) < 0) {
      free(seen);
      goto nomem;
    }
    cand_t *hit = n ? bsearch(&key, c, n, sizeof *c, by_id) : NULL;
    if (hit)
      hit->taken = 1;
    int32_t g;
    uint64_t k;
    if (gmt_dp_parse_id(key.id, &g, &k) < 0)
      continue;
    size_t h = 0;
    while (h < nh && homes[h].gpu != g)
      h++;
    if (h == nh && nh < GMT_DP_MAX_GPUS)
      homes[nh++] = (group_t){.gpu = g};
    if (h < nh)
      homes[h].avail++;
  }
  free(seen);
  int32_t home = -1;
  size_t home_n = 0;
  for (size_t h = 0; h < nh; h++)
    if (homes[h].avail > home_n || (homes[h].avail == home_n && homes[h].gpu < home))
      home = homes[h].gpu, home_n = homes[h].avail;
  /* Our IDs by GPU, at most GMT_DP_MAX_GPUS of them (IDs of more GPUs
   * than a node can list go last, with the IDs that are not ours). */
  if (n)
    qsort(c, n, sizeof *c, by_gpu);
  group_t groups[GMT_DP_MAX_GPUS];
  size_t ng = 0;
  for (size_t i = 0; i < n && c[i].ours; i++) {
    if (!ng || groups[ng - 1].gpu != c[i].gpu) {
      if (ng == GMT_DP_MAX_GPUS)
        break;
      groups[ng++] = (group_t){.gpu = c[i].gpu, .start = i, .end = i};
    }
    groups[ng - 1].end = i + 1;
    groups[ng - 1].avail += !c[i].taken;
  }
  size_t need = size - r->n_deviceids;
  for (size_t i = 0; i < ng && home >= 0; i++)
    if (groups[i].gpu == home && take(c, &groups[i], &need, r) < 0)
      goto nomem;
  for (group_t *g; need && (g = next_group(groups, ng, need));)
    if (take(c, g, &need, r) < 0)
      goto nomem;
  for (size_t i = 0; i < n && need; i++) {
    if (c[i].taken)
      continue;
    c[i].taken = 1;
    need--;
    if (push(r, c[i].id) < 0)
      goto nomem;
  }
  free(c);
  *out = r;
  return 0;
nomem:
  free(c);
  protobuf_c_message_free_unpacked(&r->base, NULL);
  return -ENOMEM;
}

/* ---- Allocate ---- */

static int add_env(V1beta1__ContainerAllocateResponse *r, const char *key, const char *value)
{
  V1beta1__ContainerAllocateResponse__EnvsEntry *e = malloc(sizeof *e);
  if (!e)
    return -ENOMEM;
  v1beta1__container_allocate_response__envs_entry__init(e);
  r->envs[r->n_envs++] = e;
  if (!(e->key = strdup(key)) || !(e->value = strdup(value)))
    return -ENOMEM;
  return 0;
}

int gmt_dp_allocate(const gmt_dp_node_t *n, gmt_dp_kind_t kind, uint64_t unit,
                    const V1beta1__ContainerAllocateRequest *req,
                    V1beta1__ContainerAllocateResponse **out, char *err, size_t errlen)
{
  const gmt_dp_resource_t *res = gmt_dp_resource(kind);
  uint64_t per_gpu[GMT_DP_MAX_GPUS] = {0};
  for (size_t i = 0; i < req->n_devices_ids; i++) {
    const char *id = req->devices_ids[i] ? req->devices_ids[i] : "";
    int32_t g;
    uint64_t k;
    const gmt_dp_gpu_t *gpu = NULL;
    if (gmt_dp_parse_id(id, &g, &k) < 0 || !(gpu = gmt_dp_node_gpu(n, g)) ||
        k >= gmt_dp_units(gpu, kind, unit)) {
      snprintf(err, errlen, "device '%.64s' is not one gmt-device-plugin advertises for %s", id,
               res->name);
      return -EINVAL;
    }
    per_gpu[gpu - n->gpus]++;
  }

  uint64_t units = 0;
  char gpus[GMT_DP_MAX_GPUS * 100] = "";
  size_t used = 0;
  for (size_t i = 0; i < n->n_gpus; i++) {
    if (!per_gpu[i])
      continue;
    units += per_gpu[i];
    const gmt_dp_gpu_t *g = &n->gpus[i];
    int w = g->uuid[0] ? snprintf(gpus + used, sizeof gpus - used, "%s%s", used ? "," : "", g->uuid)
                       : snprintf(gpus + used, sizeof gpus - used, "%s%" PRId32, used ? "," : "",
                                  g->index);
    if (w > 0 && (size_t)w < sizeof gpus - used)
      used += (size_t)w;
  }
  char amount[32], key[64];
  snprintf(amount, sizeof amount, "%" PRIu64, kind == GMT_DP_MEMORY ? units * unit : units);
  snprintf(key, sizeof key, "%s_GPUS", res->env);

  V1beta1__ContainerAllocateResponse *r = malloc(sizeof *r);
  if (!r)
    return -ENOMEM;
  v1beta1__container_allocate_response__init(r);
  if (!(r->envs = calloc(2, sizeof *r->envs)) || add_env(r, res->env, amount) < 0 ||
      add_env(r, key, gpus) < 0) {
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return -ENOMEM;
  }
  *out = r;
  return 0;
}
