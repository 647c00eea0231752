/* What both daemons (gmt-schd, gmt-pmgr) do at start and at stop, written
 * once. */
#ifndef GMT_DAEMON_H
#define GMT_DAEMON_H

/* Raises the soft limit of open descriptors to the hard limit: every
 * connection costs one, and the usual soft limit of 1,024 is reached by
 * about as many idle peers. Logs the limit it ends with, and warns when it
 * is below GMT_DAEMON_NOFILE_MIN. */
void gmt_daemon_raise_nofile(void);

/* The fewest descriptors with which the per-user cap on connections
 * (GMT_SERVER_MAX_PER_USER, gmt_wire.h) protects anyone: four users at
 * the cap and 1,024 more for the daemon's own files and everyone else.
 * Below it, one or two users reconnecting in a loop take every descriptor
 * and lock out `gmt status`, pods and hooks. */
#define GMT_DAEMON_NOFILE_MIN 5120

/* A daemon told to stop exits within GMT_DAEMON_STOP_MS. Each wait of its
 * own on the stop path has a bound of its own (a peer that stalls or is
 * gone is logged and left); this one catches whatever waits without one
 * (inside nng or libuv, or a bug): past it, a thread logs the step the
 * stop was at and ends the process with GMT_DAEMON_EXIT_STOP_CUT. */
#define GMT_DAEMON_STOP_MS 6000
#define GMT_DAEMON_EXIT_STOP_CUT 3

/* Arms the bound (once; later calls only name the step) and names the
 * step the stop is at, a string that lives as long as the process. */
void gmt_daemon_stopping(const char *step);

#endif
