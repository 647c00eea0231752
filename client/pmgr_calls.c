/* gmt-pmgr: requests from the pod's processes. Each goes through the inbox
 * to the loop thread that owns the pod's state: Register and Report the
 * process table (pmgr_procs.c), Token the pod's one grant shared by its
 * processes (pmgr_token.c), Reserve/Release/MemInfo the pod's memory,
 * which the pod manager counts itself while the scheduler is away
 * (pmgr_memory.c). */
#include <errno.h>
#include <stdlib.h>

#include "gmt_error.h"
#include "gmt_log.h"
#include "pmgr_calls.h"
#include "pmgr_memory.h"
#include "pmgr_procs.h"
#include "pmgr_token.h"

/* A process's request, in its turn on the loop. */
static void on_queued(void *data, gmt_call_t *call, int status)
{
  gmt_pmgr_t *pm = data;
  if (status < 0) {
    gmt_call_reply_error(call, status, "pod manager is stopping");
    return;
  }
  const Gmt__Envelope *req = gmt_call_request(call);
  if (req->body_case == GMT__ENVELOPE__BODY_REGISTER_REQ)
    gmt__pmgr_handle_register(pm, call, req->register_req);
  else if (req->body_case == GMT__ENVELOPE__BODY_TOKEN_REQ)
    gmt__pmgr_handle_token(pm, call, req->token_req);
  else if (req->body_case == GMT__ENVELOPE__BODY_REPORT_REQ)
    gmt__pmgr_handle_report(pm, call, req->report_req);
  else
    gmt__pmgr_handle_memory(pm, call, req);
}

/* The server's handler, on an nng thread. */
void gmt__pmgr_on_request(void *arg, gmt_call_t *call, const Gmt__Envelope *req)
{
  gmt_pmgr_t *pm = arg;

  switch (req->body_case) {
  case GMT__ENVELOPE__BODY_RESERVE_REQ:
  case GMT__ENVELOPE__BODY_RELEASE_REQ:
  case GMT__ENVELOPE__BODY_MEMINFO_REQ:
  case GMT__ENVELOPE__BODY_TOKEN_REQ:
  case GMT__ENVELOPE__BODY_REGISTER_REQ:
  case GMT__ENVELOPE__BODY_REPORT_REQ: {
    gmt_inbox_push_call(&pm->inbox, call, on_queued, pm, "pod manager");
    return;
  }
  default:
    gmt_call_reply_error(call, -EINVAL, "a pod manager does not serve this request (case %d)",
                         (int)req->body_case);
    return;
  }
}
