/* Work queues of the fake driver: what makes it asynchronous, as a GPU is.
 * Kernels, copies, memsets, host functions, event records, event waits and
 * stream-ordered frees are operations in a stream's queue; a worker thread
 * per device (per process) runs them one at a time, so a launch returns at
 * once and the process waits for its work later, in a synchronize. A
 * kernel still holds its device's lock across processes (kernel.c) while
 * it runs, so kernels of all processes on a device run one at a time.
 *
 * Order. Every operation takes a number from one counter of the process.
 * The worker runs, of the operations at the head of their queues that may
 * start, the lowest numbered. One may start unless
 *  - it waits for an event (cuStreamWaitEvent) whose record has not run;
 *  - it is on the legacy default stream and a blocking stream of its device
 *    (per-thread default streams included) holds an older one;
 *  - it is on a blocking stream and the legacy stream holds an older one.
 * That is the legacy stream's real rule: it does not wait for non-blocking
 * streams. It is kept per device, not per context, so two contexts of a
 * process on one device share one legacy stream (more conservative than
 * the driver, which gives each context its own). The oldest pending
 * operation of a device may always start unless it waits for a record on
 * another device; a wait names a record issued before it, so numbers fall
 * along every chain of waits and no cycle, hence no deadlock, can form.
 *
 * Hand-offs. A thread that waits for a device's work runs the device's
 * next operations itself while the worker is not running one, as a
 * worker would, in the same order and one at a time; host functions are
 * left to the worker, as the driver calls them on a thread of its own.
 * And the worker leaves an operation to its thread for HANDOFF_NS after it
 * was queued, since that thread usually synchronizes next; if it does
 * not, the operation starts that much late, a GPU's launch latency.
 * Without these, a synchronize after every 2 ms kernel lost about 4% of
 * the device's time to waking the worker and then the waiter, more on a
 * busy machine, and the token tests measure shares of device time.
 *
 * Locks. queue_mu guards everything here. It is taken after the fake's
 * global lock, never before, and nothing waits for the queues while
 * holding the global lock: the worker takes that lock for stream-ordered
 * frees (pool.c), and never holds it while a kernel runs. */
#include "fakecuda.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HANDOFF_NS 200000ull

enum { Q_LEGACY = 1, Q_BLOCKING = 2, Q_NONBLOCKING = 4 };
enum { OP_RUN, OP_RECORD, OP_WAIT };

struct gmt__queue {
  int dev;
  int kind;
  int released; /* its stream is gone: freed once empty */
  struct gmt__op *head, *tail;
  struct gmt__queue *next_active;         /* in its device's list while not empty */
  struct gmt__queue *prev_all, *next_all; /* every queue but the legacy ones */
};

/* Records are numbered per event; a wait for record n is over once a record
 * numbered n or later has run. (Records of one event on two streams may
 * run out of order: the later one then stands for the earlier, where the
 * driver would track each. No test needs more.) */
struct gmt__mark {
  uint64_t issued; /* records issued (cuEventRecord) */
  uint64_t done;   /* the highest numbered record that has run */
  uint64_t ns;     /* CLOCK_MONOTONIC when that record ran */
  int dev;         /* of the stream of the last record issued */
  int refs;        /* the event and each queued operation that names it */
  struct gmt__mark *prev_all, *next_all;
};

struct devq {
  pthread_cond_t wake; /* for the worker: work, or a record ran elsewhere */
  int started;
  int running;               /* the worker or a waiting thread is running an operation */
  struct gmt__queue *active; /* queues with pending operations */
  struct gmt__queue legacy;
};

static pthread_mutex_t queue_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER; /* an operation ran */
static struct devq devq[GMT_FAKE_MAX_DEVICES];
static uint64_t last_seq;
static struct gmt__queue *all_queues;
static struct gmt__mark *all_marks;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_key_t thread_key; /* to release per-thread streams at thread exit */
static int have_key;
static __thread struct gmt__queue *per_thread[GMT_FAKE_MAX_DEVICES];
static __thread int on_worker;

static uint64_t now_ns(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void thread_exit(void *unused);

/* The worker's wake-up waits time out on the clock of the operations. */
static void wake_init(pthread_cond_t *c)
{
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(c, &a);
  pthread_condattr_destroy(&a);
}

static void queue_init(void)
{
  for (int i = 0; i < GMT_FAKE_MAX_DEVICES; i++) {
    wake_init(&devq[i].wake);
    devq[i].legacy.dev = i;
    devq[i].legacy.kind = Q_LEGACY;
  }
  have_key = pthread_key_create(&thread_key, thread_exit) == 0;
}

static void lock(void)
{
  pthread_once(&init_once, queue_init);
  pthread_mutex_lock(&queue_mu);
}
static void unlock(void)
{
  pthread_mutex_unlock(&queue_mu);
}

/* ---- queues ---- */

static void list_add(struct gmt__queue *q)
{
  q->next_all = all_queues;
  if (all_queues)
    all_queues->prev_all = q;
  all_queues = q;
}

static void queue_free_locked(struct gmt__queue *q)
{
  if (q->prev_all)
    q->prev_all->next_all = q->next_all;
  else
    all_queues = q->next_all;
  if (q->next_all)
    q->next_all->prev_all = q->prev_all;
  free(q);
}

struct gmt__queue *gmt__queue_new(int dev, int nonblocking)
{
  struct gmt__queue *q = calloc(1, sizeof *q);
  if (!q)
    return NULL;
  q->dev = dev;
  q->kind = nonblocking ? Q_NONBLOCKING : Q_BLOCKING;
  lock();
  list_add(q);
  unlock();
  return q;
}

void gmt__queue_release(struct gmt__queue *q)
{
  if (!q)
    return;
  lock();
  /* cuStreamDestroy returns at once; the work already queued still runs. */
  if (q->head)
    q->released = 1;
  else
    queue_free_locked(q);
  unlock();
}

struct gmt__queue *gmt__queue_legacy(int dev)
{
  pthread_once(&init_once, queue_init);
  return &devq[dev].legacy;
}

static void thread_exit(void *unused)
{
  (void)unused;
  for (int i = 0; i < GMT_FAKE_MAX_DEVICES; i++) {
    gmt__queue_release(per_thread[i]);
    per_thread[i] = NULL;
  }
}

struct gmt__queue *gmt__queue_per_thread(int dev)
{
  if (!per_thread[dev]) {
    /* A per-thread default stream is a blocking stream of its own. */
    per_thread[dev] = gmt__queue_new(dev, 0);
    if (per_thread[dev] && have_key)
      pthread_setspecific(thread_key, &per_thread[0]);
  }
  return per_thread[dev];
}

/* ---- marks: an event's records ---- */

struct gmt__mark *gmt__mark_new(void)
{
  struct gmt__mark *m = calloc(1, sizeof *m);
  if (!m)
    return NULL;
  m->refs = 1;
  lock();
  m->next_all = all_marks;
  if (all_marks)
    all_marks->prev_all = m;
  all_marks = m;
  unlock();
  return m;
}

static void mark_unref_locked(struct gmt__mark *m)
{
  if (--m->refs)
    return;
  if (m->prev_all)
    m->prev_all->next_all = m->next_all;
  else
    all_marks = m->next_all;
  if (m->next_all)
    m->next_all->prev_all = m->prev_all;
  free(m);
}

void gmt__mark_release(struct gmt__mark *m)
{
  if (!m)
    return;
  lock();
  mark_unref_locked(m); /* operations that name it keep it */
  unlock();
}

int gmt__mark_query(struct gmt__mark *m, uint64_t *ns)
{
  lock();
  int st = m->issued == 0 ? -1 : m->done >= m->issued ? 1 : 0;
  if (ns)
    *ns = m->ns;
  unlock();
  return st;
}

/* ---- the worker ---- */

/* Whether op may start now (see the top of the file). */
static int may_start_locked(const struct devq *d, const struct gmt__op *op)
{
  if (op->kind == OP_WAIT && op->mark->done < op->gen)
    return 0;
  int kind = op->q->kind;
  if (kind == Q_NONBLOCKING)
    return 1;
  int blocker = kind == Q_LEGACY ? Q_BLOCKING : Q_LEGACY;
  for (const struct gmt__queue *p = d->active; p; p = p->next_active)
    if (p->kind == blocker && p->head->seq < op->seq)
      return 0;
  return 1;
}

static struct gmt__op *pick_locked(const struct devq *d)
{
  struct gmt__op *best = NULL;
  for (const struct gmt__queue *q = d->active; q; q = q->next_active)
    if ((!best || q->head->seq < best->seq) && may_start_locked(d, q->head))
      best = q->head;
  return best;
}

static void op_free(struct gmt__op *op)
{
  if (op->drop)
    op->drop(op);
  free(op);
}

void gmt__op_free(struct gmt__op *op)
{
  while (op) {
    struct gmt__op *next = op->next;
    op_free(op);
    op = next;
  }
}

/* op, at the head of its queue, has run. */
static void finish_locked(struct devq *d, struct gmt__op *op)
{
  struct gmt__queue *q = op->q;
  q->head = op->next;
  if (!q->head) {
    q->tail = NULL;
    struct gmt__queue **pp = &d->active;
    while (*pp != q)
      pp = &(*pp)->next_active;
    *pp = q->next_active;
    q->next_active = NULL;
  }
  if (op->kind == OP_RECORD) {
    struct gmt__mark *m = op->mark;
    if (op->gen > m->done) {
      m->done = op->gen;
      m->ns = op->val;
    }
    /* A stream of another device may wait for this record. */
    for (int i = 0; i < GMT_FAKE_MAX_DEVICES; i++)
      if (devq[i].started && &devq[i] != d)
        pthread_cond_signal(&devq[i].wake);
  }
  if (op->mark)
    mark_unref_locked(op->mark);
  if (q->released && !q->head)
    queue_free_locked(q);
  op_free(op);
  pthread_cond_broadcast(&done_cv);
}

/* Runs op, the device's next, on the calling thread (queue_mu held, and
 * dropped while it runs). */
static void run_locked(struct devq *d, struct gmt__op *op)
{
  /* It stays at the head of its queue while it runs, so that queries and
   * synchronizes see it pending. */
  d->running = 1;
  pthread_mutex_unlock(&queue_mu);
  if (op->kind == OP_RUN)
    op->run(op);
  else if (op->kind == OP_RECORD)
    op->val = gmt__kernel_clock(d - devq, op->queued_ns); /* when the work before it ended */
  pthread_mutex_lock(&queue_mu);
  finish_locked(d, op);
  d->running = 0;
  if (!on_worker && d->active)
    pthread_cond_signal(&d->wake); /* a waiter ran it: the worker goes on */
}

static void *worker_main(void *arg)
{
  struct devq *d = arg;
  on_worker = 1;
  pthread_mutex_lock(&queue_mu);
  for (;;) {
    struct gmt__op *op = d->running ? NULL : pick_locked(d);
    uint64_t due = op ? op->queued_ns + HANDOFF_NS : 0;
    if (op && now_ns() >= due) {
      run_locked(d, op);
    } else if (op) {
      struct timespec ts = {(time_t)(due / 1000000000ull), (long)(due % 1000000000ull)};
      pthread_cond_timedwait(&d->wake, &queue_mu, &ts);
    } else {
      pthread_cond_wait(&d->wake, &queue_mu);
    }
  }
  return NULL;
}

/* A waiting thread runs the next operation of dev (every device if dev <
 * 0) itself if nobody runs one; 0 if there was none it may run. */
static int help_locked(int dev)
{
  int first = dev < 0 ? 0 : dev, end = dev < 0 ? GMT_FAKE_MAX_DEVICES : dev + 1;
  for (int i = first; i < end; i++) {
    struct devq *d = &devq[i];
    struct gmt__op *op = d->running ? NULL : pick_locked(d);
    if (op && !op->worker_only) {
      run_locked(d, op);
      return 1;
    }
  }
  return 0;
}

static int start_locked(struct devq *d)
{
  /* The program's signals are the program's threads' to take: a worker
   * that took SIGTERM would leave a read in the main thread uninterrupted. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  pthread_t th;
  int rc = pthread_create(&th, &a, worker_main, d);
  pthread_attr_destroy(&a);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0)
    return -rc;
  d->started = 1;
  return 0;
}

/* ---- submitting ---- */

struct gmt__op *gmt__op_new(void)
{
  return calloc(1, sizeof(struct gmt__op));
}

static CUresult submit(struct gmt__queue *q, struct gmt__op *ops, uint64_t *last)
{
  struct devq *d = &devq[q->dev];
  if (!d->started && start_locked(d) != 0) {
    gmt__op_free(ops);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (!q->head) {
    q->next_active = d->active;
    d->active = q;
  }
  uint64_t now = now_ns();
  for (struct gmt__op *op = ops, *next; op; op = next) {
    next = op->next;
    op->next = NULL;
    op->seq = ++last_seq;
    op->queued_ns = now;
    op->q = q;
    if (q->tail)
      q->tail->next = op;
    else
      q->head = op;
    q->tail = op;
  }
  if (last)
    *last = last_seq;
  pthread_cond_signal(&d->wake);
  return CUDA_SUCCESS;
}

CUresult gmt__queue_submit(struct gmt__queue *q, struct gmt__op *ops, uint64_t *last)
{
  if (!ops)
    return CUDA_SUCCESS;
  lock();
  CUresult r = submit(q, ops, last);
  unlock();
  return r;
}

CUresult gmt__queue_record(struct gmt__queue *q, struct gmt__mark *m)
{
  struct gmt__op *op = gmt__op_new();
  if (!op)
    return CUDA_ERROR_OUT_OF_MEMORY;
  op->kind = OP_RECORD;
  op->mark = m;
  lock();
  op->gen = ++m->issued;
  m->dev = q->dev;
  m->refs++;
  CUresult r = submit(q, op, NULL);
  if (r != CUDA_SUCCESS) { /* the record never happened */
    m->issued--;
    m->refs--;
  }
  unlock();
  return r;
}

CUresult gmt__queue_wait_mark(struct gmt__queue *q, struct gmt__mark *m)
{
  lock();
  /* The stream waits for the record issued last; for none, or one that has
   * run, there is nothing to wait for. */
  CUresult r = CUDA_SUCCESS;
  if (m->issued && m->done < m->issued) {
    struct gmt__op *op = gmt__op_new();
    if (!op) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      op->kind = OP_WAIT;
      op->mark = m;
      op->gen = m->issued;
      m->refs++;
      r = submit(q, op, NULL);
      if (r != CUDA_SUCCESS)
        m->refs--;
    }
  }
  unlock();
  return r;
}

/* ---- waiting ---- */

/* Something numbered <= upto is pending on dev (every device if dev < 0),
 * in q if q is given, else in the queues whose kind is in kinds. */
static int pending_locked(int dev, const struct gmt__queue *q, int kinds, uint64_t upto)
{
  if (q)
    return q->head && q->head->seq <= upto;
  int first = dev < 0 ? 0 : dev, end = dev < 0 ? GMT_FAKE_MAX_DEVICES : dev + 1;
  for (int i = first; i < end; i++)
    for (const struct gmt__queue *p = devq[i].active; p; p = p->next_active)
      if ((p->kind & kinds) && p->head->seq <= upto)
        return 1;
  return 0;
}

static void wait_pending(int dev, const struct gmt__queue *q, int kinds, uint64_t upto)
{
  /* A host function must not wait for its own worker (CUDA forbids CUDA
   * calls there); it would wait forever. */
  if (on_worker)
    return;
  lock();
  while (pending_locked(dev, q, kinds, upto))
    if (!help_locked(dev))
      pthread_cond_wait(&done_cv, &queue_mu);
  unlock();
}

void gmt__queue_wait(const struct gmt__queue *q, uint64_t seq)
{
  wait_pending(q->dev, q, 0, seq);
}

int gmt__queue_would_wait(const struct gmt__queue *q)
{
  lock();
  int busy = q->head != NULL;
  if (!busy && q->kind != Q_NONBLOCKING)
    busy = pending_locked(q->dev, NULL, q->kind == Q_LEGACY ? Q_BLOCKING : Q_LEGACY, UINT64_MAX);
  unlock();
  return busy;
}

/* What a synchronize of q waits for: its own work, and for the legacy
 * stream the blocking streams' too, since its work waited for theirs. */
static void sync_scope(const struct gmt__queue *q, const struct gmt__queue **only, int *kinds)
{
  *only = q->kind == Q_LEGACY ? NULL : q;
  *kinds = Q_LEGACY | Q_BLOCKING;
}

void gmt__queue_sync(const struct gmt__queue *q)
{
  const struct gmt__queue *only;
  int kinds;
  sync_scope(q, &only, &kinds);
  lock();
  uint64_t upto = last_seq;
  unlock();
  wait_pending(q->dev, only, kinds, upto);
}

int gmt__queue_query(const struct gmt__queue *q)
{
  const struct gmt__queue *only;
  int kinds;
  sync_scope(q, &only, &kinds);
  lock();
  int busy = pending_locked(q->dev, only, kinds, UINT64_MAX);
  unlock();
  return !busy;
}

void gmt__queue_sync_device(int dev)
{
  lock();
  uint64_t upto = last_seq;
  unlock();
  wait_pending(dev, NULL, Q_LEGACY | Q_BLOCKING | Q_NONBLOCKING, upto);
}

void gmt__queue_drain(void)
{
  gmt__queue_sync_device(-1);
}

void gmt__mark_sync(struct gmt__mark *m)
{
  if (on_worker)
    return;
  lock();
  uint64_t want = m->issued;
  while (m->done < want)
    if (!help_locked(m->dev))
      pthread_cond_wait(&done_cv, &queue_mu);
  unlock();
}

/* ---- fork and exit ---- */

void gmt__queue_fork_prepare(void)
{
  lock();
}

void gmt__queue_fork_parent(void)
{
  unlock();
}

static void drop_ops(struct gmt__queue *q)
{
  gmt__op_free(q->head); /* marks go below, whatever their counts */
  q->head = q->tail = NULL;
  q->next_active = NULL;
}

void gmt__queue_reset_child(void)
{
  /* The parent's work stays the parent's: the child has no worker (threads
   * do not survive fork) and starts with empty queues. Its one thread is
   * the one that forked, whose per-thread streams are forgotten here. */
  pthread_mutex_init(&queue_mu, NULL);
  pthread_cond_init(&done_cv, NULL);
  for (int i = 0; i < GMT_FAKE_MAX_DEVICES; i++) {
    wake_init(&devq[i].wake);
    devq[i].started = 0;
    devq[i].running = 0;
    devq[i].active = NULL;
    drop_ops(&devq[i].legacy);
    per_thread[i] = NULL;
  }
  while (all_queues) {
    drop_ops(all_queues);
    queue_free_locked(all_queues);
  }
  while (all_marks) {
    struct gmt__mark *m = all_marks;
    all_marks = m->next_all;
    free(m);
  }
  if (have_key)
    pthread_setspecific(thread_key, NULL);
}

void gmt__queue_exit(void)
{
  /* A process that exits with work queued lets it run first, as a context
   * torn down at exit does, so the worker never copies into memory that
   * exit has begun to free. A later submit (another library's destructor)
   * still has its worker. */
  if (!on_worker)
    gmt__queue_drain();
}
