/* The memory tiers on the wire: their part of Status (docs/tiers.md,
 * "Seeing the spaces"), and the GPU spaces kept in step with the device
 * ledger, whose reservations occupy them. main.c builds s->tiers from the
 * flags; the ledger itself is server/tiers.c. Nothing asks for a tier over
 * the wire yet. */
#include <errno.h>
#include <stdlib.h>

#include "ledger.h"
#include "schd.h"
#include "tiers.h"

/* What the pods reserved on each device occupies its GPU space: read from
 * the device ledger whenever the spaces are looked at, so that no path
 * that changes the ledger (reserve, release, reclaim, a report adopted)
 * can leave them behind. */
static void sync_devices(gmt_schd_t *s)
{
  size_t n = s->tiers ? gmt_tiers_nspaces(s->tiers) : 0;
  for (size_t i = 0; i < n; i++) {
    gmt_tier_space_info_t sp;
    if (gmt_tiers_space_info(s->tiers, i, &sp) == 0 && sp.tier == GMT_TIER_GPU)
      (void)gmt_tiers_set_held(s->tiers, GMT_TIER_GPU, sp.index,
                               gmt_ledger_device_total(s->ledger, sp.index));
  }
}

int gmt__tiers_device_room(gmt_schd_t *s, int device, uint64_t *room)
{
  if (!s->tiers || !s->ledger)
    return -ENOENT;
  sync_devices(s);
  return gmt_tiers_room(s->tiers, GMT_TIER_GPU, device, room);
}

int gmt__tiers_host_status(gmt_schd_t *s, Gmt__HostStatus *host)
{
  size_t n = s->tiers ? gmt_tiers_nspaces(s->tiers) : 0;
  if (n == 0)
    return 0;
  if (s->ledger)
    sync_devices(s);
  /* One block, the pointers then the messages, so that one free() ends it. */
  Gmt__TierSpace **pp = calloc(n, sizeof *pp + sizeof **pp);
  if (!pp)
    return -ENOMEM;
  Gmt__TierSpace *ts = (Gmt__TierSpace *)(pp + n);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    gmt_tier_space_info_t sp;
    if (gmt_tiers_space_info(s->tiers, i, &sp) < 0)
      continue;
    Gmt__TierSpace *t = &ts[k];
    gmt__tier_space__init(t);
    /* protobuf-c's strings are not const, but packing only reads them. */
    t->tier = (char *)gmt_tier_name(sp.tier);
    t->index = sp.index;
    if (sp.tier == GMT_TIER_DISK && sp.index < s->ndisks)
      t->path = s->disks[sp.index].dir;
    t->capacity = sp.capacity;
    t->limit = sp.limit;
    t->reserved = sp.reserved + sp.held; /* a GPU space's: the device ledger's */
    t->used = sp.used;
    t->trigger = sp.trigger;
    t->stop = sp.stop;
    t->pressure = sp.pressure;
    pp[k++] = t;
  }
  host->n_tiers = k;
  host->tiers = pp;
  return 0;
}
