/* gmt-pmgr passes the node's bell (gmt_bell.h) on to its pod's processes:
 * a container sees its pod's folder, not gmt-schd's. */
#ifndef GMT_PMGR_BELL_H
#define GMT_PMGR_BELL_H

/* Serves the bell beside ipc_url (gid: the socket's group, -1: ours),
 * fetching it from beside schd_url for each process that asks. Failing
 * is said, not fatal: the pod's processes then go without. */
void gmt__pmgr_bell_start(const char *schd_url, const char *ipc_url, long gid);
void gmt__pmgr_bell_stop(void);

#endif
