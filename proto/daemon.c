/* What both daemons do at start (the descriptor limit) and at stop (the
 * bound on stopping). */
#include "gmt_daemon.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "gmt_log.h"
#include "gmt_wire.h"

_Static_assert(GMT_DAEMON_NOFILE_MIN == 4 * GMT_SERVER_MAX_PER_USER + 1024,
               "the floor follows the per-user cap");

/* The warning for a limit of have descriptors (hard: the hard limit):
 * 0 with buf filled, or -EAGAIN when have is enough. */
static int nofile_warning(unsigned long long have, unsigned long long hard, char *buf, size_t len)
{
  if (have >= GMT_DAEMON_NOFILE_MIN)
    return -EAGAIN;
  snprintf(buf, len,
           "open-file limit %llu (hard limit %llu) is below %d: one user may hold %d "
           "connections (the per-user cap), so one or two users can take every descriptor and "
           "lock pods, hooks and `gmt status` out; raise the hard limit (LimitNOFILE= in the "
           "systemd unit: deploy/systemd sets 1048576; `prlimit --nofile` or "
           "/etc/security/limits.conf otherwise)",
           have, hard, GMT_DAEMON_NOFILE_MIN, GMT_SERVER_MAX_PER_USER);
  return 0;
}

void gmt_daemon_raise_nofile(void)
{
  struct rlimit rl;
  char warning[512];

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
      rl.rlim_cur = was;
    }
  }
  gmt_debug("open-file limit %llu", (unsigned long long)rl.rlim_cur);
  if (nofile_warning(rl.rlim_cur, rl.rlim_max, warning, sizeof warning) == 0)
    gmt_warn("%s", warning);
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
