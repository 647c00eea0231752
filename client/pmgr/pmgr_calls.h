/* gmt-pmgr: requests from the pod's processes (pmgr_calls.c). */
#ifndef GMT_PMGR_CALLS_H
#define GMT_PMGR_CALLS_H

#include "pmgr_state.h"

/* The server's handler (gmt_server_cb), on an nng thread; arg is the
 * gmt_pmgr_t. */
void gmt__pmgr_on_request(void *arg, gmt_call_t *call, const Gmt__Envelope *req);

#endif
