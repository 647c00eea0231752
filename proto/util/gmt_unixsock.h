/* Unix socket paths, for the ipc sockets of nng and the bell's. */
#ifndef GMT_UNIXSOCK_H
#define GMT_UNIXSOCK_H

#include <stdbool.h>
#include <sys/un.h>

/* *sa becomes path's address. -ENAMETOOLONG when path does not fit. */
int gmt_unix_addr(const char *path, struct sockaddr_un *sa);

/* Whether path is a socket file left by a process that died: nobody
 * accepts on it (a connect is refused). */
bool gmt_unix_stale(const char *path);

#endif
