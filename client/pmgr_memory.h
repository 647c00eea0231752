/* gmt-pmgr: the pod's memory calls (pmgr_memory.c). */
#ifndef GMT_PMGR_MEMORY_H
#define GMT_PMGR_MEMORY_H

#include "pmgr_state.h"

/* On the loop: a process's Reserve, Release, MemInfo, Advise or Resident. */
void gmt__pmgr_handle_memory(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__Envelope *req);
/* On the loop: pid's report changed (gone false) or it exited. */
void gmt__pmgr_memory_proc(gmt_pmgr_t *pm, uint32_t pid, bool gone);
void gmt__pmgr_memory_close(gmt_pmgr_t *pm);

#endif
