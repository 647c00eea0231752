/* Who is at the other end of a connection, as the kernel says, and
 * whether a daemon admits that user (docs/security.md).
 *
 * A peer's word about itself (the pid in a request) is never taken: on an
 * ipc:// socket the kernel gives its pid, uid and gid (SO_PEERCRED, read
 * through nng); on tcp:// the connection must come from a loopback
 * address, and its socket's owner is read from /proc/net/tcp{,6} and its
 * process found by the socket's inode under /proc/PID/fd. */
#ifndef GMT_PEER_H
#define GMT_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gmt_peer {
  uint32_t pipe; /* the connection (nng pipe id) */
  int64_t pid;   /* -1: not known */
  int64_t uid;   /* -1: not known */
  int64_t gid;   /* primary group; -1: not known */
  bool loopback; /* ipc://, or tcp:// from a loopback address */
} gmt_peer_t;

/* The owner (uid) and inode of the TCP socket at local address addr:port
 * (network byte order; 4 bytes for AF_INET, 16 for AF_INET6) connected to
 * raddr:rport, from the text of /proc/net/tcp or tcp6. 0 or -ENOENT. */
int gmt_peer_tcp_parse(const char *text, int family, const uint8_t *addr, uint16_t port,
                       const uint8_t *raddr, uint16_t rport, uint32_t *uid, uint64_t *inode);

/* As above, reading this network namespace's /proc/net/tcp{,6}. */
int gmt_peer_tcp_owner(int family, const uint8_t *addr, uint16_t port, const uint8_t *raddr,
                       uint16_t rport, uint32_t *uid, uint64_t *inode);

/* The one process that holds socket inode open (a scan of /proc/PID/fd;
 * only processes this one may look into). -ENOENT: none seen; -EEXIST:
 * more than one process holds it (a fork in between), so none is named. */
int gmt_peer_socket_pid(uint64_t inode, int64_t *pid);

/* Whether addr (network byte order, family AF_INET or AF_INET6) is a
 * loopback address, v4-mapped ones included. */
bool gmt_peer_addr_loopback(int family, const uint8_t *addr);

/* Whether a listening url is reachable only from this machine: ipc://,
 * or tcp:// on a loopback address or localhost. */
bool gmt_url_is_local(const char *url);

/* The users a daemon admits: its own, root, and those listed. */
typedef struct gmt_admit {
  uint32_t uids[32];
  size_t nuids;
  uint32_t gids[32];
  size_t ngids;
} gmt_admit_t;

/* Adds a user or group by name or number (--allow-uid / --allow-gid).
 * -EINVAL with err filled in. */
int gmt_admit_add_uid(gmt_admit_t *a, const char *name, char *err, size_t errlen);
int gmt_admit_add_gid(gmt_admit_t *a, const char *name, char *err, size_t errlen);

/* Whether the peer's user is admitted: its uid is ours, root's or listed,
 * or its primary group (or, when its pid is known, any of its groups) is
 * listed. A peer whose uid is unknown is not admitted. */
bool gmt_admit_peer(const gmt_admit_t *a, const gmt_peer_t *p);

/* "uid 1001 (pid 4242)" or "an unknown peer", for refusals. */
const char *gmt_peer_str(const gmt_peer_t *p, char *buf, size_t len);

#endif
