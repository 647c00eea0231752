/* Who is at the other end of a connection, as the kernel says, and
 * whether a daemon admits that user (docs/security.md).
 *
 * A peer's word about itself (the pid in a request) is never taken: on an
 * ipc:// socket the kernel gives its pid, uid and gid (SO_PEERCRED, read
 * through nng); on tcp:// the connection must come from a loopback
 * address, its socket's owner is asked of the kernel (sock_diag), and
 * the process the caller claims to be (Envelope.caller) must hold that
 * socket (gmt_peer_pid_holds). */
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

/* As above, asking the kernel (sock_diag) for the one socket, or reading
 * this network namespace's /proc/net/tcp{,6} where it cannot answer. */
int gmt_peer_tcp_owner(int family, const uint8_t *addr, uint16_t port, const uint8_t *raddr,
                       uint16_t rport, uint32_t *uid, uint64_t *inode);

/* A tcp:// caller's own claim, checked: 0 when process pid holds socket
 * inode (its descriptor fd, when not 0, is tried first; else its own
 * descriptors are scanned, at most GMT_PEER_SCAN_MAX_FDS) and runs as
 * uid, the socket's owner. -EPERM: another user's process (or one that
 * changed users on exec); -ENOENT: it does not hold the socket; -E2BIG:
 * too many descriptors to scan; -errno: its /proc could not be read.
 * Costs the same however many processes and files the node has. */
#define GMT_PEER_SCAN_MAX_FDS 65536
int gmt_peer_pid_holds(int64_t pid, uint32_t fd, uint64_t inode, uint32_t uid);

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
