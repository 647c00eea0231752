/* Waits with a bound (gmt_bounded.h). */
#include "gmt_bounded.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "gmt_log.h"

struct timespec gmt__deadline_in(int ms)
{
  struct timespec t;

  clock_gettime(CLOCK_MONOTONIC, &t);
  t.tv_sec += ms / 1000;
  t.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec++;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}

void gmt__cond_init_monotonic(pthread_cond_t *cv)
{
  pthread_condattr_t attr;

  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &attr);
  pthread_condattr_destroy(&attr);
}

/* Shared by the waiter and the closing thread; the last one out frees it. */
struct closing {
  nng_socket sock;
  pthread_mutex_t lock;
  pthread_cond_t done_cv;
  bool done;
  int refs;
};

static void closing_put(struct closing *c)
{
  pthread_mutex_lock(&c->lock);
  int refs = --c->refs;
  pthread_mutex_unlock(&c->lock);
  if (refs > 0)
    return;
  pthread_cond_destroy(&c->done_cv);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

static void *close_thread(void *arg)
{
  struct closing *c = arg;

  nng_close(c->sock);
  pthread_mutex_lock(&c->lock);
  c->done = true;
  pthread_cond_signal(&c->done_cv);
  pthread_mutex_unlock(&c->lock);
  closing_put(c);
  return NULL;
}

int gmt__close_until(nng_socket sock, const struct timespec *until, const char *what)
{
  struct closing *c = calloc(1, sizeof *c);
  pthread_attr_t attr;
  pthread_t t;

  if (!c) {
    nng_close(sock); /* no thread to spare: unbounded, as before */
    return 0;
  }
  c->sock = sock;
  c->refs = 2;
  pthread_mutex_init(&c->lock, NULL);
  gmt__cond_init_monotonic(&c->done_cv);
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&t, &attr, close_thread, c);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    c->refs = 1;
    closing_put(c);
    nng_close(sock);
    return 0;
  }
  pthread_mutex_lock(&c->lock);
  while (!c->done && pthread_cond_timedwait(&c->done_cv, &c->lock, until) != ETIMEDOUT)
    ;
  bool done = c->done;
  pthread_mutex_unlock(&c->lock);
  closing_put(c);
  if (done)
    return 0;
  gmt_warn("closing %s: nng's close has not returned by its bound; going on without it", what);
  return -ETIMEDOUT;
}
