/* gmt-pmgr: the pod's memory calls (pmgr_memory.c). */
#ifndef GMT_PMGR_MEMORY_H
#define GMT_PMGR_MEMORY_H

#include "pmgr_state.h"

/* Reserves held at once for the pod's slack at most (pmgr_memory.c); past
 * that a refusal is answered at once. Each holds one of the server's
 * contexts, so the pod manager has more (pmgr.c). */
#define PMGR_HELD_MAX 256

/* On the loop, before any call: the held Reserves' timer. */
int gmt__pmgr_memory_init(gmt_pmgr_t *pm);
/* On the loop: a process's call that the table forwards (gmt_rpc_kinds.h:
 * Reserve, Release, MemInfo, Advise, Resident, Devices, Pick). */
void gmt__pmgr_handle_memory(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req);
/* On the loop: pid's report changed (gone false) or it exited. */
void gmt__pmgr_memory_proc(gmt_pmgr_t *pm, uint32_t pid, bool gone);
/* Answers the held Reserves (with their refusal) and closes the timer. */
void gmt__pmgr_memory_close(gmt_pmgr_t *pm);

#endif
