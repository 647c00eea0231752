/* gmt-pmgr: the pod's view, sent to the scheduler (pmgr_heartbeat.c). */
#ifndef GMT_PMGR_HEARTBEAT_H
#define GMT_PMGR_HEARTBEAT_H

#include "pmgr_state.h"

int gmt__pmgr_heartbeat_init(gmt_pmgr_t *pm);
void gmt__pmgr_heartbeat_close(gmt_pmgr_t *pm);
/* Something in the pod changed: a heartbeat goes out within a few ms. */
void gmt__pmgr_changed(gmt_pmgr_t *pm);
/* Takes a config from the scheduler, logging what changed. */
int gmt__pmgr_set_config(gmt_pmgr_t *pm, const Gmt__PodConfig *c, bool log_changes);

#endif
