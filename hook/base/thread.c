/* Background threads of the hook (see thread.h). */
#include "thread.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "gmt_bounded.h"

int gmt__thread_start(const char *name, void *(*fn)(void *))
{
  /* The new thread inherits this mask: block all, create, restore ours. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  /* Joinable until named: a detached thread that has already returned
   * would leave th pointing at freed memory. */
  pthread_t th;
  int rc = pthread_create(&th, NULL, fn, NULL);
  if (rc == 0) {
    (void)pthread_setname_np(th, name);
    pthread_detach(th);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return -rc;
}

/* ms from now on CLOCK_MONOTONIC (gmt_bounded.h's, bounded to an int). */
static struct timespec deadline(uint64_t ms)
{
  return gmt__deadline_in(ms > INT_MAX ? INT_MAX : (int)ms);
}

void gmt__cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t ms)
{
  struct timespec ts = deadline(ms);
  pthread_cond_clockwait(cv, mu, CLOCK_MONOTONIC, &ts);
}

int gmt__mutex_lock_ms(pthread_mutex_t *mu, uint64_t ms)
{
  struct timespec ts = deadline(ms);
  return -pthread_mutex_clocklock(mu, CLOCK_MONOTONIC, &ts);
}
