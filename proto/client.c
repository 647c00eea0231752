/* The client side of the wire: one nng REQ socket per peer, a fresh
 * context per call so that many calls may be outstanding at once. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "gmt_bounded.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_wire.h"

struct gmt_client {
  nng_socket sock;
  char *url; /* for the log */
  /* Asynchronous calls whose callback has not returned yet: close waits
   * for them (on CLOCK_MONOTONIC, at most GMT_CLIENT_CLOSE_MS), so that
   * no callback runs after gmt_client_close() returned 0. */
  pthread_mutex_t lock;
  pthread_cond_t idle;
  int inflight;
  bool abandoned; /* close gave up waiting: the last callback frees it */
};

/* A synchronous nng dial waits for the peer's handshake, which a peer out
 * of descriptors never sends (its kernel completes the TCP connect all the
 * same). So the dial runs on a thread, and closing the socket when the
 * bound passes aborts it. */
struct dial {
  nng_socket sock;
  const char *url;
  pthread_mutex_t lock;
  pthread_cond_t done_cv;
  int done, rv;
};

static void *dial_thread(void *arg)
{
  struct dial *d = arg;
  int rv = nng_dial(d->sock, d->url, NULL, 0);

  pthread_mutex_lock(&d->lock);
  d->rv = rv;
  d->done = 1;
  pthread_cond_signal(&d->done_cv);
  pthread_mutex_unlock(&d->lock);
  return NULL;
}

/* 0, the dial's error, or -ETIMEDOUT (the socket is then closed). */
static int dial_bounded(nng_socket sock, const char *url, int timeout_ms)
{
  struct dial d = {.sock = sock, .url = url};
  struct timespec until;
  pthread_t t;
  int rv;

  pthread_mutex_init(&d.lock, NULL);
  gmt__cond_init_monotonic(&d.done_cv);
  if ((rv = pthread_create(&t, NULL, dial_thread, &d)) != 0) {
    rv = -rv;
    goto out;
  }
  until = gmt__deadline_in(timeout_ms);
  pthread_mutex_lock(&d.lock);
  while (!d.done && pthread_cond_timedwait(&d.done_cv, &d.lock, &until) != ETIMEDOUT)
    ;
  int done = d.done;
  pthread_mutex_unlock(&d.lock);
  if (!done)
    nng_close(sock); /* aborts the dial */
  pthread_join(t, NULL);
  rv = done ? gmt__from_nng(d.rv) : -ETIMEDOUT;
out:
  pthread_cond_destroy(&d.done_cv);
  pthread_mutex_destroy(&d.lock);
  return rv;
}

static void client_free(gmt_client_t *c)
{
  pthread_mutex_destroy(&c->lock);
  pthread_cond_destroy(&c->idle);
  free(c->url);
  free(c);
}

int gmt_client_open(gmt_client_t **out, const char *url, int flags)
{
  gmt_client_t *c;
  int rv;

  *out = NULL;
  c = calloc(1, sizeof(*c));
  if (!c || !(c->url = strdup(url))) {
    free(c);
    return -ENOMEM;
  }
  pthread_mutex_init(&c->lock, NULL);
  gmt__cond_init_monotonic(&c->idle);
  rv = nng_req0_open(&c->sock);
  if (rv) {
    client_free(c);
    return gmt__from_nng(rv);
  }
  nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, GMT_WIRE_MAX_FRAME);
  /* Reconnect quickly at first, then back off to 2 s. */
  nng_socket_set_ms(c->sock, NNG_OPT_RECONNMINT, 100);
  nng_socket_set_ms(c->sock, NNG_OPT_RECONNMAXT, 2000);
  if (flags & GMT_CLIENT_DIAL_NOW)
    rv = dial_bounded(c->sock, url, GMT_CLIENT_DIAL_MS);
  else
    rv = gmt__from_nng(nng_dial(c->sock, url, NULL, NNG_FLAG_NONBLOCK));
  if (rv) {
    nng_close(c->sock);
    client_free(c);
    return rv;
  }
  *out = c;
  return 0;
}

int gmt_client_close(gmt_client_t *c)
{
  if (!c)
    return 0;
  /* Closing aborts calls in flight; their callbacks run with an error.
   * That is nng's promise, and a callback is the caller's code: neither
   * may hold a stopping daemon for ever, so the close and the wait share
   * one bound. */
  struct timespec until = gmt__deadline_in(GMT_CLIENT_CLOSE_MS);
  char what[300];
  snprintf(what, sizeof what, "the line to %s", c->url);
  int rv = gmt__close_until(c->sock, &until, what);
  pthread_mutex_lock(&c->lock);
  while (c->inflight > 0 && pthread_cond_timedwait(&c->idle, &c->lock, &until) != ETIMEDOUT)
    ;
  int left = c->inflight;
  if (left > 0) {
    /* A late callback still takes the lock and counts itself out: the
     * client stays allocated for it, and the last one frees it (so c is
     * not touched after the unlock). */
    c->abandoned = true;
    gmt_warn("closing %s: %d call%s still in flight %d ms after the close; leaving them", what,
             left, left == 1 ? "" : "s", GMT_CLIENT_CLOSE_MS);
    pthread_mutex_unlock(&c->lock);
    return -ETIMEDOUT;
  }
  pthread_mutex_unlock(&c->lock);
  client_free(c);
  return rv;
}

static int envelope_to_msg(const Gmt__Envelope *env, nng_msg **msg)
{
  void *buf;
  size_t len;
  /* Says which process calls (a tcp:// daemon checks it; nng does not
   * tell us our socket's descriptor, so the daemon looks through ours).
   * A forwarded request carries its sender's claim: ours replaces it. */
  Gmt__Envelope e = *env;
  Gmt__Caller me = GMT__CALLER__INIT;
  me.pid = (uint32_t)getpid();
  e.caller = &me;
  int rv = gmt_wire_pack(&e, &buf, &len);

  if (rv)
    return rv;
  rv = nng_msg_alloc(msg, 0);
  if (rv == 0 && (rv = nng_msg_append(*msg, buf, len)) != 0)
    nng_msg_free(*msg);
  free(buf);
  return gmt__from_nng(rv);
}

static int msg_to_envelope(nng_msg *msg, Gmt__Envelope **env)
{
  int rv = gmt_wire_unpack(nng_msg_body(msg), nng_msg_len(msg), env);

  nng_msg_free(msg);
  return rv;
}

static nng_duration remaining_ms(uint64_t deadline_ms)
{
  uint64_t now = gmt_now_ms();

  return now >= deadline_ms ? 1 : (nng_duration)(deadline_ms - now);
}

int gmt_client_call(gmt_client_t *c, const Gmt__Envelope *req, Gmt__Envelope **rep, int timeout_ms)
{
  uint64_t deadline = gmt_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 1);
  nng_msg *msg;
  nng_aio *aio;
  nng_ctx ctx;
  int rv;

  *rep = NULL;
  rv = envelope_to_msg(req, &msg);
  if (rv)
    return rv;
  if ((rv = nng_aio_alloc(&aio, NULL, NULL)) != 0) {
    nng_msg_free(msg);
    return gmt__from_nng(rv);
  }
  if ((rv = nng_ctx_open(&ctx, c->sock)) != 0) {
    nng_msg_free(msg);
    nng_aio_free(aio);
    return gmt__from_nng(rv);
  }
  nng_aio_set_msg(aio, msg);
  nng_aio_set_timeout(aio, remaining_ms(deadline));
  nng_ctx_send(ctx, aio);
  nng_aio_wait(aio);
  rv = nng_aio_result(aio);
  if (rv) {
    nng_msg_free(nng_aio_get_msg(aio));
  } else {
    nng_aio_set_timeout(aio, remaining_ms(deadline));
    nng_ctx_recv(ctx, aio);
    nng_aio_wait(aio);
    rv = nng_aio_result(aio);
  }
  if (rv == 0)
    rv = msg_to_envelope(nng_aio_get_msg(aio), rep);
  else
    rv = gmt__from_nng(rv);
  nng_ctx_close(ctx);
  nng_aio_free(aio);
  return rv;
}

/* One asynchronous call: send, then receive, then hand the reply on. */
struct async_call {
  gmt_client_t *client;
  nng_ctx ctx;
  nng_aio *aio;
  int receiving;
  uint64_t deadline;
  gmt_client_cb cb;
  void *arg;
};

static void async_done(struct async_call *a, int rv, Gmt__Envelope *rep)
{
  gmt_client_t *c = a->client;

  a->cb(a->arg, rv, rep);
  nng_ctx_close(a->ctx);
  /* We are inside the aio's own callback: it cannot be freed here. */
  nng_aio_reap(a->aio);
  free(a);
  pthread_mutex_lock(&c->lock);
  bool last = --c->inflight == 0;
  if (last)
    pthread_cond_broadcast(&c->idle);
  bool orphan = last && c->abandoned;
  pthread_mutex_unlock(&c->lock);
  if (orphan)
    client_free(c);
}

static void async_cb(void *arg)
{
  struct async_call *a = arg;
  Gmt__Envelope *rep = NULL;
  int rv = nng_aio_result(a->aio);

  if (rv) {
    if (!a->receiving)
      nng_msg_free(nng_aio_get_msg(a->aio));
    async_done(a, gmt__from_nng(rv), NULL);
    return;
  }
  if (!a->receiving) {
    a->receiving = 1;
    nng_aio_set_timeout(a->aio, remaining_ms(a->deadline));
    nng_ctx_recv(a->ctx, a->aio);
    return;
  }
  rv = msg_to_envelope(nng_aio_get_msg(a->aio), &rep);
  async_done(a, rv, rep);
}

int gmt_client_call_async(gmt_client_t *c, const Gmt__Envelope *req, int timeout_ms,
                          gmt_client_cb cb, void *arg)
{
  struct async_call *a;
  nng_msg *msg;
  int rv;

  a = calloc(1, sizeof(*a));
  if (!a)
    return -ENOMEM;
  a->client = c;
  a->cb = cb;
  a->arg = arg;
  a->deadline = gmt_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 1);
  if ((rv = envelope_to_msg(req, &msg)) != 0) {
    free(a);
    return rv;
  }
  if ((rv = nng_aio_alloc(&a->aio, async_cb, a)) != 0) {
    nng_msg_free(msg);
    free(a);
    return gmt__from_nng(rv);
  }
  if ((rv = nng_ctx_open(&a->ctx, c->sock)) != 0) {
    nng_msg_free(msg);
    nng_aio_free(a->aio);
    free(a);
    return gmt__from_nng(rv);
  }
  pthread_mutex_lock(&c->lock);
  c->inflight++;
  pthread_mutex_unlock(&c->lock);
  nng_aio_set_msg(a->aio, msg);
  nng_aio_set_timeout(a->aio, remaining_ms(a->deadline));
  nng_ctx_send(a->ctx, a->aio);
  return 0;
}
