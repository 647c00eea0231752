/* Who is calling, from the kernel's own tables (see gmt_peer.h), and who
 * a daemon admits. Pure reads of /proc and the user database: nothing
 * here talks nng, so that the server (server.c) and the tests share it. */
#include "gmt_peer.h"

#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "gmt_error.h"

/* /proc/net/tcp prints each address as the native-endian words of its
 * network-order bytes, and the port in host order. */
static void addr_hex(int family, const uint8_t *addr, uint16_t port_be, char *out, size_t len)
{
  size_t words = family == AF_INET6 ? 4 : 1, n = 0;
  for (size_t i = 0; i < words; i++) {
    uint32_t w;
    memcpy(&w, addr + 4 * i, 4);
    n += (size_t)snprintf(out + n, len - n, "%08" PRIX32, w);
  }
  snprintf(out + n, len - n, ":%04X", (unsigned)(((port_be & 0xff) << 8) | (port_be >> 8)));
}

int gmt_peer_tcp_parse(const char *text, int family, const uint8_t *addr, uint16_t port,
                       const uint8_t *raddr, uint16_t rport, uint32_t *uid, uint64_t *inode)
{
  char local[64], remote[64];
  addr_hex(family, addr, port, local, sizeof local);
  addr_hex(family, raddr, rport, remote, sizeof remote);
  for (const char *line = text; line && *line;) {
    const char *end = strchr(line, '\n');
    char l[64], r[64];
    unsigned long long ino;
    unsigned u;
    /* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
    if (sscanf(line, " %*s %63s %63s %*s %*s %*s %*s %u %*s %llu", l, r, &u, &ino) == 4 &&
        strcasecmp(l, local) == 0 && strcasecmp(r, remote) == 0) {
      *uid = u;
      *inode = ino;
      return 0;
    }
    line = end ? end + 1 : NULL;
  }
  return -ENOENT;
}

static char *read_all(const char *path)
{
  FILE *f = fopen(path, "re");
  if (!f)
    return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n - 1, f);
    if (n < cap - 1)
      break;
    char *more = cap < (64u << 20) ? realloc(buf, cap * 2) : NULL;
    if (!more) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = more;
    cap *= 2;
  }
  fclose(f);
  if (buf)
    buf[n] = '\0';
  return buf;
}

/* The kernel's exact lookup of one TCP socket by its four-tuple
 * (sock_diag): one message, however many sockets the machine has, where
 * reading /proc/net/tcp costs a walk of all of them. */
static int diag_owner(int family, const uint8_t *addr, uint16_t port, const uint8_t *raddr,
                      uint16_t rport, uint32_t *uid, uint64_t *inode)
{
  int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0)
    return -errno;
  struct timeval tv = {.tv_sec = 1};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct {
    struct nlmsghdr nh;
    struct inet_diag_req_v2 r;
  } req = {
      .nh = {.nlmsg_len = sizeof req,
             .nlmsg_type = SOCK_DIAG_BY_FAMILY,
             .nlmsg_flags = NLM_F_REQUEST},
      .r = {.sdiag_family = (uint8_t)family,
            .sdiag_protocol = IPPROTO_TCP,
            .idiag_states = ~0u,
            .id = {.idiag_sport = port,
                   .idiag_dport = rport,
                   .idiag_cookie = {INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE}}},
  };
  size_t alen = family == AF_INET6 ? 16 : 4;
  memcpy(req.r.id.idiag_src, addr, alen);
  memcpy(req.r.id.idiag_dst, raddr, alen);
  struct sockaddr_nl nl = {.nl_family = AF_NETLINK};
  int rc = -ENOENT;
  if (sendto(fd, &req, sizeof req, 0, (struct sockaddr *)&nl, sizeof nl) < 0) {
    rc = -errno;
    close(fd);
    return rc;
  }
  union {
    struct nlmsghdr nh;
    char buf[8192];
  } rep;
  ssize_t n = recv(fd, &rep, sizeof rep, 0);
  if (n < 0)
    rc = -errno;
  for (struct nlmsghdr *h = &rep.nh; n > 0 && NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
    if (h->nlmsg_type == NLMSG_ERROR) {
      const struct nlmsgerr *e = NLMSG_DATA(h);
      rc = e->error ? e->error : -ENOENT;
      break;
    }
    if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
        h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
      const struct inet_diag_msg *m = NLMSG_DATA(h);
      *uid = m->idiag_uid;
      *inode = m->idiag_inode;
      rc = 0;
      break;
    }
  }
  close(fd);
  return rc;
}

int gmt_peer_tcp_owner(int family, const uint8_t *addr, uint16_t port, const uint8_t *raddr,
                       uint16_t rport, uint32_t *uid, uint64_t *inode)
{
  /* /proc/net/tcp where sock_diag is missing (a kernel without
   * inet_diag): the same answer, slower. */
  int rc = diag_owner(family, addr, port, raddr, rport, uid, inode);
  if (rc == 0 || rc == -ENOENT)
    return rc;
  char *text = read_all(family == AF_INET6 ? "/proc/net/tcp6" : "/proc/net/tcp");
  if (!text)
    return errno ? -errno : -ENOMEM;
  rc = gmt_peer_tcp_parse(text, family, addr, port, raddr, rport, uid, inode);
  free(text);
  return rc;
}

/* Whether /proc/PID/fd/FD names the socket (the link reads
 * "socket:[INODE]"). */
static bool fd_is(const char *dir, const char *fd, const char *want)
{
  char path[96], target[64];
  snprintf(path, sizeof path, "%s/%s", dir, fd);
  ssize_t n = readlink(path, target, sizeof target - 1);
  if (n <= 0)
    return false;
  target[n] = '\0';
  return strcmp(target, want) == 0;
}

int gmt_peer_pid_holds(int64_t pid, uint32_t fd, uint64_t inode, uint32_t uid)
{
  if (pid <= 0 || pid > INT32_MAX)
    return -EINVAL;
  char dir[64], want[40], name[16];
  snprintf(dir, sizeof dir, "/proc/%" PRId64, pid);
  /* The process's effective user owns its /proc folder (root does, for
   * one that changed users on exec: a set-uid program that inherited the
   * caller's socket is not taken for the caller). */
  struct stat st;
  if (stat(dir, &st) < 0)
    return -errno;
  if (st.st_uid != uid)
    return -EPERM;
  snprintf(dir, sizeof dir, "/proc/%" PRId64 "/fd", pid);
  snprintf(want, sizeof want, "socket:[%" PRIu64 "]", inode);
  snprintf(name, sizeof name, "%" PRIu32, fd);
  if (fd > 0 && fd_is(dir, name, want))
    return 0;
  /* No descriptor named, or a wrong one: that one process's table,
   * bounded, never the node's. */
  DIR *fds = opendir(dir);
  if (!fds)
    return -errno;
  int rc = -ENOENT;
  size_t seen = 0;
  struct dirent *f;
  while ((f = readdir(fds))) {
    if (f->d_name[0] == '.')
      continue;
    if (++seen > GMT_PEER_SCAN_MAX_FDS) {
      rc = -E2BIG;
      break;
    }
    if (fd_is(dir, f->d_name, want)) {
      rc = 0;
      break;
    }
  }
  closedir(fds);
  return rc;
}

bool gmt_peer_addr_loopback(int family, const uint8_t *a)
{
  static const uint8_t v6_loop[16] = {[15] = 1};
  static const uint8_t v4_mapped[12] = {[10] = 0xff, [11] = 0xff};
  if (family == AF_INET)
    return a[0] == 127;
  if (family != AF_INET6)
    return false;
  return memcmp(a, v6_loop, 16) == 0 || (memcmp(a, v4_mapped, 12) == 0 && a[12] == 127);
}

bool gmt_url_is_local(const char *url)
{
  if (strncmp(url, "ipc://", 6) == 0)
    return true;
  if (strncmp(url, "tcp://", 6) != 0 && strncmp(url, "tcp4://", 7) != 0 &&
      strncmp(url, "tcp6://", 7) != 0)
    return false;
  const char *host = strstr(url, "://") + 3;
  if (strncmp(host, "localhost:", 10) == 0 || strncmp(host, "[::1]:", 6) == 0)
    return true;
  /* 127.0.0.0/8, dotted quad only: "127.evil.example" is a name */
  unsigned a, b, c, d;
  char colon;
  return sscanf(host, "%u.%u.%u.%u%c", &a, &b, &c, &d, &colon) == 5 && colon == ':' && a == 127 &&
         b < 256 && c < 256 && d < 256;
}

/* ---- admission ---- */

static int parse_id(const char *s, uint32_t *out)
{
  char *end;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (!*s || *end || errno || v >= UINT32_MAX)
    return -EINVAL;
  *out = (uint32_t)v;
  return 0;
}

/* A user or group by name or number into ids (--allow-uid, --allow-gid). */
static int add_id(uint32_t *ids, size_t *n, size_t cap, bool user, const char *name, char *err,
                  size_t errlen)
{
  const char *flag = user ? "--allow-uid" : "--allow-gid";
  uint32_t id;
  if (parse_id(name, &id) != 0) {
    const struct passwd *pw = user ? getpwnam(name) : NULL;
    const struct group *gr = user ? NULL : getgrnam(name);
    if (!pw && !gr) {
      snprintf(err, errlen, "%s %s: no such %s", flag, name, user ? "user" : "group");
      return -EINVAL;
    }
    id = pw ? pw->pw_uid : gr->gr_gid;
  }
  if (*n >= cap) {
    snprintf(err, errlen, "%s %s: at most %zu %s", flag, name, cap, user ? "users" : "groups");
    return -EINVAL;
  }
  ids[(*n)++] = id;
  return 0;
}

int gmt_admit_add_uid(gmt_admit_t *a, const char *name, char *err, size_t errlen)
{
  return add_id(a->uids, &a->nuids, sizeof a->uids / sizeof a->uids[0], true, name, err, errlen);
}

int gmt_admit_add_gid(gmt_admit_t *a, const char *name, char *err, size_t errlen)
{
  return add_id(a->gids, &a->ngids, sizeof a->gids / sizeof a->gids[0], false, name, err, errlen);
}

static bool listed(const uint32_t *ids, size_t n, int64_t id)
{
  for (size_t i = 0; i < n; i++)
    if ((int64_t)ids[i] == id)
      return true;
  return false;
}

/* Whether a process's supplementary groups (its "Groups:" line) meet the
 * list. */
static bool groups_listed(const gmt_admit_t *a, int64_t pid)
{
  char path[64], line[4096];
  snprintf(path, sizeof path, "/proc/%" PRId64 "/status", pid);
  FILE *f = fopen(path, "re");
  if (!f)
    return false;
  bool yes = false;
  while (!yes && fgets(line, sizeof line, f)) {
    if (strncmp(line, "Groups:", 7) != 0)
      continue;
    for (char *s = line + 7, *end;; s = end) {
      long g = strtol(s, &end, 10);
      if (end == s)
        break;
      yes = yes || listed(a->gids, a->ngids, g);
    }
    break;
  }
  fclose(f);
  return yes;
}

bool gmt_admit_peer(const gmt_admit_t *a, const gmt_peer_t *p)
{
  if (p->uid < 0)
    return false;
  if (p->uid == 0 || p->uid == (int64_t)geteuid() || listed(a->uids, a->nuids, p->uid))
    return true;
  if (a->ngids == 0)
    return false;
  return listed(a->gids, a->ngids, p->gid) || (p->pid > 0 && groups_listed(a, p->pid));
}

const char *gmt_peer_str(const gmt_peer_t *p, char *buf, size_t len)
{
  if (p->uid < 0)
    snprintf(buf, len, "an unknown peer");
  else if (p->pid > 0)
    snprintf(buf, len, "uid %" PRId64 " (pid %" PRId64 ")", p->uid, p->pid);
  else
    snprintf(buf, len, "uid %" PRId64, p->uid);
  return buf;
}
