/* gmt status: asks the scheduler for every pod and prints it, as a table per
 * pod for people or as JSON (status_json.c) for programs. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "gmt_counters.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_wire.h"
#include "status_devices.h"
#include "status_json.h"
#include "status_waits.h"

#define STATUS_TIMEOUT_MS 3000

static void usage(FILE *f)
{
  fprintf(f, "usage: gmt [--schd URL] status [--json]\n"
             "\n"
             "Shows every configured pod: whether its pod manager is connected,\n"
             "its request/limit share of GPU time, its device memory in use\n"
             "against its limit, per GPU its memory and share of that GPU's time\n"
             "(and the GPUs its devices= allows), its processes' context memory (shown,\n"
             "not charged), and its processes (for a mode=swap or um pod, where their\n"
             "allocations' bytes are: GPU, host, disk, and moves out/in); then the\n"
             "node's pinned host memory, of which gmt pinned on advice, against its\n"
             "budget, and the memory tiers' spaces (GPU, host, disk) with what each\n"
             "holds, and a WARNING for a GPU whose space the strict pods' quotas pass.\n"
             "\n"
             "  --json       print one line of JSON (see docs/protocol.md)\n"
             "  -h, --help   show this help\n");
}

/* An exe path comes from the process itself; keep control characters out of
 * the operator's terminal. */
static void print_safe(const char *s)
{
  for (; s && *s; s++)
    putchar(iscntrl((unsigned char)*s) ? '?' : *s);
}

/* The memory tiers' spaces (docs/tiers.md): what each holds against its
 * capacity, and how far past its trigger it is (PRESSURE, the bytes to
 * move down). The JSON has the rest (limit, the exact bytes). */
/* GPU processes outside gmt: no quota, no share (NVML's view). */
static void print_unmanaged(const Gmt__StatusReply *st)
{
  if (!st->n_unmanaged)
    return;
  printf("\nUNMANAGED: %zu process%s on the GPUs outside gmt (no quota, no share)\n",
         st->n_unmanaged, st->n_unmanaged == 1 ? "" : "es");
  printf("  %8s  %-10s  %s\n", "PID", "MEMORY", "EXE");
  for (size_t i = 0; i < st->n_unmanaged; i++) {
    const Gmt__UnmanagedProcess *u = st->unmanaged[i];
    char mem[32];
    gmt_human_bytes(mem, sizeof mem, u->memory_used);
    printf("  %8u  %-10s  ", u->pid, mem);
    print_safe(u->exe ? u->exe : "");
    putchar('\n');
  }
}

/* Unix seconds as local time, "?" when not known. */
static void local_time(char *buf, size_t len, double unix_s)
{
  time_t t = (time_t)unix_s;
  struct tm tm;
  if (!(unix_s > 0 && localtime_r(&t, &tm) && strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm)))
    snprintf(buf, len, "?");
}

/* What gmt-schd refused the pod, by why, and why the last one was. */
static void print_refusals(const Gmt__PodStatus *pod)
{
  if (!pod->last_refusal || !pod->last_refusal[0])
    return;
  char when[32];
  local_time(when, sizeof when, pod->last_refusal_unix);
  printf("  allocations refused: %llu for its GPU_MEM, %llu for the GPU's space",
         (unsigned long long)pod->refused_quota, (unsigned long long)pod->refused_space);
  /* The other whys only where they happened: most pods have neither. */
  if (pod->refused_devices)
    printf("; calls refused for its devices=: %llu", (unsigned long long)pod->refused_devices);
  if (pod->refused_limit)
    printf("; tokens refused for LIMIT 0: %llu", (unsigned long long)pod->refused_limit);
  printf("; the last at %s: ", when);
  print_safe(pod->last_refusal);
  putchar('\n');
}

/* A failed reload of resource-config.txt, said where the operator looks
 * (the daemon's log may be gone): nothing when the last read was good. */
static void print_config(const Gmt__ConfigStatus *c)
{
  if (!c || c->last_reload_ok)
    return;
  char when[64];
  local_time(when, sizeof when, c->last_success_unix);
  printf("\nCONFIG %s: its last reload FAILED; the config read at %s (%u pods) stays in force:\n",
         c->path ? c->path : "?", when, c->pods);
  const char *e = c->last_error ? c->last_error : "";
  for (const char *line = e, *nl; *line; line = nl + 1) {
    nl = strchr(line, '\n');
    int n = nl ? (int)(nl - line) : (int)strlen(line);
    printf("  %.*s\n", n, line);
    if (!nl)
      break;
  }
}

static void print_tiers(const Gmt__HostStatus *h)
{
  if (h->n_tiers == 0)
    return;
  printf("\n%-8s  %-10s  %-10s  %-10s  %-10s  %-9s  %s\n", "TIER", "CAPACITY", "RESERVED", "USED",
         "PRESSURE", "DOWN/STOP", "PATH");
  for (size_t i = 0; i < h->n_tiers; i++) {
    const Gmt__TierSpace *t = h->tiers[i];
    char name[32], cap[32], resv[32], used[32], pressure[32], at[32];
    snprintf(name, sizeof name, "%.8s %d", t->tier ? t->tier : "?", t->index);
    gmt_human_bytes(cap, sizeof cap, t->capacity);
    gmt_human_bytes(resv, sizeof resv, t->reserved);
    gmt_human_bytes(used, sizeof used, t->used);
    gmt_human_bytes(pressure, sizeof pressure, t->pressure);
    snprintf(at, sizeof at, "%.2f/%.2f", t->trigger, t->stop);
    printf("%-8s  %-10s  %-10s  %-10s  %-10s  %-9s  ", name, cap, resv, used, pressure, at);
    print_safe(t->path && t->path[0] ? t->path : "-");
    putchar('\n');
  }
  /* A GPU whose swap pods took turns: the rate its switches moved at. */
  for (size_t i = 0; i < h->n_tiers; i++) {
    const Gmt__TierSpace *t = h->tiers[i];
    if (!t->switches)
      continue;
    char last[32];
    gmt_human_bytes(last, sizeof last, t->last_switch_bytes);
    printf("%.8s %d: swap turns' switches move %.2f GB/s (%llu measured; the last %s in %.0f "
           "ms)\n",
           t->tier ? t->tier : "?", t->index, t->move_rate / 1e9, (unsigned long long)t->switches,
           last, t->last_switch_ms);
  }
  /* A GPU space that cannot hold what its strict pods' quotas allow at
   * once: said below the table, with the pods (eight, then how many more). */
  for (size_t i = 0; i < h->n_tiers; i++) {
    const Gmt__TierSpace *t = h->tiers[i];
    if (!t->overcommitted)
      continue;
    char quotas[32], space[32];
    gmt_human_bytes(quotas, sizeof quotas, t->strict_quotas);
    gmt_human_bytes(space, sizeof space, t->limit);
    printf("WARNING: %.8s %d: the strict pods' quotas sum to %s, past its space of %s (",
           t->tier ? t->tier : "?", t->index, quotas, space);
    for (size_t k = 0; k < t->n_strict_pods; k++) {
      if (k == 8) {
        printf(", %zu more", t->n_strict_pods - k);
        break;
      }
      printf("%s", k ? ", " : "");
      print_safe(t->strict_pods[k]);
    }
    printf("): their allocations past it are refused; mode=swap or um moves memory instead\n");
  }
}

/* A swap pod's turns per GPU (docs/tiers.md, "The turn's length"): how
 * many brought memory back, and the last one's plan: what it moves, what
 * that costs and how long it was to last. */
static void print_turns(const Gmt__PodStatus *pod)
{
  for (size_t i = 0; i < pod->n_devices; i++) {
    const Gmt__PodDeviceStatus *d = pod->devices[i];
    if (!d->swap_turns && !d->turn_moves_bytes)
      continue;
    char moves[32];
    gmt_human_bytes(moves, sizeof moves, d->turn_moves_bytes);
    char out[48] = "";
    if (d->out_rate > 0)
      snprintf(out, sizeof out, "; its moves out run at %.2f GB/s", d->out_rate / 1e9);
    printf("  turns on GPU %d: %llu; the last moves %s (%.0f ms) and lasts %.0f ms%s%s\n",
           d->device, (unsigned long long)d->swap_turns, moves, d->turn_cost_ms, d->turn_ms,
           d->turn_ms > 0 ? "" : " (it fits beside the others)", out);
  }
}

/* The pod per GPU (docs/devices.md): one line, each GPU's memory in the
 * ledger and its share of that GPU's time ('*': holds its token), and the
 * GPUs devices= allows; then its processes' context memory, shown beside
 * the allocations and not charged to the quota. */
static void print_pod_devices(const Gmt__PodStatus *pod)
{
  const Gmt__PodConfig *cfg = pod->config;
  if (pod->n_devices || (cfg && cfg->n_devices)) {
    printf("  per GPU:");
    for (size_t i = 0; i < pod->n_devices; i++) {
      const Gmt__PodDeviceStatus *d = pod->devices[i];
      char mem[32];
      gmt_human_bytes(mem, sizeof mem, d->memory_used);
      printf("%s %d: %s, %.2f%s", i ? ";" : "", d->device, mem, d->gpu_time_share,
             d->holds_token ? " *" : "");
    }
    if (pod->n_devices == 0)
      printf(" none yet");
    if (cfg && cfg->n_devices) {
      printf("  (devices=");
      for (size_t i = 0; i < cfg->n_devices; i++)
        printf("%s%d", i ? "," : "", (int)cfg->devices[i]);
      putchar(')');
    }
    putchar('\n');
  }
  if (pod->context_bytes == 0)
    return;
  char ctx[32];
  gmt_human_bytes(ctx, sizeof ctx, pod->context_bytes);
  printf("  context: %s, not charged (", ctx);
  size_t shown = 0;
  for (size_t j = 0; j < pod->n_processes; j++) {
    const Gmt__ProcessStatus *p = pod->processes[j];
    if (!p->context_bytes)
      continue;
    if (shown++ == 8) {
      printf(", ...");
      break;
    }
    gmt_human_bytes(ctx, sizeof ctx, p->context_bytes);
    printf("%spid %u %s", shown > 1 ? ", " : "", p->pid, ctx);
  }
  printf(")\n");
}

static const char *pod_name(const Gmt__PodStatus *pod)
{
  return pod->config && pod->config->name ? pod->config->name : "";
}

static void print_text(const Gmt__StatusReply *st)
{
  /* The node's part below is shown with or without pods. */
  if (st->n_pods == 0)
    printf("no pods configured\n");
  int w = 3;
  for (size_t i = 0; i < st->n_pods; i++) {
    int n = (int)strlen(pod_name(st->pods[i]));
    if (n > w)
      w = n;
  }
  for (size_t i = 0; i < st->n_pods; i++) {
    const Gmt__PodStatus *pod = st->pods[i];
    const Gmt__ProcessCounters *t = gmt_counters_of(pod->totals);
    double req = pod->config ? pod->config->request : 0;
    double lim = pod->config ? pod->config->limit : 0;
    char used[32], limit[32], share[64];
    gmt_human_bytes(used, sizeof used, t->memory_used);
    gmt_human_bytes(limit, sizeof limit, pod->config ? pod->config->memory_limit : 0);
    snprintf(share, sizeof share, "%.2f/%.2f", req, lim);
    if (i > 0)
      putchar('\n');
    char gpu[32];
    /* Its share of GPU time over the scheduler's window; '*' while it
     * holds a token. */
    snprintf(gpu, sizeof gpu, "%.2f%s", pod->gpu_time_share, pod->holds_token ? " *" : "");
    printf("%-*s  %-9s  %-13s  %-10s  %s\n", w, "POD", "CONNECTED", "REQUEST/LIMIT", "GPU TIME",
           "MEMORY");
    printf("%-*s  %-9s  %-13s  %-10s  %s / %s\n", w, pod_name(pod), pod->connected ? "yes" : "no",
           share, gpu, used, limit);
    /* Batch is the default and goes unsaid. */
    if (pod->config && pod->config->class_ == GMT__POD_CLASS__CLASS_LATENCY)
      printf("  class: latency (with work, it goes before the batch pods)\n");
    /* Why it waits: for tokens, now, and held back at its LIMIT. */
    char waits[160];
    if (gmt_status_pod_waits(waits, sizeof waits, pod))
      printf("  waited %s\n", waits);
    /* mode=swap: where its allocations' bytes are now, per tier. */
    bool swap = pod->config && gmt_mem_mode_moves(pod->config->mode);
    if (swap) {
      char g[32], hst[32], dsk[32], kept[32];
      gmt_human_bytes(g, sizeof g, t->swap_gpu);
      gmt_human_bytes(hst, sizeof hst, t->swap_host);
      gmt_human_bytes(dsk, sizeof dsk, t->swap_disk);
      gmt_human_bytes(kept, sizeof kept, t->swap_kept);
      char idle[40] = "off";
      if (pod->config->idle_out_ms >= 0)
        snprintf(idle, sizeof idle, "%.3g s", (double)pod->config->idle_out_ms / 1e3);
      printf("  swap: gpu %s, host %s, disk %s; host copies kept %s; idle-out %s\n", g, hst, dsk,
             kept, idle);
      /* What its turns cost: the moves and the waits for memory, and
       * per GPU the turn gmt-schd plans for it now. */
      if (t->swap_out_bytes || t->swap_in_bytes) {
        char out[32], in[32];
        gmt_human_bytes(out, sizeof out, t->swap_out_bytes);
        gmt_human_bytes(in, sizeof in, t->swap_in_bytes);
        printf("  moves: %s out, %s back in %.2f s (%.1f GB/s); waited %.2f s for memory\n", out,
               in, (double)t->swap_move_us / 1e6,
               t->swap_move_us ? (double)(t->swap_out_bytes + t->swap_in_bytes) /
                                     ((double)t->swap_move_us * 1e3)
                               : 0.0,
               (double)t->swap_wait_us / 1e6);
      }
      print_turns(pod);
    }
    print_pod_devices(pod);
    print_refusals(pod);
    if (pod->n_processes == 0) {
      printf("  (no processes)\n");
      continue;
    }
    if (swap)
      printf("  %8s  %-10s  %10s  %-16s  %-10s  %-10s  %-10s  %-11s  %s\n", "PID", "MEMORY",
             "LAUNCHES", "TOKEN WAIT", "GPU", "HOST", "DISK", "OUT/IN", "EXE");
    else
      printf("  %8s  %-10s  %10s  %-16s  %s\n", "PID", "MEMORY", "LAUNCHES", "TOKEN WAIT", "EXE");
    for (size_t j = 0; j < pod->n_processes; j++) {
      const Gmt__ProcessStatus *p = pod->processes[j];
      const Gmt__ProcessCounters *c = gmt_counters_of(p->counters);
      char mem[32];
      gmt_human_bytes(mem, sizeof mem, c->memory_used);
      /* Why it waits: its launches' time waiting for a token, and the
       * wait going on now. */
      char wait[48];
      gmt_status_proc_wait(wait, sizeof wait, c);
      printf("  %8u  %-10s  %10llu  %-16s  ", p->pid, mem, (unsigned long long)c->launches, wait);
      if (swap) {
        char g[32], hst[32], dsk[32], moves[48];
        gmt_human_bytes(g, sizeof g, c->swap_gpu);
        gmt_human_bytes(hst, sizeof hst, c->swap_host);
        gmt_human_bytes(dsk, sizeof dsk, c->swap_disk);
        snprintf(moves, sizeof moves, "%llu/%llu", (unsigned long long)c->swap_outs,
                 (unsigned long long)c->swap_ins);
        printf("%-10s  %-10s  %-10s  %-11s  ", g, hst, dsk, moves);
      }
      print_safe(p->exe);
      /* A pod manager in a PID namespace of its own (a Kubernetes pod)
       * gives the pod's pid; NVML and the tracer know the node's. */
      if (p->node_pid && p->node_pid != p->pid)
        printf("  (node pid %u)", p->node_pid);
      else if (!p->node_pid)
        printf("  (not found on the node)");
      putchar('\n');
    }
  }
  gmt_status_devices_print(stdout, st); /* the node's GPUs (status_devices.c) */
  if (st->host) {
    /* The node's page-locked host memory: what its processes hold, of
     * which gmt pinned on advice and gmt's pools keep for reuse, against
     * --pinned-limit. */
    char pinned[32], advised[32], cached[32], budget[32];
    const Gmt__ProcessCounters *t = gmt_counters_of(st->host->totals);
    gmt_human_bytes(pinned, sizeof pinned, t->pinned_bytes);
    gmt_human_bytes(advised, sizeof advised, t->pinned_advised);
    gmt_human_bytes(cached, sizeof cached, t->pinned_cached);
    gmt_human_bytes(budget, sizeof budget, st->host->pinned_limit);
    printf("\n%-12s  %-12s  %-12s  %s\n", "HOST PINNED", "ON ADVICE", "POOL CACHED", "BUDGET");
    printf("%-12s  %-12s  %-12s  %s\n", pinned, advised, cached, budget);
    print_tiers(st->host);
    print_config(st->host->config);
  }
  print_unmanaged(st);
}

int gmt_cmd_status(const gmt_cmd_ctx_t *ctx, int argc, char **argv)
{
  int json;
  int done = gmt__cmd_json_args("status", argc, argv, usage, &json);
  if (done >= 0)
    return done;

  gmt_client_t *c = NULL;
  Gmt__Envelope *rep = NULL;
  /* The dial and the call share one bound. */
  uint64_t start = gmt_now_ms();
  int rc = gmt_client_open(&c, ctx->schd_url, GMT_CLIENT_DIAL_NOW);
  if (rc < 0) {
    char why[1024];
    gmt__cmd_no_schd(why, sizeof why, ctx->schd_url, rc);
    fprintf(stderr, "gmt status: %s\n", why);
    return 1;
  }
  Gmt__StatusRequest sreq = GMT__STATUS_REQUEST__INIT;
  Gmt__Envelope req = GMT__ENVELOPE__INIT;
  gmt_wire_set_body(&req, GMT__ENVELOPE__BODY_STATUS_REQ, &sreq);
  uint64_t spent = gmt_now_ms() - start;
  rc = gmt_client_call(c, &req, &rep,
                       spent >= STATUS_TIMEOUT_MS ? 1 : STATUS_TIMEOUT_MS - (int)spent);
  if (rc < 0) {
    fprintf(stderr, "gmt: scheduler at %s: %s\n", ctx->schd_url, gmt_strerror(rc));
    gmt_client_close(c);
    return 1;
  }
  char err[256] = "";
  rc = gmt_wire_expect(rep, GMT__ENVELOPE__BODY_STATUS_REP, err, sizeof err);
  if (rc < 0) {
    fprintf(stderr, "gmt: scheduler at %s: %s\n", ctx->schd_url, err[0] ? err : gmt_strerror(rc));
    gmt_wire_free(rep);
    gmt_client_close(c);
    return 1;
  }

  int status = 0;
  if (json) {
    char *out = NULL;
    rc = gmt_status_json(rep->status_rep, &out);
    if (rc < 0) {
      fprintf(stderr, "gmt: rendering JSON: %s\n", gmt_strerror(rc));
      status = 1;
    } else {
      printf("%s\n", out);
      free(out);
    }
  } else {
    print_text(rep->status_rep);
  }
  if (fflush(stdout) != 0)
    status = 1;
  gmt_wire_free(rep);
  gmt_client_close(c);
  return status;
}
