/* GET /metrics over HTTP (nng's HTTP server), for Prometheus
 * (docs/operators.md, "Prometheus metrics").
 *
 * nng calls on_http() on its own threads, but what the metrics show lives
 * on the loop: so a scrape goes through the inbox, as an RPC does, and the
 * loop builds the Status view (status.c), renders it (metrics.c) and
 * answers. Nothing here touches the scheduler's state off the loop; what
 * the threads share is this file's own list of scrapes waiting for the
 * loop, under its own lock.
 *
 * Every wait is bounded: a scrape the loop has not answered within
 * ANSWER_MS gets 503 from the watchdog thread (the loop may be stuck
 * behind something slow; Prometheus must learn that rather than hang), at
 * most MAX_PENDING scrapes wait at once (more get 503 at once, so that a
 * flood of scrapes costs the loop at most that many renders), and a
 * client that stops reading or never finishes its request holds only its
 * own connection, on nng's threads. A scrape answered late by the loop, or
 * whose connection closed, has its answer dropped: each HTTP request is
 * answered exactly once, by whoever takes it off the list first. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>
#include <nng/supplemental/util/platform.h>

#include "gmt_error.h"
#include "gmt_log.h"
#include "metrics.h"
#include "rpc_trace.h"
#include "schd.h"

#define ANSWER_MS 2000
#define MAX_PENDING 16
#define PATH "/metrics"
#define STR_(x) #x
#define STR(x) STR_(x)

typedef struct scrape scrape_t;

struct gmt_metrics {
  gmt_schd_t *s; /* read on the loop only */
  char url[GMT_METRICS_ADDR_MAX + 16];
  nng_http_server *server;
  atomic_int refs; /* the daemon's, the handler's, one per scrape in the inbox */
  nng_thread *watchdog;
  /* Shared by nng's threads, the watchdog and the loop: */
  nng_mtx *lock;
  nng_cv *cv;        /* the watchdog waits on it */
  scrape_t *pending; /* waiting for an answer, oldest first */
  int npending;
  bool closed; /* stopping: every scrape gets 503 at once */
};

struct scrape {
  gmt_inbox_item_t item; /* first: the loop finds the scrape from it */
  struct gmt_metrics *m;
  nng_aio *aio; /* the request's; NULL once taken off the list */
  nng_time deadline;
  scrape_t *next;
};

/* A warning from nng's threads, at most once a second: a flood of
 * scrapes must not flood the log too. */
static void warn_503(const char *why)
{
  static _Atomic uint64_t last_ms;
  uint64_t now = gmt_now_ms(), last = atomic_load(&last_ms);
  if (last && now - last < 1000)
    return;
  if (atomic_compare_exchange_strong(&last_ms, &last, now))
    gmt_warn("metrics: %s; answered 503 (at most one such line a second)", why);
}

static void unref(struct gmt_metrics *m)
{
  if (atomic_fetch_sub(&m->refs, 1) != 1)
    return;
  if (m->cv)
    nng_cv_free(m->cv);
  if (m->lock)
    nng_mtx_free(m->lock);
  free(m);
}

static void on_handler_freed(void *arg)
{
  unref(arg);
}

/* ---- answers ---- */

/* An error page: nng writes its body. NULL when out of memory. */
static nng_http_res *error_res(uint16_t code)
{
  nng_http_res *res = NULL;
  if (nng_http_res_alloc_error(&res, code) != 0)
    return NULL;
  return res;
}

/* Answers aio with res, or, with no res (out of memory), closes its
 * connection: nng answers a failed handler that way. */
static void answer(nng_aio *aio, nng_http_res *res)
{
  if (!res) {
    nng_aio_finish(aio, NNG_ENOMEM);
    return;
  }
  nng_aio_set_output(aio, 0, res);
  nng_aio_finish(aio, 0);
}

/* Takes sc's request off the list: its aio, or NULL when someone else
 * took it first (the watchdog, a closed connection, stopping). */
static nng_aio *take_locked(struct gmt_metrics *m, scrape_t *sc)
{
  nng_aio *aio = sc->aio;
  if (!aio)
    return NULL;
  for (scrape_t **pp = &m->pending; *pp; pp = &(*pp)->next)
    if (*pp == sc) {
      *pp = sc->next;
      break;
    }
  sc->aio = NULL;
  sc->next = NULL;
  m->npending--;
  return aio;
}

static nng_aio *take(struct gmt_metrics *m, scrape_t *sc)
{
  nng_mtx_lock(m->lock);
  nng_aio *aio = take_locked(m, sc);
  nng_mtx_unlock(m->lock);
  return aio;
}

/* nng cancels a request whose connection closes, or when the server
 * stops. It passes m, not the scrape: the scrape may be freed by then. */
static void on_cancel(nng_aio *aio, void *arg, int rv)
{
  struct gmt_metrics *m = arg;
  nng_aio *taken = NULL;
  nng_mtx_lock(m->lock);
  for (scrape_t *sc = m->pending; sc; sc = sc->next)
    if (sc->aio == aio) {
      taken = take_locked(m, sc);
      break;
    }
  nng_mtx_unlock(m->lock);
  if (taken)
    nng_aio_finish(taken, rv);
}

/* ---- the loop's side ---- */

/* The page, as the loop sees the node now; NULL when out of memory. */
static nng_http_res *render(gmt_schd_t *s)
{
  gmt__status_t st;
  gmt_metrics_input_t in = {.status = NULL};
  nng_http_res *res = NULL;
  char *text = NULL;
  size_t len = 0;
  int rc = gmt__status_build(s, &st);
  if (rc == 0) {
    in.status = &st.reply;
    in.tracing = gmt__trace_drops(s, &in.trace_dropped_events, &in.trace_dropped_histories);
    rc = gmt_metrics_render(&in, &text, &len);
  }
  gmt__status_free(&st);
  if (rc < 0) {
    gmt_warn("metrics: out of memory rendering a scrape; answered 500");
    return error_res(NNG_HTTP_STATUS_INTERNAL_SERVER_ERROR);
  }
  if (nng_http_res_alloc(&res) != 0 ||
      nng_http_res_set_header(res, "Content-Type", GMT_METRICS_CONTENT_TYPE) != 0 ||
      nng_http_res_copy_data(res, text, len) != 0) {
    if (res)
      nng_http_res_free(res);
    res = error_res(NNG_HTTP_STATUS_INTERNAL_SERVER_ERROR);
  }
  free(text);
  return res;
}

static void on_loop(gmt_inbox_item_t *item, int status)
{
  scrape_t *sc = (scrape_t *)item;
  struct gmt_metrics *m = sc->m;
  nng_mtx_lock(m->lock);
  bool waiting = sc->aio != NULL;
  nng_mtx_unlock(m->lock);
  /* Rendered only for a scrape still waiting: one that timed out costs
   * the loop nothing more. */
  if (waiting) {
    gmt_debug("metrics: scrape");
    nng_http_res *res =
        status == 0 ? render(sc->m->s) : error_res(NNG_HTTP_STATUS_SERVICE_UNAVAILABLE);
    nng_aio *aio = take(m, sc);
    if (aio)
      answer(aio, res);
    else if (res)
      nng_http_res_free(res);
  }
  free(sc);
  unref(m);
}

/* ---- nng's side ---- */

static void on_http(nng_aio *aio)
{
  nng_http_req *req = nng_aio_get_input(aio, 0);
  nng_http_handler *h = nng_aio_get_input(aio, 1);
  struct gmt_metrics *m = nng_http_handler_get_data(h);
  const char *method = nng_http_req_get_method(req);
  if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
    /* The body, if any, is not read: the connection closes after. */
    nng_http_res *res = error_res(NNG_HTTP_STATUS_METHOD_NOT_ALLOWED);
    if (res && (nng_http_res_set_header(res, "Allow", "GET, HEAD") != 0 ||
                nng_http_res_set_header(res, "Connection", "close") != 0)) {
      nng_http_res_free(res);
      res = NULL;
    }
    answer(aio, res);
    return;
  }

  scrape_t *sc = calloc(1, sizeof *sc);
  if (!sc) {
    answer(aio, error_res(NNG_HTTP_STATUS_SERVICE_UNAVAILABLE));
    return;
  }
  sc->m = m;
  nng_mtx_lock(m->lock);
  if (m->closed || m->npending >= MAX_PENDING) {
    bool closed = m->closed;
    nng_mtx_unlock(m->lock);
    free(sc);
    if (!closed)
      warn_503("a scrape came while " STR(MAX_PENDING) " waited for the scheduler");
    answer(aio, error_res(NNG_HTTP_STATUS_SERVICE_UNAVAILABLE));
    return;
  }
  /* On the list and cancellable before anyone else can see it: under the
   * lock, so the watchdog cannot answer it before nng knows it waits. */
  sc->aio = aio;
  sc->deadline = nng_clock() + ANSWER_MS;
  scrape_t **pp = &m->pending;
  while (*pp)
    pp = &(*pp)->next;
  *pp = sc;
  m->npending++;
  nng_aio_defer(aio, on_cancel, m);
  atomic_fetch_add(&m->refs, 1);
  nng_cv_wake(m->cv);
  nng_mtx_unlock(m->lock);

  if (gmt_inbox_push(&m->s->inbox, &sc->item, on_loop) < 0) {
    /* The loop is stopping: it will never see this one. */
    nng_aio *taken = take(m, sc);
    if (taken)
      answer(taken, error_res(NNG_HTTP_STATUS_SERVICE_UNAVAILABLE));
    free(sc);
    unref(m);
  }
}

/* Answers 503 to each scrape past its deadline; sleeps until the next
 * deadline, or until a scrape comes. */
static void watchdog(void *arg)
{
  struct gmt_metrics *m = arg;
  nng_mtx_lock(m->lock);
  while (!m->closed) {
    nng_time now = nng_clock();
    scrape_t *sc = m->pending;
    if (!sc) {
      nng_cv_wait(m->cv);
      continue;
    }
    if (sc->deadline > now) { /* the oldest is the first due */
      (void)nng_cv_until(m->cv, sc->deadline);
      continue;
    }
    nng_aio *aio = take_locked(m, sc);
    nng_mtx_unlock(m->lock);
    warn_503("the scheduler did not answer a scrape within " STR(ANSWER_MS) " ms");
    answer(aio, error_res(NNG_HTTP_STATUS_SERVICE_UNAVAILABLE));
    nng_mtx_lock(m->lock);
  }
  nng_mtx_unlock(m->lock);
}

/* ---- start and stop ---- */

int gmt__metrics_start(gmt_schd_t *s, const char *addr)
{
  struct gmt_metrics *m = calloc(1, sizeof *m);
  if (!m)
    return -ENOMEM;
  m->s = s;
  atomic_init(&m->refs, 1);
  bool loopback = false;
  nng_url *url = NULL;
  nng_http_handler *h = NULL;
  const char *what = "";
  int rv;
  if (gmt_metrics_addr_parse(addr, m->url, sizeof m->url, &loopback) < 0) {
    unref(m);
    return -EINVAL; /* main.c checked it */
  }
  if ((rv = nng_mtx_alloc(&m->lock)) != 0 || (rv = nng_cv_alloc(&m->cv, m->lock)) != 0) {
    what = "allocate a lock to serve";
    goto fail;
  }
  what = "parse the address";
  if ((rv = nng_url_parse(&url, m->url)) != 0)
    goto fail;
  what = "set up an HTTP server on";
  if ((rv = nng_http_server_hold(&m->server, url)) != 0)
    goto fail;
  if ((rv = nng_http_handler_alloc(&h, PATH, on_http)) != 0 ||
      (rv = nng_http_handler_set_method(h, NULL)) != 0 ||
      (rv = nng_http_handler_collect_body(h, false, 0)) != 0)
    goto fail;
  /* From here the handler holds m until nng frees it. */
  atomic_fetch_add(&m->refs, 1);
  if ((rv = nng_http_handler_set_data(h, m, on_handler_freed)) != 0) {
    atomic_fetch_sub(&m->refs, 1);
    goto fail;
  }
  if ((rv = nng_http_server_add_handler(m->server, h)) != 0) {
    nng_http_handler_free(h); /* frees m's reference with it */
    h = NULL;
    goto fail;
  }
  h = NULL; /* the server's now */
  what = "listen on";
  if ((rv = nng_http_server_start(m->server)) != 0)
    goto fail;
  what = "start the watchdog thread of";
  if ((rv = nng_thread_create(&m->watchdog, watchdog, m)) != 0) {
    nng_http_server_stop(m->server);
    goto fail;
  }
  nng_thread_set_name(m->watchdog, "gmt-metrics");
  nng_url_free(url);
  s->metrics = m;
  gmt_info("metrics: serving http://%s%s (Prometheus)", addr, PATH);
  if (!loopback)
    gmt_warn("metrics: %s is not a loopback address: whoever reaches it reads every pod's and "
             "process's numbers (no authentication; docs/operators.md)",
             addr);
  return 0;

fail:
  rv = gmt__from_nng(rv);
  gmt_error("metrics: cannot %s %s: %s%s; gmt-schd schedules on WITHOUT Prometheus metrics "
            "(--metrics HOST:PORT picks another address, --metrics off turns them off)",
            what, m->url, gmt_strerror(rv),
            rv == -EADDRINUSE ? " (another process holds the port)" : "");
  if (h)
    nng_http_handler_free(h);
  if (m->server)
    nng_http_server_release(m->server);
  if (url)
    nng_url_free(url);
  unref(m);
  return rv;
}

void gmt__metrics_stop(gmt_schd_t *s)
{
  struct gmt_metrics *m = s->metrics;
  if (!m)
    return;
  s->metrics = NULL;
  /* Every scrape still waiting gets 503 now; the watchdog ends. Those
   * still in the inbox are freed when it closes, answering nothing. */
  nng_mtx_lock(m->lock);
  m->closed = true;
  nng_aio *aios[MAX_PENDING];
  int n = 0;
  while (m->pending && n < MAX_PENDING)
    aios[n++] = take_locked(m, m->pending);
  nng_cv_wake(m->cv);
  nng_mtx_unlock(m->lock);
  for (int i = 0; i < n; i++)
    answer(aios[i], error_res(NNG_HTTP_STATUS_SERVICE_UNAVAILABLE));
  nng_thread_destroy(m->watchdog);
  nng_http_server_stop(m->server);
  nng_http_server_release(m->server);
  unref(m);
}
