/* StatusReply -> Prometheus text exposition format 0.0.4 (metrics.h).
 *
 * The families are one table, in the order they are written; each names
 * its scope (what it has one sample per: a pod, a pod on a GPU, a
 * process, a tier space, a GPU, the node) and how its value is read from
 * that scope's message. The format wants each family's samples together,
 * after its # HELP and # TYPE: so the writer walks the table once and,
 * for each family, every object of its scope. A family without samples
 * (no process yet) writes nothing at all. */
#include "metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_version.h"

#include "gmt_counters.h"
#include "gmt_peer.h"

/* ---- the output buffer ---- */

typedef struct {
  char *buf;
  size_t len, cap;
  bool oom; /* once set, nothing more is written */
} wbuf_t;

static void put(wbuf_t *w, const char *s, size_t n)
{
  if (w->oom)
    return;
  if (w->len + n + 1 > w->cap) {
    size_t cap = w->cap ? w->cap : 16384;
    while (w->len + n + 1 > cap)
      cap *= 2;
    char *b = realloc(w->buf, cap);
    if (!b) {
      w->oom = true;
      return;
    }
    w->buf = b;
    w->cap = cap;
  }
  memcpy(w->buf + w->len, s, n);
  w->len += n;
  w->buf[w->len] = '\0';
}

static void puts_(wbuf_t *w, const char *s)
{
  put(w, s, strlen(s));
}

/* A HELP text: backslash and newline escaped. */
static void put_help(wbuf_t *w, const char *s)
{
  for (; *s; s++) {
    if (*s == '\\')
      puts_(w, "\\\\");
    else if (*s == '\n')
      puts_(w, "\\n");
    else
      put(w, s, 1);
  }
}

/* The length of the valid UTF-8 sequence at s (1 to 4), or 0 when the
 * bytes there are not one (a stray continuation byte, an overlong form, a
 * surrogate, past U+10FFFF, cut short). s[0] >= 0x80. */
static size_t utf8_seq(const unsigned char *s)
{
  unsigned char c = s[0];
  size_t n;
  uint32_t cp;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80) /* also stops at the NUL */
      return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
      (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return n;
}

/* A label value: backslash, double quote and newline escaped, as the
 * format says; bytes that are not UTF-8 (an executable's path may hold
 * any) become U+FFFD, since Prometheus refuses a scrape that is not. */
static void put_label_value(wbuf_t *w, const char *v)
{
  const unsigned char *s = (const unsigned char *)v;
  while (*s) {
    if (*s == '\\') {
      puts_(w, "\\\\");
      s++;
    } else if (*s == '"') {
      puts_(w, "\\\"");
      s++;
    } else if (*s == '\n') {
      puts_(w, "\\n");
      s++;
    } else if (*s < 0x80) {
      put(w, (const char *)s, 1);
      s++;
    } else {
      size_t n = utf8_seq(s);
      if (n) {
        put(w, (const char *)s, n);
        s += n;
      } else {
        puts_(w, "\xef\xbf\xbd");
        s++;
      }
    }
  }
}

/* ---- values ---- */

typedef struct {
  bool is_int;
  uint64_t u;
  double d;
} val_t;

static val_t U(uint64_t u)
{
  return (val_t){.is_int = true, .u = u};
}

static val_t D(double d)
{
  return (val_t){.is_int = false, .d = d};
}

static val_t B(bool b)
{
  return U(b ? 1 : 0);
}

/* Integers exactly (bytes above 2^53 stay exact); doubles in the shortest
 * form that reads back to the same value, as `gmt status --json` writes
 * them, so that the two can be compared. */
static void put_value(wbuf_t *w, val_t v)
{
  char buf[64];
  if (v.is_int)
    snprintf(buf, sizeof buf, "%" PRIu64, v.u);
  else if (isnan(v.d))
    snprintf(buf, sizeof buf, "NaN");
  else if (isinf(v.d))
    snprintf(buf, sizeof buf, "%s", v.d > 0 ? "+Inf" : "-Inf");
  else {
    snprintf(buf, sizeof buf, "%.15g", v.d);
    if (strtod(buf, NULL) != v.d)
      snprintf(buf, sizeof buf, "%.17g", v.d);
  }
  puts_(w, buf);
}

/* ---- the families ---- */

/* What a family has one sample per, and so its labels. */
enum scope {
  POD,          /* pod */
  POD_TIER,     /* pod, tier (gpu, host, disk) */
  POD_REASON,   /* pod, reason (quota, gpu_space, devices, limit) */
  POD_DEVICE,   /* pod, device */
  PROCESS,      /* pod, pid */
  PROCESS_INFO, /* pod, pid, exe; value 1 */
  PROCESS_TIER, /* pod, pid, tier */
  NODE,         /* none: the host's numbers */
  TIER_SPACE,   /* tier, index */
  GPU_SPACE,    /* device: a tier space of the GPU tier */
  DEVICE,       /* device */
  DEVICE_INFO,  /* device, bus_id, uuid, name; value 1 */
  TRACE,        /* none: the tracer */
  UNMANAGED,    /* pid, exe: a GPU process outside gmt */
  BUILD,        /* version, commit; value 1 */
};

static const char *const tier_names[] = {"gpu", "host", "disk"};
/* Why gmt-schd refused a pod: PodStatus.refused_quota, refused_space,
 * refused_devices, refused_limit. */
static const char *const reason_names[] = {"quota", "gpu_space", "devices", "limit"};
#define NREASONS 4
#define NTIERS 3

/* Reads the value of obj (the scope's message: Gmt__PodStatus for POD,
 * POD_TIER; Gmt__PodDeviceStatus; Gmt__ProcessStatus for PROCESS and
 * PROCESS_TIER; Gmt__HostStatus for NODE; Gmt__TierSpace;
 * Gmt__DeviceStatus; gmt_metrics_input_t for TRACE) and, for a *_TIER
 * scope, of tier (an index of tier_names; for POD_REASON of reason_names).
 * False: not known, no sample. */
typedef bool (*get_fn)(const void *obj, int tier, val_t *v);

typedef struct {
  const char *name;
  const char *type; /* "gauge" or "counter" */
  enum scope scope;
  get_fn get; /* NULL for the *_INFO scopes */
  const char *help;
} family_t;

/* A getter that always knows its value: expr of o, obj as type. */
#define GETTER(fn, type, expr)                                                                     \
  static bool fn(const void *obj, int tier, val_t *v)                                              \
  {                                                                                                \
    const type *o = obj;                                                                           \
    (void)tier;                                                                                    \
    *v = (expr);                                                                                   \
    return true;                                                                                   \
  }

static uint64_t of_tier(int tier, uint64_t gpu, uint64_t host, uint64_t disk)
{
  return tier == 0 ? gpu : tier == 1 ? host : disk;
}

/* A pod's and the node's totals of their processes' counters, and a
 * process's own, as its last report said them (gmt.proto). */
#define TOT(o) gmt_counters_of((o)->totals)
#define PC(o) gmt_counters_of((o)->counters)

GETTER(pod_request, Gmt__PodStatus, D(o->config ? o->config->request : 0))
GETTER(pod_limit, Gmt__PodStatus, D(o->config ? o->config->limit : 0))
GETTER(pod_memory_limit, Gmt__PodStatus, U(o->config ? o->config->memory_limit : 0))
GETTER(pod_memory_used, Gmt__PodStatus, U(TOT(o)->memory_used))
GETTER(pod_memory_reserved, Gmt__PodStatus, U(TOT(o)->memory_reserved))
GETTER(pod_share, Gmt__PodStatus, D(o->gpu_time_share))
GETTER(pod_holds_token, Gmt__PodStatus, B(o->holds_token))
GETTER(pod_token_wait, Gmt__PodStatus, D((double)TOT(o)->token_wait_us / 1e6))
GETTER(pod_bell_wait, Gmt__PodStatus, D((double)TOT(o)->bell_wait_us / 1e6))
GETTER(pod_limit_wait, Gmt__PodStatus, D((double)o->limit_wait_us / 1e6))
GETTER(pod_refused, Gmt__PodStatus,
       U(tier == 0   ? o->refused_quota
         : tier == 1 ? o->refused_space
         : tier == 2 ? o->refused_devices
                     : o->refused_limit))
GETTER(pod_connected, Gmt__PodStatus, B(o->connected))
GETTER(pod_latency, Gmt__PodStatus,
       B(o->config && o->config->class_ == GMT__POD_CLASS__CLASS_LATENCY))
GETTER(pod_processes, Gmt__PodStatus, U(o->n_processes))
GETTER(pod_pinned, Gmt__PodStatus, U(TOT(o)->pinned_bytes))
GETTER(pod_pinned_advised, Gmt__PodStatus, U(TOT(o)->pinned_advised))
GETTER(pod_pinned_cached, Gmt__PodStatus, U(TOT(o)->pinned_cached))
GETTER(pod_tier, Gmt__PodStatus,
       U(of_tier(tier, TOT(o)->swap_gpu, TOT(o)->swap_host, TOT(o)->swap_disk)))
GETTER(pod_swap_kept, Gmt__PodStatus, U(TOT(o)->swap_kept))
GETTER(pod_context, Gmt__PodStatus, U(o->context_bytes))

GETTER(pdev_memory_used, Gmt__PodDeviceStatus, U(o->memory_used))
GETTER(pdev_holds_token, Gmt__PodDeviceStatus, B(o->holds_token))
GETTER(pdev_share, Gmt__PodDeviceStatus, D(o->gpu_time_share))

GETTER(proc_launches, Gmt__ProcessStatus, U(PC(o)->launches))
GETTER(proc_allocs, Gmt__ProcessStatus, U(PC(o)->allocs))
GETTER(proc_frees, Gmt__ProcessStatus, U(PC(o)->frees))
GETTER(proc_memory_used, Gmt__ProcessStatus, U(PC(o)->memory_used))
GETTER(proc_memory_reserved, Gmt__ProcessStatus, U(PC(o)->memory_reserved))
GETTER(proc_context, Gmt__ProcessStatus, U(o->context_bytes))
GETTER(proc_pinned, Gmt__ProcessStatus, U(PC(o)->pinned_bytes))
GETTER(proc_pinned_advised, Gmt__ProcessStatus, U(PC(o)->pinned_advised))
GETTER(proc_pinned_cached, Gmt__ProcessStatus, U(PC(o)->pinned_cached))
GETTER(proc_pinned_reused, Gmt__ProcessStatus, U(PC(o)->pinned_reused))
GETTER(proc_tier, Gmt__ProcessStatus,
       U(of_tier(tier, PC(o)->swap_gpu, PC(o)->swap_host, PC(o)->swap_disk)))
GETTER(proc_swap_kept, Gmt__ProcessStatus, U(PC(o)->swap_kept))
GETTER(proc_swap_outs, Gmt__ProcessStatus, U(PC(o)->swap_outs))
GETTER(proc_swap_ins, Gmt__ProcessStatus, U(PC(o)->swap_ins))
GETTER(proc_token_wait, Gmt__ProcessStatus, D((double)PC(o)->token_wait_us / 1e6))
GETTER(proc_bell_wait, Gmt__ProcessStatus, D((double)PC(o)->bell_wait_us / 1e6))
GETTER(proc_token_waiting, Gmt__ProcessStatus, D((double)PC(o)->token_waiting_us / 1e6))

GETTER(host_pinned, Gmt__HostStatus, U(TOT(o)->pinned_bytes))
GETTER(host_pinned_advised, Gmt__HostStatus, U(TOT(o)->pinned_advised))
GETTER(host_pinned_cached, Gmt__HostStatus, U(TOT(o)->pinned_cached))
GETTER(host_pinned_limit, Gmt__HostStatus, U(o->pinned_limit))
GETTER(unmanaged_memory, Gmt__UnmanagedProcess, U(o->memory_used))

/* A getter whose value is known only when known (of o) holds. */
#define GETTER_IF(fn, type, known, expr)                                                           \
  static bool fn(const void *obj, int tier, val_t *v)                                              \
  {                                                                                                \
    const type *o = obj;                                                                           \
    (void)tier;                                                                                    \
    if (!(known))                                                                                  \
      return false;                                                                                \
    *v = (expr);                                                                                   \
    return true;                                                                                   \
  }

/* The -c file's last read (ConfigStatus): no sample without one. */
GETTER_IF(host_config_ok, Gmt__HostStatus, o->config, B(o->config->last_reload_ok))
GETTER_IF(host_config_ok_time, Gmt__HostStatus, o->config, D(o->config->last_success_unix))

GETTER(space_capacity, Gmt__TierSpace, U(o->capacity))
GETTER(space_limit, Gmt__TierSpace, U(o->limit))
GETTER(space_reserved, Gmt__TierSpace, U(o->reserved))
GETTER(space_used, Gmt__TierSpace, U(o->used))
GETTER(space_pressure, Gmt__TierSpace, U(o->pressure))
GETTER(space_trigger, Gmt__TierSpace, D(o->trigger))
GETTER(space_stop, Gmt__TierSpace, D(o->stop))
GETTER(space_strict_quotas, Gmt__TierSpace, U(o->strict_quotas))
GETTER(space_overcommitted, Gmt__TierSpace, B(o->overcommitted))

GETTER(dev_memory_reserved, Gmt__DeviceStatus, U(o->memory_reserved))
GETTER(dev_tokens_waiting, Gmt__DeviceStatus, U(o->tokens_waiting))

GETTER(trace_enabled, gmt_metrics_input_t, B(o->tracing))

/* What NVML did not say is not written: 0 bytes free would read as a
 * full card. Status marks it so: memory_total 0, utilization and the
 * probe's delay below 0 (docs/protocol.md). */
static bool dev_memory_total(const void *obj, int tier, val_t *v)
{
  const Gmt__DeviceStatus *o = obj;
  (void)tier;
  *v = U(o->memory_total);
  return o->memory_total > 0;
}

static bool dev_memory_free(const void *obj, int tier, val_t *v)
{
  const Gmt__DeviceStatus *o = obj;
  (void)tier;
  *v = U(o->memory_free);
  return o->memory_total > 0;
}

static bool dev_utilization(const void *obj, int tier, val_t *v)
{
  const Gmt__DeviceStatus *o = obj;
  (void)tier;
  *v = D(o->utilization);
  return o->utilization >= 0;
}

static bool dev_probe_delay(const void *obj, int tier, val_t *v)
{
  const Gmt__DeviceStatus *o = obj;
  (void)tier;
  *v = D(o->probe_delay_ms / 1000.0);
  return o->probe_delay_ms >= 0;
}

static bool trace_dropped_events(const void *obj, int tier, val_t *v)
{
  const gmt_metrics_input_t *o = obj;
  (void)tier;
  *v = U(o->trace_dropped_events);
  return o->tracing;
}

static bool trace_dropped_histories(const void *obj, int tier, val_t *v)
{
  const gmt_metrics_input_t *o = obj;
  (void)tier;
  *v = U(o->trace_dropped_histories);
  return o->tracing;
}

#define G "gauge"
#define C "counter"

/* Every family, in the order written. docs/operators.md lists the same. */
static const family_t families[] = {
    {"gmt_pod_request", G, POD, pod_request,
     "The pod's guaranteed share of GPU time (REQUEST in resource-config.txt), 0..1."},
    {"gmt_pod_limit", G, POD, pod_limit,
     "The most GPU time the pod may take (LIMIT in resource-config.txt), 0..1."},
    {"gmt_pod_memory_limit_bytes", G, POD, pod_memory_limit,
     "The pod's device memory quota (GPU_MEM in resource-config.txt), over all its GPUs."},
    {"gmt_pod_memory_used_bytes", G, POD, pod_memory_used,
     "Device memory the pod's processes hold, as they report it."},
    {"gmt_pod_memory_reserved_bytes", G, POD, pod_memory_reserved,
     "Device memory the scheduler's ledger holds reserved for the pod."},
    {"gmt_pod_gpu_time_share", G, POD, pod_share,
     "The pod's GPU time over the sliding window, divided by the window."},
    {"gmt_pod_holds_token", G, POD, pod_holds_token,
     "1 while the pod holds a GPU time token (on any GPU)."},
    {"gmt_alloc_refused_total", C, POD_REASON, pod_refused,
     "Calls of the pod gmt-schd refused since it started, by why: an allocation past its "
     "GPU_MEM (quota) or the card's space (gpu_space, docs/tiers.md), memory or a token on a GPU "
     "its devices= does not name (devices), a token while its LIMIT is 0 (limit); `gmt status` "
     "says the last one."},
    {"gmt_pod_limit_wait_seconds_total", C, POD, pod_limit_wait,
     "Seconds the pod waited for a GPU time token while held back at its LIMIT (summed over "
     "GPUs): of its token waits, those its LIMIT caused rather than other pods."},
    {"gmt_pod_token_wait_seconds_total", C, POD, pod_token_wait,
     "Seconds the pod's processes' launches waited for a GPU time token, added over its "
     "processes (as their reports say)."},
    {"gmt_pod_bell_wait_seconds_total", C, POD, pod_bell_wait,
     "Seconds the pod's processes' launches waited while a latency pod had work on their GPU "
     "(the bell), added over its processes (as their reports say)."},
    {"gmt_pod_latency_class", G, POD, pod_latency,
     "1 for a class=latency pod (its work goes before the batch pods'), 0 for batch."},
    {"gmt_pod_connected", G, POD, pod_connected,
     "1 while the pod's pod manager is connected (heartbeats within --pod-timeout)."},
    {"gmt_pod_processes", G, POD, pod_processes,
     "The pod's processes, as its pod manager last reported them."},
    {"gmt_pod_pinned_bytes", G, POD, pod_pinned,
     "Page-locked host memory the pod's processes hold."},
    {"gmt_pod_pinned_advised_bytes", G, POD, pod_pinned_advised,
     "Of gmt_pod_pinned_bytes, what gmt pinned on advice (the node's pinned ledger)."},
    {"gmt_pod_pinned_cached_bytes", G, POD, pod_pinned_cached,
     "Of gmt_pod_pinned_bytes, freed blocks gmt's pinned pools keep for reuse."},
    {"gmt_pod_tier_bytes", G, POD_TIER, pod_tier,
     "mode=swap and mode=um: the bytes of the pod's allocations on the GPU, in host memory and "
     "in spill files (0 for a strict pod, whose bytes are all on the GPU)."},
    {"gmt_pod_swap_kept_bytes", G, POD, pod_swap_kept,
     "Host copies the pod's processes keep of allocations back on the GPU, for their next move "
     "out."},
    {"gmt_pod_context_bytes", G, POD, pod_context,
     "Device memory NVML counts for the pod's processes beyond their allocations (CUDA "
     "contexts); shown, not charged; 0 unknown."},
    {"gmt_pod_device_memory_used_bytes", G, POD_DEVICE, pdev_memory_used,
     "Device memory the ledger holds for the pod on this GPU."},
    {"gmt_pod_device_holds_token", G, POD_DEVICE, pdev_holds_token,
     "1 while the pod holds this GPU's time token."},
    {"gmt_pod_device_gpu_time_share", G, POD_DEVICE, pdev_share,
     "The pod's time on this GPU over the sliding window, divided by the window."},
    {"gmt_process_info", G, PROCESS_INFO, NULL,
     "A process of a pod, with its executable; always 1."},
    {"gmt_process_launches_total", C, PROCESS, proc_launches,
     "Kernel launches of the process since it started."},
    {"gmt_process_allocations_total", C, PROCESS, proc_allocs,
     "Device memory allocation calls of the process since it started."},
    {"gmt_process_frees_total", C, PROCESS, proc_frees,
     "Device memory free calls of the process since it started."},
    {"gmt_process_memory_used_bytes", G, PROCESS, proc_memory_used,
     "Device memory the process holds, as it reports it."},
    {"gmt_process_memory_reserved_bytes", G, PROCESS, proc_memory_reserved,
     "Device memory the ledger holds reserved for the process."},
    {"gmt_process_context_bytes", G, PROCESS, proc_context,
     "Device memory NVML counts for the process beyond its allocations (its CUDA context); "
     "shown, not charged; 0 unknown."},
    {"gmt_process_pinned_bytes", G, PROCESS, proc_pinned,
     "Page-locked host memory the process holds."},
    {"gmt_process_pinned_advised_bytes", G, PROCESS, proc_pinned_advised,
     "Of gmt_process_pinned_bytes, what gmt pinned on advice."},
    {"gmt_process_pinned_cached_bytes", G, PROCESS, proc_pinned_cached,
     "Of gmt_process_pinned_bytes, freed blocks gmt's pinned pool keeps for reuse."},
    {"gmt_process_pinned_reused_total", C, PROCESS, proc_pinned_reused,
     "Pinned allocations gmt's pinned pool served the process since it started."},
    {"gmt_process_tier_bytes", G, PROCESS_TIER, proc_tier,
     "mode=swap and mode=um: the bytes of the process's allocations on the GPU, in host memory "
     "and in spill files."},
    {"gmt_process_swap_kept_bytes", G, PROCESS, proc_swap_kept,
     "Host copies the process keeps of allocations back on the GPU, for their next move out."},
    {"gmt_process_swap_outs_total", C, PROCESS, proc_swap_outs,
     "Allocations of the process moved off the GPU since it started."},
    {"gmt_process_swap_ins_total", C, PROCESS, proc_swap_ins,
     "Allocations of the process brought back to the GPU since it started."},
    {"gmt_process_token_wait_seconds_total", C, PROCESS, proc_token_wait,
     "Seconds the process's launches waited for a GPU time token since it started (not "
     "counting the wait for its own queued work at a grant's end)."},
    {"gmt_process_token_waiting_seconds", G, PROCESS, proc_token_waiting,
     "How long the process's oldest launch waiting for a token now has waited (0: none)."},
    {"gmt_process_bell_wait_seconds_total", C, PROCESS, proc_bell_wait,
     "Seconds the process's launches waited while a latency pod had work on its GPU (the "
     "bell) since it started."},
    {"gmt_node_pinned_bytes", G, NODE, host_pinned,
     "Page-locked host memory the pods' processes hold, over the node."},
    {"gmt_node_pinned_advised_bytes", G, NODE, host_pinned_advised,
     "Of gmt_node_pinned_bytes, what gmt pinned on advice (the node's pinned ledger)."},
    {"gmt_node_pinned_cached_bytes", G, NODE, host_pinned_cached,
     "Of gmt_node_pinned_bytes, freed blocks gmt's pinned pools keep for reuse."},
    {"gmt_node_pinned_limit_bytes", G, NODE, host_pinned_limit,
     "The node's budget of page-locked host memory for pin advice (--pinned-limit)."},
    {"gmt_unmanaged_process_memory_bytes", G, UNMANAGED, unmanaged_memory,
     "A process on the node's GPUs that no pod manager registered (outside gmt: no quota, no "
     "share), with the device memory NVML counts for it."},
    {"gmt_config_last_reload_successful", G, NODE, host_config_ok,
     "1 when the last read of resource-config.txt (at start, SIGHUP or a change on disk) was "
     "good, 0 when it failed and the config before it is kept."},
    {"gmt_config_last_reload_success_timestamp_seconds", G, NODE, host_config_ok_time,
     "When resource-config.txt was last read with success (Unix time): the config in force "
     "since."},
    {"gmt_tier_capacity_bytes", G, TIER_SPACE, space_capacity,
     "A memory tier space's capacity (--gpu-capacity, --host-tier, --disk-tier)."},
    {"gmt_tier_limit_bytes", G, TIER_SPACE, space_limit,
     "What reservations may take of a tier space, at most its capacity."},
    {"gmt_tier_reserved_bytes", G, TIER_SPACE, space_reserved,
     "The sum of a tier space's reservations (a GPU space's: the device ledger's, with swap "
     "processes' resident bytes)."},
    {"gmt_tier_used_bytes", G, TIER_SPACE, space_used,
     "The sum of what is used inside a tier space's reservations."},
    {"gmt_tier_pressure_bytes", G, TIER_SPACE, space_pressure,
     "Bytes to move down a tier to bring the space to its stop fraction; 0 below its trigger."},
    {"gmt_tier_trigger", G, TIER_SPACE, space_trigger,
     "The fraction of its capacity at which a tier space starts moving memory down."},
    {"gmt_tier_stop", G, TIER_SPACE, space_stop,
     "The fraction of its capacity down to which a tier space moves memory."},
    {"gmt_gpu_space_strict_quotas_bytes", G, GPU_SPACE, space_strict_quotas,
     "The quotas (GPU_MEM) of the strict pods (not mode=swap or um) that may use the GPU, "
     "summed."},
    {"gmt_gpu_space_overcommitted", G, GPU_SPACE, space_overcommitted,
     "1 when the strict pods' quotas on the GPU pass its space's limit: strict mode refuses "
     "their allocations past it (docs/tiers.md)."},
    {"gmt_device_info", G, DEVICE_INFO, NULL,
     "One of the node's GPUs (NVML's index), with its PCI bus id, UUID and name; always 1."},
    {"gmt_device_memory_total_bytes", G, DEVICE, dev_memory_total,
     "The GPU's memory (NVML); absent when not known."},
    {"gmt_device_memory_free_bytes", G, DEVICE, dev_memory_free,
     "The GPU's free memory (NVML) when last sampled; absent when not known."},
    {"gmt_device_memory_reserved_bytes", G, DEVICE, dev_memory_reserved,
     "Device memory gmt's ledger holds reserved on the GPU."},
    {"gmt_device_utilization", G, DEVICE, dev_utilization,
     "The GPU's utilization (NVML) when last sampled, 0..1; absent when not known."},
    {"gmt_device_probe_delay_seconds", G, DEVICE, dev_probe_delay,
     "The delay of the last tiny probe on the GPU (best-GPU selection); absent when never "
     "probed."},
    {"gmt_device_tokens_waiting", G, DEVICE, dev_tokens_waiting,
     "Token requests queued for the GPU's time token."},
    {"gmt_build_info", G, BUILD, NULL,
     "The gmt-schd serving these metrics: its release and the git commit it was built from; "
     "always 1."},
    {"gmt_trace_enabled", G, TRACE, trace_enabled, "1 while the node's eBPF tracer runs."},
    {"gmt_trace_dropped_events_total", C, TRACE, trace_dropped_events,
     "Tracer events lost in the kernel (ring buffer full) since gmt-schd started."},
    {"gmt_trace_dropped_histories_total", C, TRACE, trace_dropped_histories,
     "Histories of ended allocations the tracer let go (its bound) since gmt-schd started."},
};

#undef G
#undef C

/* ---- writing ---- */

typedef struct {
  const char *name;
  const char *value;
} label_t;

typedef struct {
  wbuf_t *w;
  const family_t *f;
  bool started; /* its HELP and TYPE are written */
} writer_t;

static void sample(writer_t *wr, const label_t *labels, size_t n, val_t v)
{
  wbuf_t *w = wr->w;
  if (!wr->started) {
    puts_(w, "# HELP ");
    puts_(w, wr->f->name);
    puts_(w, " ");
    put_help(w, wr->f->help);
    puts_(w, "\n# TYPE ");
    puts_(w, wr->f->name);
    puts_(w, " ");
    puts_(w, wr->f->type);
    puts_(w, "\n");
    wr->started = true;
  }
  puts_(w, wr->f->name);
  for (size_t i = 0; i < n; i++) {
    puts_(w, i ? "," : "{");
    puts_(w, labels[i].name);
    puts_(w, "=\"");
    put_label_value(w, labels[i].value ? labels[i].value : "");
    puts_(w, "\"");
  }
  puts_(w, n ? "} " : " ");
  put_value(w, v);
  puts_(w, "\n");
}

/* One sample of obj, if the family knows its value there. */
static void maybe(writer_t *wr, const void *obj, int tier, const label_t *labels, size_t n)
{
  val_t v;
  if (wr->f->get(obj, tier, &v))
    sample(wr, labels, n, v);
}

static void write_pods(writer_t *wr, const Gmt__StatusReply *st)
{
  const family_t *f = wr->f;
  for (size_t i = 0; i < st->n_pods; i++) {
    const Gmt__PodStatus *ps = st->pods[i];
    const char *pod = ps->config && ps->config->name ? ps->config->name : "";
    if (f->scope == POD) {
      maybe(wr, ps, 0, (label_t[]){{"pod", pod}}, 1);
    } else if (f->scope == POD_TIER) {
      for (int t = 0; t < NTIERS; t++)
        maybe(wr, ps, t, (label_t[]){{"pod", pod}, {"tier", tier_names[t]}}, 2);
    } else if (f->scope == POD_REASON) {
      for (int r = 0; r < NREASONS; r++)
        maybe(wr, ps, r, (label_t[]){{"pod", pod}, {"reason", reason_names[r]}}, 2);
    } else if (f->scope == POD_DEVICE) {
      for (size_t j = 0; j < ps->n_devices; j++) {
        char dev[16];
        snprintf(dev, sizeof dev, "%d", (int)ps->devices[j]->device);
        maybe(wr, ps->devices[j], 0, (label_t[]){{"pod", pod}, {"device", dev}}, 2);
      }
    } else {
      for (size_t j = 0; j < ps->n_processes; j++) {
        const Gmt__ProcessStatus *pr = ps->processes[j];
        char pid[16];
        snprintf(pid, sizeof pid, "%u", (unsigned)pr->pid);
        if (f->scope == PROCESS_INFO)
          sample(wr, (label_t[]){{"pod", pod}, {"pid", pid}, {"exe", pr->exe}}, 3, U(1));
        else if (f->scope == PROCESS_TIER)
          for (int t = 0; t < NTIERS; t++)
            maybe(wr, pr, t, (label_t[]){{"pod", pod}, {"pid", pid}, {"tier", tier_names[t]}}, 3);
        else
          maybe(wr, pr, 0, (label_t[]){{"pod", pod}, {"pid", pid}}, 2);
      }
    }
  }
}

static void write_family(writer_t *wr, const gmt_metrics_input_t *in, const Gmt__StatusReply *st)
{
  const Gmt__HostStatus *host = st->host;
  switch (wr->f->scope) {
  case POD:
  case POD_TIER:
  case POD_REASON:
  case POD_DEVICE:
  case PROCESS:
  case PROCESS_INFO:
  case PROCESS_TIER: write_pods(wr, st); break;
  case NODE:
    if (host)
      maybe(wr, host, 0, NULL, 0);
    break;
  case TIER_SPACE:
    for (size_t i = 0; host && i < host->n_tiers; i++) {
      const Gmt__TierSpace *t = host->tiers[i];
      char idx[16];
      snprintf(idx, sizeof idx, "%d", (int)t->index);
      maybe(wr, t, 0, (label_t[]){{"tier", t->tier}, {"index", idx}}, 2);
    }
    break;
  case GPU_SPACE:
    for (size_t i = 0; host && i < host->n_tiers; i++) {
      const Gmt__TierSpace *t = host->tiers[i];
      char dev[16];
      snprintf(dev, sizeof dev, "%d", (int)t->index);
      if (t->tier && !strcmp(t->tier, "gpu"))
        maybe(wr, t, 0, (label_t[]){{"device", dev}}, 1);
    }
    break;
  case DEVICE:
  case DEVICE_INFO:
    for (size_t i = 0; i < st->n_devices; i++) {
      const Gmt__DeviceStatus *d = st->devices[i];
      char dev[16];
      snprintf(dev, sizeof dev, "%d", (int)d->index);
      if (wr->f->scope == DEVICE_INFO)
        sample(wr,
               (label_t[]){
                   {"device", dev}, {"bus_id", d->bus_id}, {"uuid", d->uuid}, {"name", d->name}},
               4, U(1));
      else
        maybe(wr, d, 0, (label_t[]){{"device", dev}}, 1);
    }
    break;
  case TRACE: maybe(wr, in, 0, NULL, 0); break;
  case BUILD:
    sample(wr, (label_t[]){{"version", GMT_VERSION}, {"commit", GMT_COMMIT}}, 2, U(1));
    break;
  case UNMANAGED:
    for (size_t i = 0; i < st->n_unmanaged; i++) {
      const Gmt__UnmanagedProcess *u = st->unmanaged[i];
      char pid[16];
      snprintf(pid, sizeof pid, "%u", (unsigned)u->pid);
      maybe(wr, u, 0, (label_t[]){{"pid", pid}, {"exe", u->exe ? u->exe : ""}}, 2);
    }
    break;
  }
}

int gmt_metrics_render(const gmt_metrics_input_t *in, char **out, size_t *len)
{
  Gmt__StatusReply empty = GMT__STATUS_REPLY__INIT;
  const Gmt__StatusReply *st = in->status ? in->status : &empty;
  wbuf_t w = {0};
  put(&w, "", 0); /* an empty scrape is "" too, not NULL */
  for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
    writer_t wr = {.w = &w, .f = &families[i], .started = false};
    write_family(&wr, in, st);
  }
  if (w.oom) {
    free(w.buf);
    *out = NULL;
    *len = 0;
    return -ENOMEM;
  }
  *out = w.buf;
  *len = w.len;
  return 0;
}

/* ---- --metrics ADDR ---- */

int gmt_metrics_addr_parse(const char *addr, char *url, size_t len, bool *loopback)
{
  if (!addr || strlen(addr) > GMT_METRICS_ADDR_MAX)
    return -EINVAL;
  const char *colon = strrchr(addr, ':');
  if (!colon || colon == addr)
    return -EINVAL;
  /* HOST: a name, a dotted quad or [v6]; a bare v6 address is ambiguous. */
  size_t hlen = (size_t)(colon - addr);
  bool v6 = addr[0] == '[';
  if (v6 ? hlen < 3 || addr[hlen - 1] != ']' : memchr(addr, ':', hlen) != NULL)
    return -EINVAL;
  for (size_t i = v6; i < hlen - v6; i++) {
    unsigned char c = (unsigned char)addr[i];
    if (c <= ' ' || c >= 0x7f || strchr("/@?#%[]", c))
      return -EINVAL;
  }
  char *end;
  errno = 0;
  unsigned long port = strtoul(colon + 1, &end, 10);
  if (colon[1] < '0' || colon[1] > '9' || *end || errno || port == 0 || port > 65535)
    return -EINVAL;
  if ((size_t)snprintf(url, len, "http://%s", addr) >= len)
    return -EINVAL;
  char tcp[GMT_METRICS_ADDR_MAX + 8];
  snprintf(tcp, sizeof tcp, "tcp://%s", addr);
  *loopback = gmt_url_is_local(tcp);
  return 0;
}
