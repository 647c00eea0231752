/* What both daemons (gmt-schd, gmt-pmgr) do at start, written once. */
#ifndef GMT_DAEMON_H
#define GMT_DAEMON_H

/* Raises the soft limit of open descriptors to the hard limit: every
 * connection costs one, and the usual soft limit of 1,024 is reached by
 * about as many idle peers. Logs the limit it ends with. */
void gmt_daemon_raise_nofile(void);

#endif
