/* gmt-pmgr: its line to the scheduler. Every asynchronous call to the
 * scheduler (a process's forwarded memory request, the pod's token
 * requests, heartbeats) starts here, from whichever thread: once closing
 * has begun none starts, and closing waits, within the client's bound,
 * until the callbacks of those in flight have returned, so that
 * gmt_server_free() drops no call that a callback still holds. */
#include <errno.h>

#include "gmt_log.h"
#include "pmgr_schd.h"

int gmt__pmgr_schd_call(gmt_pmgr_t *pm, const Gmt__Envelope *req, int timeout_ms, gmt_client_cb cb,
                        void *arg)
{
  int rc;
  /* Under mu so that closing cannot close the client between the check
   * and the call. */
  pthread_mutex_lock(&pm->mu);
  if (pm->stopping)
    rc = -ESHUTDOWN;
  else
    rc = gmt_client_call_async(pm->schd, req, timeout_ms, cb, arg);
  pthread_mutex_unlock(&pm->mu);
  return rc;
}

bool gmt__pmgr_schd_close(gmt_pmgr_t *pm)
{
  pthread_mutex_lock(&pm->mu);
  bool was_stopping = pm->stopping;
  pm->stopping = true;
  pthread_mutex_unlock(&pm->mu);
  if (was_stopping)
    return !pm->schd_left_calls;

  /* Closing the socket fails every call in flight; their callbacks
   * answer the processes, and must be done before the server goes. A
   * callback that does not come back within the client's bound is
   * logged there, and the server is then kept (main). */
  if (gmt_client_close(pm->schd) < 0)
    pm->schd_left_calls = true;
  pm->schd = NULL;
  return !pm->schd_left_calls;
}
