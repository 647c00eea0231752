/* What both daemons do at start (the descriptor limit) and at stop (the
 * bound on stopping). */
#include "gmt_daemon.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "gmt_log.h"

void gmt_daemon_raise_nofile(void)
{
  struct rlimit rl;

  if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
    gmt_warn("cannot read the open-file limit: %s", strerror(errno));
    return;
  }
  if (rl.rlim_cur < rl.rlim_max) {
    rlim_t was = rl.rlim_cur;

    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
      gmt_warn("cannot raise the open-file limit from %llu to %llu: %s", (unsigned long long)was,
               (unsigned long long)rl.rlim_max, strerror(errno));
      return;
    }
  }
  gmt_debug("open-file limit %llu", (unsigned long long)rl.rlim_cur);
}

/* ---- the bound on stopping ---- */

static pthread_mutex_t stop_mu = PTHREAD_MUTEX_INITIALIZER;
static const char *stop_step; /* under stop_mu */

/* Sleeps out the bound on a thread of its own (the stopping thread may be
 * the one that hangs), then ends the process: returning from main in time
 * ends it first. nanosleep counts on CLOCK_MONOTONIC. */
static void *stop_watch(void *arg)
{
  (void)arg;
  struct timespec left = {.tv_sec = GMT_DAEMON_STOP_MS / 1000,
                          .tv_nsec = (long)(GMT_DAEMON_STOP_MS % 1000) * 1000000L};
  while (nanosleep(&left, &left) < 0 && errno == EINTR)
    ;
  pthread_mutex_lock(&stop_mu);
  const char *step = stop_step;
  pthread_mutex_unlock(&stop_mu);
  gmt_error("still stopping %d ms after the stop began, at: %s; exiting now without finishing",
            GMT_DAEMON_STOP_MS, step);
  _exit(GMT_DAEMON_EXIT_STOP_CUT);
  return NULL;
}

void gmt_daemon_stopping(const char *step)
{
  pthread_mutex_lock(&stop_mu);
  bool armed = stop_step != NULL;
  stop_step = step;
  pthread_mutex_unlock(&stop_mu);
  if (armed)
    return;
  pthread_attr_t attr;
  pthread_t t;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&t, &attr, stop_watch, NULL);
  pthread_attr_destroy(&attr);
  if (rc != 0)
    gmt_warn("stopping without a bound: cannot start its thread: %s", strerror(rc));
}
