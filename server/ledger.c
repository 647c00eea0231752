/* The memory ledger (see ledger.h): per pod, per process, per device
 * reserved bytes. A node runs tens of pods with a few processes each, so
 * plain arrays searched linearly are the right size of structure. */
#include "ledger.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_bytes.h"
#include "gmt_error.h"

typedef struct {
  uint32_t pid;
  bool seen;        /* listed by a heartbeat at least once */
  uint64_t born_ms; /* when its entry was made */
  uint64_t total;
  uint64_t nodev; /* adopted from a report: no device known */
  uint64_t dev[GMT_LEDGER_DEVICES];
} lproc_t;

typedef struct {
  char *name;
  bool synced;
  uint64_t total;
  size_t nprocs, cap;
  lproc_t *procs;
} lpod_t;

struct gmt_ledger {
  size_t npods, cap;
  lpod_t *pods;
};

int gmt_ledger_new(gmt_ledger_t **out)
{
  *out = calloc(1, sizeof **out);
  return *out ? 0 : -ENOMEM;
}

static void pod_clear(lpod_t *p)
{
  free(p->name);
  free(p->procs);
}

void gmt_ledger_free(gmt_ledger_t *l)
{
  if (!l)
    return;
  for (size_t i = 0; i < l->npods; i++)
    pod_clear(&l->pods[i]);
  free(l->pods);
  free(l);
}

static lpod_t *pod_find(const gmt_ledger_t *l, const char *name)
{
  if (!name)
    return NULL;
  for (size_t i = 0; i < l->npods; i++)
    if (strcmp(l->pods[i].name, name) == 0)
      return &l->pods[i];
  return NULL;
}

static lpod_t *pod_get(gmt_ledger_t *l, const char *name)
{
  lpod_t *p = pod_find(l, name);
  if (p || !name)
    return p;
  if (l->npods == l->cap) {
    size_t ncap = l->cap ? 2 * l->cap : 8;
    lpod_t *n = realloc(l->pods, ncap * sizeof *n);
    if (!n)
      return NULL;
    l->pods = n;
    l->cap = ncap;
  }
  p = &l->pods[l->npods];
  *p = (lpod_t){.name = strdup(name)};
  if (!p->name)
    return NULL;
  l->npods++;
  return p;
}

static lproc_t *proc_find(const lpod_t *p, uint32_t pid)
{
  for (size_t i = 0; p && i < p->nprocs; i++)
    if (p->procs[i].pid == pid)
      return &p->procs[i];
  return NULL;
}

static lproc_t *proc_get(lpod_t *p, uint32_t pid)
{
  lproc_t *pr = proc_find(p, pid);
  if (pr)
    return pr;
  if (p->nprocs == p->cap) {
    size_t ncap = p->cap ? 2 * p->cap : 4;
    lproc_t *n = realloc(p->procs, ncap * sizeof *n);
    if (!n)
      return NULL;
    p->procs = n;
    p->cap = ncap;
  }
  pr = &p->procs[p->nprocs++];
  memset(pr, 0, sizeof *pr);
  pr->pid = pid;
  return pr;
}

int gmt_ledger_reserve(gmt_ledger_t *l, const char *pod, uint32_t pid, int device, uint64_t bytes,
                       uint64_t limit, uint64_t now_ms, uint64_t *pod_total)
{
  lpod_t *p = pod_find(l, pod);
  uint64_t have = p ? p->total : 0;
  if (pod_total)
    *pod_total = have;
  if (device < 0 || device >= GMT_LEDGER_DEVICES)
    return -EINVAL;
  /* Written so that it cannot overflow: have <= limit is not guaranteed
   * (a reload may have lowered the limit below what is held). */
  if (have > limit || bytes > limit - have)
    return GMT_EQUOTA;
  if (!(p = pod_get(l, pod)))
    return -ENOMEM;
  bool fresh = !proc_find(p, pid);
  lproc_t *pr = proc_get(p, pid);
  if (!pr)
    return -ENOMEM;
  if (fresh)
    pr->born_ms = now_ms;
  pr->dev[device] += bytes;
  pr->total += bytes;
  p->total += bytes;
  if (pod_total)
    *pod_total = p->total;
  return 0;
}

uint64_t gmt_ledger_release(gmt_ledger_t *l, const char *pod, uint32_t pid, int device,
                            uint64_t bytes)
{
  lpod_t *p = pod_find(l, pod);
  lproc_t *pr = proc_find(p, pid);
  if (!pr)
    return 0;
  uint64_t took = 0;
  if (device >= 0 && device < GMT_LEDGER_DEVICES) {
    uint64_t t = pr->dev[device] < bytes ? pr->dev[device] : bytes;
    pr->dev[device] -= t;
    took += t;
  }
  if (took < bytes) {
    uint64_t t = pr->nodev < bytes - took ? pr->nodev : bytes - took;
    pr->nodev -= t;
    took += t;
  }
  pr->total -= took;
  p->total -= took;
  return took;
}

uint64_t gmt_ledger_pod_total(const gmt_ledger_t *l, const char *pod)
{
  const lpod_t *p = pod_find(l, pod);
  return p ? p->total : 0;
}

uint64_t gmt_ledger_node_total(const gmt_ledger_t *l)
{
  uint64_t sum = 0;
  for (size_t i = 0; i < l->npods; i++)
    sum = gmt_bytes_add(sum, l->pods[i].total);
  return sum;
}

uint64_t gmt_ledger_device_total(const gmt_ledger_t *l, int device)
{
  return gmt_ledger_device_total_if(l, device, NULL, NULL);
}

uint64_t gmt_ledger_device_total_if(const gmt_ledger_t *l, int device,
                                    bool (*count)(void *arg, const char *pod), void *arg)
{
  if (device < 0 || device >= GMT_LEDGER_DEVICES)
    return 0;
  uint64_t sum = 0;
  for (size_t i = 0; i < l->npods; i++) {
    if (count && !count(arg, l->pods[i].name))
      continue;
    for (size_t j = 0; j < l->pods[i].nprocs; j++) {
      uint64_t b = l->pods[i].procs[j].dev[device];
      sum = gmt_bytes_add(sum, b);
    }
  }
  return sum;
}

uint64_t gmt_ledger_pod_device_total(const gmt_ledger_t *l, const char *pod, int device)
{
  const lpod_t *p = pod_find(l, pod);
  if (!p || device < 0 || device >= GMT_LEDGER_DEVICES)
    return 0;
  uint64_t sum = 0;
  for (size_t j = 0; j < p->nprocs; j++) {
    uint64_t b = p->procs[j].dev[device];
    sum = gmt_bytes_add(sum, b);
  }
  return sum;
}

uint64_t gmt_ledger_pid_total(const gmt_ledger_t *l, const char *pod, uint32_t pid)
{
  const lproc_t *pr = proc_find(pod_find(l, pod), pid);
  return pr ? pr->total : 0;
}

bool gmt_ledger_knows(const gmt_ledger_t *l, const char *pod, uint32_t pid)
{
  return proc_find(pod_find(l, pod), pid) != NULL;
}

static bool listed(const uint32_t *pids, size_t n, uint32_t pid)
{
  for (size_t i = 0; i < n; i++)
    if (pids[i] == pid)
      return true;
  return false;
}

uint64_t gmt_ledger_retain(gmt_ledger_t *l, const char *pod, const uint32_t *pids, size_t npids,
                           uint64_t now_ms, gmt_ledger_reclaim_fn fn, void *arg)
{
  lpod_t *p = pod_find(l, pod);
  if (!p)
    return 0;
  uint64_t reclaimed = 0;
  size_t k = 0;
  for (size_t i = 0; i < p->nprocs; i++) {
    lproc_t *pr = &p->procs[i];
    if (listed(pids, npids, pr->pid)) {
      pr->seen = true;
      p->procs[k++] = *pr;
      continue;
    }
    /* A process whose Reserve overtook the first heartbeat that lists it
     * is not gone: it gets a grace period. */
    if (!pr->seen && now_ms - pr->born_ms < GMT_LEDGER_GRACE_MS) {
      p->procs[k++] = *pr;
      continue;
    }
    if (fn)
      fn(arg, p->name, pr->pid, pr->total);
    reclaimed += pr->total;
    p->total -= pr->total;
  }
  p->nprocs = k;
  return reclaimed;
}

uint64_t gmt_ledger_retain_pods(gmt_ledger_t *l, bool (*keep)(void *arg, const char *pod),
                                gmt_ledger_reclaim_fn fn, void *arg)
{
  uint64_t reclaimed = 0;
  size_t k = 0;
  for (size_t i = 0; i < l->npods; i++) {
    lpod_t *p = &l->pods[i];
    if (keep(arg, p->name)) {
      l->pods[k++] = *p;
      continue;
    }
    for (size_t j = 0; j < p->nprocs; j++) {
      if (fn)
        fn(arg, p->name, p->procs[j].pid, p->procs[j].total);
      reclaimed += p->procs[j].total;
    }
    pod_clear(p);
  }
  l->npods = k;
  return reclaimed;
}

uint64_t gmt_ledger_adopt(gmt_ledger_t *l, const char *pod, uint32_t pid, uint64_t bytes,
                          bool at_least, uint64_t limit)
{
  lpod_t *p = pod_find(l, pod);
  lproc_t *pr = proc_find(p, pid);
  if (pr && (!at_least || pr->total >= bytes))
    return 0;
  uint64_t had = pr ? pr->total : 0, held = p ? p->total : 0;
  /* What the report says beyond what the pod may hold is not believed. */
  uint64_t room = held < limit ? limit - held : 0;
  if (bytes - had > room)
    bytes = had + room;
  if (!pr && bytes == 0)
    return 0; /* nothing to know yet: its first Reserve creates the entry */
  if (bytes == had)
    return 0;
  if (!p && !(p = pod_get(l, pod)))
    return 0;
  if (!pr) {
    if (!(pr = proc_get(p, pid)))
      return 0;
    pr->seen = true; /* adopted from a heartbeat */
  }
  uint64_t add = bytes - pr->total;
  pr->nodev += add;
  pr->total += add;
  p->total += add;
  return add;
}

bool gmt_ledger_synced(const gmt_ledger_t *l, const char *pod)
{
  const lpod_t *p = pod_find(l, pod);
  return p && p->synced;
}

int gmt_ledger_set_synced(gmt_ledger_t *l, const char *pod, bool synced)
{
  lpod_t *p = synced ? pod_get(l, pod) : pod_find(l, pod);
  if (!p)
    return synced ? -ENOMEM : 0;
  p->synced = synced;
  return 0;
}
