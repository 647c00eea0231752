/* gmt-pmgr: its line to the scheduler. Every asynchronous call to the
 * scheduler (a process's forwarded memory request, the pod's token
 * requests, heartbeats) starts here, from whichever thread: once closing
 * has begun none starts, and closing waits until the callbacks of those in
 * flight have returned, so that gmt_server_free() drops no call that a
 * callback still holds. */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "gmt_log.h"
#include "pmgr_schd.h"

/* Closing the client fails every call in flight at once; this only bounds
 * the wait for a callback that does not return. */
#define PMGR_SCHD_CLOSE_WAIT_S 6

typedef struct {
  gmt_pmgr_t *pm;
  gmt_client_cb cb;
  void *arg;
} pending_t;

/* On an nng thread of the scheduler client. */
static void on_reply(void *arg, int rc, Gmt__Envelope *rep)
{
  pending_t *p = arg;
  gmt_pmgr_t *pm = p->pm;
  p->cb(p->arg, rc, rep);
  free(p);
  pthread_mutex_lock(&pm->mu);
  if (--pm->calls == 0)
    pthread_cond_broadcast(&pm->calls_done);
  pthread_mutex_unlock(&pm->mu);
}

int gmt__pmgr_schd_call(gmt_pmgr_t *pm, const Gmt__Envelope *req, int timeout_ms, gmt_client_cb cb,
                        void *arg)
{
  pending_t *p = malloc(sizeof *p);
  if (!p)
    return -ENOMEM;
  *p = (pending_t){.pm = pm, .cb = cb, .arg = arg};
  int rc;
  /* Under mu so that closing cannot close the client between the check
   * and the call. */
  pthread_mutex_lock(&pm->mu);
  if (pm->stopping) {
    rc = -ESHUTDOWN;
  } else {
    rc = gmt_client_call_async(pm->schd, req, timeout_ms, on_reply, p);
    if (rc == 0)
      pm->calls++;
  }
  pthread_mutex_unlock(&pm->mu);
  if (rc < 0)
    free(p);
  return rc;
}

void gmt__pmgr_schd_close(gmt_pmgr_t *pm)
{
  pthread_mutex_lock(&pm->mu);
  bool was_stopping = pm->stopping;
  pm->stopping = true;
  pthread_mutex_unlock(&pm->mu);
  if (was_stopping)
    return;

  /* Closing the socket fails every call in flight; their callbacks
   * answer the processes, and must be done before the server goes. */
  gmt_client_close(pm->schd);
  pm->schd = NULL;
  pthread_mutex_lock(&pm->mu);
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += PMGR_SCHD_CLOSE_WAIT_S;
  while (pm->calls > 0)
    if (pthread_cond_timedwait(&pm->calls_done, &pm->mu, &until) == ETIMEDOUT)
      break;
  int left = pm->calls;
  pthread_mutex_unlock(&pm->mu);
  if (left > 0)
    gmt_warn("%d calls to the scheduler did not come back", left);
}
