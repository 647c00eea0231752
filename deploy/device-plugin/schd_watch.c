/* Asks gmt-schd's Status on a thread of its own (schd_watch.h). */
#include "schd_watch.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gmt_bounded.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_wire.h"

struct gmt_dp_watch {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop;
  char url[512];
  int poll_ms;
  gmt_dp_node_t node;   /* under mu */
  uint64_t gen;         /* under mu */
  gmt_client_t *client; /* the thread's own */
};

/* One Status: 0 and the node in *out, or a negative code and why. */
static int ask(gmt_dp_watch_t *w, gmt_dp_node_t *out, char *why, size_t len)
{
  int rc;
  if (!w->client && (rc = gmt_client_open(&w->client, w->url, GMT_CLIENT_DIAL_NOW)) < 0) {
    w->client = NULL;
    snprintf(why, len, "%s", gmt_strerror(rc));
    return rc;
  }
  Gmt__StatusRequest sreq = GMT__STATUS_REQUEST__INIT;
  Gmt__Envelope req = GMT__ENVELOPE__INIT, *rep = NULL;
  gmt_wire_set_body(&req, GMT__ENVELOPE__BODY_STATUS_REQ, &sreq);
  rc = gmt_client_call(w->client, &req, &rep, GMT_DP_SCHD_CALL_MS);
  if (rc == 0) {
    char err[256] = "";
    rc = gmt_wire_expect(rep, GMT__ENVELOPE__BODY_STATUS_REP, err, sizeof err);
    snprintf(why, len, "%s", err[0] ? err : gmt_strerror(rc));
  } else {
    snprintf(why, len, "%s", gmt_strerror(rc));
  }
  if (rc < 0) {
    gmt_wire_free(rep);
    /* A fresh connection next time: this one may be to a dead daemon. */
    gmt_client_close(w->client);
    w->client = NULL;
    return rc;
  }
  size_t dropped = gmt_dp_node_from_status(rep->status_rep, out);
  if (dropped)
    gmt_warn("gmt-schd at %s lists %zu GPUs past the %d the plugin advertises", w->url, dropped,
             GMT_DP_MAX_GPUS);
  gmt_wire_free(rep);
  return 0;
}

static void say(const gmt_dp_watch_t *w, const gmt_dp_node_t *was, const gmt_dp_node_t *now,
                const char *why)
{
  if (now->healthy && !was->healthy)
    gmt_info("gmt-schd at %s answers: %zu GPU%s", w->url, now->n_gpus, now->n_gpus == 1 ? "" : "s");
  else if (!now->healthy && (was->healthy || !was->known) && why)
    gmt_warn("gmt-schd at %s does not answer (%s): %s", w->url, why,
             now->known ? "its GPUs' devices are advertised Unhealthy until it does"
                        : "no devices are advertised until it does");
  else if (now->healthy && !gmt_dp_node_equal(was, now))
    gmt_info("gmt-schd at %s: the GPUs or their spaces changed (%zu GPU%s)", w->url, now->n_gpus,
             now->n_gpus == 1 ? "" : "s");
}

static void *run(void *arg)
{
  gmt_dp_watch_t *w = arg;
  gmt_dp_node_t last = {0};
  bool first = true;
  pthread_mutex_lock(&w->mu);
  while (!w->stop) {
    pthread_mutex_unlock(&w->mu);
    gmt_dp_node_t next;
    char why[300] = "";
    if (ask(w, &next, why, sizeof why) < 0) {
      next = last;
      next.healthy = false;
    }
    if (first || !gmt_dp_node_equal(&last, &next))
      say(w, first ? &(gmt_dp_node_t){0} : &last, &next, why);
    pthread_mutex_lock(&w->mu);
    if (first || !gmt_dp_node_equal(&last, &next)) {
      w->node = next;
      w->gen++;
    }
    last = next;
    first = false;
    struct timespec until = gmt__deadline_in(w->poll_ms);
    while (!w->stop && pthread_cond_timedwait(&w->cv, &w->mu, &until) != ETIMEDOUT) {
    }
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

int gmt_dp_watch_start(gmt_dp_watch_t **out, const char *url, int poll_ms)
{
  gmt_dp_watch_t *w = calloc(1, sizeof *w);
  if (!w)
    return -ENOMEM;
  snprintf(w->url, sizeof w->url, "%s", url);
  w->poll_ms = poll_ms;
  pthread_mutex_init(&w->mu, NULL);
  gmt__cond_init_monotonic(&w->cv);
  int rc = pthread_create(&w->thread, NULL, run, w);
  if (rc != 0) {
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
    return -rc;
  }
  *out = w;
  return 0;
}

uint64_t gmt_dp_watch_get(gmt_dp_watch_t *w, gmt_dp_node_t *out)
{
  pthread_mutex_lock(&w->mu);
  *out = w->node;
  uint64_t gen = w->gen;
  pthread_mutex_unlock(&w->mu);
  return gen;
}

int gmt_dp_watch_stop(gmt_dp_watch_t *w)
{
  pthread_mutex_lock(&w->mu);
  w->stop = true;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  /* pthread_timedjoin_np counts on CLOCK_REALTIME. */
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += GMT_DP_WATCH_STOP_MS / 1000;
  until.tv_nsec += (long)(GMT_DP_WATCH_STOP_MS % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  if (pthread_timedjoin_np(w->thread, NULL, &until) != 0)
    return -ETIMEDOUT;
  if (w->client)
    gmt_client_close(w->client);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  free(w);
  return 0;
}
