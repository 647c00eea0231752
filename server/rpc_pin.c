/* Pin advice on the wire: Advise (docs/pinning.md, "the scheduler's side").
 * A process asks whether a host buffer may be pinned; a yes charges its
 * bytes to the process in the pinned ledger (s->pinned_ledger, kept in
 * step with the pods by rpc_memory.c) until it gives them back, so that
 * the node's pinned host memory stays within --pinned-limit however many
 * processes ask at once, and each pod's within its share of it. The same
 * call gives back and brings the buffer histories of pin=profile runs,
 * which go to the store (pin_profile.c). The decisions themselves are
 * pin_policy.c's; this file gathers their inputs, applies the answer and
 * logs it. */
#include <inttypes.h>
#include <stdlib.h>

#include "gmt_error.h"
#include "gmt_log.h"
#include "ledger.h"
#include "pin_policy.h"
#include "pin_profile.h"
#include "reply.h"
#include "schd.h"

#define MIB (1024.0 * 1024.0)

int gmt__pin_init(gmt_schd_t *s)
{
  return gmt_pin_profiles_new(&s->pin_profiles, s->store);
}

void gmt__pin_close(gmt_schd_t *s)
{
  gmt_pin_profiles_free(s->pin_profiles);
  s->pin_profiles = NULL;
}

/* Pods the config lists but that do not run (no pod manager) hold no
 * part: the budget is not kept for them. */
void gmt__pin_shares(gmt_schd_t *s, const gmt_pod_t *pod, uint64_t *share, uint64_t *own)
{
  size_t running = 0, pinning = 0;
  for (size_t i = 0; i < s->pods->npods; i++) {
    const gmt_pod_t *p = &s->pods->pods[i];
    if (!p->connected && p != pod)
      continue;
    running++;
    pinning += p->cfg.pin != GMT__PIN_MODE__PIN_OFF;
  }
  *share = pod->cfg.pin != GMT__PIN_MODE__PIN_OFF ? gmt_pin_share(s->pinned_limit, pinning) : 0;
  *own = gmt_pin_share(s->pinned_limit, running);
}

/* What a pod's processes pinned themselves. Each reports all the host
 * memory it holds page-locked (pinned_bytes), of which pinned_advised was
 * pinned on advice and is in the ledger already: counted there, not
 * twice. Both as gmt-schd counts them (rpc_memory.c holds reports to
 * what the ledgers granted: reports.h). */
static uint64_t own_pins(const gmt_pod_t *pod)
{
  uint64_t sum = 0;
  for (size_t j = 0; j < pod->nprocs; j++) {
    const gmt_proc_t *pr = &pod->procs[j];
    if (pr->c.pinned_bytes > pr->c.pinned_advised)
      sum = gmt_bytes_add(sum, pr->c.pinned_bytes - pr->c.pinned_advised);
  }
  return sum;
}

/* The node's pinned host memory as gmt-schd counts it. */
static uint64_t pinned_used(gmt_schd_t *s)
{
  uint64_t sum = gmt_ledger_node_total(s->pinned_ledger);
  for (size_t i = 0; i < s->pods->npods; i++)
    sum = gmt_bytes_add(sum, own_pins(&s->pods->pods[i]));
  return sum;
}

static int cmp_pid(const void *key, const void *elem)
{
  uint32_t a = *(const uint32_t *)key, b = ((const gmt_proc_t *)elem)->pid;
  return (a > b) - (a < b);
}

/* The executable a process's profile is kept under: the one its pod
 * manager reports for it, else what the request says. */
static const char *exe_of(const gmt_pod_t *pod, const Gmt__AdviseRequest *r)
{
  const gmt_proc_t *pr =
      pod->nprocs ? bsearch(&r->pid, pod->procs, pod->nprocs, sizeof *pod->procs, cmp_pid) : NULL;
  if (pr && pr->exe && pr->exe[0])
    return pr->exe;
  return r->exe;
}

static void record_histories(gmt_schd_t *s, const gmt_pod_t *pod, const char *exe,
                             const Gmt__AdviseRequest *r)
{
  size_t n = r->n_history;
  if (n > GMT_ADVISE_MAX_HISTORY) {
    gmt_debug("pod '%s' pid %u: %zu buffer histories in one Advise, at most %d are recorded",
              pod->cfg.name, r->pid, n, GMT_ADVISE_MAX_HISTORY);
    n = GMT_ADVISE_MAX_HISTORY;
  }
  if (!exe || !exe[0]) {
    gmt_debug("pod '%s' pid %u: %zu buffer histories without an executable to keep them under; "
              "skipped",
              pod->cfg.name, r->pid, n);
    return;
  }
  gmt_store_profile_row_t *rows = calloc(n, sizeof *rows);
  if (!rows) {
    gmt_warn("pod '%s' pid %u: out of memory recording %zu buffer histories", pod->cfg.name, r->pid,
             n);
    return;
  }
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const Gmt__BufferHistory *h = r->history[i];
    if (!h || !h->site)
      continue; /* no site: nothing to key it by */
    rows[k++] = (gmt_store_profile_row_t){
        .module = h->site->module ? h->site->module : "",
        .offset = h->site->offset,
        .nth = h->site->nth,
        .size_class = h->site->size_class,
        .size = h->size,
        .h2d_copies = h->h2d_copies,
        .d2h_copies = h->d2h_copies,
        .h2d_bytes = h->h2d_bytes,
        .d2h_bytes = h->d2h_bytes,
        .lifetime_ms = h->lifetime_ms,
    };
  }
  size_t added = 0;
  int rc = gmt_pin_profiles_add(s->pin_profiles, exe, rows, k, gmt_store_now_ms(), &added);
  free(rows);
  if (rc < 0)
    gmt_warn("pod '%s' pid %u: pin profile of %s: %s", pod->cfg.name, r->pid, exe,
             gmt_strerror(rc));
  else
    gmt_debug("pod '%s' pid %u: %zu of %zu buffer histories recorded for %s", pod->cfg.name, r->pid,
              added, r->n_history, exe);
}

static const char *reason_name(int reason)
{
  const ProtobufCEnumValue *v =
      protobuf_c_enum_descriptor_get_value(&gmt__pin_reason__descriptor, reason);
  return v ? v->name : "?";
}

void gmt__rpc_advise(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req)
{
  const Gmt__AdviseRequest *r = req->advise_req;
  const gmt_pod_t *pod = gmt_pods_find(s->pods, r->pod);
  if (!pod) {
    gmt__reply_nopod(call, s->cfg, r->pod);
    return;
  }
  const char *name = pod->cfg.name;
  if (r->pid == 0) {
    gmt_call_reply_error(call, -EINVAL, "an Advise names its process (pid 0 is the pod's)");
    return;
  }
  /* What it gave back first: room it frees is room this call may take. */
  if (r->release) {
    uint64_t took = gmt_ledger_release(s->pinned_ledger, name, r->pid, 0, r->release);
    gmt_debug("pod '%s' pid %u: gave back %" PRIu64 " pinned bytes%s", name, r->pid, took,
              took < r->release ? " (fewer than it named: it held no more)" : "");
  }
  const char *exe = exe_of(pod, r);
  if (r->n_history)
    record_histories(s, pod, exe, r);

  gmt_pin_site_t site = GMT_PIN_SITE_UNKNOWN;
  if (pod->cfg.pin == GMT__PIN_MODE__PIN_USE && r->bytes && r->site)
    site = gmt_pin_profiles_site(s->pin_profiles, exe, r->site->module, r->site->offset,
                                 r->site->nth, r->site->size_class);
  /* The node's budget, and the pod's share of it: no pod takes the
   * others' shares, in one request or in many. */
  uint64_t used = pinned_used(s), limit = s->pinned_limit, share, own_part;
  gmt__pin_shares(s, pod, &share, &own_part);
  uint64_t pod_used = gmt_bytes_add(gmt_ledger_pod_total(s->pinned_ledger, name), own_pins(pod));
  uint64_t room = gmt_pin_room(limit, used, share, pod_used);
  gmt_pin_advice_t a = gmt_pin_decide(pod->cfg.pin, r->bytes, r->pays_back, room, site);
  if (a.pin) {
    /* Checked above against the node and the pod: the ledger's own limit
     * would only repeat the pod's share. */
    int rc = gmt_ledger_reserve(s->pinned_ledger, name, r->pid, 0, r->bytes, UINT64_MAX,
                                uv_now(s->loop), NULL);
    if (rc < 0) {
      gmt_call_reply_error(call, rc, "cannot charge the pin: %s", gmt_strerror(rc));
      return;
    }
    used = gmt_bytes_add(used, r->bytes);
  }
  if (r->bytes)
    gmt_debug("pod '%s' pid %u: pin of %" PRIu64 " bytes (%.1f MiB) %s, %s; node pins %" PRIu64
              " of %" PRIu64 ", the pod's %" PRIu64 " of its share %" PRIu64,
              name, r->pid, r->bytes, (double)r->bytes / MIB, a.pin ? "granted" : "refused",
              reason_name(a.reason), used, limit,
              a.pin ? gmt_bytes_add(pod_used, r->bytes) : pod_used, share);

  Gmt__AdviseReply body = GMT__ADVISE_REPLY__INIT;
  uint32_t hot[GMT_ADVISE_MAX_HOT_NTHS];
  if (pod->cfg.pin == GMT__PIN_MODE__PIN_USE && r->bytes && r->site) {
    /* The site as a whole, for the hook to keep: it then asks only about
     * the buffers the profile calls hot. */
    bool known = false;
    body.n_hot_nths =
        gmt_pin_profiles_site_hot(s->pin_profiles, exe, r->site->module, r->site->offset,
                                  r->site->size_class, hot, GMT_ADVISE_MAX_HOT_NTHS, &known);
    body.hot_nths = hot;
    body.site_profiled = known;
  }
  body.pin = a.pin;
  body.reason = (Gmt__PinReason)a.reason;
  body.pinned_used = used;
  body.pinned_limit = limit;
  gmt_call_reply_body(call, GMT__ENVELOPE__BODY_ADVISE_REP, &body);
}
