/* StatusReply -> JSON with json-c. Integers stay JSON integers (memory as
 * int64, clamped: no device has 8 EiB), shares and the tiers' thresholds
 * are doubles written in the shortest form that reads back to the same
 * value. */
#include "status_json.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_counters.h"
#include "gmt_wire.h"
#include "status_devices.h"

static json_object *new_u64(uint64_t v)
{
  return json_object_new_int64(v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v);
}

/* json-c writes 0.3 as 0.29999999999999999 (%.17g); an operator reading a
 * share should see what the config said. */
/* A share or fraction: 0 where it is not a number. */
static json_object *new_share(double v)
{
  return gmt_json_double(isfinite(v) ? v : 0);
}

/* A NULL value is an allocation that failed; it is reported here so that
 * the callers can OR the results of a run of adds together. */
static int add(json_object *obj, const char *key, json_object *val)
{
  if (!val)
    return -ENOMEM;
  if (json_object_object_add(obj, key, val) != 0) {
    json_object_put(val);
    return -ENOMEM;
  }
  return 0;
}

static int push(json_object *arr, json_object *val)
{
  if (!val)
    return -ENOMEM;
  if (json_object_array_add(arr, val) != 0) {
    json_object_put(val);
    return -ENOMEM;
  }
  return 0;
}

/* The end of each builder below: o, or NULL (and o freed) when one of its
 * adds failed. */
static json_object *built(json_object *o, int rc)
{
  if (rc) {
    json_object_put(o);
    return NULL;
  }
  return o;
}

static const char *str(const char *s)
{
  return s ? s : "";
}

/* mode=swap: where an owner's allocations' bytes are, per tier. */
static json_object *tiers_json(uint64_t gpu, uint64_t host, uint64_t disk)
{
  json_object *o = json_object_new_object();
  if (!o)
    return NULL;
  int rc = add(o, "gpu", new_u64(gpu));
  rc |= add(o, "host", new_u64(host));
  rc |= add(o, "disk", new_u64(disk));
  return built(o, rc);
}

static json_object *process_json(const Gmt__ProcessStatus *p)
{
  const Gmt__ProcessCounters *c = gmt_counters_of(p->counters);
  json_object *o = json_object_new_object();
  if (!o)
    return NULL;
  int rc = 0;
  rc |= add(o, "pid", json_object_new_int64(p->pid));
  if (p->node_pid)
    rc |= add(o, "node_pid", json_object_new_int64(p->node_pid));
  else /* not found on the node */
    rc |= json_object_object_add(o, "node_pid", NULL) != 0 ? -ENOMEM : 0;
  rc |= add(o, "exe", json_object_new_string(str(p->exe)));
  rc |= add(o, "memory_used", new_u64(c->memory_used));
  rc |= add(o, "launches", new_u64(c->launches));
  rc |= add(o, "allocs", new_u64(c->allocs));
  rc |= add(o, "frees", new_u64(c->frees));
  rc |= add(o, "memory_reserved", new_u64(c->memory_reserved));
  rc |= add(o, "pinned_bytes", new_u64(c->pinned_bytes));
  rc |= add(o, "pinned_advised", new_u64(c->pinned_advised));
  rc |= add(o, "pinned_cached", new_u64(c->pinned_cached));
  rc |= add(o, "pinned_reused", new_u64(c->pinned_reused));
  rc |= add(o, "tiers", tiers_json(c->swap_gpu, c->swap_host, c->swap_disk));
  rc |= add(o, "swap_kept", new_u64(c->swap_kept));
  rc |= add(o, "swap_outs", new_u64(c->swap_outs));
  rc |= add(o, "swap_ins", new_u64(c->swap_ins));
  rc |= add(o, "swap_out_bytes", new_u64(c->swap_out_bytes));
  rc |= add(o, "swap_in_bytes", new_u64(c->swap_in_bytes));
  rc |= add(o, "swap_move_us", new_u64(c->swap_move_us));
  rc |= add(o, "swap_out_us", new_u64(c->swap_out_us));
  rc |= add(o, "swap_wait_us", new_u64(c->swap_wait_us));
  rc |= add(o, "token_wait_us", new_u64(c->token_wait_us));
  rc |= add(o, "token_waiting_us", new_u64(c->token_waiting_us));
  rc |= add(o, "bell_wait_us", new_u64(c->bell_wait_us));
  rc |= add(o, "context_bytes", new_u64(p->context_bytes));
  return built(o, rc);
}

/* A GPU space's strict quotas against it (docs/tiers.md, "Quotas past a
 * card"): the sum, whether it passes the limit, and then which pods. */
static int add_strict_quotas(json_object *o, const Gmt__TierSpace *t)
{
  json_object *pods = json_object_new_array();
  int rc = pods ? 0 : -ENOMEM;
  for (size_t i = 0; i < t->n_strict_pods && !rc; i++)
    rc |= push(pods, json_object_new_string(str(t->strict_pods[i])));
  rc |= add(o, "strict_quotas", new_u64(t->strict_quotas));
  rc |= add(o, "overcommitted", json_object_new_boolean(t->overcommitted));
  rc |= add(o, "strict_pods", pods);
  /* Swap turns' switches on the card (docs/tiers.md, "The turn's length"). */
  rc |= add(o, "move_rate", json_object_new_double(t->move_rate));
  rc |= add(o, "switches", new_u64(t->switches));
  rc |= add(o, "last_switch_ms", json_object_new_double(t->last_switch_ms));
  rc |= add(o, "last_switch_bytes", new_u64(t->last_switch_bytes));
  return rc;
}

/* One memory space of the tiers; "path" only for a disk space, the strict
 * quotas only for a GPU's. */
static json_object *tier_json(const Gmt__TierSpace *t)
{
  json_object *o = json_object_new_object();
  if (!o)
    return NULL;
  int rc = add(o, "tier", json_object_new_string(str(t->tier)));
  rc |= add(o, "index", json_object_new_int64(t->index));
  if (t->path && t->path[0])
    rc |= add(o, "path", json_object_new_string(t->path));
  rc |= add(o, "capacity", new_u64(t->capacity));
  rc |= add(o, "limit", new_u64(t->limit));
  rc |= add(o, "reserved", new_u64(t->reserved));
  rc |= add(o, "used", new_u64(t->used));
  rc |= add(o, "trigger", new_share(t->trigger));
  rc |= add(o, "stop", new_share(t->stop));
  rc |= add(o, "pressure", new_u64(t->pressure));
  if (t->tier && !strcmp(t->tier, "gpu"))
    rc |= add_strict_quotas(o, t);
  return built(o, rc);
}

static json_object *config_json(const Gmt__ConfigStatus *c)
{
  json_object *o = json_object_new_object();
  if (!o)
    return NULL;
  int rc = add(o, "path", json_object_new_string(str(c->path)));
  rc |= add(o, "pods", new_u64(c->pods));
  rc |= add(o, "last_reload_ok", json_object_new_boolean(c->last_reload_ok));
  rc |= add(o, "last_reload_unix", gmt_json_double(c->last_reload_unix));
  rc |= add(o, "last_success_unix", gmt_json_double(c->last_success_unix));
  rc |= add(o, "last_error", json_object_new_string(str(c->last_error)));
  return built(o, rc);
}

static json_object *host_json(const Gmt__HostStatus *h)
{
  json_object *o = json_object_new_object();
  json_object *tiers = json_object_new_array();
  if (!o || !tiers) {
    json_object_put(o);
    json_object_put(tiers);
    return NULL;
  }
  const Gmt__ProcessCounters *t = gmt_counters_of(h->totals);
  int rc = add(o, "pinned_bytes", new_u64(t->pinned_bytes));
  rc |= add(o, "pinned_advised", new_u64(t->pinned_advised));
  rc |= add(o, "pinned_cached", new_u64(t->pinned_cached));
  rc |= add(o, "pinned_limit", new_u64(h->pinned_limit));
  /* Always a list: empty from a scheduler older than the tiers. */
  for (size_t i = 0; i < h->n_tiers && !rc; i++)
    rc |= push(tiers, tier_json(h->tiers[i]));
  rc |= add(o, "tiers", tiers);
  if (h->config) /* an older scheduler sends none */
    rc |= add(o, "config", config_json(h->config));
  return built(o, rc);
}

/* The pod on each GPU it uses (docs/devices.md, "Per-device view"). */
static json_object *pod_device_json(const Gmt__PodDeviceStatus *d)
{
  json_object *o = json_object_new_object();
  if (!o)
    return NULL;
  int rc = add(o, "device", json_object_new_int64(d->device));
  rc |= add(o, "memory_used", new_u64(d->memory_used));
  rc |= add(o, "holds_token", json_object_new_boolean(d->holds_token));
  rc |= add(o, "gpu_time_share", new_share(d->gpu_time_share));
  /* A swap pod's turns (docs/tiers.md, "The turn's length"). */
  rc |= add(o, "swap_turns", new_u64(d->swap_turns));
  rc |= add(o, "turn_moves_bytes", new_u64(d->turn_moves_bytes));
  rc |= add(o, "turn_cost_ms", json_object_new_double(d->turn_cost_ms));
  rc |= add(o, "turn_ms", json_object_new_double(d->turn_ms));
  rc |= add(o, "out_rate", json_object_new_double(d->out_rate));
  return built(o, rc);
}

/* Always lists: empty from a scheduler older than devices=, or for a pod
 * on no GPU yet (devices) and one allowed every GPU (allowed_devices). */
static int add_pod_devices(json_object *o, const Gmt__PodStatus *pod, const Gmt__PodConfig *cfg)
{
  json_object *devs = json_object_new_array(), *allowed = json_object_new_array();
  int rc = devs && allowed ? 0 : -ENOMEM;
  for (size_t i = 0; i < cfg->n_devices && !rc; i++)
    rc |= push(allowed, json_object_new_int64(cfg->devices[i]));
  for (size_t i = 0; i < pod->n_devices && !rc; i++)
    rc |= push(devs, pod_device_json(pod->devices[i]));
  rc |= add(o, "allowed_devices", allowed);
  rc |= add(o, "devices", devs);
  return rc;
}

static json_object *pod_json(const Gmt__PodStatus *pod)
{
  static Gmt__PodConfig none = GMT__POD_CONFIG__INIT;
  const Gmt__PodConfig *cfg = pod->config ? pod->config : &none;
  const Gmt__ProcessCounters *t = gmt_counters_of(pod->totals);
  json_object *o = json_object_new_object();
  json_object *procs = json_object_new_array();
  if (!o || !procs) {
    json_object_put(o);
    json_object_put(procs);
    return NULL;
  }
  int rc = 0;
  rc |= add(o, "name", json_object_new_string(str(cfg->name)));
  rc |= add(o, "request", new_share(cfg->request));
  rc |= add(o, "limit", new_share(cfg->limit));
  rc |= add(o, "memory_used", new_u64(t->memory_used));
  rc |= add(o, "memory_limit", new_u64(cfg->memory_limit));
  rc |= add(o, "pin", json_object_new_string(gmt_pin_mode_name(cfg->pin)));
  rc |= add(o, "mode", json_object_new_string(gmt_mem_mode_name(cfg->mode)));
  rc |= add(o, "class", json_object_new_string(gmt_pod_class_name(cfg->class_)));
  rc |= add(o, "idle_out_ms", json_object_new_int64(cfg->idle_out_ms));
  rc |= add(o, "connected", json_object_new_boolean(pod->connected));
  rc |= add(o, "memory_reserved", new_u64(t->memory_reserved));
  rc |= add(o, "gpu_time_share", new_share(pod->gpu_time_share));
  rc |= add(o, "holds_token", json_object_new_boolean(pod->holds_token));
  rc |= add(o, "pinned_bytes", new_u64(t->pinned_bytes));
  rc |= add(o, "pinned_advised", new_u64(t->pinned_advised));
  rc |= add(o, "pinned_cached", new_u64(t->pinned_cached));
  rc |= add(o, "tiers", tiers_json(t->swap_gpu, t->swap_host, t->swap_disk));
  rc |= add(o, "swap_kept", new_u64(t->swap_kept));
  rc |= add(o, "swap_out_bytes", new_u64(t->swap_out_bytes));
  rc |= add(o, "swap_in_bytes", new_u64(t->swap_in_bytes));
  rc |= add(o, "swap_move_us", new_u64(t->swap_move_us));
  rc |= add(o, "swap_out_us", new_u64(t->swap_out_us));
  rc |= add(o, "swap_wait_us", new_u64(t->swap_wait_us));
  rc |= add(o, "token_wait_us", new_u64(t->token_wait_us));
  rc |= add(o, "token_waiting_us", new_u64(t->token_waiting_us));
  rc |= add(o, "bell_wait_us", new_u64(t->bell_wait_us));
  rc |= add(o, "limit_wait_us", new_u64(pod->limit_wait_us));
  rc |= add(o, "refused_quota", new_u64(pod->refused_quota));
  rc |= add(o, "refused_space", new_u64(pod->refused_space));
  rc |= add(o, "refused_devices", new_u64(pod->refused_devices));
  rc |= add(o, "refused_limit", new_u64(pod->refused_limit));
  rc |= add(o, "last_refusal", json_object_new_string(str(pod->last_refusal)));
  rc |= add(o, "last_refusal_unix", gmt_json_double(pod->last_refusal_unix));
  rc |= add(o, "context_bytes", new_u64(pod->context_bytes));
  rc |= add_pod_devices(o, pod, cfg);
  for (size_t i = 0; i < pod->n_processes && !rc; i++)
    rc |= push(procs, process_json(pod->processes[i]));
  rc |= add(o, "processes", procs);
  return built(o, rc);
}

/* GPU processes outside gmt (always a list: empty from an older scheduler). */
static json_object *unmanaged_json(const Gmt__StatusReply *st)
{
  json_object *list = json_object_new_array();
  int rc = list ? 0 : -ENOMEM;
  for (size_t i = 0; i < st->n_unmanaged && !rc; i++) {
    const Gmt__UnmanagedProcess *u = st->unmanaged[i];
    json_object *o = json_object_new_object();
    int orc = o ? 0 : -ENOMEM;
    if (o) {
      orc |= add(o, "pid", json_object_new_int64(u->pid));
      orc |= add(o, "memory_used", new_u64(u->memory_used));
      orc |= add(o, "exe", json_object_new_string(str(u->exe)));
    }
    rc |= push(list, built(o, orc));
  }
  return built(list, rc);
}

int gmt_status_json(const Gmt__StatusReply *st, char **out)
{
  *out = NULL;
  json_object *root = json_object_new_object();
  json_object *pods = json_object_new_array();
  if (!root || !pods) {
    json_object_put(root);
    json_object_put(pods);
    return -ENOMEM;
  }
  int rc = 0;
  for (size_t i = 0; i < st->n_pods && !rc; i++)
    rc |= push(pods, pod_json(st->pods[i]));
  rc |= add(root, "pods", pods);
  if (st->host) /* an older scheduler sends none */
    rc |= add(root, "host", host_json(st->host));
  rc |= add(root, "devices", gmt_status_devices_json(st)); /* the node's GPUs */
  rc |= add(root, "unmanaged", unmanaged_json(st));
  if (!rc) {
    const char *s = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE);
    *out = s ? strdup(s) : NULL;
    if (!*out)
      rc = -ENOMEM;
  }
  json_object_put(root);
  return rc ? -ENOMEM : 0;
}
