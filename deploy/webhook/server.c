/* gmt-webhook's HTTPS server (server.h). nng's TLS streams carry the
 * bytes; the request is read with proto/util/http_head.c and answered here.
 *
 * Not nng's HTTP server: it keeps a connection for as long as its client
 * likes and caps nothing. Any pod of the cluster that the NetworkPolicy
 * lets through can reach the webhook's Service, so it could hold enough
 * connections, or bodies, that the API server's reviews time out or the
 * webhook is killed for its memory; pods would then start without the
 * hook, or not at all (failurePolicy). Here:
 * - at most GMT_WEBHOOK_MAX_CONNS connections. One more closes the oldest
 *   whose request is not whole yet (the API server sends its request at
 *   once), or is closed itself when every connection is being answered;
 * - --timeout (GMT_WEBHOOK_TIMEOUT_MS) to send the whole request (a head
 *   of at most 8 KiB, a body of at most --max-body), as long again to take
 *   the answer;
 * - a body is read only once the bytes held for bodies leave room for it
 *   (GMT_WEBHOOK_BODIES of the largest); until then the request waits, in
 *   order, and past its --timeout gets 503;
 * - reviews are parsed on GMT_WEBHOOK_PARSERS threads of our own, never on
 *   nng's, which carry every connection's TLS;
 * - an answer given before the request was whole (a body over --max-body,
 *   a bad head) is followed by reading and dropping what the client still
 *   sends, bounded, before the close: closing with unread bytes makes the
 *   kernel send a reset, which destroys the answer before the client
 *   reads it;
 * - one request per connection (Connection: close);
 * - every REAP_EVERY_MS, a connection past its deadline is closed here.
 *   nng 1.5's TLS stream loses an operation started after it has seen
 *   the peer's close (the TCP read it then starts on its closed aio never
 *   calls back), and then neither the operation's timeout nor an abort
 *   ends it; only closing the stream does (it fails what it has queued).
 *   A client that sends its last bytes and closes would otherwise hold its
 *   connection, and its place among the 32, for good.
 *
 * Each connection has one aio, and its callbacks run on nng's threads one
 * at a time (or on a parser, while no operation of it is pending); the
 * lists of connections, the budget, the queues and each connection's state
 * are under the server's lock, which is also held while an operation is
 * started, so that an abort cannot fall between the check and the start. */
#include "server.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/supplemental/util/platform.h>

#include "gmt_http_head.h"
#include "gmt_log.h"
#include "scan.h"

#define STOP_WAIT_MS 2000
#define REAP_EVERY_MS 250
#define DRAIN_UNKNOWN SIZE_MAX

typedef enum {
  ST_HEAD,   /* reading the head (and what of the body came with it) */
  ST_WAIT,   /* head read; waiting for room for the body (asleep) */
  ST_BODY,   /* reading the body, its bytes counted in the budget */
  ST_REVIEW, /* whole: queued for a parser, or being parsed */
  ST_SEND,   /* sending the answer */
  ST_DRAIN,  /* answered early: dropping what the client still sends */
} state_t;

typedef enum { OP_RECV, OP_SEND, OP_DRAIN, OP_SLEEP } op_t;

typedef struct conn conn_t;

struct conn {
  gmt_webhook_server_t *srv;
  nng_stream *s;
  nng_aio *aio;
  char *buf; /* the request as read */
  size_t len, cap;
  size_t need;    /* once the head is read: its bytes and the body's */
  size_t body_at; /* where the body starts */
  bool sleeping;  /* the pending operation is the wait for room */
  size_t drain;   /* after the answer: bytes the client still sends, to be read
                     and dropped (DRAIN_UNKNOWN: until it closes) */
  size_t drained;
  char *out; /* the answer */
  size_t out_len, out_off;
  nng_sockaddr peer; /* its client's address (the port aside) */
  /* Under the server's lock: */
  nng_time deadline;
  state_t state;
  bool going;  /* evicted, or the server stops: the next step ends it */
  bool closed; /* its stream closed by the server (going too) */
  size_t held; /* bytes counted in the server's budget */
  conn_t *prev, *next;
  conn_t *qnext; /* in the wait queue or the review queue */
};

typedef struct queue {
  conn_t *head, *tail;
} queue_t;

struct gmt_webhook_server {
  nng_stream_listener *l;
  nng_aio *accept;
  nng_aio *reap; /* the deadlines' timer */
  nng_mtx *mu;
  nng_cv *cv;   /* the last connection went */
  nng_cv *work; /* a review is queued, or the server stops */
  conn_t *oldest, *newest;
  int n;
  bool stopping;
  nng_time evicted_said, busy_said;
  const gmt_webhook_opts_t *o;
  size_t max_body;
  int timeout_ms;
  size_t budget, held; /* bytes of requests whose bodies may be held, and held now */
  queue_t waiting;     /* for room, in order */
  queue_t reviews;     /* for a parser */
  nng_thread *parsers[GMT_WEBHOOK_PARSERS];
};

static void push_locked(queue_t *q, conn_t *c)
{
  c->qnext = NULL;
  if (q->tail)
    q->tail->qnext = c;
  else
    q->head = c;
  q->tail = c;
}

static conn_t *pop_locked(queue_t *q)
{
  conn_t *c = q->head;
  if (c && !(q->head = c->qnext))
    q->tail = NULL;
  return c;
}

static void remove_locked(queue_t *q, conn_t *c)
{
  conn_t *prev = NULL;
  for (conn_t *x = q->head; x; prev = x, x = x->qnext)
    if (x == c) {
      if (prev)
        prev->qnext = c->qnext;
      else
        q->head = c->qnext;
      if (q->tail == c)
        q->tail = prev;
      return;
    }
}

/* Room has come: the waiting requests that now fit, in order, are counted
 * and woken (their sleep aborted; the callback finds them in ST_BODY). */
static void wake_locked(gmt_webhook_server_t *srv)
{
  conn_t *c;
  while ((c = srv->waiting.head) && srv->held + c->need <= srv->budget) {
    pop_locked(&srv->waiting);
    srv->held += c->need;
    c->held = c->need;
    c->state = ST_BODY;
    nng_aio_abort(c->aio, NNG_ECANCELED);
  }
}

static void release_locked(conn_t *c)
{
  if (c->held) {
    c->srv->held -= c->held;
    c->held = 0;
    wake_locked(c->srv);
  }
}

/* ---- a connection's end ---- */

/* Tells c to go (lock held): its pending operation ends with an error,
 * through the stream's close where an abort alone would be lost (the
 * comment at the top), and its callback then ends it. */
static void cut_locked(conn_t *c, int why)
{
  c->going = true;
  if (!c->closed && c->state != ST_REVIEW) { /* a parser holds it: its answer sees going */
    c->closed = true;
    nng_stream_close(c->s);
  }
  nng_aio_abort(c->aio, why);
}

/* Called from c's own callback, from the parser that holds it, or before
 * its first operation. */
static void conn_done(conn_t *c)
{
  gmt_webhook_server_t *srv = c->srv;
  nng_mtx_lock(srv->mu);
  if (c->state == ST_WAIT)
    remove_locked(&srv->waiting, c);
  release_locked(c);
  if (c->prev)
    c->prev->next = c->next;
  else
    srv->oldest = c->next;
  if (c->next)
    c->next->prev = c->prev;
  else
    srv->newest = c->prev;
  if (--srv->n == 0)
    nng_cv_wake(srv->cv);
  bool closed = c->closed;
  nng_mtx_unlock(srv->mu);
  if (!closed)
    nng_stream_close(c->s);
  nng_stream_free(c->s);
  nng_aio_reap(c->aio); /* this may be its callback: freed from another thread */
  free(c->buf);
  free(c->out);
  free(c);
}

/* Starts c's next operation before its deadline, unless it has been told
 * to go (lock held). false: it is to end now. */
static bool start_locked(conn_t *c, op_t op)
{
  nng_time now = nng_clock();
  if (now >= c->deadline) {
    gmt_debug("a client took more than %d ms to %s; closed", c->srv->timeout_ms,
              op == OP_SEND ? "take its answer" : "send its request");
    return false;
  }
  if (c->going)
    return false;
  nng_duration left = (nng_duration)(c->deadline - now);
  c->sleeping = op == OP_SLEEP;
  if (op == OP_SLEEP) {
    nng_aio_set_timeout(c->aio, NNG_DURATION_DEFAULT);
    nng_sleep_aio(left, c->aio);
    return true;
  }
  nng_iov iov = op == OP_SEND    ? (nng_iov){c->out + c->out_off, c->out_len - c->out_off}
                : op == OP_DRAIN ? (nng_iov){c->buf, c->cap}
                                 : (nng_iov){c->buf + c->len, c->cap - c->len};
  if (nng_aio_set_iov(c->aio, 1, &iov) != 0)
    return false;
  nng_aio_set_timeout(c->aio, left);
  if (op == OP_SEND)
    nng_stream_send(c->s, c->aio);
  else
    nng_stream_recv(c->s, c->aio);
  return true;
}

static bool start(conn_t *c, op_t op)
{
  nng_mtx_lock(c->srv->mu);
  bool ok = start_locked(c, op);
  nng_mtx_unlock(c->srv->mu);
  return ok;
}

/* ---- answers ---- */

/* drain: the bytes of the request not read yet (answered early), which
 * the client may still send: read and dropped before the close. */
static void answer(conn_t *c, int status, const char *allow, const char *type, const char *body,
                   size_t blen, bool head, size_t drain)
{
  char hdr[320];
  int hlen = snprintf(hdr, sizeof hdr,
                      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s%s"
                      "Connection: close\r\n\r\n",
                      status, gmt_http_reason(status), type, blen, allow ? "Allow: " : "",
                      allow ? allow : "", allow ? "\r\n" : "");
  c->drain = drain;
  c->out_len = (size_t)hlen + (head ? 0 : blen);
  if (!(c->out = malloc(c->out_len))) {
    conn_done(c);
    return;
  }
  memcpy(c->out, hdr, (size_t)hlen);
  if (!head)
    memcpy(c->out + hlen, body, blen);
  nng_mtx_lock(c->srv->mu);
  c->deadline = nng_clock() + (nng_duration)c->srv->timeout_ms;
  if (c->state == ST_WAIT)
    remove_locked(&c->srv->waiting, c);
  c->state = ST_SEND;
  release_locked(c); /* an answer given early reads no body */
  bool ok = start_locked(c, OP_SEND);
  nng_mtx_unlock(c->srv->mu);
  if (!ok)
    conn_done(c);
}

static void answer_text(conn_t *c, int status, const char *allow, const char *text, bool head,
                        size_t drain)
{
  answer(c, status, allow, "text/plain; charset=utf-8", text, strlen(text), head, drain);
}

/* The request's head is whole: what it asks, and how much body to read
 * (c->need). false when it has been answered already. */
static bool route(conn_t *c, const gmt_http_head_t *h)
{
  bool head = h->method == GMT_HTTP_HEAD;
  /* Answered now, what the client still sends is dropped before the
   * close: the rest of its body, or of a bad or cut head, or of a POST
   * whose length it did not say. */
  size_t had = c->len > h->len ? c->len - h->len : 0; /* of the body, read with the head */
  size_t drain = 0;
  if (h->status != 0 || (h->content_length < 0 && h->method == GMT_HTTP_POST))
    drain = DRAIN_UNKNOWN; /* a bad head's Content-Length is not to be trusted */
  else if (h->content_length > 0 && had < (size_t)h->content_length)
    drain = (size_t)h->content_length - had;
  char msg[160];
  if (h->status) {
    snprintf(msg, sizeof msg, "%d %s\n", h->status, gmt_http_reason(h->status));
    answer_text(c, h->status, NULL, msg, false, drain);
    return false;
  }
  if (gmt_http_path_is(h, "/healthz")) {
    if (h->method == GMT_HTTP_GET || head)
      answer_text(c, 200, NULL, "ok\n", head, drain);
    else
      answer_text(c, 405, "GET, HEAD", "405 Method Not Allowed\n", false, drain);
    return false;
  }
  if (!gmt_http_path_is(h, "/mutate")) {
    answer_text(c, 404, NULL, "404 Not Found\n", head, drain);
    return false;
  }
  if (h->method != GMT_HTTP_POST) {
    answer_text(c, 405, "POST", "405 Method Not Allowed\n", head, drain);
    return false;
  }
  if (h->content_length < 0) {
    answer_text(c, 411, NULL, "gmt-webhook: a review needs a Content-Length\n", false, drain);
    return false;
  }
  if ((uint64_t)h->content_length > c->srv->max_body) {
    /* Refused unread, as the API server's own limit would. */
    gmt_warn("refused a request of %lld bytes: over --max-body %zu", (long long)h->content_length,
             c->srv->max_body);
    snprintf(msg, sizeof msg, "gmt-webhook: a body of %lld bytes is over --max-body %zu\n",
             (long long)h->content_length, c->srv->max_body);
    answer_text(c, 400, NULL, msg, false, drain);
    return false;
  }
  c->body_at = h->len;
  c->need = h->len + (size_t)h->content_length;
  return true;
}

static void busy(conn_t *c)
{
  gmt_webhook_server_t *srv = c->srv;
  char msg[200];
  nng_time now = nng_clock();
  nng_mtx_lock(srv->mu);
  bool say = now - srv->busy_said >= 1000;
  if (say)
    srv->busy_said = now;
  nng_mtx_unlock(srv->mu);
  if (say)
    gmt_warn("a review of %zu bytes waited %d ms for room among the bodies held (%zu bytes, "
             "%d bodies of --max-body); answered 503 (at most one such line a second)",
             c->need - c->body_at, srv->timeout_ms, srv->budget, GMT_WEBHOOK_BODIES);
  snprintf(msg, sizeof msg, "gmt-webhook: busy: %zu bytes of reviews are held already; try again\n",
           srv->budget);
  answer_text(c, 503, NULL, msg, false, c->need > c->len ? c->need - c->len : 0);
}

/* On a parser: the review and its answer. The body is freed, and its room
 * given back, before the answer is sent. */
static void review(conn_t *c)
{
  size_t len = c->need - c->body_at;
  gmt_webhook_answer_t a;
  int rc = gmt_webhook_review(c->buf + c->body_at, len, c->srv->o, &a);
  free(c->buf);
  c->buf = NULL;
  c->cap = c->len = 0;
  nng_mtx_lock(c->srv->mu);
  release_locked(c);
  nng_mtx_unlock(c->srv->mu);
  if (rc < 0) {
    gmt_error("out of memory answering a review of %zu bytes", len);
    answer_text(c, 500, NULL, "gmt-webhook: out of memory\n", false, 0);
    return;
  }
  if (a.status != 200 || strstr(a.body, "\"allowed\":false")) {
    char shown[200];
    gmt_warn("refused a request of %zu bytes: %s", len, gmt_shown(a.body, shown, sizeof shown));
  } else {
    gmt_debug("answered a review of %zu bytes", len);
  }
  answer(c, a.status, NULL, a.content_type, a.body, strlen(a.body), false, 0);
  free(a.body);
}

static void parser(void *arg)
{
  gmt_webhook_server_t *srv = arg;
  for (;;) {
    nng_mtx_lock(srv->mu);
    while (!srv->reviews.head && !srv->stopping)
      nng_cv_wait(srv->work);
    conn_t *c = pop_locked(&srv->reviews);
    bool going = c && c->going;
    nng_mtx_unlock(srv->mu);
    if (!c)
      return; /* stopping, and nothing left */
    if (going)
      conn_done(c);
    else
      review(c);
  }
}

/* ---- reading ---- */

/* The whole request: to a parser. */
static void queue_review(conn_t *c)
{
  gmt_webhook_server_t *srv = c->srv;
  nng_mtx_lock(srv->mu);
  bool going = c->going;
  if (!going) {
    c->state = ST_REVIEW;
    push_locked(&srv->reviews, c);
    nng_cv_wake1(srv->work);
  }
  nng_mtx_unlock(srv->mu);
  if (going)
    conn_done(c);
}

/* In ST_BODY: the buffer made as large as the request, then read on. */
static void read_body(conn_t *c)
{
  if (c->need > c->cap) {
    char *b = realloc(c->buf, c->need);
    if (!b) {
      answer_text(c, 500, NULL, "gmt-webhook: out of memory\n", false, c->need - c->len);
      return;
    }
    c->buf = b;
    c->cap = c->need;
  }
  if (c->len >= c->need)
    queue_review(c);
  else if (!start(c, OP_RECV))
    conn_done(c);
}

/* The head is whole and asks for a body of c->need: counted at once when
 * there is room and nobody waits before it, else it waits for room. */
static void want_body(conn_t *c)
{
  gmt_webhook_server_t *srv = c->srv;
  nng_mtx_lock(srv->mu);
  bool now = !srv->waiting.head && srv->held + c->need <= srv->budget, ok = true;
  if (now) {
    srv->held += c->need;
    c->held = c->need;
    c->state = ST_BODY;
  } else {
    c->state = ST_WAIT;
    push_locked(&srv->waiting, c);
    ok = start_locked(c, OP_SLEEP);
  }
  nng_mtx_unlock(srv->mu);
  if (now)
    read_body(c);
  else if (!ok)
    conn_done(c);
}

static void read_on(conn_t *c)
{
  if (c->state == ST_BODY) {
    read_body(c);
    return;
  }
  gmt_http_head_t h;
  /* Whole, or 431 once the buffer (GMT_HTTP_HEAD_MAX) is full. */
  if (gmt_http_head_parse(c->buf, c->len, &h)) {
    if (route(c, &h))
      want_body(c);
    return;
  }
  if (!start(c, OP_RECV))
    conn_done(c);
}

/* The wait for room ended: woken (ST_BODY), out of time (still ST_WAIT),
 * or told to go. */
static void slept(conn_t *c)
{
  nng_mtx_lock(c->srv->mu);
  bool going = c->going;
  state_t st = c->state;
  nng_mtx_unlock(c->srv->mu);
  if (going)
    conn_done(c);
  else if (st == ST_BODY)
    read_body(c);
  else
    busy(c);
}

/* n more bytes dropped after an early answer: the connection ends once
 * the client has sent what it said it would (then closing sends no reset),
 * or closes, or has sent twice --max-body, or at its deadline. */
static void drain_on(conn_t *c, size_t n)
{
  c->drained += n;
  if (c->drain != DRAIN_UNKNOWN)
    c->drain -= n < c->drain ? n : c->drain;
  if (c->drain == 0 || c->drained > 2 * c->srv->max_body + GMT_HTTP_HEAD_MAX || !start(c, OP_DRAIN))
    conn_done(c);
}

static void on_conn(void *arg)
{
  conn_t *c = arg;
  int rv = nng_aio_result(c->aio);
  if (c->sleeping) {
    c->sleeping = false;
    slept(c);
    return;
  }
  if (rv != 0) { /* timed out, closed by either side, told to go */
    if (rv == NNG_ETIMEDOUT)
      gmt_debug("a client took more than %d ms to %s; closed", c->srv->timeout_ms,
                c->state == ST_SEND ? "take its answer" : "send its request");
    conn_done(c);
    return;
  }
  size_t n = nng_aio_count(c->aio);
  switch (c->state) {
  case ST_SEND:
    c->out_off += n;
    if (c->out_off < c->out_len) {
      if (!start(c, OP_SEND))
        conn_done(c);
      return;
    }
    free(c->out);
    c->out = NULL;
    if (c->drain == 0) {
      conn_done(c);
      return;
    }
    nng_mtx_lock(c->srv->mu);
    c->state = ST_DRAIN;
    nng_mtx_unlock(c->srv->mu);
    drain_on(c, 0);
    return;
  case ST_DRAIN: drain_on(c, n); return;
  default:
    c->len += n;
    read_on(c);
    return;
  }
}

/* ---- accepting ---- */

static bool same_client(const nng_sockaddr *a, const nng_sockaddr *b)
{
  if (a->s_family != b->s_family)
    return false;
  if (a->s_family == NNG_AF_INET)
    return a->s_in.sa_addr == b->s_in.sa_addr;
  if (a->s_family == NNG_AF_INET6)
    return !memcmp(a->s_in6.sa_addr, b->s_in6.sa_addr, sizeof a->s_in6.sa_addr);
  return false; /* not known: each its own */
}

static bool evictable(const conn_t *c)
{
  return c->state != ST_REVIEW && c->state != ST_SEND && !c->going;
}

/* Makes room for one more (lock held): of the connections still sending
 * their request (or dropping what follows an early answer), the oldest of
 * the client address that holds the most of them is told to go. Oldest
 * alone let a client that keeps reopening idle connections close the API
 * server's own during its TLS handshake (32 accepts later): 56 of 56
 * reviews failed under 1,000 of them. Now such a client closes only its
 * own. false when every one is being reviewed or answered. */
static bool evict_locked(gmt_webhook_server_t *srv)
{
  conn_t *victim = NULL;
  int most = 0;
  for (conn_t *c = srv->oldest; c; c = c->next) {
    if (!evictable(c))
      continue;
    int k = 0;
    for (conn_t *x = c; x; x = x->next)
      k += evictable(x) && same_client(&x->peer, &c->peer);
    if (k > most) { /* the first seen of an address is its oldest */
      most = k;
      victim = c;
    }
  }
  if (!victim)
    return false;
  cut_locked(victim, NNG_ECANCELED);
  nng_time now = nng_clock();
  if (now - srv->evicted_said >= 1000) { /* a flood says it once a second */
    srv->evicted_said = now;
    gmt_warn("%d connections at once; the oldest unfinished one of the client holding the most "
             "(%d) was closed (at most one such line a second)",
             GMT_WEBHOOK_MAX_CONNS, most);
  }
  return true;
}

static void on_accept(void *arg)
{
  gmt_webhook_server_t *srv = arg;
  int rv = nng_aio_result(srv->accept);
  if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
    return; /* stopping */
  if (rv == 0) {
    nng_stream *s = nng_aio_get_output(srv->accept, 0);
    conn_t *c = calloc(1, sizeof *c);
    if (c && (c->buf = malloc(GMT_HTTP_HEAD_MAX)) && nng_aio_alloc(&c->aio, on_conn, c) == 0) {
      c->srv = srv;
      c->s = s;
      c->cap = GMT_HTTP_HEAD_MAX;
      c->deadline = nng_clock() + (nng_duration)srv->timeout_ms; /* not yet seen by others */
      if (nng_stream_get_addr(s, NNG_OPT_REMADDR, &c->peer) != 0)
        c->peer.s_family = NNG_AF_UNSPEC;
      nng_mtx_lock(srv->mu);
      bool room = !srv->stopping && (srv->n < GMT_WEBHOOK_MAX_CONNS || evict_locked(srv));
      if (room) {
        c->prev = srv->newest;
        if (srv->newest)
          srv->newest->next = c;
        else
          srv->oldest = c;
        srv->newest = c;
        srv->n++;
      }
      nng_mtx_unlock(srv->mu);
      if (room) {
        if (!start(c, OP_RECV))
          conn_done(c);
        c = NULL;
        s = NULL;
      }
    } else {
      gmt_warn("out of memory for a connection; closed");
    }
    if (c) {
      if (c->aio)
        nng_aio_free(c->aio);
      free(c->buf);
      free(c);
    }
    if (s) { /* no room, or no memory */
      nng_stream_close(s);
      nng_stream_free(s);
    }
  } else {
    gmt_debug("accept: %s", nng_strerror(rv));
    if (rv == NNG_ENOMEM || rv == NNG_ENOFILES)
      nng_msleep(100); /* not a spin while the process is out of them */
  }
  nng_mtx_lock(srv->mu);
  bool stopping = srv->stopping;
  nng_mtx_unlock(srv->mu);
  if (!stopping)
    nng_stream_listener_accept(srv->l, srv->accept);
}

/* ---- deadlines ---- */

/* Every REAP_EVERY_MS: a connection past its deadline is cut (its own
 * timeout may have been lost in the TLS stream: the comment at the top).
 * Not one waiting for room: its sleep is no stream's, and ends in a 503. */
static void on_reap(void *arg)
{
  gmt_webhook_server_t *srv = arg;
  if (nng_aio_result(srv->reap) != 0)
    return; /* stopped */
  nng_mtx_lock(srv->mu);
  nng_time now = nng_clock();
  for (conn_t *c = srv->oldest; c; c = c->next)
    if (!c->going && c->state != ST_REVIEW && c->state != ST_WAIT && now >= c->deadline) {
      gmt_debug("a client took more than %d ms to %s; closed", srv->timeout_ms,
                c->state == ST_SEND ? "take its answer" : "send its request");
      cut_locked(c, NNG_ETIMEDOUT);
    }
  if (!srv->stopping)
    nng_sleep_aio(REAP_EVERY_MS, srv->reap);
  nng_mtx_unlock(srv->mu);
}

/* ---- start and stop ---- */

size_t gmt_webhook_memory_bound(size_t max_body)
{
  return GMT_WEBHOOK_BASE + GMT_WEBHOOK_BODIES * (max_body + GMT_HTTP_HEAD_MAX) +
         GMT_WEBHOOK_PARSERS * ((size_t)GMT_WEBHOOK_TREE_MAX + GMT_WEBHOOK_ANSWER);
}

static void server_free(gmt_webhook_server_t *srv)
{
  for (int i = 0; i < GMT_WEBHOOK_PARSERS; i++)
    if (srv->parsers[i])
      nng_thread_destroy(srv->parsers[i]); /* joins it */
  if (srv->l)
    nng_stream_listener_free(srv->l);
  if (srv->accept)
    nng_aio_free(srv->accept);
  if (srv->reap)
    nng_aio_free(srv->reap);
  if (srv->work)
    nng_cv_free(srv->work);
  if (srv->cv)
    nng_cv_free(srv->cv);
  if (srv->mu)
    nng_mtx_free(srv->mu);
  free(srv);
}

int gmt_webhook_server_start(gmt_webhook_server_t **out, const char *url, nng_tls_config *tls,
                             const gmt_webhook_opts_t *o, size_t max_body, int timeout_ms)
{
  gmt_webhook_server_t *srv = calloc(1, sizeof *srv);
  if (!srv)
    return NNG_ENOMEM;
  srv->o = o;
  srv->max_body = max_body;
  srv->timeout_ms = timeout_ms;
  srv->budget = GMT_WEBHOOK_BODIES * (max_body + GMT_HTTP_HEAD_MAX);
  int rv;
  if ((rv = nng_mtx_alloc(&srv->mu)) != 0 || (rv = nng_cv_alloc(&srv->cv, srv->mu)) != 0 ||
      (rv = nng_cv_alloc(&srv->work, srv->mu)) != 0 ||
      (rv = nng_aio_alloc(&srv->accept, on_accept, srv)) != 0 ||
      (rv = nng_aio_alloc(&srv->reap, on_reap, srv)) != 0 ||
      (rv = nng_stream_listener_alloc(&srv->l, url)) != 0 ||
      (rv = nng_stream_listener_set_ptr(srv->l, NNG_OPT_TLS_CONFIG, tls)) != 0 ||
      (rv = nng_stream_listener_listen(srv->l)) != 0)
    goto fail;
  for (int i = 0; i < GMT_WEBHOOK_PARSERS; i++)
    if ((rv = nng_thread_create(&srv->parsers[i], parser, srv)) != 0)
      goto fail;
  nng_stream_listener_accept(srv->l, srv->accept);
  nng_sleep_aio(REAP_EVERY_MS, srv->reap);
  *out = srv;
  return 0;
fail:
  if (srv->mu) { /* the parsers started end at once */
    nng_mtx_lock(srv->mu);
    srv->stopping = true;
    if (srv->work)
      nng_cv_wake(srv->work);
    nng_mtx_unlock(srv->mu);
  }
  server_free(srv);
  return rv;
}

void gmt_webhook_server_stop(gmt_webhook_server_t *srv)
{
  nng_mtx_lock(srv->mu);
  srv->stopping = true;
  nng_cv_wake(srv->work);
  nng_mtx_unlock(srv->mu);
  nng_stream_listener_close(srv->l);
  nng_aio_stop(srv->accept); /* its callback has returned, and no accept is pending */
  nng_aio_stop(srv->reap);
  nng_mtx_lock(srv->mu);
  for (conn_t *c = srv->oldest; c; c = c->next)
    cut_locked(c, NNG_ECLOSED);
  nng_time until = nng_clock() + STOP_WAIT_MS;
  while (srv->n > 0 && nng_cv_until(srv->cv, until) != NNG_ETIMEDOUT)
    ;
  int left = srv->n;
  nng_mtx_unlock(srv->mu);
  if (left) {
    /* A callback or a parser still holds one: freeing the server under it
     * would be a use after free, and the process is about to end anyway. */
    gmt_warn("%d connection%s did not let go within %d ms of the stop", left, left == 1 ? "" : "s",
             STOP_WAIT_MS);
    return;
  }
  server_free(srv);
}
