/* gmt-pmgr: requests from the pod's processes. Register, Report and Token
 * change the pod's state (Token: the pod's one grant shared by its
 * processes, pmgr_token.c), so they are queued to the loop thread that
 * owns it. Reserve/Release/MemInfo touch no state: they are stamped with
 * the pod's name (a process cannot name another pod) and forwarded to the
 * scheduler straight from the nng thread, and the reply callback answers
 * the process. */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "gmt_error.h"
#include "gmt_log.h"
#include "pmgr.h"

int gmt__pmgr_push(gmt_pmgr_t *pm, pmgr_item_t *item) {
  item->next = NULL;
  pthread_mutex_lock(&pm->mu);
  if (pm->stopping) {
    pthread_mutex_unlock(&pm->mu);
    return -ESHUTDOWN;
  }
  if (pm->tail)
    pm->tail->next = item;
  else
    pm->head = item;
  pm->tail = item;
  uv_async_send(&pm->wake);
  pthread_mutex_unlock(&pm->mu);
  return 0;
}

static pmgr_item_t *take_all(gmt_pmgr_t *pm) {
  pthread_mutex_lock(&pm->mu);
  pmgr_item_t *all = pm->head;
  pm->head = pm->tail = NULL;
  pthread_mutex_unlock(&pm->mu);
  return all;
}

typedef struct forward {
  gmt_pmgr_t *pm;
  gmt_call_t *call;
} forward_t;

static void forward_finished(gmt_pmgr_t *pm) {
  pthread_mutex_lock(&pm->mu);
  if (--pm->forwards == 0)
    pthread_cond_broadcast(&pm->forwards_done);
  pthread_mutex_unlock(&pm->mu);
}

/* On an nng thread of the scheduler client. */
static void on_forwarded(void *arg, int rc, Gmt__Envelope *rep) {
  forward_t *f = arg;
  gmt_pmgr_t *pm = f->pm;

  if (rc == -ESHUTDOWN)
    gmt_call_reply_error(f->call, rc, "pod manager is stopping"); /* quiesce closed it */
  else if (rc < 0)
    gmt_call_reply_error(f->call, rc, "scheduler at %s: %s", pm->schd_url, gmt_strerror(rc));
  else if (gmt_call_reply(f->call, rep) < 0)
    gmt_warn("cannot pass the scheduler's reply back to a process");
  gmt_wire_free(rep);
  free(f);
  forward_finished(pm);
}

static void forward(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req) {
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
  default:
    gmt_call_reply_error(call, -EINVAL, "not a request to forward");
    return;
  }

  forward_t *f = malloc(sizeof *f);
  if (!f) {
    gmt_call_reply_error(call, -ENOMEM, "pod manager out of memory");
    return;
  }
  f->pm = pm;
  f->call = call;
  int rc;
  /* Under mu so that quiesce cannot close the client between the check
   * and the call. */
  pthread_mutex_lock(&pm->mu);
  if (pm->stopping) {
    rc = -ESHUTDOWN;
  } else {
    rc = gmt_client_call_async(pm->schd, &env, PMGR_FORWARD_TIMEOUT_MS, on_forwarded, f);
    if (rc == 0)
      pm->forwards++;
  }
  pthread_mutex_unlock(&pm->mu);
  if (rc < 0) {
    free(f);
    gmt_call_reply_error(call, rc, "%s",
                         rc == -ESHUTDOWN ? "pod manager is stopping" : gmt_strerror(rc));
  }
}

/* The server's handler, on an nng thread. */
void gmt__pmgr_on_request(void *arg, gmt_call_t *call, const Gmt__Envelope *req) {
  gmt_pmgr_t *pm = arg;

  switch (req->body_case) {
  case GMT__ENVELOPE__BODY_RESERVE_REQ:
  case GMT__ENVELOPE__BODY_RELEASE_REQ:
  case GMT__ENVELOPE__BODY_MEMINFO_REQ:
    forward(pm, call, req);
    return;
  case GMT__ENVELOPE__BODY_TOKEN_REQ:
  case GMT__ENVELOPE__BODY_REGISTER_REQ:
  case GMT__ENVELOPE__BODY_REPORT_REQ: {
    pmgr_item_t *item = calloc(1, sizeof *item);
    if (!item) {
      gmt_call_reply_error(call, -ENOMEM, "pod manager out of memory");
      return;
    }
    item->call = call;
    int rc = gmt__pmgr_push(pm, item);
    if (rc < 0) {
      free(item);
      gmt_call_reply_error(call, rc, "pod manager is stopping");
    }
    return;
  }
  default:
    gmt_call_reply_error(call, -EINVAL, "a pod manager does not serve this request (case %d)",
                         (int)req->body_case);
    return;
  }
}

static void handle(gmt_pmgr_t *pm, pmgr_item_t *item) {
  if (item->fn) {
    item->fn(pm, item);
    return;
  }
  if (!item->call) {
    gmt__pmgr_heartbeat_done(pm, item->rc, item->rep);
    return;
  }
  const Gmt__Envelope *req = gmt_call_request(item->call);
  if (req->body_case == GMT__ENVELOPE__BODY_REGISTER_REQ)
    gmt__pmgr_handle_register(pm, item->call, req->register_req);
  else if (req->body_case == GMT__ENVELOPE__BODY_TOKEN_REQ)
    gmt__pmgr_handle_token(pm, item->call, req->token_req);
  else
    gmt__pmgr_handle_report(pm, item->call, req->report_req);
}

void gmt__pmgr_on_wake(uv_async_t *h) {
  gmt_pmgr_t *pm = h->data;
  pmgr_item_t *item = take_all(pm);

  while (item) {
    pmgr_item_t *next = item->next;
    handle(pm, item);
    if (item != &pm->hb_item)
      free(item);
    item = next;
  }
}

void gmt__pmgr_quiesce(gmt_pmgr_t *pm) {
  pthread_mutex_lock(&pm->mu);
  pm->stopping = true;
  pthread_mutex_unlock(&pm->mu);

  pmgr_item_t *item = take_all(pm);
  while (item) {
    pmgr_item_t *next = item->next;
    if (item->call)
      gmt_call_reply_error(item->call, -ESHUTDOWN, "pod manager is stopping");
    else
      gmt_wire_free(item->rep);
    if (item != &pm->hb_item)
      free(item);
    item = next;
  }

  /* Closing the socket fails every call in flight; their callbacks
   * answer the processes, and must be done before the server goes. */
  gmt_client_close(pm->schd);
  pm->schd = NULL;
  pthread_mutex_lock(&pm->mu);
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += PMGR_FORWARD_TIMEOUT_MS / 1000 + 1;
  while (pm->forwards > 0)
    if (pthread_cond_timedwait(&pm->forwards_done, &pm->mu, &until) == ETIMEDOUT)
      break;
  int left = pm->forwards;
  pthread_mutex_unlock(&pm->mu);
  if (left > 0)
    gmt_warn("%d forwarded calls did not come back", left);
  gmt__pmgr_tokens_close(pm);
}
