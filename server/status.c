/* The Status view: the node as a StatusReply, gathered from every part of
 * the scheduler (the pod table, tokens, the ledgers, context memory, the
 * tiers, the GPUs). Status (rpc.c) sends it and /metrics
 * (http_metrics.c) renders it: one builder, so the two never disagree.
 * Loop thread only. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_counters.h"
#include "schd.h"

void gmt__status_free(gmt__status_t *st)
{
  for (size_t i = 0; st->ps && i < st->npods; i++)
    gmt__pod_devices_free(&st->ps[i]);
  free(st->ps);
  free(st->psp);
  free(st->pcs);
  free(st->pr);
  free(st->prp);
  free(st->pc);
  free(st->pt);
  free(st->host.tiers);
  free(st->unmanaged);
  st->unmanaged = NULL;
  st->ps = NULL;
  st->psp = NULL;
  st->pcs = NULL;
  st->pr = NULL;
  st->prp = NULL;
  st->pc = NULL;
  st->pt = NULL;
  st->host.tiers = NULL;
  st->npods = 0;
}

int gmt__status_build(gmt_schd_t *s, gmt__status_t *st)
{
  gmt_pods_t *p = s->pods;
  *st = (gmt__status_t){.npods = p->npods};
  gmt__status_reply__init(&st->reply);
  gmt__host_status__init(&st->host);
  gmt__process_counters__init(&st->ht);
  gmt__config_status__init(&st->config);
  const gmt_config_health_t *h = &s->config_health;
  st->config.path = (char *)(s->config_path ? s->config_path : "");
  st->config.pods = s->cfg ? (uint32_t)s->cfg->npods : 0;
  st->config.last_reload_ok = h->ok;
  st->config.last_reload_unix = h->read_unix;
  st->config.last_success_unix = h->ok_unix;
  st->config.last_error = (char *)h->error;
  st->host.config = &st->config;
  size_t nprocs = 0;
  for (size_t i = 0; i < p->npods; i++)
    nprocs += p->pods[i].nprocs;

  /* The table is sorted by name and each pod's processes by pid, as the
   * reply must be. */
  st->ps = calloc(p->npods + 1, sizeof *st->ps);
  st->psp = calloc(p->npods + 1, sizeof(Gmt__PodStatus *));
  st->pcs = calloc(p->npods + 1, sizeof *st->pcs);
  st->pr = calloc(nprocs + 1, sizeof *st->pr);
  st->prp = calloc(nprocs + 1, sizeof(Gmt__ProcessStatus *));
  st->pc = calloc(nprocs + 1, sizeof *st->pc);
  st->pt = calloc(p->npods + 1, sizeof *st->pt);
  if (!st->ps || !st->psp || !st->pcs || !st->pr || !st->prp || !st->pc || !st->pt)
    return -ENOMEM;
  Gmt__PodStatus *ps = st->ps;
  Gmt__ProcessStatus *pr = st->pr;
  Gmt__HostStatus *host = &st->host;
  size_t k = 0;
  host->pinned_limit = s->pinned_limit;
  host->totals = &st->ht;
  for (size_t i = 0; i < p->npods; i++) {
    const gmt_pod_t *pod = &p->pods[i];
    gmt__pod_status__init(&ps[i]);
    gmt_pod_config_wire(&pod->cfg, &st->pcs[i]);
    ps[i].config = &st->pcs[i];
    ps[i].connected = pod->connected;
    ps[i].refused_quota = pod->refused[GMT_REFUSED_QUOTA];
    ps[i].refused_space = pod->refused[GMT_REFUSED_SPACE];
    ps[i].refused_devices = pod->refused[GMT_REFUSED_DEVICES];
    ps[i].refused_limit = pod->refused[GMT_REFUSED_LIMIT];
    ps[i].last_refusal = (char *)pod->last_refusal;
    ps[i].last_refusal_unix = pod->last_refusal_unix;
    gmt__process_counters__init(&st->pt[i]);
    ps[i].totals = &st->pt[i];
    ps[i].n_processes = pod->nprocs;
    ps[i].processes = &st->prp[k];
    gmt__tokens_status(s, pod, &ps[i]);
    for (size_t j = 0; j < pod->nprocs; j++, k++) {
      const gmt_proc_t *src = &pod->procs[j];
      gmt__process_status__init(&pr[k]);
      pr[k].pid = src->pid;
      pr[k].node_pid = gmt_proc_node_pid(src);
      pr[k].exe = src->exe;
      gmt_counters_copy(&st->pc[k], &src->c);
      pr[k].counters = &st->pc[k];
      gmt_counters_add(&st->pt[i], &src->c);
      st->prp[k] = &pr[k];
    }
    gmt__ledger_status(s, pod, &ps[i]); /* after its processes: fills theirs too */
    /* After the ledger's part: a context is NVML's count less the ledger's. */
    if (gmt__pod_devices_status(s, pod, &ps[i]) < 0)
      return -ENOMEM;
    gmt_counters_add(&st->ht, &st->pt[i]);
    st->psp[i] = &ps[i];
  }
  gmt__ledger_host_status(s, host);
  if (gmt__tiers_host_status(s, host) < 0)
    return -ENOMEM;
  /* The GPU spaces' swap switches (rpc_swap_turn.c). */
  for (size_t i = 0; i < host->n_tiers; i++)
    if (!strcmp(host->tiers[i]->tier, "gpu"))
      gmt__turns_space_status(s, host->tiers[i]->index, host->tiers[i]);

  st->reply.n_pods = p->npods;
  st->reply.pods = st->psp;
  st->reply.protocol_version = GMT_PROTOCOL_VERSION;
  st->reply.host = host;
  gmt__pick_status(s, &st->reply); /* the node's GPUs (rpc_pick.c) */
  if (gmt__unmanaged_status(s, &st->reply, &st->unmanaged) < 0)
    return -ENOMEM;
  return 0;
}
