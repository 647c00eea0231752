/* The pod and process table: what each pod manager last told us.
 *
 * A heartbeat carries a pod's full process list, so the table is replaced,
 * never patched; the merge below exists only to tell the store which
 * processes appeared and which went away. */
#include "pods.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_counters.h"
#include "gmt_log.h"
#include "gmt_podconfig.h"
#include "gmt_wire.h"

static void proc_clear(gmt_proc_t *pr)
{
  free(pr->exe);
}

static void procs_free(gmt_proc_t *procs, size_t n)
{
  for (size_t i = 0; i < n; i++)
    proc_clear(&procs[i]);
  free(procs);
}

/* Drops every process of pod, recording them as ended. */
static void pod_forget_procs(gmt_pods_t *p, gmt_pod_t *pod, int64_t wall_ms)
{
  gmt_store_batch_begin(p->store);
  for (size_t i = 0; i < pod->nprocs; i++)
    gmt_store_process_ended(p->store, pod->cfg.name, pod->procs[i].pid, wall_ms);
  gmt_store_batch_end(p->store);
  procs_free(pod->procs, pod->nprocs);
  pod->procs = NULL;
  pod->nprocs = 0;
}

int gmt_pods_new(gmt_pods_t **out, const gmt_config_t *cfg, gmt_store_t *store)
{
  *out = NULL;
  gmt_pods_t *p = calloc(1, sizeof *p);
  if (!p)
    return -ENOMEM;
  if (cfg->npods && !(p->pods = calloc(cfg->npods, sizeof *p->pods))) {
    free(p);
    return -ENOMEM;
  }
  p->npods = cfg->npods;
  p->store = store;
  for (size_t i = 0; i < cfg->npods; i++)
    p->pods[i].cfg = cfg->pods[i];
  *out = p;
  return 0;
}

void gmt_pods_free(gmt_pods_t *p)
{
  if (!p)
    return;
  for (size_t i = 0; i < p->npods; i++)
    procs_free(p->pods[i].procs, p->pods[i].nprocs);
  free(p->pods);
  free(p);
}

static int cmp_name(const void *key, const void *elem)
{
  return strcmp(key, ((const gmt_pod_t *)elem)->cfg.name);
}

gmt_pod_t *gmt_pods_find(gmt_pods_t *p, const char *name)
{
  if (!name || p->npods == 0)
    return NULL;
  return bsearch(name, p->pods, p->npods, sizeof *p->pods, cmp_name);
}

void gmt_pods_refused(gmt_pod_t *pod, int why, const char *words)
{
  if (why < 0 || why >= GMT_REFUSED_WHYS)
    return;
  pod->refused[why]++;
  if (words != pod->last_refusal)
    snprintf(pod->last_refusal, sizeof pod->last_refusal, "%s", words);
  pod->last_refusal_unix = gmt_unix_now();
}

void gmt_pods_register(gmt_pods_t *p, gmt_pod_t *pod, uint64_t now_ms)
{
  if (!pod->connected)
    gmt_info("pod '%s' connected", pod->cfg.name);
  pod->connected = true;
  pod->last_seen_ms = now_ms;
  gmt_store_pod_registered(p->store, &pod->cfg, gmt_store_now_ms());
}

static int cmp_pid(const void *a, const void *b)
{
  uint32_t x = ((const gmt_proc_t *)a)->pid, y = ((const gmt_proc_t *)b)->pid;
  return (x > y) - (x < y);
}

static bool same_exe(const char *a, const char *b)
{
  return strcmp(a ? a : "", b ? b : "") == 0;
}

/* The heartbeat's list as a table sorted by pid, without pid 0 or a pid
 * listed twice (a pod manager bug; one of them is kept). NULL on ENOMEM. */
static gmt_proc_t *procs_from(const Gmt__HeartbeatRequest *req, size_t *n)
{
  gmt_proc_t *v = calloc(req->n_processes ? req->n_processes : 1, sizeof *v);
  if (!v)
    return NULL;
  size_t k = 0;
  for (size_t i = 0; i < req->n_processes; i++) {
    const Gmt__ProcessReport *r = req->processes[i];
    if (!r || r->pid == 0)
      continue;
    v[k] = (gmt_proc_t){.pid = r->pid};
    gmt_report_counters(r, &v[k].c);
    if (!(v[k].exe = strdup(r->exe ? r->exe : ""))) {
      procs_free(v, k);
      return NULL;
    }
    k++;
  }
  qsort(v, k, sizeof *v, cmp_pid);
  size_t m = 0;
  for (size_t i = 0; i < k; i++) {
    if (m > 0 && v[m - 1].pid == v[i].pid) {
      gmt_debug("heartbeat lists pid %u twice; keeping one", v[i].pid);
      proc_clear(&v[i]);
      continue;
    }
    v[m++] = v[i];
  }
  *n = m;
  return v;
}

static void proc_ended(gmt_pods_t *p, const gmt_pod_t *pod, const gmt_proc_t *pr, int64_t wall)
{
  gmt_debug("pod '%s': process %u (%s) ended", pod->cfg.name, pr->pid, pr->exe);
  gmt_store_process_ended(p->store, pod->cfg.name, pr->pid, wall);
}

static void proc_started(gmt_pods_t *p, const gmt_pod_t *pod, const gmt_proc_t *pr, int64_t wall)
{
  gmt_debug("pod '%s': process %u (%s) started", pod->cfg.name, pr->pid, pr->exe);
  gmt_store_process_started(p->store, pod->cfg.name, pr->pid, pr->exe, wall);
}

bool gmt_pods_heartbeat(gmt_pods_t *p, gmt_pod_t *pod, const Gmt__HeartbeatRequest *req,
                        uint64_t now_ms)
{
  if (pod->have_seq && req->epoch == pod->epoch && req->seq <= pod->seq)
    return false;

  if (!pod->connected)
    gmt_pods_register(p, pod, now_ms);
  pod->connected = true;
  pod->last_seen_ms = now_ms;
  pod->have_seq = true;
  pod->epoch = req->epoch;
  pod->seq = req->seq;

  int64_t wall = gmt_store_now_ms();
  gmt_store_pod_seen(p->store, pod->cfg.name, wall);

  size_t n = 0;
  gmt_proc_t *next = procs_from(req, &n);
  if (!next) {
    gmt_warn("pod '%s': out of memory applying a heartbeat; keeping its old process list",
             pod->cfg.name);
    return true;
  }
  gmt_store_batch_begin(p->store);

  /* Both lists are sorted by pid: one pass finds who came and who went. */
  size_t i = 0, j = 0;
  while (i < pod->nprocs && j < n) {
    const gmt_proc_t *old = &pod->procs[i], *cur = &next[j];
    if (old->pid < cur->pid) {
      proc_ended(p, pod, old, wall);
      i++;
    } else if (cur->pid < old->pid) {
      proc_started(p, pod, cur, wall);
      j++;
    } else {
      /* The same pid running another program: the pid was reused. */
      if (!same_exe(old->exe, cur->exe)) {
        proc_ended(p, pod, old, wall);
        proc_started(p, pod, cur, wall);
      } else {
        next[j].node_pid = old->node_pid;
        next[j].node_pid_tried = old->node_pid_tried;
      }
      i++, j++;
    }
  }
  for (; i < pod->nprocs; i++)
    proc_ended(p, pod, &pod->procs[i], wall);
  for (; j < n; j++)
    proc_started(p, pod, &next[j], wall);
  gmt_store_batch_end(p->store);
  procs_free(pod->procs, pod->nprocs);
  pod->procs = next;
  pod->nprocs = n;
  return true;
}

int gmt_pods_expire(gmt_pods_t *p, uint64_t now_ms, uint64_t timeout_ms)
{
  int n = 0;
  int64_t wall = 0;
  for (size_t i = 0; i < p->npods; i++) {
    gmt_pod_t *pod = &p->pods[i];
    if (!pod->connected || now_ms - pod->last_seen_ms <= timeout_ms)
      continue;
    if (!wall)
      wall = gmt_store_now_ms();
    gmt_info("pod '%s' disconnected: no heartbeat for %llu ms (timeout %llu ms), %zu process%s "
             "forgotten",
             pod->cfg.name, (unsigned long long)(now_ms - pod->last_seen_ms),
             (unsigned long long)timeout_ms, pod->nprocs, pod->nprocs == 1 ? "" : "es");
    pod->connected = false;
    /* Whatever comes next (the same pod manager back, or a new one) is
     * news: no heartbeat is a duplicate of what we no longer hold. */
    pod->have_seq = false;
    pod_forget_procs(p, pod, wall);
    n++;
  }
  return n;
}

/* Logs which of a pod's shares a reload changed; false when none did. */
static bool log_change(const gmt_pod_config_t *a, const gmt_pod_config_t *b)
{
  Gmt__PodConfig was, now;
  gmt_pod_config_wire(a, &was);
  gmt_pod_config_wire(b, &now);
  char what[512];
  if (!gmt_podcfg_diff(&was, &now, what, sizeof what))
    return false;
  gmt_info("config: pod '%s' changed: %s", a->name, what);
  return true;
}

int gmt_pods_reload(gmt_pods_t *p, const gmt_config_t *cfg)
{
  gmt_pod_t *next = calloc(cfg->npods ? cfg->npods : 1, sizeof *next);
  if (!next)
    return -ENOMEM;

  int64_t wall = gmt_store_now_ms();
  int added = 0, removed = 0, changed = 0;
  /* Both sorted by name. */
  size_t i = 0, j = 0;
  while (i < p->npods || j < cfg->npods) {
    int c = i == p->npods     ? 1
            : j == cfg->npods ? -1
                              : strcmp(p->pods[i].cfg.name, cfg->pods[j].name);
    if (c < 0) {
      gmt_pod_t *old = &p->pods[i++];
      gmt_info("config: pod '%s' removed (%s, %zu process%s forgotten)", old->cfg.name,
               old->connected ? "was connected" : "was not connected", old->nprocs,
               old->nprocs == 1 ? "" : "es");
      pod_forget_procs(p, old, wall);
      removed++;
    } else if (c > 0) {
      const gmt_pod_config_t *nc = &cfg->pods[j];
      gmt_info("config: pod '%s' added (request %g, limit %g, memory %llu)", nc->name, nc->request,
               nc->limit, (unsigned long long)nc->memory_limit);
      next[j++].cfg = *nc;
      added++;
    } else {
      const gmt_pod_t *old = &p->pods[i++];
      const gmt_pod_config_t *nc = &cfg->pods[j];
      if (log_change(&old->cfg, nc)) {
        gmt_store_pod_config(p->store, nc);
        changed++;
      }
      next[j] = *old;
      next[j++].cfg = *nc;
    }
  }
  gmt_info("config %s reloaded: %zu pod%s, %d added, %d removed, %d changed", cfg->path, cfg->npods,
           cfg->npods == 1 ? "" : "s", added, removed, changed);
  free(p->pods);
  p->pods = next;
  p->npods = cfg->npods;
  return 0;
}
