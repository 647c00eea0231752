/* GET /metrics over HTTP, for Prometheus (docs/operators.md, "Prometheus
 * metrics"): a small HTTP/1.1 server on the scheduler's own libuv loop.
 *
 * Not nng's HTTP server: that one keeps a connection for as long as its
 * client likes, and has no bound on how many it keeps, so any local user
 * could hold enough idle connections to take every descriptor gmt-schd may
 * open and lock every pod out of it (measured: `gmt status` timed out while
 * 20,000 idle connections to the metrics port were held). Here:
 * - at most MAX_CONNS connections live at once. When one more comes, the
 *   oldest whose request is not whole yet is answered 503 and closed (a
 *   scraper sends its request as soon as it connects, so a flood of idle
 *   connections evicts itself); when every connection is being answered,
 *   the new one is;
 * - a client has REQUEST_MS to send its request head (at most
 *   GMT_HTTP_HEAD_MAX bytes), and ANSWER_MS more to take the answer;
 * - every answer closes its connection (Connection: close);
 * - the page is rendered at most every PAGE_MS: a flood of scrapes costs
 *   the loop a few renders a second, not one per scrape.
 * Everything runs on the loop, so the page is built from the scheduler's
 * state directly (status.c, metrics.c), with no locks and no threads. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_http_head.h"
#include "metrics.h"
#include "rpc_trace.h"
#include "schd.h"

#define PATH "/metrics"
#define MAX_CONNS 64
#define REQUEST_MS 5000
#define ANSWER_MS 10000
#define PAGE_MS 250

typedef struct conn conn_t;

static void on_deadline(uv_timer_t *t);

struct gmt_metrics {
  gmt_schd_t *s;
  uv_tcp_t listener;
  conn_t *oldest, *newest; /* every live connection, by arrival */
  int nconns;
  int handles; /* open: the listener's and each connection's two */
  bool stopping;
  char *page; /* the last rendered page, and when */
  size_t page_len;
  uint64_t page_ms;
  uint64_t evicted_said_ms;
  uv_tcp_t reject; /* a connection there is no memory for */
  bool reject_busy;
};

struct conn {
  uv_tcp_t tcp;
  uv_timer_t timer;
  struct gmt_metrics *m;
  conn_t *prev, *next;
  bool answering; /* the request is whole; its answer is on its way */
  bool closing;
  int open; /* of tcp and timer */
  size_t len;
  char head[GMT_HTTP_HEAD_MAX];
  uv_write_t wr;
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
  m->nconns--;
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

static void on_written(uv_write_t *wr, int status)
{
  (void)status; /* whatever came of it, the connection is done */
  conn_close(wr->data);
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
  if (c->answering || c->closing)
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
  gmt_debug("metrics: a client took more than %d ms to %s; closed",
            c->answering ? ANSWER_MS : REQUEST_MS,
            c->answering ? "take its answer" : "send its request");
  if (!c->answering)
    turn_away(c);
  else
    conn_close(c);
}

/* ---- connections ---- */

/* Makes room: the oldest connection still sending its request (the
 * newest, which is, when every other is being answered) is answered 503
 * and closed. Returns it. */
static conn_t *evict(struct gmt_metrics *m)
{
  for (conn_t *c = m->oldest; c; c = c->next)
    if (!c->answering) {
      uint64_t now = uv_now(m->s->loop);
      if (now - m->evicted_said_ms >= 1000) { /* a flood says it once a second */
        m->evicted_said_ms = now;
        gmt_warn("metrics: %d connections at once; the oldest idle one was answered 503 (at "
                 "most one such line a second)",
                 MAX_CONNS);
      }
      turn_away(c);
      return c;
    }
  return NULL;
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
  m->nconns++;
  if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
    conn_close(c);
    return;
  }
  if (m->nconns > MAX_CONNS && evict(m) == c)
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
