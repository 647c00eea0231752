/* gmt-schd's message handlers: one function per request kind, found in the
 * table below by the envelope's body case (the handlers of tokens, memory,
 * mode=swap, pin advice and the tracer, and the tiers' part of Status, live in
 * rpc_*.c; the replies they share, in reply.c below them; the Status view,
 * in status.c). Runs on the loop thread, so handlers read and change the
 * daemon's state freely. A handler answers its call exactly once; one that
 * must wait (a token) keeps the call and answers it when it can.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_rpc_kinds.h"
#include "nspid.h"
#include "reply.h"
#include "rpc_trace.h"
#include "schd.h"

typedef void (*rpc_fn)(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req);

static void on_register(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req)
{
  const Gmt__RegisterRequest *r = req->register_req;
  char sb[96];
  gmt_debug("Register pod '%s' pid %u", gmt_shown(r->pod, sb, sizeof sb), r->pid);
  gmt_pod_t *pod = gmt_pods_find(s->pods, r->pod);
  if (!pod) {
    gmt_warn("Register from pod '%s', which is not in %s", gmt_shown(r->pod, sb, sizeof sb),
             s->cfg->path);
    gmt__reply_nopod(call, s->cfg, r->pod);
    return;
  }
  gmt_pods_register(s->pods, pod, uv_now(s->loop));

  Gmt__PodConfig pc;
  Gmt__RegisterReply body = GMT__REGISTER_REPLY__INIT;
  gmt_pod_config_wire(&pod->cfg, &pc);
  body.config = &pc;
  gmt_call_reply_body(call, GMT__ENVELOPE__BODY_REGISTER_REP, &body);
}

/* Looks up the node's pid of each process new to the pod (nspid.h), all
 * in one pass over /proc: once a process, since a pid reported in another
 * namespace stays what it was for the life of the process. */
static void node_pids(gmt_pod_t *pod)
{
  uint32_t pids[GMT_POD_MAX_PROCESSES], nodes[GMT_POD_MAX_PROCESSES];
  gmt_proc_t *procs[GMT_POD_MAX_PROCESSES];
  size_t n = 0;
  for (size_t i = 0; i < pod->nprocs && n < GMT_POD_MAX_PROCESSES; i++)
    if (!pod->procs[i].node_pid_tried) {
      procs[n] = &pod->procs[i];
      pids[n++] = pod->procs[i].pid;
    }
  if (!n)
    return;
  int rc = gmt_nspid_nodes("/proc", pod->owner_pid, pids, nodes, n);
  for (size_t i = 0; i < n; i++) {
    gmt_proc_t *pr = procs[i];
    pr->node_pid_tried = true;
    pr->node_pid = nodes[i];
    if (!nodes[i])
      gmt_warn("pod '%s': pid %u: not found on the node (its pod manager, pid %lld, is in "
               "another PID namespace%s%s); its context memory and trace are not shown",
               pod->cfg.name, pr->pid, (long long)pod->owner_pid, rc < 0 ? ": " : "",
               rc < 0 ? gmt_strerror(rc) : "");
    else if (nodes[i] != pr->pid)
      gmt_info("pod '%s': pid %u is pid %u on the node", pod->cfg.name, pr->pid, nodes[i]);
  }
}

static void on_heartbeat(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req)
{
  const Gmt__HeartbeatRequest *r = req->heartbeat_req;
  char sb[96];
  gmt_debug("Heartbeat pod '%s' epoch %llu seq %llu, %zu process%s",
            gmt_shown(r->pod, sb, sizeof sb), (unsigned long long)r->epoch,
            (unsigned long long)r->seq, r->n_processes, r->n_processes == 1 ? "" : "es");
  gmt_pod_t *pod = gmt_pods_find(s->pods, r->pod);
  if (!pod) {
    gmt__reply_nopod(call, s->cfg, r->pod);
    return;
  }
  if (r->n_processes > GMT_POD_MAX_PROCESSES) {
    gmt_warn("pod '%s': heartbeat lists %zu processes (at most %d); refused", pod->cfg.name,
             r->n_processes, GMT_POD_MAX_PROCESSES);
    gmt_call_reply_error(call, -E2BIG, "heartbeat lists %zu processes; a pod may have at most %d",
                         r->n_processes, GMT_POD_MAX_PROCESSES);
    return;
  }
  if (!gmt_pods_heartbeat(s->pods, pod, r, uv_now(s->loop))) {
    gmt_debug("pod '%s': heartbeat seq %llu is not newer than %llu; ignored", pod->cfg.name,
              (unsigned long long)r->seq, (unsigned long long)pod->seq);
  } else {
    node_pids(pod);
    gmt__pods_changed(s, pod);
  }

  Gmt__PodConfig pc;
  Gmt__HeartbeatReply body = GMT__HEARTBEAT_REPLY__INIT;
  gmt_pod_config_wire(&pod->cfg, &pc);
  body.config = &pc;
  /* mode=swap: what its processes are asked to move out. Resent while
   * pending: a target heard twice moves nothing more. */
  if (gmt__swap_heartbeat_evicts(s, pod, &body) < 0)
    gmt_warn("pod '%s': out of memory listing its eviction targets; next heartbeat", pod->cfg.name);
  gmt_call_reply_body(call, GMT__ENVELOPE__BODY_HEARTBEAT_REP, &body);
  free(body.evict);
}

static void on_status(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req)
{
  (void)req;
  gmt_debug("Status");
  gmt__status_t st; /* status.c: /metrics shows the same */
  if (gmt__status_build(s, &st) < 0)
    gmt_call_reply_error(call, -ENOMEM, "out of memory building the status");
  else
    gmt_call_reply_body(call, GMT__ENVELOPE__BODY_STATUS_REP, &st.reply);
  gmt__status_free(&st);
}

/* Each request's handler; a request without one is not implemented here
 * (a Report goes to pod managers). Names and who may ask are the table's
 * (gmt_rpc_kinds.h). */
static const rpc_fn handlers[] = {
    [GMT__ENVELOPE__BODY_REGISTER_REQ] = on_register,
    [GMT__ENVELOPE__BODY_HEARTBEAT_REQ] = on_heartbeat,
    [GMT__ENVELOPE__BODY_TOKEN_REQ] = gmt__rpc_token,
    [GMT__ENVELOPE__BODY_TOKEN_WATCH_REQ] = gmt__rpc_token_watch,
    [GMT__ENVELOPE__BODY_RESERVE_REQ] = gmt__rpc_reserve,
    [GMT__ENVELOPE__BODY_RELEASE_REQ] = gmt__rpc_release,
    [GMT__ENVELOPE__BODY_MEMINFO_REQ] = gmt__rpc_meminfo,
    [GMT__ENVELOPE__BODY_STATUS_REQ] = on_status,
    [GMT__ENVELOPE__BODY_TRACE_SPOTS_REQ] = gmt__rpc_trace_spots,
    [GMT__ENVELOPE__BODY_ADVISE_REQ] = gmt__rpc_advise,
    [GMT__ENVELOPE__BODY_RESIDENT_REQ] = gmt__rpc_resident,
    [GMT__ENVELOPE__BODY_DEVICES_REQ] = gmt__rpc_devices,
    [GMT__ENVELOPE__BODY_PICK_REQ] = gmt__rpc_pick,
};

void gmt__pods_changed(gmt_schd_t *s, gmt_pod_t *pod)
{
  if (pod) {
    gmt__tokens_pod_changed(s, pod);
    gmt__ledger_pod_changed(s, pod);
    gmt__swap_pod_changed(s, pod);
    gmt__trace_pod_changed(s, pod);
    return;
  }
  for (size_t i = 0; i < s->pods->npods; i++)
    gmt__pods_changed(s, &s->pods->pods[i]);
}

/* ---- who may ask ---- */

/* Views (the table's: Status, Devices and Pick) are for every local user
 * (what the node's GPUs are called, which is emptiest); every other call
 * acts, and only an admitted user's may. A call that names a pod must come from the
 * process that speaks for it: the first admitted pod manager to name it,
 * until that process is gone (docs/security.md). */
static bool caller_may(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req)
{
  const gmt_rpc_kind_t *k = gmt_rpc_kind(req->body_case);
  if (k->view)
    return true;
  char **name = gmt_rpc_pod(req);
  gmt_pod_t *pod = name ? gmt_pods_find(s->pods, *name) : NULL;
  gmt_peer_t peer;
  char who[96];
  if (gmt_call_admit(call, &s->admit, "gmt-schd", pod != NULL, &peer) < 0)
    return false;
  if (!pod || pod->owner_pid == peer.pid)
    return true; /* no pod: the handler says so */
  /* kill(pid, 0) fails with EPERM for a live process of another user. */
  if (pod->owner_pid > 0 && (kill((pid_t)pod->owner_pid, 0) == 0 || errno == EPERM)) {
    gmt_info("refused %s for pod '%s' from %s: pid %lld speaks for the pod", k->name, pod->cfg.name,
             gmt_peer_str(&peer, who, sizeof who), (long long)pod->owner_pid);
    gmt_call_reply_error(call, -EPERM,
                         "pod '%s' is served by another pod manager (pid %lld); only it may "
                         "speak for the pod",
                         pod->cfg.name, (long long)pod->owner_pid);
    return false;
  }
  if (pod->owner_pid > 0)
    gmt_info("pod '%s': its pod manager (pid %lld) is gone; pid %lld speaks for it now",
             pod->cfg.name, (long long)pod->owner_pid, (long long)peer.pid);
  pod->owner_pid = peer.pid;
  return true;
}

void gmt__rpc_handle(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req)
{
  unsigned c = (unsigned)req->body_case;
  const gmt_rpc_kind_t *k = gmt_rpc_kind(req->body_case);
  if (!k) {
    gmt_debug("request with no known body (case %u); refused", c);
    gmt_call_reply_error(call, -EINVAL, "envelope carries no request (body case %u)", c);
    return;
  }
  /* Every body is a message pointer in one union; a decoded envelope
   * always has it, but a NULL here would be our bug, not the peer's. */
  if (!req->error) {
    gmt_call_reply_error(call, -EINVAL, "%s without a body", k->name);
    return;
  }
  if (!caller_may(s, call, req))
    return;
  rpc_fn fn = c < sizeof handlers / sizeof handlers[0] ? handlers[c] : NULL;
  if (k->reply == GMT__ENVELOPE__BODY__NOT_SET) {
    /* A reply sent as a request: a confused peer. */
    gmt_debug("%s sent as a request; refused", k->name);
    gmt_call_reply_error(call, -EINVAL, "%s is a reply, not a request", k->name);
  } else if (!fn) {
    gmt_debug("%s: not implemented yet", k->name);
    gmt_call_reply_error(call, GMT_EUNIMPL, "%s is not implemented yet", k->name);
  } else {
    fn(s, call, req);
  }
}
