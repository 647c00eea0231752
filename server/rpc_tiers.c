/* The memory tiers on the wire: their part of Status (docs/tiers.md,
 * "Seeing the spaces"), and the GPU spaces kept in step with what occupies
 * them: the device reservations of pods not in swap mode (the device
 * ledger's) and the resident bytes of swap pods' processes (rpc_swap.c).
 * main.c builds s->tiers from the flags; the ledger itself is
 * server/tiers.c. */
#include <errno.h>
#include <stdlib.h>

#include "ledger.h"
#include "schd.h"
#include "swap.h"
#include "tiers.h"

/* A pod whose device reservations occupy the GPU spaces: every pod but
 * those in swap mode, whose resident bytes do instead (a pod the config no
 * longer lists still counts until its reservations are reclaimed). */
static bool reservations_occupy(void *arg, const char *name)
{
  const gmt_pod_t *pod = gmt_pods_find(((gmt_schd_t *)arg)->pods, name);
  return !pod || !gmt_mem_mode_moves(pod->cfg.mode);
}

/* What occupies each device's GPU space, read whenever the spaces are
 * looked at, so that no path that changes it (reserve, release, reclaim,
 * a report adopted, a Resident, a reload that changes a mode) can leave
 * them behind. */
static void sync_devices(gmt_schd_t *s)
{
  size_t n = s->tiers ? gmt_tiers_nspaces(s->tiers) : 0;
  for (size_t i = 0; i < n; i++) {
    gmt_tier_space_info_t sp;
    if (gmt_tiers_space_info(s->tiers, i, &sp) < 0 || sp.tier != GMT_TIER_GPU)
      continue;
    uint64_t held = gmt_ledger_device_total_if(s->ledger, sp.index, reservations_occupy, s);
    (void)gmt_tiers_set_held(
        s->tiers, GMT_TIER_GPU, sp.index,
        gmt__sat_add(held, s->swap ? gmt_swap_device_total(s->swap, sp.index) : 0));
  }
  /* The host space holds what swap processes moved out and the copies
   * they keep for the next move, as their reports say (one host space:
   * NUMA node 0). */
  uint64_t host = 0, disk = 0;
  for (size_t i = 0; s->pods && i < s->pods->npods; i++)
    for (size_t j = 0; j < s->pods->pods[i].nprocs; j++) {
      const gmt_proc_t *p = &s->pods->pods[i].procs[j];
      host = gmt__sat_add(host, gmt__sat_add(p->c.swap_host, p->c.swap_kept));
      disk = gmt__sat_add(disk, p->c.swap_disk);
    }
  (void)gmt_tiers_set_held(s->tiers, GMT_TIER_HOST, 0, host);
  /* Spill files go to the first disk space (the hook's, rpc_swap.c). */
  (void)gmt_tiers_set_held(s->tiers, GMT_TIER_DISK, 0, disk);
}

bool gmt__tiers_swap_rooms(gmt_schd_t *s, uint64_t *host_room, uint64_t *disk_room,
                           const char **spill_dir)
{
  *host_room = *disk_room = 0;
  *spill_dir = "";
  if (!s->tiers || !s->ledger || !s->swap_host_bounded)
    return false;
  sync_devices(s);
  if (gmt_tiers_room(s->tiers, GMT_TIER_HOST, 0, host_room) < 0)
    return false;
  if (s->ndisks > 0 && gmt_tiers_room(s->tiers, GMT_TIER_DISK, 0, disk_room) == 0)
    *spill_dir = s->disks[0].dir;
  return true;
}

int gmt__tiers_device_room(gmt_schd_t *s, int device, uint64_t *room)
{
  if (!s->tiers || !s->ledger)
    return -ENOENT;
  sync_devices(s);
  return gmt_tiers_room(s->tiers, GMT_TIER_GPU, device, room);
}

int gmt__tiers_gpu_space(gmt_schd_t *s, int device, uint64_t *limit, uint64_t *base,
                         uint64_t *trigger, uint64_t *stop)
{
  if (!s->tiers || !s->ledger)
    return -ENOENT;
  sync_devices(s);
  size_t n = gmt_tiers_nspaces(s->tiers);
  for (size_t i = 0; i < n; i++) {
    gmt_tier_space_info_t sp;
    if (gmt_tiers_space_info(s->tiers, i, &sp) < 0 || sp.tier != GMT_TIER_GPU || sp.index != device)
      continue;
    /* occupied = the space's own reservations + held (above). */
    uint64_t own = sp.occupied > sp.held ? sp.occupied - sp.held : 0;
    *limit = sp.limit;
    *base =
        gmt__sat_add(own, gmt_ledger_device_total_if(s->ledger, device, reservations_occupy, s));
    if (trigger)
      *trigger = (uint64_t)(sp.trigger * (double)sp.capacity);
    if (stop)
      *stop = (uint64_t)(sp.stop * (double)sp.capacity);
    return 0;
  }
  return -ENOENT;
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
