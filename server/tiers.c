/* Memory tiers: the table of spaces (see tiers.h). A node has a handful of
 * spaces, so they are a plain array. */
#include "tiers.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

struct gmt_tiers {
  gmt_tier_space_t *spaces;
  size_t nspaces, cap;
};

int gmt_tiers_new(gmt_tiers_t **out)
{
  *out = calloc(1, sizeof **out);
  return *out ? 0 : -ENOMEM;
}

void gmt_tiers_free(gmt_tiers_t *t)
{
  if (!t)
    return;
  free(t->spaces);
  free(t);
}

const char *gmt_tier_name(gmt_tier_t tier)
{
  switch (tier) {
  case GMT_TIER_GPU: return "gpu";
  case GMT_TIER_HOST: return "host";
  case GMT_TIER_DISK: return "disk";
  }
  return "?";
}

int gmt_tiers_add_space(gmt_tiers_t *t, gmt_tier_t tier, int index, uint64_t capacity,
                        uint64_t limit, double trigger, double stop)
{
  if (limit == 0)
    limit = capacity;
  if (trigger == 0)
    trigger = GMT_TIERS_TRIGGER;
  if (stop == 0)
    stop = GMT_TIERS_STOP;
  /* Written so that NaN fails too. */
  if ((unsigned)tier >= GMT_TIERS || index < 0 || capacity == 0 || limit > capacity ||
      !(stop > 0 && stop < trigger && trigger <= 1))
    return -EINVAL;
  if (gmt_tiers_find(t, tier, index))
    return -EEXIST;
  if (t->nspaces == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 8;
    gmt_tier_space_t *s = realloc(t->spaces, cap * sizeof *s);
    if (!s)
      return -ENOMEM;
    t->spaces = s;
    t->cap = cap;
  }
  t->spaces[t->nspaces++] = (gmt_tier_space_t){
      .tier = tier,
      .index = index,
      .capacity = capacity,
      .limit = limit,
      .trigger = trigger,
      .stop = stop,
      .trigger_bytes = (uint64_t)(trigger * (double)capacity),
      .stop_bytes = (uint64_t)(stop * (double)capacity),
  };
  return 0;
}

size_t gmt_tiers_nspaces(const gmt_tiers_t *t)
{
  return t->nspaces;
}

const gmt_tier_space_t *gmt_tiers_space(const gmt_tiers_t *t, size_t i)
{
  return i < t->nspaces ? &t->spaces[i] : NULL;
}

const gmt_tier_space_t *gmt_tiers_find(const gmt_tiers_t *t, gmt_tier_t tier, int index)
{
  for (size_t i = 0; i < t->nspaces; i++)
    if (t->spaces[i].tier == tier && t->spaces[i].index == index)
      return &t->spaces[i];
  return NULL;
}

uint64_t gmt_tier_room(const gmt_tier_space_t *sp, uint64_t occupied)
{
  return occupied < sp->limit ? sp->limit - occupied : 0;
}

uint64_t gmt_tier_pressure(const gmt_tier_space_t *sp, uint64_t occupied)
{
  if (occupied < sp->trigger_bytes || occupied <= sp->stop_bytes)
    return 0;
  return occupied - sp->stop_bytes;
}

size_t gmt_tiers_gpu_plan(const gmt_gpu_capacity_t *cards, size_t ncards,
                          const gmt_gpu_capacity_t *flags, size_t nflags, gmt_gpu_capacity_t *out)
{
  size_t n = 0;
  for (size_t i = 0; i < nflags; i++) {
    out[n] = flags[i];
    out[n].from = GMT_GPU_FROM_FLAG;
    out[n].card = 0;
    for (size_t j = 0; j < ncards; j++)
      if (cards[j].dev == flags[i].dev)
        out[n].card = cards[j].card;
    n++;
  }
  for (size_t j = 0; j < ncards; j++) {
    bool flagged = false;
    for (size_t i = 0; i < nflags && !flagged; i++)
      flagged = flags[i].dev == cards[j].dev;
    if (flagged)
      continue;
    uint64_t card = cards[j].card;
    out[n++] = (gmt_gpu_capacity_t){
        .dev = cards[j].dev,
        .bytes = card > GMT_TIERS_GPU_CONTEXT_RESERVE ? card - GMT_TIERS_GPU_CONTEXT_RESERVE : 0,
        .card = card,
        .from = GMT_GPU_FROM_NVML,
    };
  }
  /* A handful of GPUs: insertion sort by device. */
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && out[j - 1].dev > out[j].dev; j--) {
      gmt_gpu_capacity_t tmp = out[j];
      out[j] = out[j - 1];
      out[j - 1] = tmp;
    }
  return n;
}
