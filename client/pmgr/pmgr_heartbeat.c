/* gmt-pmgr: heartbeats, the pod's whole view sent to the scheduler every
 * 500 ms and soon after any change. At most one is in flight; a change
 * meanwhile sends another as soon as it returns. A scheduler that does not
 * answer is logged once per outage while the pod goes on with the config
 * it last had; the reply carries the config now in force. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "gmt_error.h"
#include "gmt_log.h"
#include "pmgr_heartbeat.h"
#include "pmgr_procs.h"
#include "pmgr_schd.h"

#define PMGR_HB_TIMEOUT_MS 1000 /* the scheduler forgets a pod after 3 s */
#define PMGR_HB_PERIOD_MS 500
#define PMGR_HB_SOON_MS 5 /* after a change: coalesces a burst of reports */
/* While the scheduler has eviction targets pending for the pod (mode=swap),
 * the next heartbeat goes this soon, so that a target that changes or ends
 * is heard quickly; bounded by how long targets stand (10 s). */
#define PMGR_HB_EVICT_MS 20
/* A mode=swap pod heartbeats this often: the scheduler cannot call a pod
 * manager, so a target set for one of its processes (another pod waits on
 * it, holding the token) is heard at the next heartbeat. At 500 ms that
 * wait was most of a swap's time; at 100 ms, with the process's own 100 ms
 * report, two busy swap pods lost about 90 ms a turn to it on the fake
 * driver (bench/swap_quantum.py). A heartbeat is one small message on
 * loopback. The timer ticks at this period for every pod; others send at
 * PMGR_HB_PERIOD_MS still. */
#define PMGR_HB_SWAP_MS 20

static void send_heartbeat(gmt_pmgr_t *pm);
static void heartbeat_done(gmt_pmgr_t *pm, int rc, Gmt__Envelope *rep);

/* On the loop, or handed back when the inbox closes. */
static void on_landed(gmt_inbox_item_t *item, int status)
{
  gmt_pmgr_t *pm = item->data;
  if (status < 0)
    gmt_wire_free(pm->hb_rep);
  else
    heartbeat_done(pm, pm->hb_rc, pm->hb_rep);
}

/* On an nng thread. At most one heartbeat is in flight, so its outcome
 * travels to the loop in the one item kept for it. */
static void on_reply(void *arg, int rc, Gmt__Envelope *rep)
{
  gmt_pmgr_t *pm = arg;
  pm->hb_rc = rc;
  pm->hb_rep = rep;
  if (gmt_inbox_push(&pm->inbox, &pm->hb_item, on_landed) < 0)
    gmt_wire_free(rep);
}

static void on_tick(uv_timer_t *h)
{
  gmt_pmgr_t *pm = h->data;
  uint64_t period = gmt_mem_mode_moves(pm->config.mode) ? PMGR_HB_SWAP_MS : PMGR_HB_PERIOD_MS;
  if (!pm->hb_in_flight && uv_now(pm->loop) - pm->hb_sent_ms + 5 >= period)
    send_heartbeat(pm);
}

static void on_soon(uv_timer_t *h)
{
  gmt_pmgr_t *pm = h->data;
  if (!pm->hb_in_flight && pm->hb_dirty)
    send_heartbeat(pm);
}

void gmt__pmgr_changed(gmt_pmgr_t *pm)
{
  pm->hb_dirty = true;
  if (!pm->hb_in_flight && !uv_is_active((uv_handle_t *)&pm->hb_soon))
    uv_timer_start(&pm->hb_soon, on_soon, PMGR_HB_SOON_MS, 0);
}

static void outage(gmt_pmgr_t *pm, const char *why)
{
  if (pm->schd_down)
    return;
  pm->schd_down = true;
  gmt_warn("scheduler unreachable: %s; keeping the pod running with its last config", why);
}

static void reachable(gmt_pmgr_t *pm)
{
  if (pm->schd_down) {
    pm->schd_down = false;
    gmt_info("scheduler at %s is reachable again", pm->schd_url);
  }
}

static void send_heartbeat(gmt_pmgr_t *pm)
{
  pm->hb_sent_ms = uv_now(pm->loop);
  size_t n = pm->nprocs;
  Gmt__ProcessReport *reports = calloc(n ? n : 1, sizeof *reports);
  Gmt__ProcessReport **ptrs = calloc(n ? n : 1, sizeof *ptrs);
  if (!reports || !ptrs) {
    free(reports);
    free(ptrs);
    gmt_warn("heartbeat: out of memory");
    return;
  }
  gmt__pmgr_proc_reports(pm, reports, ptrs);

  Gmt__HeartbeatRequest hb = GMT__HEARTBEAT_REQUEST__INIT;
  Gmt__Envelope env = GMT__ENVELOPE__INIT;
  hb.pod = (char *)pm->name;
  hb.seq = ++pm->seq;
  hb.epoch = pm->epoch;
  hb.n_processes = n;
  hb.processes = ptrs;
  gmt_wire_set_body(&env, GMT__ENVELOPE__BODY_HEARTBEAT_REQ, &hb);

  pm->hb_dirty = false;
  uv_timer_stop(&pm->hb_soon);
  uv_timer_again(&pm->hb_tick); /* the next periodic one counts from now */
  int rc = gmt__pmgr_schd_call(pm, &env, PMGR_HB_TIMEOUT_MS, on_reply, pm);
  free(reports);
  free(ptrs);
  if (rc < 0)
    outage(pm, gmt_strerror(rc));
  else
    pm->hb_in_flight = true;
}

int gmt__pmgr_set_config(gmt_pmgr_t *pm, const Gmt__PodConfig *c, bool log_changes)
{
  if (!c)
    return 0;
  char what[512];
  if (log_changes && gmt_podcfg_diff(&pm->config, c, what, sizeof what))
    gmt_info("pod '%s' config changed: %s", pm->name, what);
  return gmt_podcfg_copy(&pm->config, c);
}

/* On the loop: the outcome of the heartbeat in flight. */
static void heartbeat_done(gmt_pmgr_t *pm, int rc, Gmt__Envelope *rep)
{
  char err[512] = "";
  bool evicting = false;

  pm->hb_in_flight = false;
  pm->prepare = false; /* only an answer that says so keeps it */
  if (rc < 0) {
    outage(pm, gmt_strerror(rc));
  } else if ((rc = gmt_wire_expect(rep, GMT__ENVELOPE__BODY_HEARTBEAT_REP, err, sizeof err)) ==
             GMT_ENOPOD) {
    reachable(pm);
    if (!pm->pod_unlisted) {
      pm->pod_unlisted = true;
      gmt_error("the scheduler no longer lists pod '%s' (%s); keeping the pod running "
                "with its last config and asking again",
                pm->name, err[0] ? err : gmt_strerror(rc));
    }
  } else if (rc < 0) {
    /* The scheduler answered but refused: as bad as no answer for the
     * pod, and said once per outage too. */
    char why[600];
    snprintf(why, sizeof why, "heartbeat refused: %s", err[0] ? err : gmt_strerror(rc));
    outage(pm, why);
  } else {
    reachable(pm);
    if (pm->pod_unlisted) {
      pm->pod_unlisted = false;
      gmt_info("the scheduler lists pod '%s' again", pm->name);
    }
    if (gmt__pmgr_set_config(pm, rep->heartbeat_rep->config, true) < 0)
      gmt_warn("heartbeat: out of memory keeping the config");
    const Gmt__HeartbeatReply *hb = rep->heartbeat_rep;
    evicting = gmt__pmgr_procs_evict(pm, hb->evict, hb->n_evict) > 0;
    pm->prepare = hb->prepare;
    pm->prepare_bounded = hb->prepare_bounded;
    pm->prepare_host_room = hb->prepare_host_room;
  }
  gmt_wire_free(rep);
  if (pm->hb_dirty) {
    send_heartbeat(pm);
  } else if (evicting) {
    pm->hb_dirty = true;
    uv_timer_start(&pm->hb_soon, on_soon, PMGR_HB_EVICT_MS, 0);
  }
}

int gmt__pmgr_heartbeat_init(gmt_pmgr_t *pm)
{
  int rc = uv_timer_init(pm->loop, &pm->hb_tick);
  if (rc == 0)
    rc = uv_timer_init(pm->loop, &pm->hb_soon);
  if (rc < 0)
    return rc;
  pm->hb_tick.data = pm;
  pm->hb_soon.data = pm;
  pm->hb_item.data = pm;
  rc = uv_timer_start(&pm->hb_tick, on_tick, PMGR_HB_SWAP_MS, PMGR_HB_SWAP_MS);
  if (rc == 0)
    send_heartbeat(pm);
  return rc;
}

void gmt__pmgr_heartbeat_close(gmt_pmgr_t *pm)
{
  uv_close((uv_handle_t *)&pm->hb_tick, NULL);
  uv_close((uv_handle_t *)&pm->hb_soon, NULL);
}
