/* The server side of the wire: an nng REP socket with many contexts, so
 * that a request that must wait (a token, say) does not hold up others.
 * Each context receives, hands the decoded request to the handler, and
 * sends the reply whenever and from whichever thread it comes. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "gmt_bounded.h"
#include "gmt_error.h"
#include "gmt_ipc_watch.h"
#include "gmt_log.h"
#include "gmt_peer.h"
#include "gmt_unixsock.h"
#include "gmt_wire.h"

enum call_state { CALL_RECV, CALL_HANDLER, CALL_SEND };

struct gmt_call {
  gmt_server_t *server;
  nng_ctx ctx;
  nng_aio *aio;
  enum call_state state;
  Gmt__Envelope *req;
  nng_pipe pipe; /* the connection the request came on */
};

/* What is known of a connection's peer, kept while it is open. */
typedef struct peer_entry {
  struct peer_entry *next;
  gmt_peer_t peer;
  bool pid_tried; /* a tcp peer's pid is looked for once, if ever asked */
} peer_entry_t;

#define GMT_SERVER_MAX_IPC 8

struct gmt_server {
  nng_socket sock;
  gmt_server_cb cb;
  void *arg;
  int ncalls;
  struct gmt_call *calls;
  char *ipc_paths[GMT_SERVER_MAX_IPC];
  nng_listener ipc_listeners[GMT_SERVER_MAX_IPC];
  int nipc;
  gmt_ipc_watch_t *ipc_watch; /* makes a listener that stopped again */
  volatile int closing;
  pthread_mutex_t peers_mu;
  peer_entry_t *peers;
  int64_t ipc_gid; /* the group given the ipc sockets, -1: ours */
  uint64_t refused_said_ms;
};

static void call_receive(struct gmt_call *call)
{
  call->state = CALL_RECV;
  nng_ctx_recv(call->ctx, call->aio);
}

static int call_send(struct gmt_call *call, const Gmt__Envelope *rep)
{
  nng_msg *msg;
  void *buf;
  size_t len;
  int rv;

  /* rep may point into the request: pack before freeing it. */
  rv = gmt_wire_pack(rep, &buf, &len);
  gmt_wire_free(call->req);
  call->req = NULL;
  if (rv == 0) {
    rv = gmt__from_nng(nng_msg_alloc(&msg, 0));
    if (rv == 0 && (rv = gmt__from_nng(nng_msg_append(msg, buf, len))) != 0)
      nng_msg_free(msg);
    free(buf);
  }
  if (rv) {
    /* Nothing can go back; drop the request so the context serves on. */
    gmt_warn("cannot send a reply: %s", gmt_strerror(rv));
    call_receive(call);
    return rv;
  }
  call->state = CALL_SEND;
  nng_aio_set_msg(call->aio, msg);
  nng_ctx_send(call->ctx, call->aio);
  return 0;
}

static void reply_error(struct gmt_call *call, int code, const char *text)
{
  Gmt__Envelope rep = GMT__ENVELOPE__INIT;
  Gmt__Error err = GMT__ERROR__INIT;

  err.code = code;
  err.message = (char *)text;
  gmt_wire_set_body(&rep, GMT__ENVELOPE__BODY_ERROR, &err);
  call_send(call, &rep);
}

static void call_cb(void *arg)
{
  struct gmt_call *call = arg;
  gmt_server_t *s = call->server;
  nng_msg *msg;
  int rv = nng_aio_result(call->aio);

  if (call->state == CALL_SEND) {
    if (rv)
      nng_msg_free(nng_aio_get_msg(call->aio));
    if (rv == NNG_ECLOSED || s->closing)
      return;
    call_receive(call);
    return;
  }
  if (rv) {
    if (rv == NNG_ECLOSED || s->closing)
      return;
    call_receive(call);
    return;
  }
  msg = nng_aio_get_msg(call->aio);
  call->pipe = nng_msg_get_pipe(msg);
  rv = gmt_wire_unpack(nng_msg_body(msg), nng_msg_len(msg), &call->req);
  nng_msg_free(msg);
  if (rv == GMT_EVERSION) {
    char text[96];

    snprintf(text, sizeof(text), "protocol version newer than %u; upgrade this peer",
             GMT_PROTOCOL_VERSION);
    reply_error(call, rv, text);
    return;
  }
  if (rv) {
    reply_error(call, rv, "message does not decode as a gmt envelope");
    return;
  }
  call->state = CALL_HANDLER;
  s->cb(s->arg, call, call->req);
}

static void resolve(nng_pipe p, gmt_peer_t *peer, const Gmt__Caller *claim);

/* A connection came: note who it is from, and turn it away if its user
 * already holds GMT_SERVER_MAX_PER_USER (so that one user cannot take
 * every descriptor and lock everyone else out). */
static void on_pipe_added(nng_pipe p, nng_pipe_ev ev, void *arg)
{
  (void)ev;
  gmt_server_t *s = arg;
  peer_entry_t *e = calloc(1, sizeof *e);
  if (!e)
    return; /* looked up again at its first call */
  e->peer = (gmt_peer_t){.pipe = (uint32_t)nng_pipe_id(p), .pid = -1, .uid = -1, .gid = -1};
  resolve(p, &e->peer, NULL);
  int64_t uid = e->peer.uid;
  bool limited = uid > 0 && uid != (int64_t)geteuid();
  size_t held = 0;
  pthread_mutex_lock(&s->peers_mu);
  for (peer_entry_t *q = s->peers; limited && q; q = q->next)
    held += q->peer.uid == uid;
  if (held < GMT_SERVER_MAX_PER_USER) {
    e->next = s->peers;
    s->peers = e;
    e = NULL;
  }
  pthread_mutex_unlock(&s->peers_mu);
  if (!e)
    return;
  free(e);
  nng_pipe_close(p);
  uint64_t now = gmt_now_ms();
  if (now - s->refused_said_ms >= 1000) { /* a flood says it once a second */
    s->refused_said_ms = now;
    gmt_warn("uid %lld holds %d connections already; refusing more", (long long)uid,
             GMT_SERVER_MAX_PER_USER);
  }
}

/* A connection closed: forget its peer (its pipe id is not reused while
 * the socket lives, but the memory would grow with every connection). */
static void on_pipe_removed(nng_pipe p, nng_pipe_ev ev, void *arg)
{
  (void)ev;
  gmt_server_t *s = arg;
  pthread_mutex_lock(&s->peers_mu);
  for (peer_entry_t **ep = &s->peers; *ep; ep = &(*ep)->next) {
    if ((*ep)->peer.pipe == (uint32_t)nng_pipe_id(p)) {
      peer_entry_t *gone = *ep;
      *ep = gone->next;
      free(gone);
      break;
    }
  }
  pthread_mutex_unlock(&s->peers_mu);
}

int gmt_server_new(gmt_server_t **out, int ncontexts, gmt_server_cb cb, void *arg)
{
  gmt_server_t *s;
  int rv, i;

  *out = NULL;
  if (ncontexts < 1 || !cb)
    return -EINVAL;
  s = calloc(1, sizeof(*s));
  if (!s)
    return -ENOMEM;
  s->cb = cb;
  s->arg = arg;
  s->ipc_gid = -1;
  s->calls = calloc((size_t)ncontexts, sizeof(*s->calls));
  if (!s->calls) {
    free(s);
    return -ENOMEM;
  }
  pthread_mutex_init(&s->peers_mu, NULL);
  rv = nng_rep0_open(&s->sock);
  if (rv == 0)
    rv = nng_pipe_notify(s->sock, NNG_PIPE_EV_ADD_PRE, on_pipe_added, s);
  if (rv == 0)
    rv = nng_pipe_notify(s->sock, NNG_PIPE_EV_REM_POST, on_pipe_removed, s);
  if (rv) {
    if (nng_socket_id(s->sock) > 0)
      nng_close(s->sock);
    pthread_mutex_destroy(&s->peers_mu);
    free(s->calls);
    free(s);
    return gmt__from_nng(rv);
  }
  nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ, GMT_WIRE_MAX_FRAME);
  for (i = 0; i < ncontexts; i++) {
    struct gmt_call *call = &s->calls[i];

    call->server = s;
    if ((rv = nng_aio_alloc(&call->aio, call_cb, call)) != 0 ||
        (rv = nng_ctx_open(&call->ctx, s->sock)) != 0) {
      s->ncalls = i + (call->aio != NULL);
      gmt_server_free(s);
      return gmt__from_nng(rv);
    }
    s->ncalls = i + 1;
  }
  *out = s;
  return 0;
}

static int make_parent_dirs(const char *path)
{
  char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
  char *p;

  if (strlen(path) >= sizeof(dir))
    return -ENAMETOOLONG;
  strcpy(dir, path);
  for (p = dir + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(dir, 0755) && errno != EEXIST)
      return -errno;
    *p = '/';
  }
  return 0;
}

/* Listens on url (an ipc:// one: path) and gives the listener. */
static int listen_url(gmt_server_t *s, const char *url, const char *path, nng_listener *out)
{
  int rv;
  if (path) {
    if ((rv = make_parent_dirs(path)) != 0)
      return rv;
    if (gmt_unix_stale(path)) /* a file left by a process that died */
      unlink(path);
  }
  nng_listener l;
  rv = nng_listener_create(&l, s->sock, url);
  /* Only the owner and its group may connect to an ipc socket (0660);
   * a tcp:// peer is checked call by call (gmt_call_peer). */
  if (rv == 0 && path)
    rv = nng_listener_set_int(l, NNG_OPT_IPC_PERMISSIONS, 0660);
  if (rv == 0)
    rv = nng_listener_start(l, 0);
  if (rv)
    return gmt__from_nng(rv);
  /* lchown: a link planted at the path is not followed. */
  if (path && s->ipc_gid >= 0 && lchown(path, (uid_t)-1, (gid_t)s->ipc_gid) < 0) {
    rv = -errno;
    nng_listener_close(l);
    return rv;
  }
  *out = l;
  return 0;
}

int gmt_server_listen(gmt_server_t *s, const char *url)
{
  const char *path = strncmp(url, "ipc://", 6) == 0 ? url + 6 : NULL;
  if (path && s->nipc >= GMT_SERVER_MAX_IPC)
    return -E2BIG;
  nng_listener l;
  int rv = listen_url(s, url, path, &l);
  if (rv == 0 && path) {
    s->ipc_listeners[s->nipc] = l;
    s->ipc_paths[s->nipc++] = strdup(path);
  }
  return rv;
}

/* The watch found ipc listener i no longer accepting: a new one on the
 * same path (closing the old one removes the socket file). */
static int relisten(void *data, int i)
{
  gmt_server_t *s = data;
  char url[sizeof(((struct sockaddr_un *)0)->sun_path) + 8];
  snprintf(url, sizeof url, "ipc://%s", s->ipc_paths[i]);
  nng_listener_close(s->ipc_listeners[i]);
  return listen_url(s, url, s->ipc_paths[i], &s->ipc_listeners[i]);
}

void gmt_server_set_ipc_group(gmt_server_t *s, int64_t gid)
{
  s->ipc_gid = gid;
}

int gmt_server_start(gmt_server_t *s)
{
  for (int i = 0; i < s->ncalls; i++)
    call_receive(&s->calls[i]);
  if (s->nipc > 0) {
    int rc = gmt_ipc_watch_start(&s->ipc_watch, s->ipc_paths, s->nipc, GMT_IPC_WATCH_PERIOD_MS,
                                 GMT_IPC_WATCH_TIMEOUT_MS, relisten, s);
    if (rc < 0)
      gmt_warn("cannot watch the ipc sockets: %s", gmt_strerror(rc));
  }
  return 0;
}

void gmt_server_free(gmt_server_t *s)
{
  if (!s)
    return;
  s->closing = 1;
  /* First, so that no listener is made again while the socket closes. */
  gmt_ipc_watch_stop(s->ipc_watch);
  s->ipc_watch = NULL;
  /* nng 1.5's close of a socket can wait for ever on a connection it
   * never reaps (seen in gmt-pmgr's stop after the scheduler restarted).
   * Past the bound, nothing is freed: nng may still call back into it. */
  struct timespec until = gmt__deadline_in(GMT_SERVER_CLOSE_MS);
  if (gmt__close_until(s->sock, &until, "the server's socket") < 0) {
    for (int i = 0; i < s->nipc; i++)
      if (s->ipc_paths[i])
        unlink(s->ipc_paths[i]);
    return;
  }
  for (int i = 0; i < s->ncalls; i++) {
    struct gmt_call *call = &s->calls[i];

    if (call->aio) {
      nng_aio_stop(call->aio);
      nng_aio_free(call->aio);
    }
    gmt_wire_free(call->req);
  }
  for (int i = 0; i < s->nipc; i++) {
    if (s->ipc_paths[i])
      unlink(s->ipc_paths[i]);
    free(s->ipc_paths[i]);
  }
  while (s->peers) {
    peer_entry_t *e = s->peers;
    s->peers = e->next;
    free(e);
  }
  pthread_mutex_destroy(&s->peers_mu);
  free(s->calls);
  free(s);
}

const Gmt__Envelope *gmt_call_request(const gmt_call_t *call)
{
  return call->req;
}

int gmt_call_reply(gmt_call_t *call, const Gmt__Envelope *rep)
{
  if (call->state != CALL_HANDLER)
    return -EINVAL;
  return call_send(call, rep);
}

int gmt_call_reply_body(gmt_call_t *call, Gmt__Envelope__BodyCase c, const void *msg)
{
  Gmt__Envelope rep = GMT__ENVELOPE__INIT;

  if (call->state != CALL_HANDLER)
    return -EINVAL;
  if (gmt_wire_set_body(&rep, c, msg)) {
    /* Our bug, not the peer's; the call is still answered once. */
    gmt_warn("reply of case %d with a message of another type", (int)c);
    reply_error(call, -EINVAL, "the server built a malformed reply");
    return -EINVAL;
  }
  return call_send(call, &rep);
}

int gmt_call_reply_error(gmt_call_t *call, int code, const char *fmt, ...)
{
  char text[512];
  va_list ap;

  if (call->state != CALL_HANDLER)
    return -EINVAL;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  reply_error(call, code, text);
  return 0;
}

/* ---- who is calling ---- */

/* An nng address's family and bytes (network order). */
static int tcp_addr(const nng_sockaddr *a, const uint8_t **bytes, uint16_t *port)
{
  if (a->s_family == NNG_AF_INET) {
    *bytes = (const uint8_t *)&a->s_in.sa_addr;
    *port = a->s_in.sa_port;
    return AF_INET;
  }
  if (a->s_family == NNG_AF_INET6) {
    *bytes = a->s_in6.sa_addr;
    *port = a->s_in6.sa_port;
    return AF_INET6;
  }
  return -1;
}

/* Fills in what the kernel says of the peer behind pipe p. A tcp peer's
 * pid is its claim (the request's caller), taken only once that process
 * is seen holding the connection's socket as the socket's owner. */
static void resolve(nng_pipe p, gmt_peer_t *peer, const Gmt__Caller *claim)
{
  uint64_t v;
  if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &v) == 0) {
    peer->uid = (int64_t)v;
    peer->loopback = true;
    if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_GID, &v) == 0)
      peer->gid = (int64_t)v;
    if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &v) == 0 && v > 0)
      peer->pid = (int64_t)v;
    return;
  }
  nng_sockaddr ra, la;
  if (nng_pipe_get_addr(p, NNG_OPT_REMADDR, &ra) != 0 ||
      nng_pipe_get_addr(p, NNG_OPT_LOCADDR, &la) != 0)
    return;
  const uint8_t *rb, *lb;
  uint16_t rport, lport;
  int fam = tcp_addr(&ra, &rb, &rport);
  if (fam < 0 || tcp_addr(&la, &lb, &lport) != fam || !gmt_peer_addr_loopback(fam, rb))
    return;
  peer->loopback = true;
  bool need_pid = claim && peer->pid < 0;
  if (peer->uid >= 0 && !need_pid)
    return;
  /* The peer's socket is the one whose local end is its address: one
   * lookup gives its owner and the inode its process must hold. */
  uint32_t uid;
  uint64_t ino;
  if (gmt_peer_tcp_owner(fam, rb, rport, lb, lport, &uid, &ino) != 0)
    return;
  peer->uid = uid;
  if (!need_pid)
    return;
  if (claim->pid == 0) {
    gmt_debug("connection %u names no process (an older client?)", peer->pipe);
    return;
  }
  int rc = gmt_peer_pid_holds(claim->pid, claim->fd, ino, uid);
  if (rc == 0)
    peer->pid = claim->pid;
  else
    gmt_info("connection %u from uid %u claims pid %u, not taken: %s", peer->pipe, uid, claim->pid,
             rc == -ENOENT  ? "that process does not hold the connection"
             : rc == -EPERM ? "that process is not the connection's owner"
             : rc == -E2BIG ? "that process has too many descriptors to look through"
                            : gmt_strerror(rc));
}

bool gmt_call_caller_gone(const gmt_call_t *call)
{
  int peer;
  return nng_pipe_get_int(call->pipe, NNG_OPT_PEER, &peer) == NNG_ENOENT;
}

int gmt_call_peer(const gmt_call_t *call, gmt_peer_t *out, bool want_pid)
{
  gmt_server_t *s = call->server;
  uint32_t id = (uint32_t)nng_pipe_id(call->pipe);
  gmt_peer_t p = {.pipe = id, .pid = -1, .uid = -1, .gid = -1};
  bool tried = false;

  pthread_mutex_lock(&s->peers_mu);
  peer_entry_t *e = s->peers;
  while (e && e->peer.pipe != id)
    e = e->next;
  if (e) {
    p = e->peer;
    tried = e->pid_tried;
  }
  pthread_mutex_unlock(&s->peers_mu);
  if (e && (p.pid > 0 || !want_pid || tried)) {
    *out = p;
    return p.uid >= 0 ? 0 : -EPERM;
  }

  /* Outside the lock: a claimed pid is checked in /proc. An empty claim
   * stands for none, so that the lookup is tried once. */
  static const Gmt__Caller none = GMT__CALLER__INIT;
  const Gmt__Caller *claim = call->req && call->req->caller ? call->req->caller : &none;
  resolve(call->pipe, &p, want_pid ? claim : NULL);
  pthread_mutex_lock(&s->peers_mu);
  for (e = s->peers; e && e->peer.pipe != id; e = e->next)
    ;
  /* Kept only while its connection is: on_pipe_added made the entry and
   * on_pipe_removed frees it, so a pipe already gone is not added back. */
  if (e) {
    e->peer = p;
    e->pid_tried = e->pid_tried || want_pid;
  }
  pthread_mutex_unlock(&s->peers_mu);
  *out = p;
  return p.uid >= 0 ? 0 : -EPERM;
}

int gmt_call_admit(gmt_call_t *call, const gmt_admit_t *a, const char *who, bool need_pid,
                   gmt_peer_t *peer)
{
  char str[96];
  if (gmt_call_peer(call, peer, need_pid) < 0 || !gmt_admit_peer(a, peer)) {
    gmt_peer_str(peer, str, sizeof str);
    gmt_info("refused a call from %s: not a user %s admits", str, who);
    gmt_call_reply_error(call, -EPERM,
                         "%s does not admit %s (it admits uid %u, root, and the users and "
                         "groups given by --allow-uid/--allow-gid)",
                         who, str, (unsigned)geteuid());
    return -EPERM;
  }
  if (need_pid && (peer->pid <= 0 || peer->pid > UINT32_MAX)) {
    gmt_call_reply_error(call, -EPERM,
                         "%s cannot tell which process is calling (%s); connect through its "
                         "ipc:// socket",
                         who, gmt_peer_str(peer, str, sizeof str));
    return -EPERM;
  }
  return 0;
}
