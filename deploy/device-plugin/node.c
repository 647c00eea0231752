/* The node's GPUs from gmt-schd's Status reply (node.h). */
#include "node.h"

#include <stdio.h>
#include <string.h>

/* The slot of index in out, added in index order; NULL when full. */
static gmt_dp_gpu_t *slot(gmt_dp_node_t *out, int32_t index, size_t *dropped)
{
  size_t i = 0;
  while (i < out->n_gpus && out->gpus[i].index < index)
    i++;
  if (i < out->n_gpus && out->gpus[i].index == index)
    return &out->gpus[i];
  if (out->n_gpus == GMT_DP_MAX_GPUS) {
    (*dropped)++;
    return NULL;
  }
  memmove(&out->gpus[i + 1], &out->gpus[i], (out->n_gpus - i) * sizeof out->gpus[0]);
  out->n_gpus++;
  memset(&out->gpus[i], 0, sizeof out->gpus[i]);
  out->gpus[i].index = index;
  return &out->gpus[i];
}

size_t gmt_dp_node_from_status(const Gmt__StatusReply *st, gmt_dp_node_t *out)
{
  memset(out, 0, sizeof *out);
  out->known = out->healthy = true;
  size_t dropped = 0;
  for (size_t i = 0; i < st->n_devices; i++) {
    const Gmt__DeviceStatus *d = st->devices[i];
    if (d->index < 0)
      continue;
    gmt_dp_gpu_t *g = slot(out, d->index, &dropped);
    if (g && d->uuid)
      snprintf(g->uuid, sizeof g->uuid, "%s", d->uuid);
  }
  for (size_t i = 0; st->host && i < st->host->n_tiers; i++) {
    const Gmt__TierSpace *t = st->host->tiers[i];
    if (!t->tier || strcmp(t->tier, "gpu") != 0 || t->index < 0)
      continue;
    gmt_dp_gpu_t *g = slot(out, t->index, &dropped);
    if (g)
      g->space = t->limit;
  }
  return dropped;
}

const gmt_dp_gpu_t *gmt_dp_node_gpu(const gmt_dp_node_t *n, int32_t index)
{
  for (size_t i = 0; i < n->n_gpus; i++)
    if (n->gpus[i].index == index)
      return &n->gpus[i];
  return NULL;
}

bool gmt_dp_node_equal(const gmt_dp_node_t *a, const gmt_dp_node_t *b)
{
  if (a->known != b->known || a->healthy != b->healthy || a->n_gpus != b->n_gpus)
    return false;
  for (size_t i = 0; i < a->n_gpus; i++) {
    const gmt_dp_gpu_t *x = &a->gpus[i], *y = &b->gpus[i];
    if (x->index != y->index || x->space != y->space || strcmp(x->uuid, y->uuid) != 0)
      return false;
  }
  return true;
}
