/* GET /metrics over HTTP, for Prometheus (docs/operators.md, "Prometheus
 * metrics"): a small HTTP/1.1 server on the scheduler's own libuv loop.
 *
 * Not nng's HTTP server: that one keeps a connection for as long as its
 * client likes, and has no bound on how many it keeps, so any local user
 * could hold enough idle connections to take every descriptor gmt-schd may
 * open and lock every pod out of it (measured: `gmt status` timed out while
 * 20,000 idle connections to the metrics port were held). Here:
 * - at most MAX_CONNS connections live at once, and at most PER_USER of
 *   one user other than root and the daemon's own (a loopback peer's user
 *   comes from sock_diag, one message however many sockets the node has;
 *   peers whose user is not known share one such cap). When one more
 *   comes, http_admit.c picks who gives way: a user past its cap loses its
 *   own oldest connection whose request is not whole yet, so one user
 *   reconnecting in a loop pushes out only itself; past MAX_CONNS the
 *   oldest such connection of whoever holds the most goes. It is answered
 *   503 and closed (a scraper sends its request as soon as it connects, so
 *   a flood of idle connections evicts itself); when every other
 *   connection is being answered, the new one is;
 * - a client has REQUEST_MS to send its request head (at most
 *   GMT_HTTP_HEAD_MAX bytes: past it the answer is 431), and ANSWER_MS
 *   more to take the answer;
 * - every answer closes its connection (Connection: close), gracefully: the
 *   writing side is shut, and what the client still sends is read and
 *   dropped for up to LINGER_MS, because closing a socket with unread
 *   bytes sends a reset that can destroy the answer before the client
 *   reads it (an oversized head's 431 did);
 * - the page is rendered at most every PAGE_MS: a flood of scrapes costs
 *   the loop a few renders a second, not one per scrape.
 * Everything runs on the loop, so the page is built from the scheduler's
 * state directly (status.c, metrics.c), with no locks and no threads. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_http_head.h"
#include "gmt_peer.h"
#include "http_admit.h"
#include "metrics.h"
#include "rpc_trace.h"
#include "schd.h"

#define PATH "/metrics"
#define MAX_CONNS 64
#define PER_USER 8
#define REQUEST_MS 5000
#define ANSWER_MS 10000
#define LINGER_MS 2000
#define PAGE_MS 250

typedef struct conn conn_t;

static void on_deadline(uv_timer_t *t);

struct gmt_metrics {
  gmt_schd_t *s;
  uv_tcp_t listener;
  conn_t *oldest, *newest; /* every live connection, by arrival */
  int handles;             /* open: the listener's and each connection's two */
  bool stopping;
  char *page; /* the last rendered page, and when */
  size_t page_len;
  uint64_t page_ms;
  uint64_t evicted_said_ms, capped_said_ms;
  uv_tcp_t reject; /* a connection there is no memory for */
  bool reject_busy;
};

struct conn {
  uv_tcp_t tcp;
  uv_timer_t timer;
  struct gmt_metrics *m;
  conn_t *prev, *next;
  int64_t uid;    /* who holds the other end; -1: not known */
  bool limited;   /* held to PER_USER */
  bool answering; /* the request is whole; its answer is on its way */
  bool lingering; /* answered: what the client still sends is dropped */
  bool closing;
  int open; /* of tcp and timer */
  size_t len;
  char head[GMT_HTTP_HEAD_MAX];
  uv_write_t wr;
  uv_shutdown_t shut;
  char *out; /* the answer being written */
};

static void maybe_free(struct gmt_metrics *m)
{
  if (m->handles == 0 && m->stopping) {
    free(m->page);
    free(m);
  }
}

static void on_conn_handle_closed(uv_handle_t *h)
{
  conn_t *c = h->data;
  struct gmt_metrics *m = c->m;
  m->handles--;
  if (--c->open == 0) {
    free(c->out);
    free(c);
  }
  maybe_free(m);
}

static void conn_close(conn_t *c)
{
  if (c->closing)
    return;
  c->closing = true;
  struct gmt_metrics *m = c->m;
  if (c->prev)
    c->prev->next = c->next;
  else
    m->oldest = c->next;
  if (c->next)
    c->next->prev = c->prev;
  else
    m->newest = c->prev;
  uv_close((uv_handle_t *)&c->tcp, on_conn_handle_closed);
  uv_close((uv_handle_t *)&c->timer, on_conn_handle_closed);
}

/* ---- answers ---- */

/* The page as the scheduler sees the node now, or one at most PAGE_MS
 * old. NULL when out of memory. */
static const char *page(struct gmt_metrics *m, size_t *len)
{
  uint64_t now = uv_now(m->s->loop);
  if (m->page && now - m->page_ms < PAGE_MS) {
    *len = m->page_len;
    return m->page;
  }
  gmt__status_t st;
  gmt_metrics_input_t in = {.status = NULL};
  char *text = NULL;
  size_t n = 0;
  int rc = gmt__status_build(m->s, &st);
  if (rc == 0) {
    in.status = &st.reply;
    in.tracing = gmt__trace_drops(m->s, &in.trace_dropped_events, &in.trace_dropped_histories);
    rc = gmt_metrics_render(&in, &text, &n);
  }
  gmt__status_free(&st);
  if (rc < 0) {
    gmt_warn("metrics: out of memory rendering a scrape; answered 500");
    return NULL;
  }
  free(m->page);
  m->page = text;
  m->page_len = n;
  m->page_ms = now;
  *len = n;
  return text;
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);
static void on_alloc(uv_handle_t *h, size_t want, uv_buf_t *buf);

static void on_shutdown(uv_shutdown_t *req, int status)
{
  conn_t *c = req->data;
  if (status < 0 && status != UV_ECANCELED)
    conn_close(c);
}

/* The answer is written: the writing side is shut (the client reads it
 * and then the end), and whatever the client still sends is read and
 * dropped until it closes, or LINGER_MS, so that the close sends no reset
 * over the answer. */
static void on_written(uv_write_t *wr, int status)
{
  conn_t *c = wr->data;
  if (status < 0 || c->closing) {
    conn_close(c);
    return;
  }
  c->lingering = true;
  c->len = 0;
  c->shut.data = c;
  uv_timer_start(&c->timer, on_deadline, LINGER_MS, 0);
  if (uv_shutdown(&c->shut, (uv_stream_t *)&c->tcp, on_shutdown) < 0 ||
      uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
    conn_close(c);
}

/* Sends status (and body, unless a HEAD) and closes the connection once
 * it is written, or after ANSWER_MS. */
static void answer(conn_t *c, int status, bool head, const char *body, size_t blen,
                   const char *type)
{
  char error_body[96];
  if (!body) {
    blen =
        (size_t)snprintf(error_body, sizeof error_body, "%d %s\n", status, gmt_http_reason(status));
    body = error_body;
    type = "text/plain; charset=utf-8";
  }
  char hdr[320];
  int hlen = snprintf(hdr, sizeof hdr,
                      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
                      "Connection: close\r\n\r\n",
                      status, gmt_http_reason(status), type, blen,
                      status == 405 ? "Allow: GET, HEAD\r\n" : "");
  size_t total = (size_t)hlen + (head ? 0 : blen);
  c->answering = true;
  uv_read_stop((uv_stream_t *)&c->tcp);
  if (!(c->out = malloc(total))) {
    conn_close(c);
    return;
  }
  memcpy(c->out, hdr, (size_t)hlen);
  if (!head)
    memcpy(c->out + hlen, body, blen);
  uv_timer_start(&c->timer, on_deadline, ANSWER_MS, 0);
  uv_buf_t b = uv_buf_init(c->out, (unsigned)total);
  c->wr.data = c;
  if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, on_written) < 0)
    conn_close(c);
}

/* A connection turned away: 503 written if the socket takes it at once,
 * then closed. */
static void turn_away(conn_t *c)
{
  static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                             "Retry-After: 1\r\nConnection: close\r\n\r\n";
  uv_buf_t b = uv_buf_init((char *)busy, sizeof busy - 1);
  (void)uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
  conn_close(c);
}

/* ---- reading the request ---- */

static void on_alloc(uv_handle_t *h, size_t want, uv_buf_t *buf)
{
  (void)want;
  conn_t *c = h->data;
  *buf = uv_buf_init(c->head + c->len, (unsigned)(sizeof c->head - c->len));
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
  (void)buf;
  conn_t *c = st->data;
  if (c->closing)
    return;
  if (c->lingering) { /* dropped; the client's end closes it */
    c->len = 0;
    if (nread < 0)
      conn_close(c);
    return;
  }
  if (c->answering)
    return;
  if (nread < 0) { /* EOF or an error before the request was whole */
    conn_close(c);
    return;
  }
  c->len += (size_t)nread;
  gmt_http_head_t h;
  if (!gmt_http_head_parse(c->head, c->len, &h))
    return;
  /* Anything after the head (a body, more requests) is not read. */
  bool head = h.method == GMT_HTTP_HEAD;
  int status = h.status                                                ? h.status
               : h.method != GMT_HTTP_GET && h.method != GMT_HTTP_HEAD ? 405
               : !gmt_http_path_is(&h, PATH)                           ? 404
                                                                       : 200;
  if (status != 200) {
    gmt_debug("metrics: answered %d to a request", status);
    answer(c, status, head, NULL, 0, NULL);
    return;
  }
  gmt_debug("metrics: scrape");
  size_t len = 0;
  const char *text = page(c->m, &len);
  if (!text)
    answer(c, 500, head, NULL, 0, NULL);
  else
    answer(c, 200, head, text, len, GMT_METRICS_CONTENT_TYPE);
}

static void on_deadline(uv_timer_t *t)
{
  conn_t *c = t->data;
  if (c->lingering) {
    gmt_debug("metrics: a client still sent %d ms after its answer; closed", LINGER_MS);
    conn_close(c);
    return;
  }
  gmt_debug("metrics: a client took more than %d ms to %s; closed",
            c->answering ? ANSWER_MS : REQUEST_MS,
            c->answering ? "take its answer" : "send its request");
  if (!c->answering)
    turn_away(c);
  else
    conn_close(c);
}

/* ---- connections ---- */

/* The addresses of a TCP address, as sock_diag wants them: a v4-mapped
 * IPv6 address (a dual-stack listener's IPv4 peer) as the IPv4 one. */
static int addr_of(const struct sockaddr_storage *sa, const uint8_t **addr, uint16_t *port)
{
  if (sa->ss_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    *addr = (const uint8_t *)&in->sin_addr;
    *port = in->sin_port;
    return AF_INET;
  }
  if (sa->ss_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
    *port = in6->sin6_port;
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      *addr = in6->sin6_addr.s6_addr + 12;
      return AF_INET;
    }
    *addr = in6->sin6_addr.s6_addr;
    return AF_INET6;
  }
  return -1;
}

/* The user holding the other end of c: a loopback peer's socket is looked
 * up by its four-tuple (gmt_peer_tcp_owner: sock_diag, no walk of /proc).
 * -1 for a peer not on loopback, or one gone already. */
static int64_t peer_uid(conn_t *c)
{
  struct sockaddr_storage ra, la;
  int rlen = sizeof ra, llen = sizeof la;
  const uint8_t *rb, *lb;
  uint16_t rport, lport;
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ra, &rlen) < 0 ||
      uv_tcp_getsockname(&c->tcp, (struct sockaddr *)&la, &llen) < 0)
    return -1;
  int fam = addr_of(&ra, &rb, &rport);
  if (fam < 0 || addr_of(&la, &lb, &lport) != fam || !gmt_peer_addr_loopback(fam, rb))
    return -1;
  uint32_t uid;
  uint64_t ino;
  if (gmt_peer_tcp_owner(fam, rb, rport, lb, lport, &uid, &ino) != 0)
    return -1;
  return uid;
}

/* Makes room for c, just accepted, as http_admit.c decides: the one that
 * gives way is answered 503 and closed (one whose answer is written
 * already is closed). Returns it, or NULL. */
static conn_t *make_room(struct gmt_metrics *m, conn_t *c)
{
  gmt_http_conn_t view[MAX_CONNS + 1];
  conn_t *at[MAX_CONNS + 1];
  size_t n = 0;
  for (conn_t *x = m->oldest; x && n < MAX_CONNS + 1; x = x->next) {
    at[n] = x;
    view[n++] = (gmt_http_conn_t){
        .uid = x->uid, .limited = x->limited, .busy = x->answering && !x->lingering};
  }
  if (n == 0 || at[n - 1] != c) /* more than the array: cannot happen, one goes per arrival */
    return NULL;
  int i = gmt_http_admit(view, n, MAX_CONNS, PER_USER);
  if (i < 0)
    return NULL;
  conn_t *gone = at[i];
  size_t held = 0;
  for (size_t k = 0; k < n; k++)
    held += view[k].uid == c->uid;
  bool capped = c->limited && held > PER_USER; /* else the port is full */
  uint64_t now = uv_now(m->s->loop);
  uint64_t *said = capped ? &m->capped_said_ms : &m->evicted_said_ms;
  if (now - *said >= 1000) { /* a flood says it once a second */
    *said = now;
    if (capped)
      gmt_warn("metrics: uid %lld has %d connections at once; its own oldest idle one was "
               "answered 503 (at most one such line a second)",
               (long long)c->uid, PER_USER);
    else
      gmt_warn("metrics: %d connections at once; the oldest idle one was answered 503, of the "
               "user holding the most (at most one such line a second)",
               MAX_CONNS);
  }
  if (gone->lingering)
    conn_close(gone);
  else
    turn_away(gone);
  return gone;
}

/* Out of memory for a connection: it is accepted into the one spare
 * handle and closed, since libuv reads no further connection until this
 * one is taken. */
static void on_reject_closed(uv_handle_t *h)
{
  struct gmt_metrics *m = h->data;
  m->reject_busy = false;
  m->handles--;
  maybe_free(m);
}

static void reject(struct gmt_metrics *m, uv_stream_t *server)
{
  if (m->reject_busy)
    return; /* the next connection, or the close of this one, tries again */
  m->reject_busy = true;
  m->handles++;
  uv_tcp_init(m->s->loop, &m->reject);
  m->reject.data = m;
  (void)uv_accept(server, (uv_stream_t *)&m->reject);
  uv_close((uv_handle_t *)&m->reject, on_reject_closed);
}

static void on_connection(uv_stream_t *server, int status)
{
  struct gmt_metrics *m = server->data;
  if (status < 0 || m->stopping)
    return;
  conn_t *c = calloc(1, sizeof *c);
  if (!c) {
    reject(m, server);
    return;
  }
  c->m = m;
  uv_tcp_init(m->s->loop, &c->tcp);
  uv_timer_init(m->s->loop, &c->timer);
  c->tcp.data = c->timer.data = c;
  c->open = 2;
  m->handles += 2;
  c->prev = m->newest;
  if (m->newest)
    m->newest->next = c;
  else
    m->oldest = c;
  m->newest = c;
  if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
    conn_close(c);
    return;
  }
  c->uid = peer_uid(c);
  c->limited = c->uid != 0 && c->uid != (int64_t)geteuid();
  if (make_room(m, c) == c)
    return;
  uv_timer_start(&c->timer, on_deadline, REQUEST_MS, 0);
  if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
    conn_close(c);
}

/* ---- start and stop ---- */

static void on_listener_closed(uv_handle_t *h)
{
  struct gmt_metrics *m = h->data;
  m->handles--;
  maybe_free(m);
}

/* Binds and listens on HOST:PORT (checked by gmt_metrics_addr_parse). */
static int listen_on(struct gmt_metrics *m, const char *addr)
{
  char host[GMT_METRICS_ADDR_MAX + 1];
  const char *colon = strrchr(addr, ':');
  size_t hlen = (size_t)(colon - addr);
  bool v6 = addr[0] == '[';
  snprintf(host, sizeof host, "%.*s", (int)(hlen - 2 * v6), addr + v6);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *ai = NULL;
  int rc = getaddrinfo(host, colon + 1, &hints, &ai);
  if (rc != 0)
    return rc == EAI_SYSTEM ? -errno : -EADDRNOTAVAIL;
  rc = uv_tcp_bind(&m->listener, ai->ai_addr, 0);
  freeaddrinfo(ai);
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&m->listener, 128, on_connection);
  return rc;
}

int gmt__metrics_start(gmt_schd_t *s, const char *addr)
{
  char url[GMT_METRICS_ADDR_MAX + 16];
  bool loopback = false;
  if (gmt_metrics_addr_parse(addr, url, sizeof url, &loopback) < 0)
    return -EINVAL; /* main.c checked it */
  struct gmt_metrics *m = calloc(1, sizeof *m);
  if (!m)
    return -ENOMEM;
  m->s = s;
  uv_tcp_init(s->loop, &m->listener);
  m->listener.data = m;
  m->handles = 1;
  int rc = listen_on(m, addr);
  if (rc < 0) {
    gmt_error("metrics: cannot listen on %s: %s%s; gmt-schd schedules on WITHOUT Prometheus "
              "metrics (--metrics HOST:PORT picks another address, --metrics off turns them off)",
              url, gmt_strerror(rc), rc == -EADDRINUSE ? " (another process holds the port)" : "");
    m->stopping = true;
    uv_close((uv_handle_t *)&m->listener, on_listener_closed);
    return rc;
  }
  s->metrics = m;
  gmt_info("metrics: serving http://%s%s (Prometheus)", addr, PATH);
  if (!loopback)
    gmt_warn("metrics: %s is not a loopback address: whoever reaches it reads every pod's and "
             "process's numbers (no authentication; docs/operators.md)",
             addr);
  return 0;
}

void gmt__metrics_stop(gmt_schd_t *s)
{
  struct gmt_metrics *m = s->metrics;
  if (!m)
    return;
  s->metrics = NULL;
  /* Closed with the loop's other handles; a scrape being written is cut. */
  m->stopping = true;
  while (m->oldest)
    conn_close(m->oldest);
  uv_close((uv_handle_t *)&m->listener, on_listener_closed);
}
