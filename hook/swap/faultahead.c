/* Fresh host pages faulted in ahead of a move out (faultahead.h). */
#include "faultahead.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older glibc headers lack it */
#endif

#define GMT_FAULT_AHEAD_THREADS 4

enum { WANTED, BUSY, READY, GONE };

struct gmt_fault_ahead {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  size_t n;
  const uint64_t *sizes;
  void **maps;
  unsigned char *state;
  size_t next;    /* the first a thread may start */
  size_t taken;   /* every copy before it is taken or dropped */
  uint64_t ahead; /* bytes started and not yet taken or dropped */
  uint64_t window;
  size_t faulted;
  int stop;
  int nthreads;
  pthread_t tid[GMT_FAULT_AHEAD_THREADS];
  gmt_fault_place_fn place;
  void *arg;
};

void gmt__fault_pages(void *p, size_t n)
{
  if (madvise(p, n, MADV_POPULATE_WRITE) == 0)
    return;
  long page = sysconf(_SC_PAGESIZE);
  for (size_t o = 0; o < n; o += (size_t)(page > 0 ? page : 4096))
    ((volatile char *)p)[o] = 0;
}

void *gmt__fault_map(uint64_t size)
{
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  (void)madvise(p, size, MADV_HUGEPAGE); /* a hint: a kernel without THP ignores it */
  return p;
}

/* Copy i's fresh mapping, placed, faulted in (the caller's lock let go). */
static void *fresh(gmt_fault_ahead_t *a, size_t i)
{
  uint64_t size = a->sizes[i];
  void *p = gmt__fault_map(size);
  if (!p)
    return NULL;
  if (a->place)
    a->place(p, size, i, a->arg);
  gmt__fault_pages(p, size);
  return p;
}

/* Copy j, if ready, is not wanted any more: 1 when a mapping went
 * (a->mu held, or no thread left). */
static int drop(gmt_fault_ahead_t *a, size_t j)
{
  if (a->state[j] != READY)
    return 0;
  void *p = a->maps[j];
  if (p)
    munmap(p, a->sizes[j]);
  a->maps[j] = NULL;
  a->ahead -= a->sizes[j];
  a->state[j] = GONE;
  return p != NULL;
}

/* Copy i, just faulted in as p (a->mu held): kept for its taker, or
 * unmapped when the move has passed it. */
static void done(gmt_fault_ahead_t *a, size_t i, void *p)
{
  if (p)
    a->faulted++;
  a->maps[i] = p;
  a->state[i] = READY;
  if (i < a->taken)
    drop(a, i);
  pthread_cond_broadcast(&a->cv);
}

static void *worker(void *arg)
{
  gmt_fault_ahead_t *a = arg;
  pthread_mutex_lock(&a->mu);
  for (;;) {
    while (a->next < a->n && a->state[a->next] != WANTED)
      a->next++;
    if (a->stop || a->next >= a->n)
      break;
    size_t i = a->next;
    if (a->ahead && a->ahead + a->sizes[i] > a->window) {
      pthread_cond_wait(&a->cv, &a->mu);
      continue;
    }
    a->next++;
    a->state[i] = BUSY;
    a->ahead += a->sizes[i];
    pthread_mutex_unlock(&a->mu);
    void *p = fresh(a, i);
    pthread_mutex_lock(&a->mu);
    done(a, i, p);
  }
  pthread_mutex_unlock(&a->mu);
  return NULL;
}

gmt_fault_ahead_t *gmt__fault_ahead_start(const uint64_t *sizes, size_t n, int threads,
                                          uint64_t window, gmt_fault_place_fn place, void *arg)
{
  size_t wanted = 0;
  for (size_t i = 0; i < n; i++)
    wanted += sizes[i] != 0;
  if (!wanted)
    return NULL;
  gmt_fault_ahead_t *a = calloc(1, sizeof *a);
  if (!a)
    return NULL;
  a->maps = calloc(n, sizeof *a->maps);
  a->state = calloc(n, 1);
  if (!a->maps || !a->state) {
    free(a->maps);
    free(a->state);
    free(a);
    return NULL;
  }
  pthread_mutex_init(&a->mu, NULL);
  pthread_cond_init(&a->cv, NULL);
  a->n = n;
  a->sizes = sizes;
  a->window = window;
  a->place = place;
  a->arg = arg;
  for (size_t i = 0; i < n; i++)
    a->state[i] = sizes[i] ? WANTED : GONE;
  if (threads > GMT_FAULT_AHEAD_THREADS)
    threads = GMT_FAULT_AHEAD_THREADS;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old); /* the program's handlers never run on them */
  for (int t = 0; t < threads; t++) {
    if (pthread_create(&a->tid[a->nthreads], NULL, worker, a) != 0)
      break;
    pthread_setname_np(a->tid[a->nthreads], "gmt-fault");
    a->nthreads++;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return a;
}

/* Copies before i are passed: those ready are unmapped, those not begun
 * never will be (a->mu held). */
static void pass(gmt_fault_ahead_t *a, size_t i)
{
  for (size_t j = a->taken; j < i && j < a->n; j++) {
    if (a->state[j] == WANTED)
      a->state[j] = GONE;
    drop(a, j);
  }
  if (i > a->taken)
    a->taken = i;
  pthread_cond_broadcast(&a->cv);
}

void *gmt__fault_ahead_take(gmt_fault_ahead_t *a, size_t i)
{
  if (!a || i >= a->n)
    return NULL;
  pthread_mutex_lock(&a->mu);
  pass(a, i);
  if (a->state[i] == WANTED) {
    /* Not begun: faulted here rather than waiting for a thread. */
    a->state[i] = BUSY;
    a->ahead += a->sizes[i];
    pthread_mutex_unlock(&a->mu);
    void *p = fresh(a, i);
    pthread_mutex_lock(&a->mu);
    done(a, i, p);
  }
  while (a->state[i] == BUSY) /* a thread is at it: it ends */
    pthread_cond_wait(&a->cv, &a->mu);
  void *p = a->state[i] == READY ? a->maps[i] : NULL;
  a->maps[i] = NULL; /* the caller's now: drop only counts it taken */
  pass(a, i + 1);
  pthread_mutex_unlock(&a->mu);
  return p;
}

size_t gmt__fault_ahead_faulted(gmt_fault_ahead_t *a)
{
  if (!a)
    return 0;
  pthread_mutex_lock(&a->mu);
  size_t n = a->faulted;
  pthread_mutex_unlock(&a->mu);
  return n;
}

size_t gmt__fault_ahead_end(gmt_fault_ahead_t *a)
{
  if (!a)
    return 0;
  pthread_mutex_lock(&a->mu);
  a->stop = 1;
  pthread_cond_broadcast(&a->cv);
  pthread_mutex_unlock(&a->mu);
  for (int t = 0; t < a->nthreads; t++)
    pthread_join(a->tid[t], NULL);
  size_t left = 0;
  for (size_t i = 0; i < a->n; i++)
    left += (size_t)drop(a, i);
  pthread_mutex_destroy(&a->mu);
  pthread_cond_destroy(&a->cv);
  free(a->maps);
  free(a->state);
  free(a);
  return left;
}
