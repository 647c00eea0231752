/* Start-up steps that both daemons share. */
#include "gmt_daemon.h"

#include <errno.h>
#include <string.h>
#include <sys/resource.h>

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
