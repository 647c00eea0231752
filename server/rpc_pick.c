/* Pick: the best GPUs for a job to start on, and the GPUs' part of Status
 * (docs/devices.md, "Picking a GPU"). The glue around pick.c's pure
 * decision: it samples each GPU's numbers (NVML's memory and utilization,
 * the ledger's reservations, the token queue), runs gmt-probe for the probe
 * delay when the sampled numbers are stale and a Pick needs them, keeps
 * them as the cache, and answers. Loop thread only.
 *
 * The daemon never holds a CUDA context: the probe is a child process
 * (gmt-probe, beside gmt-schd; $GMT_PROBE names another), spawned without
 * LD_PRELOAD and killed at daemon.probe-timeout. Picks that come while it
 * runs wait for it, at most server.max-queued-requests of them; one more
 * is refused as busy. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_settings.h"
#include "ledger.h"
#include "pick.h"
#include "reply.h"
#include "schd.h"

extern char **environ;

/* What gmt-probe may print: a line per GPU. */
#define PROBE_OUT_MAX 16384
/* How long past its timeout a killed probe's run may take to end. */
#define PROBE_GRACE_MS 1000
/* GPUs given and not yet past daemon.pick-hold: at most this many are
 * counted (the oldest goes first). */
#define PENDING_MAX 256

typedef struct waiter {
  struct waiter *next;
  gmt_call_t *call;
  char pod[GMT_POD_NAME_MAX + 1]; /* "" any GPU */
  uint64_t bytes;
  unsigned count;
} waiter_t;

/* One run of gmt-probe. Its handles close one by one; the last close frees
 * it. pk is NULL once the daemon stopped: the run only cleans up. */
typedef struct probe_run {
  struct gmt_pick *pk;
  uv_process_t proc;
  uv_pipe_t out;
  uv_timer_t timer;
  int open_handles;
  bool exited, eof, timed_out, grace, done;
  int64_t exit_status;
  int term_signal;
  uint64_t started_ms;
  char buf[PROBE_OUT_MAX];
  size_t len;
  bool overflow;
} probe_run_t;

struct gmt_pick {
  gmt_schd_t *s;
  gmt_settings_t set;
  char probe_path[PATH_MAX];
  /* The cache: the last numbers a Pick was answered from. */
  gmt_pick_dev_t *devs;
  size_t ndevs;
  gmt_pick_cache_t cache;
  /* A probe running now, and the Picks waiting for it. */
  probe_run_t *run;
  waiter_t *waiters, **tail;
  unsigned nwaiters;
  /* The GPUs given by the last Picks, counted on top of the sampled
   * numbers until daemon.pick-hold passes (pick.h). */
  gmt_pick_pending_t pending[PENDING_MAX];
  size_t npending;
  /* Status's devices, kept until the next Status (the reply points in). */
  Gmt__DeviceStatus *st;
  Gmt__DeviceStatus **stp;
  gmt_pick_dev_t *st_devs;
};

/* ---- sampling ---- */

/* The node's GPUs now: NVML's numbers, the ledger's, the token queue's.
 * Probe delays are carried over from the cache (by index), or unknown. */
static int sample(struct gmt_pick *pk, gmt_pick_dev_t **out, size_t *n)
{
  gmt_schd_t *s = pk->s;
  const gmt_devices_t *dv = s->devices;
  int ngpu = dv && dv->topo ? dv->topo->n_gpus : 0;
  gmt_pick_dev_t *d = calloc(ngpu > 0 ? (size_t)ngpu : 1, sizeof *d);
  if (!d)
    return -ENOMEM;
  for (int i = 0; i < ngpu; i++) {
    const gmt_topo_gpu_t *g = &dv->topo->gpus[i];
    gmt_pick_dev_t *x = &d[i];
    x->index = g->index;
    x->utilization = -1;
    x->probe_ms = -1;
    gmt_nvml_device_t h = gmt_devices_nvml_handle(dv, g->index);
    gmt_nvml_memory_t mem;
    if (h && dv->nvml.DeviceGetMemoryInfo(h, &mem) == GMT_NVML_SUCCESS) {
      x->mem_known = true;
      x->total = mem.total;
      x->nvml_free = mem.free;
    }
    gmt_nvml_utilization_t u;
    if (h && dv->nvml.DeviceGetUtilizationRates &&
        dv->nvml.DeviceGetUtilizationRates(h, &u) == GMT_NVML_SUCCESS)
      x->utilization = fmin(u.gpu, 100) / 100.0;
    if (g->index >= 0)
      x->reserved = gmt_ledger_device_total(s->ledger, g->index);
    const char *holder = NULL;
    x->tokens_waiting = gmt__tokens_device(s, g->index, &holder);
    snprintf(x->holder, sizeof x->holder, "%s", holder ? holder : "");
    for (size_t k = 0; k < pk->ndevs; k++)
      if (pk->devs[k].index == x->index) {
        x->probe_ms = pk->devs[k].probe_ms;
        x->probe_failed = pk->devs[k].probe_failed;
      }
  }
  *out = d;
  *n = (size_t)ngpu;
  return 0;
}

static void cache_set(struct gmt_pick *pk, gmt_pick_dev_t *devs, size_t n)
{
  free(pk->devs);
  pk->devs = devs;
  pk->ndevs = n;
  pk->cache = (gmt_pick_cache_t){.valid = true, .taken_ms = gmt_now_ms(), .served = 0};
}

/* ---- picks in flight ---- */

/* Drops the pending picks past their hold; then, with room for one more
 * (the oldest goes when full), adds index with bytes. */
static void pending_add(struct gmt_pick *pk, int index, uint64_t bytes, uint64_t now)
{
  size_t k = 0;
  for (size_t i = 0; i < pk->npending; i++)
    if (pk->pending[i].until_ms > now)
      pk->pending[k++] = pk->pending[i];
  pk->npending = k;
  if (pk->set.pick_hold_ms == 0)
    return;
  if (pk->npending == PENDING_MAX)
    memmove(pk->pending, pk->pending + 1, --pk->npending * sizeof pk->pending[0]);
  pk->pending[pk->npending++] =
      (gmt_pick_pending_t){.index = index, .bytes = bytes, .until_ms = now + pk->set.pick_hold_ms};
}

/* ---- replies ---- */

static void fill_status(Gmt__DeviceStatus *ds, const gmt_pick_dev_t *d, const gmt_devices_t *dv,
                        uint64_t age_ms)
{
  gmt__device_status__init(ds);
  const gmt_topo_gpu_t *g = gmt_devices_gpu(dv, d->index);
  ds->index = d->index;
  ds->bus_id = g ? (char *)g->bus_id : "";
  ds->uuid = g ? (char *)g->uuid : "";
  ds->name = g ? (char *)g->name : "";
  ds->memory_total = d->mem_known ? d->total : (g ? g->memory_total : 0);
  ds->memory_free = d->nvml_free;
  ds->memory_reserved = d->reserved;
  ds->utilization = d->utilization;
  ds->probe_delay_ms = d->probe_ms;
  ds->tokens_waiting = d->tokens_waiting;
  ds->token_holder = (char *)d->holder;
  ds->score = d->score;
  ds->sample_age_ms = age_ms;
}

/* Answers one Pick from pk's cache; counts it as served. */
static void answer(struct gmt_pick *pk, gmt_call_t *call, const char *podname, uint64_t bytes,
                   unsigned count, bool cached)
{
  gmt_schd_t *s = pk->s;
  gmt_pick_ask_t ask = {.bytes = bytes, .count = count};
  if (podname[0]) {
    const gmt_pod_t *pod = gmt_pods_find(s->pods, podname);
    if (!pod) {
      gmt__reply_nopod(call, s->cfg, podname);
      return;
    }
    ask.allowed = pod->cfg.devices;
    ask.nallowed = pod->cfg.ndevices;
  }
  /* The decision scores a copy: the cache keeps the numbers as sampled. */
  size_t n = pk->ndevs;
  gmt_pick_dev_t *devs = malloc((n ? n : 1) * sizeof *devs);
  bool *considered = calloc(n ? n : 1, sizeof *considered);
  size_t *chosen = calloc(n ? n : 1, sizeof *chosen);
  int32_t *idx = calloc(n ? n : 1, sizeof *idx);
  char **uuids = calloc(n ? n : 1, sizeof *uuids);
  Gmt__DeviceStatus *st = calloc(n ? n : 1, sizeof *st);
  Gmt__DeviceStatus **stp = calloc(n ? n : 1, sizeof *stp);
  if (!devs || !considered || !chosen || !idx || !uuids || !st || !stp) {
    gmt_call_reply_error(call, -ENOMEM, "gmt-schd out of memory answering Pick");
    goto out;
  }
  if (n)
    memcpy(devs, pk->devs, n * sizeof *devs);
  uint64_t now = gmt_now_ms();
  gmt_pick_apply_pending(devs, n, pk->pending, pk->npending, now);
  pk->cache.served++;
  char why[768];
  size_t nchosen = 0;
  int rc = gmt_pick_choose(devs, n, &ask, considered, chosen, &nchosen, why, sizeof why);
  char sb[96];
  if (rc < 0) {
    gmt_debug("Pick pod '%s' count %u bytes %llu: %s", gmt_shown(podname, sb, sizeof sb),
              count ? count : 1, (unsigned long long)bytes, why);
    gmt_call_reply_error(call, rc, "cannot pick a GPU%s%s: %s", podname[0] ? " for pod " : "",
                         podname[0] ? podname : "", why);
    goto out;
  }
  uint64_t age = now - pk->cache.taken_ms;
  size_t nst = 0;
  for (size_t i = 0; i < n; i++)
    if (considered[i]) {
      fill_status(&st[nst], &devs[i], pk->s->devices, age);
      stp[nst] = &st[nst];
      nst++;
    }
  char list[256] = "";
  size_t len = 0;
  for (size_t k = 0; k < nchosen; k++) {
    const gmt_pick_dev_t *d = &devs[chosen[k]];
    const gmt_topo_gpu_t *g = gmt_devices_gpu(s->devices, d->index);
    idx[k] = d->index;
    uuids[k] = g ? (char *)g->uuid : "";
    pending_add(pk, d->index, bytes, now);
    if (len < sizeof list)
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%d (%.3f)", k ? ", " : "", d->index,
                              d->score);
  }
  gmt_debug("Pick pod '%s' count %zu bytes %llu: GPU %s%s", gmt_shown(podname, sb, sizeof sb),
            nchosen, (unsigned long long)bytes, list, cached ? ", cached" : "");
  Gmt__PickReply body = GMT__PICK_REPLY__INIT;
  body.n_devices = nchosen;
  body.devices = idx;
  body.n_uuids = nchosen;
  body.uuids = uuids;
  body.n_scored = nst;
  body.scored = stp;
  body.cached = cached;
  body.confined = ask.nallowed > 0;
  gmt_call_reply_body(call, GMT__ENVELOPE__BODY_PICK_REP, &body);
out:
  free(devs);
  free(considered);
  free(chosen);
  free(idx);
  free(uuids);
  free(st);
  free(stp);
}

/* ---- the probe ---- */

static void run_handle_closed(uv_handle_t *h)
{
  probe_run_t *r = h->data;
  if (--r->open_handles == 0)
    free(r);
}

static void run_close(uv_handle_t *h)
{
  if (!uv_is_closing(h))
    uv_close(h, run_handle_closed);
}

/* Reads gmt-probe's lines into devs[0..n): a delay, or an error (the GPU
 * counts as the slowest). A GPU it did not reach: the slowest too when it
 * was stopped at the timeout, else not probed. */
static void probe_apply(probe_run_t *r, gmt_pick_dev_t *devs, size_t n, const gmt_devices_t *dv,
                        uint64_t timeout_ms)
{
  bool *seen = calloc(n ? n : 1, sizeof *seen);
  if (!seen)
    return;
  char *save = NULL;
  r->buf[r->len < sizeof r->buf ? r->len : sizeof r->buf - 1] = '\0';
  for (char *line = strtok_r(r->buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char bus[64];
    int used = 0;
    if (sscanf(line, "%63s %n", bus, &used) != 1)
      continue;
    const char *rest = line + used;
    int index = gmt_devices_index_of_bus(dv, bus);
    for (size_t i = 0; i < n; i++) {
      if (devs[i].index != index || index < 0)
        continue;
      char *end;
      double ms = strtod(rest, &end);
      seen[i] = true;
      if (end != rest && *end == '\0' && ms >= 0 && isfinite(ms)) {
        devs[i].probe_ms = ms;
        devs[i].probe_failed = false;
      } else {
        gmt_warn("probe GPU %d (%s): %s; it counts as the slowest", devs[i].index, bus, rest);
        devs[i].probe_ms = -1;
        devs[i].probe_failed = true;
      }
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (seen[i])
      continue;
    devs[i].probe_failed = r->timed_out;
    devs[i].probe_ms = r->timed_out ? (double)timeout_ms : -1;
  }
  free(seen);
}

/* The probe is over (exited, its output read): sample, cache, answer. */
static void probe_done(probe_run_t *r)
{
  struct gmt_pick *pk = r->pk;
  if (r->done)
    return;
  r->done = true;
  run_close((uv_handle_t *)&r->timer);
  if (!pk)
    return;
  pk->run = NULL;
  uint64_t took = gmt_now_ms() - r->started_ms;
  if (r->timed_out)
    gmt_warn("probe: %s did not finish within %llu ms; killed: the GPUs it did not reach count "
             "as the slowest",
             pk->probe_path, (unsigned long long)pk->set.probe_timeout_ms);
  else if (r->exit_status != 0 || r->term_signal)
    gmt_warn("probe: %s %s %d after %llu ms (its stderr is in this log); GPUs it did not reach "
             "are scored without a probe delay",
             pk->probe_path, r->term_signal ? "was killed by signal" : "exited with",
             r->term_signal ? r->term_signal : (int)r->exit_status, (unsigned long long)took);
  if (r->overflow)
    gmt_warn("probe: more than %d bytes of output; the rest was ignored", PROBE_OUT_MAX);

  /* Sampled now, after the probe's own contexts are gone, so that its
   * memory is not counted and the numbers are as fresh as the delays. */
  gmt_pick_dev_t *devs;
  size_t n;
  int rc = sample(pk, &devs, &n);
  if (rc == 0) {
    probe_apply(r, devs, n, pk->s->devices, pk->set.probe_timeout_ms);
    char list[512] = "";
    size_t len = 0;
    for (size_t i = 0; i < n && len < sizeof list; i++)
      len += (size_t)snprintf(list + len, sizeof list - len, "%s GPU %d %.3f ms%s", i ? "," : "",
                              devs[i].index, devs[i].probe_ms,
                              devs[i].probe_failed ? " (failed)" : "");
    gmt_info("probe: %zu GPU%s in %llu ms:%s", n, n == 1 ? "" : "s", (unsigned long long)took,
             list);
    cache_set(pk, devs, n);
  }
  while (pk->waiters) {
    waiter_t *w = pk->waiters;
    pk->waiters = w->next;
    if (rc < 0)
      gmt_call_reply_error(w->call, rc, "gmt-schd out of memory sampling the GPUs");
    else
      answer(pk, w->call, w->pod, w->bytes, w->count, false);
    free(w);
  }
  pk->tail = &pk->waiters;
  pk->nwaiters = 0;
}

static void on_probe_exit(uv_process_t *p, int64_t status, int term_signal)
{
  probe_run_t *r = p->data;
  r->exited = true;
  r->exit_status = status;
  r->term_signal = term_signal;
  run_close((uv_handle_t *)&r->proc);
  if (r->eof)
    probe_done(r);
}

static void on_probe_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  probe_run_t *r = h->data;
  (void)suggested;
  /* Past the buffer, reads go to a scratch area and are dropped. */
  static char scratch[4096];
  if (r->len + 1 < sizeof r->buf)
    *buf = uv_buf_init(r->buf + r->len, (unsigned)(sizeof r->buf - 1 - r->len));
  else
    *buf = uv_buf_init(scratch, sizeof scratch);
}

static void on_probe_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
  probe_run_t *r = st->data;
  if (nread > 0) {
    if (buf->base == r->buf + r->len)
      r->len += (size_t)nread;
    else
      r->overflow = true;
    return;
  }
  if (nread == 0)
    return;
  /* UV_EOF, or an error: either way there is no more. */
  uv_read_stop(st);
  run_close((uv_handle_t *)&r->out);
  r->eof = true;
  if (r->exited)
    probe_done(r);
}

static void on_probe_timeout(uv_timer_t *t)
{
  probe_run_t *r = t->data;
  if (!r->grace) {
    r->grace = true;
    if (!r->exited) {
      r->timed_out = true;
      (void)uv_process_kill(&r->proc, SIGKILL);
    }
    /* Its output ends when it dies; should anything it started keep the
     * pipe open, the run ends anyway a little later. */
    uv_timer_start(t, on_probe_timeout, PROBE_GRACE_MS, 0);
    return;
  }
  if (!r->eof) {
    uv_read_stop((uv_stream_t *)&r->out);
    run_close((uv_handle_t *)&r->out);
    r->eof = true;
  }
  if (!r->exited) {
    r->exited = true;
    r->term_signal = SIGKILL;
    run_close((uv_handle_t *)&r->proc);
  }
  probe_done(r);
}

/* The environment of gmt-probe: ours without LD_PRELOAD (it must not run
 * under the hook, nor under anything preloaded into the daemon). */
static char **probe_env(void)
{
  size_t n = 0;
  while (environ && environ[n])
    n++;
  char **env = calloc(n + 1, sizeof *env);
  if (!env)
    return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
      env[k++] = environ[i];
  return env;
}

/* Starts gmt-probe on every GPU with a bus id. 0, or a negative code
 * (nothing started; why logged). */
static int probe_start(struct gmt_pick *pk)
{
  gmt_schd_t *s = pk->s;
  const gmt_devices_t *dv = s->devices;
  int ngpu = dv && dv->topo ? dv->topo->n_gpus : 0;
  char **argv = calloc((size_t)ngpu + 2, sizeof *argv);
  char **env = probe_env();
  probe_run_t *r = calloc(1, sizeof *r);
  int rc = -ENOMEM;
  if (!argv || !env || !r)
    goto fail;
  int argc = 0;
  argv[argc++] = pk->probe_path;
  for (int i = 0; i < ngpu; i++)
    if (dv->topo->gpus[i].bus_id[0])
      argv[argc++] = (char *)dv->topo->gpus[i].bus_id;
  if (argc == 1) {
    rc = -ENODEV;
    goto fail;
  }
  r->pk = pk;
  r->started_ms = gmt_now_ms();
  r->proc.data = r->out.data = r->timer.data = r;
  if ((rc = uv_pipe_init(s->loop, &r->out, 0)) < 0)
    goto fail;
  r->open_handles = 1;
  uv_stdio_container_t stdio[3] = {
      {.flags = UV_IGNORE},
      {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE, .data.stream = (uv_stream_t *)&r->out},
      {.flags = UV_INHERIT_FD, .data.fd = 2},
  };
  uv_process_options_t opt = {.exit_cb = on_probe_exit,
                              .file = pk->probe_path,
                              .args = argv,
                              .env = env,
                              .stdio_count = 3,
                              .stdio = stdio};
  if ((rc = uv_spawn(s->loop, &r->proc, &opt)) < 0) {
    gmt_warn("probe: cannot run %s: %s; GPUs are scored without a probe delay", pk->probe_path,
             uv_strerror(rc));
    /* A failed spawn leaves its handle to be closed too. */
    r->open_handles++;
    run_close((uv_handle_t *)&r->proc);
    run_close((uv_handle_t *)&r->out);
    r = NULL;
    goto fail;
  }
  r->open_handles++;
  uv_timer_init(s->loop, &r->timer);
  r->open_handles++;
  uv_timer_start(&r->timer, on_probe_timeout, pk->set.probe_timeout_ms, 0);
  if ((rc = uv_read_start((uv_stream_t *)&r->out, on_probe_alloc, on_probe_read)) < 0) {
    gmt_warn("probe: cannot read %s's output: %s", pk->probe_path, uv_strerror(rc));
    r->eof = true;
    run_close((uv_handle_t *)&r->out);
  }
  gmt_debug("probe: %s on %d GPU%s (pid %d)", pk->probe_path, argc - 1, argc == 2 ? "" : "s",
            r->proc.pid);
  pk->run = r;
  free(argv);
  free(env);
  return 0;

fail:
  if (r && r->open_handles == 0)
    free(r);
  else if (r)
    run_close((uv_handle_t *)&r->out);
  free(argv);
  free(env);
  return rc < 0 ? rc : -EINVAL;
}

/* ---- the RPC ---- */

/* PickRequest.allowed: every GPU pod may use, in the node's order, at once
 * (gmt run --pod confines a job to them with CUDA_VISIBLE_DEVICES). */
static void answer_allowed(gmt_schd_t *s, gmt_call_t *call, const gmt_pod_t *pod)
{
  const gmt_devices_t *dv = s->devices;
  int ngpu = dv && dv->topo ? dv->topo->n_gpus : 0;
  int32_t *idx = calloc(ngpu > 0 ? (size_t)ngpu : 1, sizeof *idx);
  char **uuids = calloc(ngpu > 0 ? (size_t)ngpu : 1, sizeof *uuids);
  if (!idx || !uuids) {
    gmt_call_reply_error(call, -ENOMEM, "gmt-schd out of memory answering Pick");
    goto out;
  }
  size_t n = 0;
  for (int i = 0; i < ngpu; i++) {
    const gmt_topo_gpu_t *g = &dv->topo->gpus[i];
    if (!gmt_pod_config_allows(&pod->cfg, g->index))
      continue;
    idx[n] = g->index;
    uuids[n++] = (char *)g->uuid;
  }
  Gmt__PickReply body = GMT__PICK_REPLY__INIT;
  body.n_devices = n;
  body.devices = idx;
  body.n_uuids = n;
  body.uuids = uuids;
  body.confined = pod->cfg.ndevices > 0;
  gmt_call_reply_body(call, GMT__ENVELOPE__BODY_PICK_REP, &body);
out:
  free(idx);
  free(uuids);
}

void gmt__rpc_pick(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req)
{
  struct gmt_pick *pk = s->pick;
  const Gmt__PickRequest *r = req->pick_req;
  const char *podname = r->pod ? r->pod : "";
  if (r->allowed) {
    const gmt_pod_t *pod = podname[0] ? gmt_pods_find(s->pods, podname) : NULL;
    if (!podname[0])
      gmt_call_reply_error(call, -EINVAL, "Pick for the GPUs a pod may use names no pod");
    else if (!pod)
      gmt__reply_nopod(call, s->cfg, podname);
    else
      answer_allowed(s, call, pod);
    return;
  }
  if (r->count > GMT_PICK_MAX_COUNT) {
    gmt_call_reply_error(call, -EINVAL, "Pick asks for %u GPUs; at most %d", r->count,
                         GMT_PICK_MAX_COUNT);
    return;
  }
  if (podname[0] && !gmt_pods_find(s->pods, podname)) {
    gmt__reply_nopod(call, s->cfg, podname);
    return;
  }
  if (!gmt_pick_cache_stale(&pk->cache, pk->set.cache_max_age_ms, pk->set.cache_max_requests,
                            gmt_now_ms()) &&
      !pk->run) {
    answer(pk, call, podname, r->bytes, r->count, true);
    return;
  }
  bool can_probe = pk->set.probe && s->devices && s->devices->topo && s->devices->topo->n_gpus > 0;
  if (!pk->run && can_probe)
    (void)probe_start(pk); /* a failure is logged; then no probe this time */
  if (!pk->run) {
    /* Without a probe (off, none to run, or it could not start): the
     * numbers now, and no delay term. */
    gmt_pick_dev_t *devs;
    size_t n;
    int rc = sample(pk, &devs, &n);
    if (rc < 0) {
      gmt_call_reply_error(call, rc, "gmt-schd out of memory sampling the GPUs");
      return;
    }
    for (size_t i = 0; i < n; i++) {
      devs[i].probe_ms = -1;
      devs[i].probe_failed = false;
    }
    cache_set(pk, devs, n);
    answer(pk, call, podname, r->bytes, r->count, false);
    return;
  }
  if (pk->nwaiters >= pk->set.max_queued_requests) {
    gmt_call_reply_error(call, -EBUSY,
                         "gmt-schd is busy: %u Pick%s already wait for the GPU probe "
                         "(server.max-queued-requests %u%s%s); try again",
                         pk->nwaiters, pk->nwaiters == 1 ? "" : "s", pk->set.max_queued_requests,
                         pk->set.path[0] ? " in " : "", pk->set.path);
    return;
  }
  waiter_t *w = calloc(1, sizeof *w);
  if (!w) {
    gmt_call_reply_error(call, -ENOMEM, "gmt-schd out of memory");
    return;
  }
  w->call = call;
  snprintf(w->pod, sizeof w->pod, "%s", podname);
  w->bytes = r->bytes;
  w->count = r->count;
  *pk->tail = w;
  pk->tail = &w->next;
  pk->nwaiters++;
}

/* ---- Status ---- */

void gmt__pick_status(gmt_schd_t *s, Gmt__StatusReply *st)
{
  struct gmt_pick *pk = s->pick;
  if (!pk)
    return;
  free(pk->st);
  free(pk->stp);
  free(pk->st_devs);
  pk->st = NULL;
  pk->stp = NULL;
  pk->st_devs = NULL;
  /* The cache while it is young enough; else NVML's numbers now, with
   * the last probe's delays (Status never starts a probe). */
  uint64_t now = gmt_now_ms(), age = 0;
  gmt_pick_dev_t *devs;
  size_t n;
  if (pk->cache.valid && now - pk->cache.taken_ms <= pk->set.cache_max_age_ms) {
    n = pk->ndevs;
    devs = malloc((n ? n : 1) * sizeof *devs);
    if (!devs)
      return;
    if (n)
      memcpy(devs, pk->devs, n * sizeof *devs);
    age = now - pk->cache.taken_ms;
  } else if (sample(pk, &devs, &n) < 0) {
    gmt_warn("Status: out of memory sampling the GPUs; shown without them");
    return;
  }
  gmt_pick_score(devs, n);
  pk->st = calloc(n ? n : 1, sizeof *pk->st);
  pk->stp = calloc(n ? n : 1, sizeof *pk->stp);
  if (!pk->st || !pk->stp) {
    free(devs);
    free(pk->st);
    free(pk->stp);
    pk->st = NULL;
    pk->stp = NULL;
    return;
  }
  for (size_t i = 0; i < n; i++) {
    fill_status(&pk->st[i], &devs[i], s->devices, age);
    pk->stp[i] = &pk->st[i];
  }
  pk->st_devs = devs; /* the holders' names point into it */
  st->n_devices = n;
  st->devices = pk->stp;
}

/* ---- start and stop ---- */

int gmt__pick_init(gmt_schd_t *s, const char *settings_path)
{
  struct gmt_pick *pk = calloc(1, sizeof *pk);
  if (!pk)
    return -ENOMEM;
  pk->s = s;
  pk->tail = &pk->waiters;
  char *errors = NULL;
  int rc = gmt_settings_load(settings_path, &pk->set, &errors);
  if (rc < 0) {
    for (char *line = errors, *nl; line && *line; line = nl + 1) {
      if (!(nl = strchr(line, '\n'))) {
        gmt_error("%s", line);
        break;
      }
      gmt_error("%.*s", (int)(nl - line), line);
    }
    free(errors);
    free(pk);
    return rc;
  }
  const char *env = getenv("GMT_PROBE");
  if (env && *env) {
    snprintf(pk->probe_path, sizeof pk->probe_path, "%s", env);
  } else {
    /* Beside gmt-schd, where both are installed (and built). */
    char self[PATH_MAX];
    size_t len = sizeof self;
    if (uv_exepath(self, &len) == 0) {
      char *slash = strrchr(self, '/');
      if (slash)
        slash[1] = '\0';
      snprintf(pk->probe_path, sizeof pk->probe_path, "%.*sgmt-probe", PATH_MAX - 16, self);
    } else {
      snprintf(pk->probe_path, sizeof pk->probe_path, "gmt-probe");
    }
  }
  s->pick = pk;
  gmt_info("best-GPU selection: settings from %s; cache at most %llu ms old and %llu Pick%s, "
           "probe %s (%s, timeout %llu ms), at most %u Picks waiting",
           pk->set.path[0] ? pk->set.path : "built-in defaults",
           (unsigned long long)pk->set.cache_max_age_ms,
           (unsigned long long)pk->set.cache_max_requests,
           pk->set.cache_max_requests == 1 ? "" : "s", pk->set.probe ? "on" : "off", pk->probe_path,
           (unsigned long long)pk->set.probe_timeout_ms, pk->set.max_queued_requests);
  return 0;
}

void gmt__pick_close(gmt_schd_t *s)
{
  struct gmt_pick *pk = s->pick;
  if (!pk)
    return;
  probe_run_t *r = pk->run;
  if (r) {
    r->pk = NULL;
    if (!r->exited)
      (void)uv_process_kill(&r->proc, SIGKILL);
    run_close((uv_handle_t *)&r->proc);
    run_close((uv_handle_t *)&r->out);
    run_close((uv_handle_t *)&r->timer);
  }
  /* The calls belonged to the server, which is gone: free, never answer. */
  while (pk->waiters) {
    waiter_t *w = pk->waiters;
    pk->waiters = w->next;
    free(w);
  }
  free(pk->devs);
  free(pk->st);
  free(pk->stp);
  free(pk->st_devs);
  free(pk);
  s->pick = NULL;
}
