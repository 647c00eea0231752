/* gmt-pmgr: the table of the pod's processes (pmgr_procs.c). */
#ifndef GMT_PMGR_PROCS_H
#define GMT_PMGR_PROCS_H

#include "pmgr_state.h"

/* What the table tells its owner, on the loop: pid joined or what it
 * reports changed (gone false), or it exited and has left the table (gone
 * true). The table names none of those who care (the token, the
 * heartbeat): its owner does. */
typedef void (*pmgr_procs_cb)(gmt_pmgr_t *pm, uint32_t pid, bool gone);

void gmt__pmgr_procs_init(gmt_pmgr_t *pm, pmgr_procs_cb cb);
void gmt__pmgr_handle_register(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__RegisterRequest *r);
void gmt__pmgr_handle_report(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__ReportRequest *r);
/* Fills an array of nprocs reports (totals only) for a heartbeat. */
void gmt__pmgr_proc_reports(gmt_pmgr_t *pm, Gmt__ProcessReport *out, Gmt__ProcessReport **ptrs);
/* mode=swap: the scheduler's eviction targets for the pod's processes, as
 * its heartbeat reply listed them (pids not listed have none pending): each
 * process hears its own in the reply to its next Report, once. Returns how
 * many of the listed pids are in the table. */
size_t gmt__pmgr_procs_evict(gmt_pmgr_t *pm, Gmt__Evict **evict, size_t n);
/* What pid last reported holding in the ledger (*bytes unchanged when the
 * pid is unknown), and the sum over the pod. */
void gmt__pmgr_proc_reserved(gmt_pmgr_t *pm, uint32_t pid, uint64_t *bytes);
uint64_t gmt__pmgr_procs_reserved(gmt_pmgr_t *pm);
/* As the pod's processes last reported: their live allocations (the sum of
 * memory_used) and the slack of all but pid (memory_reserved less
 * memory_used, each at least 0). */
void gmt__pmgr_procs_slack(gmt_pmgr_t *pm, uint32_t pid, uint64_t *used, uint64_t *others_slack);
void gmt__pmgr_procs_close(gmt_pmgr_t *pm);

#endif
