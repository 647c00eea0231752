/* The memory tiers on the wire: their part of Status (docs/tiers.md,
 * "Seeing the spaces"), and the rooms that memory requests and mode=swap
 * are held to. main.c builds s->tiers, the table of spaces, from the
 * flags (server/tiers.c); what occupies each space is counted here from
 * the bookkeepers that own it (tiers.h says which), each time a space is
 * looked at, so that no path that changes it (reserve, release, reclaim,
 * a report adopted, a Resident, a reload that changes a mode) can leave a
 * copy of it behind. The same goes for the strict pods' quotas each GPU
 * space is shown against (and warned of at start and reload): summed from
 * the config in force each time. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_bytes.h"
#include "gmt_log.h"
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

/* The device reservations of the pods not in swap mode on device. */
static uint64_t strict_reserved(gmt_schd_t *s, int device)
{
  return gmt_ledger_device_total_if(s->ledger, device, reservations_occupy, s);
}

/* What swap processes moved to host memory (with the copies they keep for
 * the next move out), or to spill files, as their reports say. */
static uint64_t swapped_out(const gmt_schd_t *s, gmt_tier_t tier)
{
  uint64_t sum = 0;
  for (size_t i = 0; s->pods && i < s->pods->npods; i++)
    for (size_t j = 0; j < s->pods->pods[i].nprocs; j++) {
      const gmt_proc_t *p = &s->pods->pods[i].procs[j];
      sum = gmt_bytes_add(sum, tier == GMT_TIER_HOST ? gmt_bytes_add(p->c.swap_host, p->c.swap_kept)
                                                     : p->c.swap_disk);
    }
  return sum;
}

/* What occupies a space: a GPU's, the device ledger's strict reservations
 * and the swap processes' resident bytes (swap.c); the host space (one:
 * NUMA node 0) and the first disk space (where the hook spills,
 * rpc_swap.c), what swap processes moved there. Nothing without the
 * ledger (before it is up). */
static uint64_t occupied(gmt_schd_t *s, const gmt_tier_space_t *sp)
{
  if (!s->ledger)
    return 0;
  if (sp->tier == GMT_TIER_GPU)
    return gmt_bytes_add(strict_reserved(s, sp->index),
                         s->swap ? gmt_swap_device_total(s->swap, sp->index) : 0);
  return sp->index == 0 ? swapped_out(s, sp->tier) : 0;
}

/* Who holds a GPU space, for a refusal's words. */
typedef struct holder {
  const char *pod;
  uint64_t bytes;
  bool resident; /* a swap pod's resident bytes, not reservations */
} holder_t;

static int by_bytes_desc(const void *a, const void *b)
{
  const holder_t *x = a, *y = b;
  return (x->bytes < y->bytes) - (x->bytes > y->bytes);
}

size_t gmt__tiers_holders(gmt_schd_t *s, int device, char *buf, size_t len)
{
  size_t n = s->pods ? s->pods->npods : 0, k = 0, at = 0;
  buf[0] = '\0';
  holder_t *h = n && s->ledger ? calloc(n, sizeof *h) : NULL;
  if (!h)
    return 0;
  for (size_t i = 0; i < n; i++) {
    const gmt_pod_t *pod = &s->pods->pods[i];
    bool moves = gmt_mem_mode_moves(pod->cfg.mode);
    uint64_t bytes = !moves    ? gmt_ledger_pod_device_total(s->ledger, pod->cfg.name, device)
                     : s->swap ? gmt_swap_pod_device_total(s->swap, pod->cfg.name, device)
                               : 0;
    if (bytes)
      h[k++] = (holder_t){pod->cfg.name, bytes, moves};
  }
  qsort(h, k, sizeof *h, by_bytes_desc);
  for (size_t i = 0; i < k && i < GMT_TIERS_HOLDERS_SAID && at < len; i++) {
    int w = snprintf(buf + at, len - at, "%s'%s' %.1f MiB%s", i ? ", " : "", h[i].pod,
                     (double)h[i].bytes / (1024.0 * 1024.0), h[i].resident ? " resident" : "");
    at += w > 0 ? (size_t)w : 0;
  }
  if (k > GMT_TIERS_HOLDERS_SAID && at < len)
    snprintf(buf + at, len - at, " and %zu more", k - GMT_TIERS_HOLDERS_SAID);
  free(h);
  return k;
}

bool gmt__tiers_swap_rooms(gmt_schd_t *s, uint64_t *host_room, uint64_t *disk_room,
                           const char **spill_dir)
{
  *host_room = *disk_room = 0;
  *spill_dir = "";
  if (!s->tiers || !s->ledger || !s->swap_host_bounded)
    return false;
  const gmt_tier_space_t *host = gmt_tiers_find(s->tiers, GMT_TIER_HOST, 0);
  if (!host)
    return false;
  *host_room = gmt_tier_room(host, occupied(s, host));
  const gmt_tier_space_t *disk = s->ndisks > 0 ? gmt_tiers_find(s->tiers, GMT_TIER_DISK, 0) : NULL;
  if (disk) {
    *disk_room = gmt_tier_room(disk, occupied(s, disk));
    *spill_dir = s->disks[0].dir;
  }
  return true;
}

int gmt__tiers_device_room(gmt_schd_t *s, int device, uint64_t *room)
{
  const gmt_tier_space_t *sp =
      s->tiers && s->ledger ? gmt_tiers_find(s->tiers, GMT_TIER_GPU, device) : NULL;
  if (!sp)
    return -ENOENT;
  *room = gmt_tier_room(sp, occupied(s, sp));
  return 0;
}

int gmt__tiers_gpu_space(gmt_schd_t *s, int device, uint64_t *limit, uint64_t *base,
                         uint64_t *trigger, uint64_t *stop)
{
  const gmt_tier_space_t *sp =
      s->tiers && s->ledger ? gmt_tiers_find(s->tiers, GMT_TIER_GPU, device) : NULL;
  if (!sp)
    return -ENOENT;
  *limit = sp->limit;
  *base = strict_reserved(s, device);
  if (trigger)
    *trigger = sp->trigger_bytes;
  if (stop)
    *stop = sp->stop_bytes;
  return 0;
}

/* A GPU space's strict quotas, *sum (of the config in force, config.h;
 * the pods' indices in pods when not NULL, their count in *npods), and
 * whether they pass its limit: strict mode could then not hold what
 * their quotas allow at once. 0 and false for the other spaces. */
static bool overcommitted(const gmt_schd_t *s, const gmt_tier_space_t *sp, uint64_t *sum,
                          size_t *pods, size_t *npods)
{
  *sum = 0;
  *npods = 0;
  if (sp->tier != GMT_TIER_GPU)
    return false;
  *sum = gmt_config_quotas_on(s->cfg, sp->index, false, pods, npods);
  return *sum > sp->limit;
}

void gmt__tiers_check_quotas(gmt_schd_t *s)
{
  size_t n = s->tiers ? gmt_tiers_nspaces(s->tiers) : 0;
  size_t *pods = malloc(((s->cfg ? s->cfg->npods : 0) + 1) * sizeof *pods);
  for (size_t i = 0; i < n; i++) {
    const gmt_tier_space_t *sp = gmt_tiers_space(s->tiers, i);
    uint64_t sum;
    size_t npods;
    if (!overcommitted(s, sp, &sum, pods, &npods))
      continue;
    /* The pods by name, as many as a log line holds. */
    char names[512] = "", quotas[32], space[32];
    size_t used = 0, shown = 0;
    for (; pods && shown < npods; shown++) {
      const char *name = s->cfg->pods[pods[shown]].name;
      if (used + strlen(name) + 2 + 16 >= sizeof names)
        break;
      used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", shown ? ", " : "", name);
    }
    if (shown < npods)
      snprintf(names + used, sizeof names - used, "%s%zu more", shown ? " and " : "",
               npods - shown);
    gmt_human_bytes(quotas, sizeof quotas, sum);
    gmt_human_bytes(space, sizeof space, sp->limit);
    gmt_warn("gpu %d: the quotas (GPU_MEM) of the strict pods that may use it sum to %llu bytes "
             "(%s), past its space of %llu bytes (%s): %s; strict mode refuses their "
             "allocations past the space (mode=swap or um lets gmt move memory instead; "
             "docs/tiers.md)",
             sp->index, (unsigned long long)sum, quotas, (unsigned long long)sp->limit, space,
             names);
  }
  free(pods);
}

int gmt__tiers_host_status(gmt_schd_t *s, Gmt__HostStatus *host)
{
  size_t n = s->tiers ? gmt_tiers_nspaces(s->tiers) : 0;
  if (n == 0)
    return 0;
  /* How many pods the overcommitted GPU spaces name. */
  size_t names = 0, npods;
  uint64_t sum;
  for (size_t i = 0; i < n; i++)
    if (overcommitted(s, gmt_tiers_space(s->tiers, i), &sum, NULL, &npods))
      names += npods;
  size_t *pods = malloc(((s->cfg ? s->cfg->npods : 0) + 1) * sizeof *pods);
  /* One block, the pointers, the messages, then the pods' names, so that
   * one free() ends it. */
  Gmt__TierSpace **pp = calloc(1, n * (sizeof *pp + sizeof **pp) + names * sizeof(char *));
  if (!pp || !pods) {
    free(pp);
    free(pods);
    return -ENOMEM;
  }
  Gmt__TierSpace *ts = (Gmt__TierSpace *)(pp + n);
  char **name = (char **)(ts + n);
  for (size_t i = 0; i < n; i++) {
    const gmt_tier_space_t *sp = gmt_tiers_space(s->tiers, i);
    uint64_t occ = occupied(s, sp);
    Gmt__TierSpace *t = &ts[i];
    gmt__tier_space__init(t);
    /* protobuf-c's strings are not const, but packing only reads them. */
    t->tier = (char *)gmt_tier_name(sp->tier);
    t->index = sp->index;
    if (sp->tier == GMT_TIER_DISK && sp->index < s->ndisks)
      t->path = s->disks[sp->index].dir;
    t->capacity = sp->capacity;
    t->limit = sp->limit;
    /* What occupies it (above). used stays 0: nothing reserves inside a
     * space any more, so nothing is used inside such a reservation. */
    t->reserved = occ;
    t->trigger = sp->trigger;
    t->stop = sp->stop;
    t->pressure = gmt_tier_pressure(sp, occ);
    if (overcommitted(s, sp, &t->strict_quotas, pods, &npods)) {
      t->overcommitted = true;
      t->n_strict_pods = npods;
      t->strict_pods = name;
      for (size_t k = 0; k < npods; k++)
        *name++ = s->cfg->pods[pods[k]].name; /* the config in force outlives the reply */
    }
    pp[i] = t;
  }
  free(pods);
  host->n_tiers = n;
  host->tiers = pp;
  return 0;
}
