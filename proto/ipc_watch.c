/* Keeping a daemon's ipc listeners accepting: see gmt_ipc_watch.h for why
 * (nng 1.5's listener stops after a client hangs up mid-handshake). */
#include "gmt_ipc_watch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "gmt_bounded.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_unixsock.h"

/* Waits for events on fd until the monotonic ms deadline. */
static int wait_for(int fd, short events, uint64_t until)
{
  for (;;) {
    uint64_t now = gmt_now_ms();
    if (now >= until)
      return -ETIMEDOUT;
    struct pollfd p = {.fd = fd, .events = events};
    int r = poll(&p, 1, (int)(until - now));
    if (r > 0)
      return 0;
    if (r < 0 && errno != EINTR)
      return -errno;
  }
}

int gmt_sp_probe_ipc(const char *path, int timeout_ms)
{
  struct sockaddr_un sa;
  int rc = gmt_unix_addr(path, &sa);
  if (rc < 0)
    return rc;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return -errno;
  uint64_t until = gmt_now_ms() + (uint64_t)timeout_ms;
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
    rc = errno == EINPROGRESS || errno == EAGAIN ? wait_for(fd, POLLOUT, until) : -errno;
    int err = 0;
    socklen_t el = sizeof err;
    if (rc == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err)
      rc = -err;
  }
  /* The handshake alone proves nothing: nng's transport goes on taking
   * connections after its listener has stopped, and they wait unserved.
   * So the probe asks something: a frame that does not decode, which the
   * server answers with an error at once, on its own threads. */
  static const unsigned char req[] = {
      0,    'S',  'P',  0,    0, 0x30, 0, 0,    /* SP header: REQ */
      1,    0,    0,    0,    0, 0,    0, 0, 8, /* ipc message: type, 64-bit length 8 */
      0x80, 0,    0,    1,                      /* request id */
      0xff, 0xff, 0xff, 0xff,                   /* not a protobuf envelope */
  };
  size_t sent = 0;
  while (rc == 0 && sent < sizeof req) {
    ssize_t n = send(fd, req + sent, sizeof req - sent, MSG_NOSIGNAL);
    if (n > 0)
      sent += (size_t)n;
    else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      rc = wait_for(fd, POLLOUT, until);
    else if (n < 0 && errno != EINTR)
      rc = -errno;
  }
  /* Its header, then a reply's frame head (type byte, 64-bit length). */
  unsigned char got[8 + 9];
  size_t have = 0;
  while (rc == 0 && have < sizeof got) {
    ssize_t n = recv(fd, got + have, sizeof got - have, 0);
    if (n > 0)
      have += (size_t)n;
    else if (n == 0)
      rc = -ECONNRESET;
    else if (errno == EAGAIN || errno == EWOULDBLOCK)
      rc = wait_for(fd, POLLIN, until);
    else if (errno != EINTR)
      rc = -errno;
  }
  if (rc == 0 && (got[0] != 0 || got[1] != 'S' || got[2] != 'P' || got[3] != 0 || got[8] != 1))
    rc = -EPROTO;
  close(fd);
  return rc;
}

struct gmt_ipc_watch {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* on CLOCK_MONOTONIC */
  bool stop;
  char *const *paths;
  int n, period_ms, timeout_ms;
  gmt_ipc_relisten_cb relisten;
  void *data;
};

static void *watch_main(void *arg)
{
  gmt_ipc_watch_t *w = arg;
  pthread_mutex_lock(&w->mu);
  while (!w->stop) {
    struct timespec until = gmt__deadline_in(w->period_ms);
    while (!w->stop && pthread_cond_timedwait(&w->cv, &w->mu, &until) != ETIMEDOUT) {
    }
    if (w->stop)
      break;
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < w->n; i++) {
      int rc = gmt_sp_probe_ipc(w->paths[i], w->timeout_ms);
      if (rc == 0)
        continue;
      gmt_warn("ipc://%s does not answer (%s): listening on it again (nng 1.5 stops accepting "
               "there after a client hangs up during its handshake)",
               w->paths[i], gmt_strerror(rc));
      int r = w->relisten(w->data, i);
      if (r < 0)
        gmt_warn("ipc://%s: cannot listen again: %s", w->paths[i], gmt_strerror(r));
    }
    pthread_mutex_lock(&w->mu);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

int gmt_ipc_watch_start(gmt_ipc_watch_t **out, char *const *paths, int n, int period_ms,
                        int timeout_ms, gmt_ipc_relisten_cb relisten, void *data)
{
  *out = NULL;
  gmt_ipc_watch_t *w = calloc(1, sizeof *w);
  if (!w)
    return -ENOMEM;
  *w = (gmt_ipc_watch_t){.paths = paths,
                         .n = n,
                         .period_ms = period_ms,
                         .timeout_ms = timeout_ms,
                         .relisten = relisten,
                         .data = data};
  pthread_mutex_init(&w->mu, NULL);
  gmt__cond_init_monotonic(&w->cv);
  int rc = pthread_create(&w->thread, NULL, watch_main, w);
  if (rc != 0) {
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
    return -rc;
  }
  *out = w;
  return 0;
}

void gmt_ipc_watch_stop(gmt_ipc_watch_t *w)
{
  if (!w)
    return;
  pthread_mutex_lock(&w->mu);
  w->stop = true;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  free(w);
}
