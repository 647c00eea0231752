/* gmt-pmgr: its line to the scheduler (pmgr_schd.c). */
#ifndef GMT_PMGR_SCHD_H
#define GMT_PMGR_SCHD_H

#include "pmgr_state.h"

/* Calls the scheduler from any thread (gmt_client_call_async()): cb runs
 * on an nng thread. -ESHUTDOWN once closing has begun. */
int gmt__pmgr_schd_call(gmt_pmgr_t *pm, const Gmt__Envelope *req, int timeout_ms, gmt_client_cb cb,
                        void *arg);
/* On the loop: refuses new calls, closes the client (which fails the calls
 * in flight) and waits, at most GMT_CLIENT_CLOSE_MS, until their callbacks
 * have returned. false when some had not (pm->schd_left_calls): one may
 * still answer a call of the server, which must then not be freed. */
bool gmt__pmgr_schd_close(gmt_pmgr_t *pm);

#endif
