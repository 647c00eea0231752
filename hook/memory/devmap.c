/* The node's index of each GPU this process sees (devmap.h). */
#include "devmap.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "channel.h"
#include "driver.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_wire.h"
#include "log.h"

#define MAX_GPUS GMT_DEVMAP_MAX_GPUS
#define DEVICES_TIMEOUT_MS 1000
#define RETRY_MS 1000

/* ---- the scheduler's answer ---- */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int g_known; /* 1: g_map holds the answer (entries may be -1) */
static int g_map[MAX_GPUS], g_nmap;
static uint64_t g_next_try_ms;

int gmt__devmap_bus_ids(char ids[][GMT_BUSID_SIZE], int max)
{
  __typeof__(&cuDeviceGetCount) count = GMT_REAL(cuDeviceGetCount);
  __typeof__(&cuDeviceGet) get = GMT_REAL(cuDeviceGet);
  __typeof__(&cuDeviceGetPCIBusId) bus_id = GMT_REAL(cuDeviceGetPCIBusId);
  int n = 0;
  if (!count || !get || !bus_id || count(&n) != CUDA_SUCCESS || n < 0)
    return -1;
  if (n > max)
    n = max;
  for (int i = 0; i < n; i++) {
    CUdevice d;
    if (get(&d, i) != CUDA_SUCCESS || bus_id(ids[i], GMT_BUSID_SIZE, d) != CUDA_SUCCESS)
      return -1;
  }
  return n;
}

static int ask(void)
{
  char ids[MAX_GPUS][GMT_BUSID_SIZE];
  int n = gmt__devmap_bus_ids(ids, MAX_GPUS);
  if (n < 0)
    return -ENODEV;
  char *ptrs[MAX_GPUS];
  for (int i = 0; i < n; i++)
    ptrs[i] = ids[i];
  Gmt__DevicesRequest rq = GMT__DEVICES_REQUEST__INIT;
  rq.pid = (uint32_t)getpid();
  rq.n_bus_ids = (size_t)n;
  rq.bus_ids = ptrs;
  Gmt__Envelope env = GMT__ENVELOPE__INIT;
  env.body_case = GMT__ENVELOPE__BODY_DEVICES_REQ;
  env.devices_req = &rq;
  Gmt__Envelope *rep = NULL;
  int rc = gmt__channel_call(GMT_CH_MEMORY, &env, &rep, DEVICES_TIMEOUT_MS);
  if (rc < 0)
    return rc;
  char err[256] = "";
  rc = gmt_wire_expect(rep, GMT__ENVELOPE__BODY_DEVICES_REP, err, sizeof err);
  if (rc == 0 && rep->devices_rep->n_index != (size_t)n)
    rc = -EPROTO;
  if (rc < 0) {
    GMT_HOOK_DEBUG("Devices: %s%s%s", gmt_strerror(rc), *err ? ": " : "", err);
    gmt_wire_free(rep);
    return rc;
  }
  /* A pod manager without its scheduler answers -1 for each: not an
   * answer to keep. */
  int any = 0;
  for (int i = 0; i < n; i++)
    any |= rep->devices_rep->index[i] >= 0;
  if (any || n == 0) {
    for (int i = 0; i < n; i++) {
      g_map[i] = rep->devices_rep->index[i];
      GMT_HOOK_DEBUG("CUDA device %d (%s) is the node's GPU %d", i, ids[i], g_map[i]);
    }
    g_nmap = n;
  }
  gmt_wire_free(rep);
  return any || n == 0 ? 0 : -EAGAIN;
}

void gmt__devmap_ensure(void)
{
  if (atomic_load_explicit(&g_known, memory_order_acquire))
    return;
  /* Another thread asking is as good; and a child forked while a thread
   * asked finds the lock taken for good, and keeps the fallback. */
  if (pthread_mutex_trylock(&g_mu) != 0)
    return;
  uint64_t now = gmt_now_ms();
  if (!atomic_load_explicit(&g_known, memory_order_relaxed) && now >= g_next_try_ms &&
      gmt__driver_ready()) {
    if (ask() == 0)
      atomic_store_explicit(&g_known, 1, memory_order_release);
    else
      g_next_try_ms = now + RETRY_MS;
  }
  pthread_mutex_unlock(&g_mu);
}

/* ---- CUDA_VISIBLE_DEVICES, when the scheduler cannot say ---- */

/* As node indices, read once (it is fixed when the driver starts).
 * g_nvis < 0: unset, or not indices. */
static pthread_once_t g_vis_once = PTHREAD_ONCE_INIT;
static int g_vis[MAX_GPUS], g_nvis = -1;

static void read_visible(void)
{
  const char *v = getenv("CUDA_VISIBLE_DEVICES");
  if (!v || !*v)
    return;
  int n = 0;
  for (const char *p = v; *p && n < MAX_GPUS;) {
    while (*p == ' ')
      p++;
    if (*p < '0' || *p > '9')
      break; /* a UUID or garbage: CUDA stops here too, or names GPUs otherwise */
    char *end;
    long x = strtol(p, &end, 10);
    if (x < 0 || x > 1023)
      break;
    g_vis[n++] = (int)x;
    p = end;
    while (*p == ' ')
      p++;
    if (*p != ',')
      break;
    p++;
  }
  if (n > 0)
    g_nvis = n;
}

int gmt__node_device(int ordinal)
{
  if (ordinal < 0)
    return ordinal;
  /* g_map is written once, before g_known is released. */
  if (atomic_load_explicit(&g_known, memory_order_acquire) && ordinal < g_nmap &&
      g_map[ordinal] >= 0)
    return g_map[ordinal];
  pthread_once(&g_vis_once, read_visible);
  return g_nvis > 0 && ordinal < g_nvis ? g_vis[ordinal] : ordinal;
}
