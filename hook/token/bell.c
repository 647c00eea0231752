/* The bell in this process (bell.h). */
#include "bell.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "busy.h" /* gmt__busy_stay_ns */
#include "channel.h"
#include "devmap.h"
#include "gmt_bell.h"
#include "gmt_error.h"
#include "gmt_log.h" /* gmt_now_ns: CLOCK_MONOTONIC, as the bell's */
#include "gmt_token_rules.h"
#include "log.h"

#define REFETCH_NS 10000000000LL /* a bell older than this is fetched again */

static _Atomic(gmt_bell_t *) g_bell;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t g_fetched_ns; /* under g_mu; 0: never */
static dev_t g_dev;
static ino_t g_ino;
/* What this process rang each slot until. */
static _Atomic int64_t g_rang[GMT_BELL_SLOTS];
/* When it last hushed a ring of its own (0: launched since), and how long
 * its next hush rings on (gmt__busy_stay_ns). */
static _Atomic int64_t g_hushed[GMT_BELL_SLOTS];
static _Atomic int64_t g_stay[GMT_BELL_SLOTS];
static _Atomic int64_t g_stay_max_ns = -1; /* GMT_BELL_STAY_US; set at the first need */

static void fetch(void)
{
  char url[512], path[512];
  const char *env = getenv("GMT_BELL");
  if (env && *env)
    snprintf(path, sizeof path, "%s", env);
  else {
    gmt__channel_url(url, sizeof url);
    if (gmt_bell_path(url, path, sizeof path) < 0)
      return; /* a tcp:// pod manager: no socket to fetch it from */
  }
  int fd = gmt_bell_fetch(path);
  if (fd < 0) {
    GMT_HOOK_DEBUG("no bell at %s (%s): batch pods hear of this GPU's latency work through "
                   "the daemons",
                   path, gmt_strerror(fd));
    return;
  }
  struct stat st = {0};
  if (fstat(fd, &st) == 0 && st.st_dev == g_dev && st.st_ino == g_ino && atomic_load(&g_bell)) {
    close(fd); /* the same bell */
    return;
  }
  gmt_bell_t *b = gmt_bell_map(fd);
  int e = errno;
  close(fd);
  if (!b) {
    GMT_HOOK_DEBUG("the bell from %s is refused: %s", path, gmt_strerror(-e));
    return;
  }
  g_dev = st.st_dev;
  g_ino = st.st_ino;
  /* The old mapping stays: another thread may be reading it. */
  atomic_store(&g_bell, b);
  GMT_HOOK_DEBUG("bell from %s", path);
}

int gmt__bell_have(void)
{
  return atomic_load_explicit(&g_bell, memory_order_relaxed) != NULL;
}

void gmt__bell_need(int64_t now_ns)
{
  pthread_mutex_lock(&g_mu);
  if (atomic_load(&g_stay_max_ns) < 0) {
    const char *e = getenv("GMT_BELL_STAY_US");
    long long us = e && *e ? atoll(e) : GMT_BELL_STAY_MAX_US;
    atomic_store(&g_stay_max_ns, us > 0 ? us * 1000 : 0);
  }
  if (!g_fetched_ns || now_ns - g_fetched_ns >= REFETCH_NS) {
    g_fetched_ns = now_ns;
    fetch();
  }
  pthread_mutex_unlock(&g_mu);
}

/* dev's slot, or -1. */
static int slot(int dev)
{
  int nd = gmt__node_device(dev);
  return nd >= 0 && nd < GMT_BELL_SLOTS ? nd : -1;
}

static void ring(int dev, int64_t now_ns, int64_t ring_ns, int64_t rewrite_ns, int launch)
{
  gmt_bell_t *b = atomic_load_explicit(&g_bell, memory_order_relaxed);
  int s;
  if (!b || (s = slot(dev)) < 0)
    return;
  /* Rung long enough still: nothing to write. */
  if (atomic_load_explicit(&g_rang[s], memory_order_relaxed) - now_ns > rewrite_ns)
    return;
  /* The first launch after a hush (which left g_rang at 0): how soon the
   * work came back sets how long the next hush rings on. */
  int64_t hushed = launch ? atomic_exchange_explicit(&g_hushed[s], 0, memory_order_relaxed) : 0;
  if (hushed) {
    int64_t last = atomic_load_explicit(&g_stay[s], memory_order_relaxed);
    int64_t max = atomic_load_explicit(&g_stay_max_ns, memory_order_relaxed);
    atomic_store_explicit(&g_stay[s], gmt__busy_stay_ns(now_ns - hushed, last, max),
                          memory_order_relaxed);
  }
  int64_t until = gmt_bell_ring(b, s, now_ns + ring_ns);
  atomic_store_explicit(&g_rang[s], until, memory_order_relaxed);
}

void gmt__bell_ring(int dev, int64_t now_ns)
{
  int64_t ns = (int64_t)GMT_BELL_RING_US * 1000;
  ring(dev, now_ns, ns, ns * 3 / 4, 1);
}

void gmt__bell_ring_drain(int dev, int64_t now_ns)
{
  int64_t ns = (int64_t)GMT_BELL_DRAIN_US * 1000;
  ring(dev, now_ns, ns, ns - 1, 0);
}

void gmt__bell_hush(int dev, int64_t now_ns)
{
  gmt_bell_t *b = atomic_load_explicit(&g_bell, memory_order_relaxed);
  int s;
  if (!b || (s = slot(dev)) < 0)
    return;
  int64_t mine = atomic_exchange_explicit(&g_rang[s], 0, memory_order_relaxed);
  if (!mine)
    return; /* hushed already */
  atomic_store_explicit(&g_hushed[s], now_ns, memory_order_relaxed);
  if (mine > now_ns)
    gmt_bell_hush(b, s, mine, now_ns);
  int64_t stay = atomic_load_explicit(&g_stay[s], memory_order_relaxed);
  if (stay > 0)
    gmt_bell_stay(b, s, now_ns + stay);
}

int64_t gmt__bell_heed(int dev, int64_t budget_ns, int64_t kernel_ns)
{
  gmt_bell_t *b = atomic_load_explicit(&g_bell, memory_order_relaxed);
  int s;
  if (!b || budget_ns <= 0 || (s = slot(dev)) < 0)
    return 0;
  int64_t t0 = (int64_t)gmt_now_ns(), t = t0;
  int64_t until = gmt_bell_wait_until(b, s, t0, kernel_ns);
  if (until <= t0)
    return 0;
  while (until > t && t - t0 < budget_ns) {
    int64_t nap = until - t;
    if (nap > GMT_BELL_NAP_NS)
      nap = GMT_BELL_NAP_NS;
    if (nap > budget_ns - (t - t0))
      nap = budget_ns - (t - t0);
    struct timespec ts = {0, nap};
    nanosleep(&ts, NULL);
    t = (int64_t)gmt_now_ns();
    until = gmt_bell_wait_until(b, s, t, kernel_ns);
  }
  return t - t0;
}
