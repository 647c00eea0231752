/* Background threads of the hook (see thread.h). */
#include "thread.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

int gmt__thread_start(void *(*fn)(void *))
{
  /* The new thread inherits this mask: block all, create, restore ours. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  pthread_t th;
  int rc = pthread_create(&th, &a, fn, NULL);
  pthread_attr_destroy(&a);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return -rc;
}

void gmt__cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t ms)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t ns = (uint64_t)ts.tv_nsec + ms % 1000 * 1000000ULL;
  ts.tv_sec += (time_t)(ms / 1000 + ns / 1000000000ULL);
  ts.tv_nsec = (long)(ns % 1000000000ULL);
  pthread_cond_clockwait(cv, mu, CLOCK_MONOTONIC, &ts);
}
