/* gmt-webhook's HTTPS server (server.h). nng's TLS streams carry the
 * bytes; the request is read with proto/http_head.c and answered here.
 *
 * Not nng's HTTP server: it keeps a connection for as long as its client
 * likes and caps nothing. Any pod of the cluster can reach the webhook's
 * Service, so it could hold enough connections that the API server's
 * reviews time out, and with failurePolicy Ignore pods would then start
 * without the hook. Here:
 * - at most GMT_WEBHOOK_MAX_CONNS connections. One more closes the oldest
 *   whose request is not whole yet (the API server sends its request at
 *   once), or is closed itself when every connection is being answered;
 * - --timeout (GMT_WEBHOOK_TIMEOUT_MS) to send the whole request (a head
 *   of at most 8 KiB, a body of at most --max-body), as long again to take
 *   the answer;
 * - one request per connection (Connection: close).
 *
 * Each connection has one aio, and its callbacks run on nng's threads one
 * at a time; the list of connections, and whether one has been told to
 * go, are under the server's lock, which is also held while an operation
 * is started, so that an abort cannot fall between the check and the
 * start. */
#include "server.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/supplemental/util/platform.h>

#include "gmt_http_head.h"
#include "gmt_log.h"

#define STOP_WAIT_MS 2000

typedef struct conn conn_t;

struct conn {
  gmt_webhook_server_t *srv;
  nng_stream *s;
  nng_aio *aio;
  char *buf; /* the request as read */
  size_t len, cap;
  bool have_head;
  size_t need;    /* once the head is read: its bytes and the body's */
  size_t body_at; /* where the body starts */
  char *out;      /* the answer */
  size_t out_len, out_off;
  bool answering; /* written under the server's lock */
  nng_time deadline;
  /* Under the server's lock: */
  bool going; /* evicted, or the server stops: the next step ends it */
  conn_t *prev, *next;
};

struct gmt_webhook_server {
  nng_stream_listener *l;
  nng_aio *accept;
  nng_mtx *mu;
  nng_cv *cv; /* the last connection went */
  conn_t *oldest, *newest;
  int n;
  bool stopping;
  nng_time evicted_said;
  const gmt_webhook_opts_t *o;
  size_t max_body;
  int timeout_ms;
};

/* ---- a connection's end ---- */

/* Called from c's own callback (or before its first operation). */
static void conn_done(conn_t *c)
{
  gmt_webhook_server_t *srv = c->srv;
  nng_mtx_lock(srv->mu);
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
  nng_mtx_unlock(srv->mu);
  nng_stream_close(c->s);
  nng_stream_free(c->s);
  nng_aio_reap(c->aio); /* this may be its callback: freed from another thread */
  free(c->buf);
  free(c->out);
  free(c);
}

/* Starts c's next receive (send: its next send) before its deadline,
 * unless it has been told to go. false: it is to end now. */
static bool start(conn_t *c, bool send)
{
  nng_time now = nng_clock();
  if (now >= c->deadline) {
    gmt_debug("a client took more than %d ms to %s; closed", c->srv->timeout_ms,
              send ? "take its answer" : "send its request");
    return false;
  }
  nng_iov iov = send ? (nng_iov){c->out + c->out_off, c->out_len - c->out_off}
                     : (nng_iov){c->buf + c->len, c->cap - c->len};
  nng_mtx_lock(c->srv->mu);
  bool going = c->going;
  if (!going && nng_aio_set_iov(c->aio, 1, &iov) == 0) {
    nng_aio_set_timeout(c->aio, (nng_duration)(c->deadline - now));
    if (send)
      nng_stream_send(c->s, c->aio);
    else
      nng_stream_recv(c->s, c->aio);
  } else {
    going = true;
  }
  nng_mtx_unlock(c->srv->mu);
  return !going;
}

/* ---- answers ---- */

static void answer(conn_t *c, int status, const char *allow, const char *type, const char *body,
                   size_t blen, bool head)
{
  char hdr[320];
  int hlen = snprintf(hdr, sizeof hdr,
                      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s%s"
                      "Connection: close\r\n\r\n",
                      status, gmt_http_reason(status), type, blen, allow ? "Allow: " : "",
                      allow ? allow : "", allow ? "\r\n" : "");
  nng_mtx_lock(c->srv->mu); /* evict_locked reads it */
  c->answering = true;
  nng_mtx_unlock(c->srv->mu);
  c->out_len = (size_t)hlen + (head ? 0 : blen);
  if (!(c->out = malloc(c->out_len))) {
    conn_done(c);
    return;
  }
  memcpy(c->out, hdr, (size_t)hlen);
  if (!head)
    memcpy(c->out + hlen, body, blen);
  c->deadline = nng_clock() + (nng_duration)c->srv->timeout_ms;
  if (!start(c, true))
    conn_done(c);
}

static void answer_text(conn_t *c, int status, const char *allow, const char *text, bool head)
{
  answer(c, status, allow, "text/plain; charset=utf-8", text, strlen(text), head);
}

/* The request's head is whole: what it asks, and how much body to read
 * (c->need). false when it has been answered already. */
static bool route(conn_t *c, const gmt_http_head_t *h)
{
  bool head = h->method == GMT_HTTP_HEAD;
  char msg[160];
  if (h->status) {
    snprintf(msg, sizeof msg, "%d %s\n", h->status, gmt_http_reason(h->status));
    answer_text(c, h->status, NULL, msg, false);
    return false;
  }
  if (gmt_http_path_is(h, "/healthz")) {
    if (h->method == GMT_HTTP_GET || head)
      answer_text(c, 200, NULL, "ok\n", head);
    else
      answer_text(c, 405, "GET, HEAD", "405 Method Not Allowed\n", false);
    return false;
  }
  if (!gmt_http_path_is(h, "/mutate")) {
    answer_text(c, 404, NULL, "404 Not Found\n", head);
    return false;
  }
  if (h->method != GMT_HTTP_POST) {
    answer_text(c, 405, "POST", "405 Method Not Allowed\n", head);
    return false;
  }
  if (h->content_length < 0) {
    answer_text(c, 411, NULL, "gmt-webhook: a review needs a Content-Length\n", false);
    return false;
  }
  if ((uint64_t)h->content_length > c->srv->max_body) {
    /* Refused unread, as the API server's own limit would. */
    gmt_warn("refused a request of %lld bytes: over --max-body %zu", (long long)h->content_length,
             c->srv->max_body);
    snprintf(msg, sizeof msg, "gmt-webhook: a body of %lld bytes is over --max-body %zu\n",
             (long long)h->content_length, c->srv->max_body);
    answer_text(c, 400, NULL, msg, false);
    return false;
  }
  c->body_at = h->len;
  c->need = h->len + (size_t)h->content_length;
  if (c->need > c->cap) {
    char *b = realloc(c->buf, c->need);
    if (!b) {
      answer_text(c, 500, NULL, "gmt-webhook: out of memory\n", false);
      return false;
    }
    c->buf = b;
    c->cap = c->need;
  }
  return true;
}

static void review(conn_t *c)
{
  size_t len = c->need - c->body_at;
  gmt_webhook_answer_t a;
  if (gmt_webhook_review(c->buf + c->body_at, len, c->srv->o, &a) < 0) {
    gmt_error("out of memory answering a review of %zu bytes", len);
    answer_text(c, 500, NULL, "gmt-webhook: out of memory\n", false);
    return;
  }
  if (a.status != 200) {
    char shown[160];
    gmt_warn("refused a request of %zu bytes: %s", len, gmt_shown(a.body, shown, sizeof shown));
  } else {
    gmt_debug("answered a review of %zu bytes", len);
  }
  answer(c, a.status, NULL, a.content_type, a.body, strlen(a.body), false);
  free(a.body);
}

/* ---- reading ---- */

static void read_on(conn_t *c)
{
  if (!c->have_head) {
    gmt_http_head_t h;
    /* Whole, or 431 once the buffer (GMT_HTTP_HEAD_MAX) is full. */
    if (gmt_http_head_parse(c->buf, c->len, &h)) {
      c->have_head = true;
      if (!route(c, &h))
        return;
    }
  }
  if (c->have_head && c->len >= c->need) {
    review(c);
    return;
  }
  if (!start(c, false))
    conn_done(c);
}

static void on_conn(void *arg)
{
  conn_t *c = arg;
  int rv = nng_aio_result(c->aio);
  if (rv != 0) { /* timed out, closed by either side, told to go */
    if (rv == NNG_ETIMEDOUT)
      gmt_debug("a client took more than %d ms to %s; closed", c->srv->timeout_ms,
                c->answering ? "take its answer" : "send its request");
    conn_done(c);
    return;
  }
  size_t n = nng_aio_count(c->aio);
  if (c->answering) {
    c->out_off += n;
    if (c->out_off >= c->out_len || !start(c, true))
      conn_done(c);
    return;
  }
  c->len += n;
  read_on(c);
}

/* ---- accepting ---- */

/* Makes room for one more (lock held): the oldest connection still
 * sending its request is told to go. false when every one is answering. */
static bool evict_locked(gmt_webhook_server_t *srv)
{
  for (conn_t *c = srv->oldest; c; c = c->next)
    if (!c->answering && !c->going) {
      c->going = true;
      nng_aio_abort(c->aio, NNG_ECANCELED);
      nng_time now = nng_clock();
      if (now - srv->evicted_said >= 1000) { /* a flood says it once a second */
        srv->evicted_said = now;
        gmt_warn("%d connections at once; the oldest whose request is not whole was closed (at "
                 "most one such line a second)",
                 GMT_WEBHOOK_MAX_CONNS);
      }
      return true;
    }
  return false;
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
      c->deadline = nng_clock() + (nng_duration)srv->timeout_ms;
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
        if (!start(c, false))
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

/* ---- start and stop ---- */

int gmt_webhook_server_start(gmt_webhook_server_t **out, const char *url, nng_tls_config *tls,
                             const gmt_webhook_opts_t *o, size_t max_body, int timeout_ms)
{
  gmt_webhook_server_t *srv = calloc(1, sizeof *srv);
  if (!srv)
    return NNG_ENOMEM;
  srv->o = o;
  srv->max_body = max_body;
  srv->timeout_ms = timeout_ms;
  int rv;
  if ((rv = nng_mtx_alloc(&srv->mu)) != 0 || (rv = nng_cv_alloc(&srv->cv, srv->mu)) != 0 ||
      (rv = nng_aio_alloc(&srv->accept, on_accept, srv)) != 0 ||
      (rv = nng_stream_listener_alloc(&srv->l, url)) != 0 ||
      (rv = nng_stream_listener_set_ptr(srv->l, NNG_OPT_TLS_CONFIG, tls)) != 0 ||
      (rv = nng_stream_listener_listen(srv->l)) != 0) {
    if (srv->l)
      nng_stream_listener_free(srv->l);
    if (srv->accept)
      nng_aio_free(srv->accept);
    if (srv->cv)
      nng_cv_free(srv->cv);
    if (srv->mu)
      nng_mtx_free(srv->mu);
    free(srv);
    return rv;
  }
  nng_stream_listener_accept(srv->l, srv->accept);
  *out = srv;
  return 0;
}

void gmt_webhook_server_stop(gmt_webhook_server_t *srv)
{
  nng_mtx_lock(srv->mu);
  srv->stopping = true;
  nng_mtx_unlock(srv->mu);
  nng_stream_listener_close(srv->l);
  nng_aio_stop(srv->accept); /* its callback has returned, and no accept is pending */
  nng_mtx_lock(srv->mu);
  for (conn_t *c = srv->oldest; c; c = c->next) {
    c->going = true;
    nng_aio_abort(c->aio, NNG_ECLOSED);
  }
  nng_time until = nng_clock() + STOP_WAIT_MS;
  while (srv->n > 0 && nng_cv_until(srv->cv, until) != NNG_ETIMEDOUT)
    ;
  int left = srv->n;
  nng_mtx_unlock(srv->mu);
  if (left) {
    /* A callback still holds one: freeing the server under it would be a
     * use after free, and the process is about to end anyway. */
    gmt_warn("%d connection%s did not let go within %d ms of the stop", left, left == 1 ? "" : "s",
             STOP_WAIT_MS);
    return;
  }
  nng_aio_free(srv->accept);
  nng_stream_listener_free(srv->l);
  nng_cv_free(srv->cv);
  nng_mtx_free(srv->mu);
  free(srv);
}
