/* gmt-pmgr: requests from the pod's processes. Register, Report and Token
 * change the pod's state (Token: the pod's one grant shared by its
 * processes, pmgr_token.c), so they go through the inbox to the loop
 * thread that owns it. Reserve/Release/MemInfo touch no state: they are
 * stamped with the pod's name (a process cannot name another pod) and
 * forwarded to the scheduler straight from the nng thread, and the reply
 * callback answers the process. */
#include <errno.h>
#include <stdlib.h>

#include "gmt_error.h"
#include "gmt_log.h"
#include "pmgr_calls.h"
#include "pmgr_procs.h"
#include "pmgr_schd.h"
#include "pmgr_token.h"

#define PMGR_FORWARD_TIMEOUT_MS 5000 /* Reserve/Release/MemInfo */

typedef struct forward {
  gmt_pmgr_t *pm;
  gmt_call_t *call;
} forward_t;

/* On an nng thread of the scheduler client. */
static void on_forwarded(void *arg, int rc, Gmt__Envelope *rep)
{
  forward_t *f = arg;
  gmt_pmgr_t *pm = f->pm;

  if (rc == -ESHUTDOWN)
    gmt_call_reply_error(f->call, rc, "pod manager is stopping"); /* the line closed */
  else if (rc < 0)
    gmt_call_reply_error(f->call, rc, "scheduler at %s: %s", pm->schd_url, gmt_strerror(rc));
  else if (gmt_call_reply(f->call, rep) < 0)
    gmt_warn("cannot pass the scheduler's reply back to a process");
  gmt_wire_free(rep);
  free(f);
}

static void forward(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req)
{
  Gmt__Envelope env = *req;
  Gmt__ReserveRequest reserve;
  Gmt__ReleaseRequest release;
  Gmt__MemInfoRequest meminfo;
  char *pod = (char *)pm->name;

  /* Shallow copies: only the pod differs, and the request is packed
   * before gmt_client_call_async() returns. */
  switch (req->body_case) {
  case GMT__ENVELOPE__BODY_RESERVE_REQ:
    reserve = *req->reserve_req;
    reserve.pod = pod;
    env.reserve_req = &reserve;
    break;
  case GMT__ENVELOPE__BODY_RELEASE_REQ:
    release = *req->release_req;
    release.pod = pod;
    env.release_req = &release;
    break;
  case GMT__ENVELOPE__BODY_MEMINFO_REQ:
    meminfo = *req->meminfo_req;
    meminfo.pod = pod;
    env.meminfo_req = &meminfo;
    break;
  default: gmt_call_reply_error(call, -EINVAL, "not a request to forward"); return;
  }

  forward_t *f = malloc(sizeof *f);
  if (!f) {
    gmt_call_reply_error(call, -ENOMEM, "pod manager out of memory");
    return;
  }
  f->pm = pm;
  f->call = call;
  int rc = gmt__pmgr_schd_call(pm, &env, PMGR_FORWARD_TIMEOUT_MS, on_forwarded, f);
  if (rc < 0) {
    free(f);
    gmt_call_reply_error(call, rc, "%s",
                         rc == -ESHUTDOWN ? "pod manager is stopping" : gmt_strerror(rc));
  }
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
  if (req->body_case == GMT__ENVELOPE__BODY_REGISTER_REQ)
    gmt__pmgr_handle_register(pm, call, req->register_req);
  else if (req->body_case == GMT__ENVELOPE__BODY_TOKEN_REQ)
    gmt__pmgr_handle_token(pm, call, req->token_req);
  else
    gmt__pmgr_handle_report(pm, call, req->report_req);
}

/* The server's handler, on an nng thread. */
void gmt__pmgr_on_request(void *arg, gmt_call_t *call, const Gmt__Envelope *req)
{
  gmt_pmgr_t *pm = arg;

  switch (req->body_case) {
  case GMT__ENVELOPE__BODY_RESERVE_REQ:
  case GMT__ENVELOPE__BODY_RELEASE_REQ:
  case GMT__ENVELOPE__BODY_MEMINFO_REQ: forward(pm, call, req); return;
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
