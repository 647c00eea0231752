/* gmt-pmgr: requests from the pod's processes. Each goes through the inbox
 * to the loop thread that owns the pod's state: Register and Report the
 * process table (pmgr_procs.c), Token the pod's one grant shared by its
 * processes (pmgr_token.c), Reserve/Release/MemInfo the pod's memory,
 * which the pod manager counts itself while the scheduler is away,
 * Advise, which only the scheduler answers yes to, and mode=swap's
 * Resident, which it grants while the scheduler is away, and the views
 * Devices and Pick, answered by the scheduler for the pod (pmgr_memory.c).
 * Which is which, and which field names the caller's pid, is the table's
 * (gmt_rpc_kinds.h).
 *
 * Every call is first checked against its sender as the kernel names it
 * (gmt_peer.h): its user must be admitted, and the pid the request names
 * is replaced by the sender's own, so that a process acts only for
 * itself (docs/security.md). */
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>

#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_peer.h"
#include "gmt_rpc_kinds.h"
#include "pmgr_calls.h"
#include "pmgr_memory.h"
#include "pmgr_procs.h"
#include "pmgr_token.h"

typedef void (*pmgr_fn)(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req);

static void on_register(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req)
{
  gmt__pmgr_handle_register(pm, call, req->register_req);
}

static void on_report(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req)
{
  gmt__pmgr_handle_report(pm, call, req->report_req);
}

static void on_token(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req)
{
  gmt__pmgr_handle_token(pm, call, req->token_req);
}

static void on_token_watch(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req)
{
  gmt__pmgr_handle_token_watch(pm, call, req->token_watch_req);
}

/* The handlers of the calls the pod manager answers itself (the table's
 * GMT_RPC_PMGR_OWN and _SHARE rows); every _FORWARD one goes through
 * pmgr_memory.c. */
static const pmgr_fn own[] = {
    [GMT__ENVELOPE__BODY_REGISTER_REQ] = on_register,
    [GMT__ENVELOPE__BODY_REPORT_REQ] = on_report,
    [GMT__ENVELOPE__BODY_TOKEN_REQ] = on_token,
    [GMT__ENVELOPE__BODY_TOKEN_WATCH_REQ] = on_token_watch,
};

/* The handler of a call the pod manager serves (gmt_rpc_kinds.h); NULL
 * for any other. */
static pmgr_fn handler_of(const Gmt__Envelope *req)
{
  const gmt_rpc_kind_t *k = gmt_rpc_kind(req->body_case);
  unsigned c = (unsigned)req->body_case;
  if (!k || k->pmgr == GMT_RPC_PMGR_NONE)
    return NULL;
  if (k->pmgr == GMT_RPC_PMGR_FORWARD)
    return gmt__pmgr_handle_memory;
  return c < sizeof own / sizeof own[0] ? own[c] : NULL;
}

/* A process's request, in its turn on the loop. */
static void on_queued(void *data, gmt_call_t *call, int status)
{
  gmt_pmgr_t *pm = data;
  if (status < 0) {
    gmt_call_reply_error(call, status, "pod manager is stopping");
    return;
  }
  const Gmt__Envelope *req = gmt_call_request(call);
  handler_of(req)(pm, call, req);
}

/* Whether the caller may act in this pod; if so the request's pid becomes
 * the caller's (the request is the call's own copy: rewriting it is ours
 * to do). Refuses the call otherwise. */
static bool admit_caller(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req)
{
  gmt_peer_t peer;
  char who[160];
  snprintf(who, sizeof who, "pod manager of pod '%s'", pm->name);
  if (gmt_call_admit(call, &pm->admit, who, true, &peer) < 0)
    return false;
  uint32_t pid = (uint32_t)peer.pid, *claimed = gmt_rpc_pid(req);
  if (claimed && *claimed != pid) {
    if (*claimed != 0)
      gmt_debug("a call from pid %u named pid %u; taken as its own", pid, *claimed);
    *claimed = pid;
  }
  return true;
}

/* The server's handler, on an nng thread. */
void gmt__pmgr_on_request(void *arg, gmt_call_t *call, const Gmt__Envelope *req)
{
  gmt_pmgr_t *pm = arg;

  if (!admit_caller(pm, call, req))
    return;
  if (!handler_of(req)) {
    gmt_call_reply_error(call, -EINVAL, "a pod manager does not serve this request (case %d)",
                         (int)req->body_case);
    return;
  }
  gmt_inbox_push_call(&pm->inbox, call, on_queued, pm, "pod manager");
}
