/* The bell, passed on (pmgr_bell.h). Fetched from gmt-schd afresh for each
 * process that asks, so that a restarted gmt-schd's new bell reaches new
 * processes; the last one fetched is passed on while gmt-schd is away. */
#include "pmgr_bell.h"

#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include "gmt_bell.h"
#include "gmt_error.h"
#include "gmt_log.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_schd[256];
static int g_fd = -1; /* the last bell fetched, under g_mu */
static gmt_bell_server_t *g_srv;

static int bell_get(void *arg)
{
  (void)arg;
  int fd = gmt_bell_fetch(g_schd);
  pthread_mutex_lock(&g_mu);
  if (fd >= 0) {
    if (g_fd >= 0)
      close(g_fd);
    g_fd = fd;
  }
  fd = g_fd >= 0 ? dup(g_fd) : -ENOENT;
  pthread_mutex_unlock(&g_mu);
  return fd;
}

void gmt__pmgr_bell_start(const char *schd_url, const char *ipc_url, long gid)
{
  char path[256];
  if (gmt_bell_path(schd_url, g_schd, sizeof g_schd) < 0) {
    gmt_info("no bell: the scheduler is not on an ipc socket (%s)", schd_url);
    return;
  }
  if (gmt_bell_path(ipc_url, path, sizeof path) < 0)
    return;
  int fd = bell_get(NULL);
  if (fd < 0)
    gmt_info("no bell from %s yet (%s): asked again for each process", g_schd, gmt_strerror(fd));
  else
    close(fd);
  int rc = gmt_bell_serve(&g_srv, path, gid, bell_get, NULL);
  if (rc < 0)
    gmt_warn("bell %s: %s", path, gmt_strerror(rc));
}

void gmt__pmgr_bell_stop(void)
{
  gmt_bell_serve_stop(g_srv);
  g_srv = NULL;
  pthread_mutex_lock(&g_mu);
  if (g_fd >= 0)
    close(g_fd);
  g_fd = -1;
  pthread_mutex_unlock(&g_mu);
}
