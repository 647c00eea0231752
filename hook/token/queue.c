/* A batch process's queued work, bounded while a latency pod may need the
 * GPU (see queue.h). */
#include "queue.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "calllog.h"

/* Devices bounded by ordinal (as the token gate's), and launches tracked
 * at once: a bound never allows more than QRING - 2. */
#define QDEVS 64
#define QRING 64
/* Kinds of launch timed apiece, per device (open addressing, probed at
 * most QPROBE slots; a kind that finds no slot counts the average). */
#define QKINDS 256
#define QPROBE 8
#define GMT_TLS __attribute__((tls_model("initial-exec")))

typedef struct {
  uint64_t key; /* 0: empty */
  float us;     /* its GPU time of late (moving average) */
} qkind_t;

typedef struct {
  pthread_mutex_t mu;
  CUcontext ctx;             /* the events' context */
  CUevent ev[QRING];         /* created in ctx as needed */
  int64_t rec_ns[QRING];     /* when each was recorded */
  int solo[QRING];           /* recorded with nothing queued before it */
  uint64_t key[QRING];       /* what each ran (gmt__queue_after) */
  float est[QRING];          /* its GPU time as counted when queued, us */
  double queued_us;          /* the sum of est over the queued launches */
  unsigned head, n;          /* the queued launches' events, oldest first */
  double launch_us;          /* GPU time of a launch of late (moving average), 0: unknown */
  _Atomic int64_t launch_ns; /* the same, read without mu (gmt__queue_launch_ns) */
  qkind_t kinds[QKINDS];
} queue_t;

static queue_t g_q[QDEVS] = {
    [0 ... QDEVS - 1] = {.mu = PTHREAD_MUTEX_INITIALIZER},
};
/* The device whose bound this thread's last launch went through, -1: none. */
static GMT_TLS __thread int t_qdev = -1;

static int64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* key's slot in q->kinds, taken for it when add; NULL when none. */
static qkind_t *kind_of(queue_t *q, uint64_t key, int add)
{
  unsigned h = (unsigned)((key * 0x9E3779B97F4A7C15ull) >> 56) % QKINDS;
  for (unsigned i = 0; i < QPROBE; i++) {
    qkind_t *k = &q->kinds[(h + i) % QKINDS];
    if (k->key == key)
      return k;
    if (k->key == 0) {
      if (!add)
        return NULL;
      k->key = key;
      k->us = 0;
      return k;
    }
  }
  return NULL;
}

static double ema(double old, double us)
{
  return old > 0 ? 0.8 * old + 0.2 * us : us;
}

static void learn(queue_t *q, uint64_t key, double us)
{
  if (us >= 0) {
    q->launch_us = ema(q->launch_us, us);
    atomic_store_explicit(&q->launch_ns, (int64_t)(q->launch_us * 1e3), memory_order_relaxed);
    qkind_t *k = kind_of(q, key, 1);
    if (k)
      k->us = (float)ema(k->us, us);
  }
}

/* What a launch of key is counted as while it is queued, in us: its
 * kind's time, else any launch's (0: nothing timed yet). */
static double estimate(queue_t *q, uint64_t key)
{
  qkind_t *k = kind_of(q, key, 0);
  return k && k->us > 0 ? k->us : q->launch_us;
}

/* A new context on the device (or a forked child): nothing queued, no
 * kind timed (its kernels are another context's). */
static void forget(queue_t *q)
{
  q->head = q->n = 0;
  q->queued_us = 0;
  memset(q->kinds, 0, sizeof q->kinds);
}

/* Drops the events of the launches that are done, learning how long each
 * took: a launch queued behind another took the GPU time between their
 * events; one queued alone, the time from its launch until it was seen
 * done (q->mu held; wait: the oldest is waited for first). */
static void retire(queue_t *q, int wait)
{
  __typeof__(&cuEventQuery) query = GMT_REAL(cuEventQuery);
  __typeof__(&cuEventSynchronize) sync = GMT_REAL(cuEventSynchronize);
  __typeof__(&cuEventElapsedTime_v2) elapsed = GMT_REAL(cuEventElapsedTime_v2);
  while (q->n > 0) {
    unsigned i = q->head % QRING;
    CUresult rc = wait ? sync(q->ev[i]) : query(q->ev[i]);
    wait = 0;
    if (rc == CUDA_ERROR_NOT_READY)
      break;
    if (rc == CUDA_SUCCESS && q->solo[i]) {
      learn(q, q->key[i], (double)(now_ns() - q->rec_ns[i]) / 1e3);
    } else if (rc == CUDA_SUCCESS && elapsed) {
      float ms;
      if (elapsed(&ms, q->ev[(q->head - 1) % QRING], q->ev[i]) == CUDA_SUCCESS)
        learn(q, q->key[i], ms * 1e3);
    }
    q->head++;
    q->n--;
    q->queued_us = q->n ? q->queued_us - q->est[i] : 0;
  }
}

/* Whether what is queued is too much for another launch under bound_us:
 * the one that runs always may be; two while no launch is timed yet. */
static int full(const queue_t *q, uint32_t bound_us)
{
  if (q->n >= QRING - 2)
    return 1;
  if (q->n == 0)
    return 0;
  if (!(q->launch_us > 0))
    return q->n >= 2;
  return q->queued_us >= bound_us;
}

void gmt__queue_before(int dev, uint32_t bound)
{
  __typeof__(&cuCtxGetCurrent) cur = GMT_REAL(cuCtxGetCurrent);
  CUcontext c = NULL;
  t_qdev = -1;
  if ((unsigned)dev >= QDEVS || !bound || !cur || cur(&c) != CUDA_SUCCESS || !c ||
      !GMT_REAL(cuEventQuery) || !GMT_REAL(cuEventSynchronize))
    return;
  queue_t *q = &g_q[dev];
  pthread_mutex_lock(&q->mu);
  if (q->ctx != c) {
    /* Another context on the device: its own events (the old ones are
     * left to their context, which may be gone). */
    for (unsigned i = 0; i < QRING; i++)
      q->ev[i] = NULL;
    q->ctx = c;
    forget(q);
  }
  retire(q, 0);
  int64_t t0 = 0, held = 0;
  if (full(q, bound)) {
    /* Held at the gate for the queue's bound: the per-call logs' tokenWait
     * (calllog.h), told once the lock is let go. The clock is read only
     * when it holds. */
    t0 = now_ns();
    while (full(q, bound))
      retire(q, 1);
    held = now_ns() - t0;
  }
  pthread_mutex_unlock(&q->mu);
  if (held)
    gmt__calllog_gate_held(t0, held);
  t_qdev = dev;
}

int64_t gmt__queue_launch_ns(int dev)
{
  return (unsigned)dev < QDEVS ? atomic_load_explicit(&g_q[dev].launch_ns, memory_order_relaxed)
                               : 0;
}

void gmt__queue_after(CUstream s, uint64_t key)
{
  int dev = t_qdev;
  if (dev < 0)
    return;
  t_qdev = -1;
  __typeof__(&cuEventCreate) create = GMT_REAL(cuEventCreate);
  __typeof__(&cuEventRecord) record = GMT_REAL(cuEventRecord);
  __typeof__(&cuStreamIsCapturing) capturing = GMT_REAL(cuStreamIsCapturing);
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  /* A stream being captured into a graph runs nothing now: nothing to wait for. */
  if (!create || !record ||
      (capturing && capturing(s, &st) == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE))
    return;
  queue_t *q = &g_q[dev];
  pthread_mutex_lock(&q->mu);
  unsigned i = (q->head + q->n) % QRING;
  if (q->n < QRING - 1 && (q->ev[i] || create(&q->ev[i], CU_EVENT_DEFAULT) == CUDA_SUCCESS) &&
      record(q->ev[i], s) == CUDA_SUCCESS) {
    q->rec_ns[i] = now_ns();
    q->solo[i] = q->n == 0;
    q->key[i] = key ? key : 1; /* 0 marks an empty kind */
    q->est[i] = (float)estimate(q, q->key[i]);
    q->queued_us += q->est[i];
    q->n++;
  }
  pthread_mutex_unlock(&q->mu);
}

void gmt__queue_child(void)
{
  for (unsigned i = 0; i < QDEVS; i++) {
    pthread_mutex_init(&g_q[i].mu, NULL);
    g_q[i].ctx = NULL;
    forget(&g_q[i]);
  }
  t_qdev = -1;
}
