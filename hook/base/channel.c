/* The hook's connections to its pod manager (see channel.h). Each channel
 * is a conn.c connection under its own mutex, opened on first use.
 *
 * Liveness: a call that should be quick (a report, a reservation) and gets
 * no answer within its bound marks the pod manager down, whether it died
 * or stopped (SIGSTOP, a stalled loop): the calls waiting on the other
 * channels give up at once, and new ones fail at once (-EHOSTDOWN), so the
 * process runs ungated within its last known quota instead of waiting. The
 * report channel keeps asking (the reporter's keepalive) and its first
 * answer marks the pod manager up again. A token call that waits long is
 * not a sign of death: the pod may be waiting its turn. */
#include "channel.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fork.h"

#define GMT_CHANNEL_OPEN_TIMEOUT_MS 1000
/* How soon a call waiting on a channel sees that another found the pod
 * manager down (gmt__conn_set_give_up): a launch waiting for its token
 * should not wait out its timeout. The watch's call waits for a grant's
 * end, seconds; at 50 ms it woke the watch thread 20 times a second with a
 * job alone on an H200 (bench/hook_wakeups.py), and nothing waits on it. */
#define GMT_CHANNEL_SLICE_MS 50
#define GMT_CHANNEL_WATCH_SLICE_MS 500

static struct {
  pthread_mutex_t mu;
  gmt_conn_t *conn;
} g_ch[GMT_CH_COUNT] = {
    [0 ... GMT_CH_COUNT - 1] = {.mu = PTHREAD_MUTEX_INITIALIZER},
};
static char *g_url;
static _Atomic int g_started;
static _Atomic int g_down; /* the pod manager did not answer a quick call */

void gmt__channels_start(const char *url, gmt_conn_t *first)
{
  pthread_mutex_lock(&g_ch[GMT_CH_REPORT].mu);
  free(g_url);
  g_url = strdup(url);
  gmt__conn_close(g_ch[GMT_CH_REPORT].conn);
  g_ch[GMT_CH_REPORT].conn = first;
  /* No connection yet: down until the first report goes through. */
  atomic_store_explicit(&g_down, first == NULL, memory_order_relaxed);
  atomic_store_explicit(&g_started, g_url != NULL, memory_order_release);
  pthread_mutex_unlock(&g_ch[GMT_CH_REPORT].mu);
}

int gmt__channel_call(int ch, const Gmt__Envelope *req, Gmt__Envelope **rep, int timeout_ms)
{
  *rep = NULL;
  if (ch < 0 || ch >= GMT_CH_COUNT)
    return -EINVAL;
  if (!atomic_load_explicit(&g_started, memory_order_acquire))
    return -ENOTCONN;
  /* The report channel is the one that finds out when it is back. */
  if (ch != GMT_CH_REPORT && atomic_load_explicit(&g_down, memory_order_relaxed))
    return -EHOSTDOWN;
  pthread_mutex_lock(&g_ch[ch].mu);
  int rc = 0;
  if (!g_ch[ch].conn) {
    rc = gmt__conn_open(&g_ch[ch].conn, g_url,
                        timeout_ms < GMT_CHANNEL_OPEN_TIMEOUT_MS ? timeout_ms
                                                                 : GMT_CHANNEL_OPEN_TIMEOUT_MS);
    if (rc == 0 && ch != GMT_CH_REPORT)
      gmt__conn_set_give_up(g_ch[ch].conn, &g_down,
                            ch == GMT_CH_WATCH ? GMT_CHANNEL_WATCH_SLICE_MS : GMT_CHANNEL_SLICE_MS);
  }
  if (rc == 0)
    rc = gmt__conn_call(g_ch[ch].conn, req, rep, timeout_ms);
  pthread_mutex_unlock(&g_ch[ch].mu);
  if (rc == 0)
    atomic_store_explicit(&g_down, 0, memory_order_relaxed);
  else if (rc != -EHOSTDOWN && ((ch != GMT_CH_TOKEN && ch != GMT_CH_WATCH) || rc != -ETIMEDOUT))
    atomic_store_explicit(&g_down, 1, memory_order_relaxed);
  return rc;
}

void gmt__channel_url(char *out, size_t n)
{
  pthread_mutex_lock(&g_ch[GMT_CH_REPORT].mu);
  snprintf(out, n, "%s", g_url ? g_url : "");
  pthread_mutex_unlock(&g_ch[GMT_CH_REPORT].mu);
}

int gmt__channel_down(void)
{
  return atomic_load_explicit(&g_down, memory_order_relaxed);
}

/* ---- fork ---- */

/* The watch channel is not taken: its call may wait for a whole grant,
 * and a fork must not. The child drops its copy of that connection
 * without touching it (it may be mid-call in the parent). */
static void channels_prepare(void)
{
  for (int i = 0; i < GMT_CH_COUNT; i++)
    if (i != GMT_CH_WATCH)
      pthread_mutex_lock(&g_ch[i].mu);
}

static void channels_parent(void)
{
  for (int i = GMT_CH_COUNT - 1; i >= 0; i--)
    if (i != GMT_CH_WATCH)
      pthread_mutex_unlock(&g_ch[i].mu);
}

static void channels_child(void)
{
  /* The parent's connections stay the parent's: the child closes its
   * copies of the descriptors (nothing goes out on the wire while the
   * parent holds the socket) and registers itself on its next cuInit. */
  atomic_store_explicit(&g_started, 0, memory_order_relaxed);
  atomic_store_explicit(&g_down, 0, memory_order_relaxed);
  for (int i = 0; i < GMT_CH_COUNT; i++) {
    if (i != GMT_CH_WATCH)
      gmt__conn_close(g_ch[i].conn);
    g_ch[i].conn = NULL;
    pthread_mutex_init(&g_ch[i].mu, NULL);
  }
}

static const gmt_fork_ops_t g_fork_ops = {channels_prepare, channels_parent, channels_child};

__attribute__((constructor)) static void channels_register(void)
{
  gmt__fork_register(GMT_LOCK_CHANNEL, &g_fork_ops);
}
