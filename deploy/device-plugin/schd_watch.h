/* gmt-schd as the plugin sees it: a thread asks its Status every poll
 * interval, each ask bounded (GMT_DP_SCHD_DIAL_MS to connect, then
 * GMT_DP_SCHD_CALL_MS for the answer), and keeps the node it makes of the
 * answer (node.h). A gmt-schd that is down, hung or refusing leaves the
 * last GPUs known and marks them unhealthy; the plugin's loop never waits
 * on gmt-schd. */
#ifndef GMT_DP_SCHD_WATCH_H
#define GMT_DP_SCHD_WATCH_H

#include <stdint.h>

#include "node.h"

#define GMT_DP_SCHD_DIAL_MS 1000 /* gmtwire's GMT_CLIENT_DIAL_MS */
#define GMT_DP_SCHD_CALL_MS 3000

typedef struct gmt_dp_watch gmt_dp_watch_t;

/* Starts asking the scheduler at url (ipc:// or tcp://) every poll_ms,
 * the first time at once. 0 or a negative code. */
int gmt_dp_watch_start(gmt_dp_watch_t **w, const char *url, int poll_ms);

/* The node as last seen into *out; returns a generation that changes
 * whenever the node does (0: not asked yet). */
uint64_t gmt_dp_watch_get(gmt_dp_watch_t *w, gmt_dp_node_t *out);

/* Stops the thread and frees w: 0. An ask in flight may take its bounds
 * (and closing its connection nng's): when the thread has not ended
 * within GMT_DP_WATCH_STOP_MS, -ETIMEDOUT, and w is left to it (a process
 * that is exiting lets it go). */
#define GMT_DP_WATCH_STOP_MS 1000
int gmt_dp_watch_stop(gmt_dp_watch_t *w);

#endif
