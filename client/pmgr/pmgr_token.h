/* gmt-pmgr: the pod's token, shared by its processes (pmgr_token.c). */
#ifndef GMT_PMGR_TOKEN_H
#define GMT_PMGR_TOKEN_H

#include "pmgr_state.h"

void gmt__pmgr_handle_token(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__TokenRequest *r);
/* A process waits for its pod's grant on a device to end (TokenWatch). */
void gmt__pmgr_handle_token_watch(gmt_pmgr_t *pm, gmt_call_t *call,
                                  const Gmt__TokenWatchRequest *r);
/* A process exited: whatever share of a token it had is given back. */
void gmt__pmgr_token_proc_gone(gmt_pmgr_t *pm, uint32_t pid);
/* Answers every waiting Token call and closes the timers (on stop). */
void gmt__pmgr_tokens_close(gmt_pmgr_t *pm);

#endif
