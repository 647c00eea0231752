/* The hook's connection to its pod manager: one blocking REQ peer of the
 * SP protocol that nng speaks (tcp:// and ipc://), written with plain
 * sockets.
 *
 * Why not gmt_client (nng): nng marks itself unusable in a forked child
 * ("nng is not fork-reentrant safe") and aborts the process on its next
 * call, so a child of a hooked process could never register, and nng's
 * worker threads would sit in every CUDA process. This needs neither: a
 * socket, a header, length-prefixed frames, one call at a time. Envelopes
 * are still packed and checked by gmtwire (pure protobuf-c).
 *
 * Wire (nng's sp-tcp / sp-ipc mappings): each side first sends
 *   00 'S' 'P' 00 <protocol u16 BE> 00 00      (REQ 0x30, REP 0x31)
 * then each message is <u64 BE length><payload> on tcp, with one more
 * leading byte 0x01 on ipc. A request's payload starts with a 32-bit BE
 * request id with its top bit set; the reply starts with the same id. */
#include "conn.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_unixsock.h"
#include "gmt_wire.h"

#define SP_PROTO_REQ 0x30
#define SP_PROTO_REP 0x31
#define MAX_REPLY (16u << 20)

struct gmt_conn {
  char *url;
  int fd; /* -1 while not connected */
  int ipc;
  uint32_t next_id;
  const _Atomic int *give_up;
  int slice_ms; /* how soon a wait notices it */
};

/* How long a call may wait: until at, or until *give_up turns nonzero. */
typedef struct {
  uint64_t at;
  const _Atomic int *give_up;
  int slice_ms;
} deadline_t;

static int wait_fd(int fd, short events, const deadline_t *dl)
{
  for (;;) {
    if (dl->give_up && atomic_load_explicit(dl->give_up, memory_order_relaxed))
      return -EHOSTDOWN;
    uint64_t now = gmt_now_ms();
    int left = now >= dl->at ? 0 : (int)(dl->at - now);
    if (dl->give_up && left > dl->slice_ms)
      left = dl->slice_ms;
    struct pollfd p = {.fd = fd, .events = events};
    int r = poll(&p, 1, left);
    if (r > 0)
      return 0;
    if (r == 0 && gmt_now_ms() >= dl->at)
      return -ETIMEDOUT;
    if (r < 0 && errno != EINTR)
      return -errno;
  }
}

static int send_all(int fd, const void *buf, size_t len, const deadline_t *dl)
{
  const char *p = buf;
  while (len) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int rc = wait_fd(fd, POLLOUT, dl);
      if (rc < 0)
        return rc;
      continue;
    }
    return n < 0 ? -errno : -EPIPE;
  }
  return 0;
}

static int recv_all(int fd, void *buf, size_t len, const deadline_t *dl)
{
  char *p = buf;
  while (len) {
    ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n == 0)
      return -ECONNRESET;
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int rc = wait_fd(fd, POLLIN, dl);
      if (rc < 0)
        return rc;
      continue;
    }
    return -errno;
  }
  return 0;
}

static void put_be64(unsigned char *p, uint64_t v)
{
  for (int i = 7; i >= 0; i--, v >>= 8)
    p[i] = (unsigned char)v;
}

static uint64_t get_be64(const unsigned char *p)
{
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v = v << 8 | p[i];
  return v;
}

static int connect_fd(int fd, const struct sockaddr *sa, socklen_t len, const deadline_t *dl)
{
  if (connect(fd, sa, len) == 0)
    return 0;
  if (errno != EINPROGRESS && errno != EAGAIN)
    return -errno;
  int rc = wait_fd(fd, POLLOUT, dl);
  if (rc < 0)
    return rc;
  int err = 0;
  socklen_t el = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
    return -errno;
  return -err;
}

/* A connected, non-blocking socket for url, or a negative code. */
static int dial(const char *url, int *ipc, const deadline_t *dl)
{
  int fd = -1, rc;
  if (!strncmp(url, "ipc://", 6)) {
    struct sockaddr_un sun;
    if ((rc = gmt_unix_addr(url + 6, &sun)) < 0)
      return rc;
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
      return -errno;
    rc = connect_fd(fd, (struct sockaddr *)&sun, sizeof(sun), dl);
    *ipc = 1;
  } else if (!strncmp(url, "tcp://", 6)) {
    char host[256];
    const char *hp = url + 6, *colon = strrchr(hp, ':');
    if (!colon || (size_t)(colon - hp) >= sizeof(host))
      return -EINVAL;
    memcpy(host, hp, (size_t)(colon - hp));
    host[colon - hp] = '\0';
    /* [::1]:port */
    char *h = host;
    if (h[0] == '[' && h[strlen(h) - 1] == ']') {
      h[strlen(h) - 1] = '\0';
      h++;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int g = getaddrinfo(*h ? h : NULL, colon + 1, &hints, &ai);
    if (g != 0)
      return g == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
    rc = -ECONNREFUSED;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
      fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0) {
        rc = -errno;
        continue;
      }
      rc = connect_fd(fd, a->ai_addr, a->ai_addrlen, dl);
      if (rc == 0)
        break;
      close(fd);
      fd = -1;
    }
    freeaddrinfo(ai);
    *ipc = 0;
  } else {
    return -EPROTONOSUPPORT;
  }
  if (rc < 0) {
    if (fd >= 0)
      close(fd);
    return rc;
  }
  /* SP header both ways; the peer must be a REP. */
  unsigned char hdr[8] = {0, 'S', 'P', 0, 0, SP_PROTO_REQ, 0, 0}, peer[8];
  rc = send_all(fd, hdr, sizeof(hdr), dl);
  if (rc == 0)
    rc = recv_all(fd, peer, sizeof(peer), dl);
  if (rc == 0 && (peer[0] != 0 || peer[1] != 'S' || peer[2] != 'P' || peer[3] != 0 ||
                  peer[4] != 0 || peer[5] != SP_PROTO_REP))
    rc = -EPROTO;
  if (rc < 0) {
    close(fd);
    return rc;
  }
  return fd;
}

int gmt__conn_open(gmt_conn_t **out, const char *url, int timeout_ms)
{
  *out = NULL;
  gmt_conn_t *c = calloc(1, sizeof(*c));
  if (!c || !(c->url = strdup(url))) {
    free(c);
    return -ENOMEM;
  }
  c->next_id = (uint32_t)getpid() * 2654435761u;
  deadline_t dl = {gmt_now_ms() + (uint64_t)timeout_ms, NULL, 0};
  c->fd = dial(url, &c->ipc, &dl);
  if (c->fd < 0) {
    int rc = c->fd;
    free(c->url);
    free(c);
    return rc;
  }
  *out = c;
  return 0;
}

void gmt__conn_set_give_up(gmt_conn_t *c, const _Atomic int *flag, int slice_ms)
{
  c->give_up = flag;
  c->slice_ms = slice_ms > 0 ? slice_ms : 1;
}

void gmt__conn_close(gmt_conn_t *c)
{
  if (!c)
    return;
  if (c->fd >= 0)
    close(c->fd);
  free(c->url);
  free(c);
}

static int connect_if_needed(gmt_conn_t *c, const deadline_t *dl)
{
  if (c->fd >= 0)
    return 0;
  c->fd = dial(c->url, &c->ipc, dl);
  if (c->fd >= 0)
    return 0;
  int rc = c->fd;
  c->fd = -1;
  return rc;
}

static int call_once(gmt_conn_t *c, const void *body, size_t blen, void **reply, size_t *rlen,
                     const deadline_t *dl)
{
  uint32_t id = (c->next_id++ & 0x7fffffffu) | 0x80000000u;
  /* One send per request: a header sent apart from its body would wait
   * on Nagle and a delayed ACK. */
  size_t hl = c->ipc ? 13 : 12;
  unsigned char *frame = malloc(hl + blen);
  if (!frame)
    return -ENOMEM;
  size_t o = 0;
  if (c->ipc)
    frame[o++] = 1;
  put_be64(frame + o, 4 + (uint64_t)blen);
  o += 8;
  for (int i = 0; i < 4; i++)
    frame[o++] = (unsigned char)(id >> (24 - 8 * i));
  memcpy(frame + o, body, blen);
  int rc = send_all(c->fd, frame, hl + blen, dl);
  free(frame);
  /* Replies to earlier requests that timed out may still arrive: skip
   * every frame that is not the answer to this one. */
  while (rc == 0) {
    unsigned char fh[9];
    size_t fl = c->ipc ? 9 : 8;
    rc = recv_all(c->fd, fh, fl, dl);
    if (rc < 0)
      break;
    uint64_t len = get_be64(fh + fl - 8);
    if (len < 4 || len > MAX_REPLY) {
      rc = -EPROTO;
      break;
    }
    char *buf = malloc((size_t)len);
    if (!buf) {
      rc = -ENOMEM;
      break;
    }
    rc = recv_all(c->fd, buf, (size_t)len, dl);
    if (rc < 0) {
      free(buf);
      break;
    }
    uint32_t rid = (uint32_t)(unsigned char)buf[0] << 24 | (uint32_t)(unsigned char)buf[1] << 16 |
                   (uint32_t)(unsigned char)buf[2] << 8 | (uint32_t)(unsigned char)buf[3];
    if (rid != id) {
      free(buf);
      continue;
    }
    memmove(buf, buf + 4, (size_t)len - 4);
    *reply = buf;
    *rlen = (size_t)len - 4;
    return 0;
  }
  /* A broken or timed-out exchange leaves the stream in an unknown state:
   * start again on a fresh connection next time. */
  close(c->fd);
  c->fd = -1;
  return rc;
}

int gmt__conn_call(gmt_conn_t *c, const Gmt__Envelope *req, Gmt__Envelope **rep, int timeout_ms)
{
  *rep = NULL;
  void *body = NULL, *reply = NULL;
  size_t blen = 0, rlen = 0;
  deadline_t dl = {gmt_now_ms() + (uint64_t)timeout_ms, c->give_up, c->slice_ms};
  /* Connected first, so that the request can name its descriptor: over
   * tcp:// the pod manager checks that /proc/PID/fd/FD is this socket,
   * one readlink however many files the node has open. */
  int rc = connect_if_needed(c, &dl);
  if (rc < 0)
    return rc;
  Gmt__Envelope e = *req;
  Gmt__Caller me = GMT__CALLER__INIT;
  me.pid = (uint32_t)getpid();
  me.fd = (uint32_t)c->fd;
  e.caller = &me;
  rc = gmt_wire_pack(&e, &body, &blen);
  if (rc < 0)
    return rc;
  rc = call_once(c, body, blen, &reply, &rlen, &dl);
  free(body);
  if (rc < 0)
    return rc;
  rc = gmt_wire_unpack(reply, rlen, rep);
  free(reply);
  return rc;
}
