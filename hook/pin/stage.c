/* Staged copies (see stage.h). One stager per process: its staging
 * buffers belong to the context of the first copy that used them, and one
 * copy at a time goes through them (a second thread's copy goes to the
 * driver rather than wait). Workers are started at the first staged copy;
 * each copies its slice of a chunk, the calling thread one more. */
#include "stage.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fork.h"
#include "frame.h"
#include "gmt_log.h"
#include "hostpin.h"
#include "log.h"
#include "numa.h"
#include "pin.h"
#include "thread.h"

#define STAGE_MIN ((size_t)8 << 20) /* smaller copies gained little (H100) */
#define CHUNK ((size_t)8 << 20)     /* the staging buffers' size: a DMA each */
#define NBUF 3                      /* chunks in flight: copy in, DMA, copy out */
#define MAX_THREADS 16
#define DEFAULT_THREADS 4
#define MIN_CPUS 4 /* with fewer, the threads would take the program's CPUs */
/* Staging buffers not used this long are freed (GMT_STAGE_IDLE_MS): the
 * process's pinned bytes go back to what it pinned itself. */
#define IDLE_MS 5000

/* The job the workers share: slice i of [dst, dst+n) from src. */
static struct {
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  uint64_t gen; /* a new job */
  int pending;  /* workers still copying it */
  char *dst;
  const char *src;
  size_t n;
} g_job = {.mu = PTHREAD_MUTEX_INITIALIZER,
           .go = PTHREAD_COND_INITIALIZER,
           .done = PTHREAD_COND_INITIALIZER};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* one staged copy at a time */
static int g_threads = -1;                               /* -1: not read yet; 0: off */
static _Atomic int g_next_slice = 1;
static int g_workers;     /* started */
static CUcontext g_ctx;   /* the staging buffers' */
static char *g_buf[NBUF]; /* pinned, CHUNK each */
static CUevent g_ev[NBUF];
static int g_broken; /* setting up failed once: the driver copies from then on */
static uint64_t g_last_ms, g_idle_ms = IDLE_MS; /* the last staged copy; when buffers go */
static size_t g_min = STAGE_MIN;                /* GMT_STAGE_MIN_KIB */

/* Chunks are CHUNK whatever the copy's size: on the H100 a 16 MiB copy in
 * 4 MiB chunks ran slower than in 8 MiB ones, and copies under 8 MiB
 * staged in 1-2 MiB chunks ran slower than the driver's own (docs/
 * BENCHMARKS.md). */

static void slice(int i, char *dst, const char *src, size_t n)
{
  size_t per = (n + (size_t)g_threads - 1) / (size_t)g_threads;
  size_t off = per * (size_t)i;
  if (off < n)
    memcpy(dst + off, src + off, n - off < per ? n - off : per);
}

static void *worker(void *arg)
{
  (void)arg;
  int i = atomic_fetch_add(&g_next_slice, 1);
  uint64_t seen = 0;
  for (;;) {
    pthread_mutex_lock(&g_job.mu);
    while (g_job.gen == seen)
      pthread_cond_wait(&g_job.go, &g_job.mu);
    seen = g_job.gen;
    char *dst = g_job.dst;
    const char *src = g_job.src;
    size_t n = g_job.n;
    pthread_mutex_unlock(&g_job.mu);
    slice(i, dst, src, n);
    pthread_mutex_lock(&g_job.mu);
    if (--g_job.pending == 0)
      pthread_cond_signal(&g_job.done);
    pthread_mutex_unlock(&g_job.mu);
  }
  return NULL;
}

/* memcpy by g_threads threads, the caller among them. */
static void par_copy(void *dst, const void *src, size_t n)
{
  pthread_mutex_lock(&g_job.mu);
  g_job.dst = dst;
  g_job.src = src;
  g_job.n = n;
  g_job.pending = g_workers;
  g_job.gen++;
  pthread_cond_broadcast(&g_job.go);
  pthread_mutex_unlock(&g_job.mu);
  slice(0, dst, src, n);
  pthread_mutex_lock(&g_job.mu);
  while (g_job.pending)
    pthread_cond_wait(&g_job.done, &g_job.mu);
  pthread_mutex_unlock(&g_job.mu);
}

static int threads_wanted(void)
{
  const char *e = getenv("GMT_STAGE_THREADS");
  if (e && *e) {
    long v = strtol(e, NULL, 10);
    return v < 0 ? 0 : v > MAX_THREADS ? MAX_THREADS : (int)v;
  }
  return sysconf(_SC_NPROCESSORS_ONLN) >= MIN_CPUS ? DEFAULT_THREADS : 0;
}

static void free_buffers(void)
{
  __typeof__(&cuMemFreeHost) fr = GMT_REAL(cuMemFreeHost);
  __typeof__(&cuEventDestroy_v2) ed = GMT_REAL(cuEventDestroy_v2);
  int entered = gmt__ctx_enter(g_ctx);
  for (int i = 0; i < NBUF; i++) {
    if (g_ev[i] && ed && ed(g_ev[i]) != CUDA_SUCCESS)
      GMT_HOOK_DEBUG("stage: cannot destroy an event");
    if (g_buf[i] && fr && fr(g_buf[i]) == CUDA_SUCCESS)
      gmt__hostpin_note(g_buf[i], 0);
    g_ev[i] = NULL;
    g_buf[i] = NULL;
  }
  gmt__ctx_leave(entered);
  g_ctx = NULL;
}

/* Under g_mu: ready to stage in the current context? */
static int ready_locked(void)
{
  if (g_broken)
    return 0;
  CUcontext cur = gmt__current_ctx();
  if (!cur || (g_ctx && cur != g_ctx))
    return 0;
  if (g_ctx)
    return 1;
  __typeof__(&cuMemHostAlloc) ha = GMT_REAL(cuMemHostAlloc);
  __typeof__(&cuEventCreate) ec = GMT_REAL(cuEventCreate);
  g_ctx = cur;
  int ok = ha && ec;
  /* On the GPU's NUMA node: the driver takes the pages in this thread. */
  gmt_numa_saved_t pol;
  gmt__numa_prefer(gmt__numa_ctx_node(), &pol);
  for (int i = 0; i < NBUF && ok; i++) {
    ok = ha((void **)&g_buf[i], CHUNK, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS;
    if (ok)
      gmt__hostpin_note(g_buf[i], CHUNK);
    ok = ok && ec(&g_ev[i], CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS;
  }
  gmt__numa_restore(&pol);
  while (ok && g_workers < g_threads - 1) {
    ok = gmt__thread_start("gmt-stage", worker) == 0;
    g_workers += ok;
  }
  if (!ok) {
    GMT_HOOK_DEBUG("stage: cannot set up staging (pinned buffers, events, threads); the "
                   "driver makes every copy");
    free_buffers();
    g_broken = 1;
  }
  return ok;
}

/* Whether this copy is one to stage, and then g_mu is held. */
static int begin(const void *host, size_t n, CUdeviceptr dev)
{
  if (n < g_min || !host || !gmt__pin_on())
    return 0;
  if (g_threads < 0)
    g_threads = threads_wanted();
  if (g_threads < 2)
    return 0;
  /* Memory the program pinned is copied at full speed already (gmt's own
   * pins copy.c leaves out). */
  if (gmt__hostpin_overlaps(host, n))
    return 0;
  /* A device range that is not one allocation may be wrong part way:
   * the driver checks it whole before it copies anything. */
  __typeof__(&cuMemGetAddressRange_v2) range = GMT_REAL(cuMemGetAddressRange_v2);
  CUdeviceptr base = 0;
  size_t size = 0;
  if (!range || range(&base, &size, dev) != CUDA_SUCCESS || dev - base > size ||
      n > size - (dev - base))
    return 0;
  if (pthread_mutex_trylock(&g_mu) != 0)
    return 0;
  if (!ready_locked()) {
    pthread_mutex_unlock(&g_mu);
    return 0;
  }
  return 1;
}

typedef CUresult (*async_fn)(CUdeviceptr, const void *, size_t, CUstream);
typedef CUresult (*async_back_fn)(void *, CUdeviceptr, size_t, CUstream);
typedef CUresult (*record_fn)(CUevent, CUstream);
typedef CUresult (*esync_fn)(CUevent);

int gmt__stage_htod(CUdeviceptr dst, const void *src, size_t n, int ptds, CUresult *rc)
{
  if (!begin(src, n, dst))
    return 0;
  g_last_ms = gmt_now_ms();
  async_fn cp =
      (async_fn)gmt__real(ptds ? GMT_SYM_cuMemcpyHtoDAsync_v2_ptsz : GMT_SYM_cuMemcpyHtoDAsync_v2);
  record_fn rec = (record_fn)gmt__real(ptds ? GMT_SYM_cuEventRecord_ptsz : GMT_SYM_cuEventRecord);
  esync_fn wait = (esync_fn)gmt__real(GMT_SYM_cuEventSynchronize);
  CUstream s = ptds ? CU_STREAM_PER_THREAD : NULL;
  CUresult r = cp && rec && wait ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
  int used[NBUF] = {0};
  size_t c = CHUNK;
  for (size_t off = 0, k = 0; off < n && r == CUDA_SUCCESS; off += c, k++) {
    size_t len = n - off < c ? n - off : c;
    int b = (int)(k % NBUF);
    if (used[b])
      r = wait(g_ev[b]); /* its last DMA is done: it may be written */
    if (r != CUDA_SUCCESS)
      break;
    par_copy(g_buf[b], (const char *)src + off, len);
    r = cp(dst + off, g_buf[b], len, s);
    if (r == CUDA_SUCCESS)
      r = rec(g_ev[b], s);
    used[b] = 1;
  }
  /* Returns with every byte on the device, as a copy from pageable memory
   * is seen to (and the buffers free for the next copy). */
  for (int b = 0; b < NBUF; b++)
    if (used[b]) {
      CUresult w = wait(g_ev[b]);
      if (r == CUDA_SUCCESS)
        r = w;
    }
  pthread_mutex_unlock(&g_mu);
  *rc = r;
  return 1;
}

int gmt__stage_dtoh(void *dst, CUdeviceptr src, size_t n, int ptds, CUresult *rc)
{
  if (!begin(dst, n, src))
    return 0;
  g_last_ms = gmt_now_ms();
  async_back_fn cp = (async_back_fn)gmt__real(ptds ? GMT_SYM_cuMemcpyDtoHAsync_v2_ptsz
                                                   : GMT_SYM_cuMemcpyDtoHAsync_v2);
  record_fn rec = (record_fn)gmt__real(ptds ? GMT_SYM_cuEventRecord_ptsz : GMT_SYM_cuEventRecord);
  esync_fn wait = (esync_fn)gmt__real(GMT_SYM_cuEventSynchronize);
  CUstream s = ptds ? CU_STREAM_PER_THREAD : NULL;
  CUresult r = cp && rec && wait ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
  size_t c = CHUNK, chunks = (n + c - 1) / c;
  /* Chunk k's DMA is queued while chunk k-1 is copied out. */
  for (size_t k = 0; k <= chunks && r == CUDA_SUCCESS; k++) {
    if (k < chunks) {
      size_t off = k * c, len = n - off < c ? n - off : c;
      int b = (int)(k % NBUF);
      r = cp(g_buf[b], src + off, len, s);
      if (r == CUDA_SUCCESS)
        r = rec(g_ev[b], s);
    }
    if (k >= 1 && r == CUDA_SUCCESS) {
      size_t off = (k - 1) * c, len = n - off < c ? n - off : c;
      int b = (int)((k - 1) % NBUF);
      r = wait(g_ev[b]);
      if (r == CUDA_SUCCESS)
        par_copy((char *)dst + off, g_buf[b], len);
    }
  }
  if (r != CUDA_SUCCESS) {
    /* Leave no DMA of ours running into the buffers. */
    __typeof__(&cuCtxSynchronize) csync = GMT_REAL(cuCtxSynchronize);
    if (csync)
      (void)csync();
  }
  pthread_mutex_unlock(&g_mu);
  *rc = r;
  return 1;
}

int gmt__stage_tick(void)
{
  if (pthread_mutex_trylock(&g_mu) != 0)
    return 0; /* a copy is staging: not idle */
  int freed = g_ctx && gmt_now_ms() - g_last_ms >= g_idle_ms;
  if (freed) {
    GMT_FRAME_IN();
    free_buffers();
    GMT_FRAME_OUT();
  }
  pthread_mutex_unlock(&g_mu);
  return freed;
}

void gmt__stage_ctx_going(void)
{
  pthread_mutex_lock(&g_mu);
  if (g_ctx)
    free_buffers();
  pthread_mutex_unlock(&g_mu);
}

/* ---- fork: a child has no staging buffers and no workers ---- */

static void stage_prepare(void)
{
  pthread_mutex_lock(&g_mu);
}

static void stage_parent(void)
{
  pthread_mutex_unlock(&g_mu);
}

static void stage_child(void)
{
  pthread_mutex_init(&g_mu, NULL);
  pthread_mutex_init(&g_job.mu, NULL);
  pthread_cond_init(&g_job.go, NULL);
  pthread_cond_init(&g_job.done, NULL);
  g_job.pending = 0;
  g_workers = 0;
  atomic_store(&g_next_slice, 1);
  g_ctx = NULL;
  for (int i = 0; i < NBUF; i++) {
    g_buf[i] = NULL;
    g_ev[i] = NULL;
  }
}

static const gmt_fork_ops_t g_fork_ops = {stage_prepare, stage_parent, stage_child};

__attribute__((constructor)) static void stage_register(void)
{
  const char *idle = getenv("GMT_STAGE_IDLE_MS");
  if (idle && *idle)
    g_idle_ms = strtoull(idle, NULL, 10);
  const char *min = getenv("GMT_STAGE_MIN_KIB");
  if (min && *min)
    g_min = (size_t)strtoull(min, NULL, 10) << 10;
  gmt__fork_register(GMT_LOCK_STAGE, &g_fork_ops);
}
