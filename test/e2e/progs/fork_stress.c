/* fork_stress: forks again and again while other threads of the same
 * process make their first CUDA calls (registering with the pod manager,
 * starting the hook's threads) and allocate, free and launch, so that the
 * end-to-end tests can check that a fork never deadlocks in the hook and
 * that every child starts clean: it registers and allocates on its own.
 *
 *   fork_stress [--rounds R] [--forks F] [--threads T] [--outstanding K]
 *
 * The top process runs R rounds one after the other, each in a fresh child
 * of its own (whose hook has not registered yet). In a round, T threads
 * start with cuInit and then allocate and free (plainly and stream-
 * ordered), launch and ask for the memory info in a loop, while the
 * round's main thread forks F times, keeping at most K children alive, and
 * every 8 forks starts one more short-lived thread that makes its own
 * first CUDA calls. Each child sets an alarm, makes its own context,
 * allocates and frees 1 MiB and exits 42. From the second half of the
 * rounds on, the top process has made its own cuInit and allocation
 * first, so the later rounds inherit a hook that has been used and
 * registered, the earlier ones one that has not.
 *
 * Output, one line per round and one at the end:
 *   ROUND n=<r> forks=<f> children_ok=<c> threads_ok=<t> threads=<n>
 *   DONE rounds=<R> failed=<rounds that did not>
 * Exits 0 when every child and every thread did its part. A fork that
 * deadlocks hangs its round: the caller's timeout is what catches it. */
#include <cuda.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../common/cudaprog.h"

#define CHILD_OK 42
#define CHILD_ALARM_S 30 /* a child that hangs dies and counts as failed */
#define SHORT_EVERY 8    /* forks between two short-lived threads */
#define SHORT_ITERS 4
#define MIB ((size_t)1 << 20)

typedef struct {
  pthread_t th;
  int iters; /* 0: until the round ends */
  int ok;
} worker_t;

static atomic_int g_stop;

/* The first CUDA calls of a thread: cuInit (in a fresh process it loads the
 * driver and registers with the pod manager), then its own context. */
static int first_use(CUcontext *ctx)
{
  CUdevice dev;
  return cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&dev, 0) == CUDA_SUCCESS &&
         cuDevicePrimaryCtxRetain(ctx, dev) == CUDA_SUCCESS &&
         cuCtxSetCurrent(*ctx) == CUDA_SUCCESS;
}

static int one_pass(CUfunction fn, int n)
{
  CUdeviceptr p, q;
  unsigned int us = 10;
  void *params[] = {&us};
  size_t free_b, total_b;
  if (cuMemAlloc(&p, MIB) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS)
    return 0;
  if (cuMemAllocAsync(&q, MIB, NULL) != CUDA_SUCCESS || cuMemFreeAsync(q, NULL) != CUDA_SUCCESS)
    return 0;
  if (cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL) != CUDA_SUCCESS)
    return 0;
  if (n % 16 == 0 &&
      (cuCtxSynchronize() != CUDA_SUCCESS || cuMemGetInfo(&free_b, &total_b) != CUDA_SUCCESS))
    return 0;
  return 1;
}

static void *worker_main(void *arg)
{
  worker_t *w = arg;
  CUcontext ctx;
  CUmodule mod;
  CUfunction fn;
  if (!first_use(&ctx) || cuModuleLoadData(&mod, gmt_spin_ptx) != CUDA_SUCCESS ||
      cuModuleGetFunction(&fn, mod, "spin") != CUDA_SUCCESS)
    return NULL;
  for (int n = 0; w->iters ? n < w->iters : !atomic_load(&g_stop); n++)
    if (!one_pass(fn, n))
      return NULL;
  w->ok = cuCtxSynchronize() == CUDA_SUCCESS;
  return NULL;
}

/* A child of a round: its own CUDA from scratch, one allocation. */
static void child_main(void)
{
  alarm(CHILD_ALARM_S);
  CUcontext ctx;
  CUdeviceptr p;
  if (!first_use(&ctx) || cuMemAlloc(&p, MIB) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS)
    exit(1);
  exit(CHILD_OK);
}

static int reap(int *ok)
{
  int status;
  pid_t pid;
  while ((pid = wait(&status)) < 0 && errno == EINTR) {
  }
  if (pid < 0)
    return -1;
  if (WIFEXITED(status) && WEXITSTATUS(status) == CHILD_OK)
    (*ok)++;
  else
    fprintf(stderr, "fork_stress: child %d ended with status 0x%x\n", (int)pid, status);
  return 0;
}

/* Until a worker's cuInit has reached the driver: from then on the hook
 * registers this process with the pod manager, which is when a fork is
 * most likely to meet its locks. Not before: the fake driver registers its
 * own fork handler inside its first cuInit, under its own lock, so a fork
 * during that call can leave the child a copy of the held lock; that is
 * the driver's to make safe, not the hook's. */
static void wait_driver(void)
{
  int n;
  for (int i = 0; i < 10000000 && cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED; i++)
    sched_yield();
}

static int start(worker_t *w, int iters)
{
  w->iters = iters;
  w->ok = 0;
  return pthread_create(&w->th, NULL, worker_main, w) == 0;
}

static int round_main(int r, int forks, int threads, int outstanding)
{
  int nshort = forks / SHORT_EVERY + 1, nw = 0;
  worker_t *w = calloc((size_t)(threads + nshort), sizeof(*w));
  if (!w)
    return 1;
  for (int i = 0; i < threads; i++)
    nw += start(&w[nw], 0);
  wait_driver();
  int alive = 0, ok = 0, forked = 0;
  for (int i = 0; i < forks; i++) {
    if (i % SHORT_EVERY == 0 && nw < threads + nshort)
      nw += start(&w[nw], SHORT_ITERS);
    if (alive == outstanding && reap(&ok) == 0)
      alive--;
    pid_t pid = fork();
    if (pid == 0)
      child_main();
    if (pid < 0) {
      perror("fork_stress: fork");
      break;
    }
    forked++;
    alive++;
  }
  while (alive > 0 && reap(&ok) == 0)
    alive--;
  atomic_store(&g_stop, 1);
  int threads_ok = 0;
  for (int i = 0; i < nw; i++) {
    pthread_join(w[i].th, NULL);
    threads_ok += w[i].ok;
  }
  printf("ROUND n=%d forks=%d children_ok=%d threads_ok=%d threads=%d\n", r, forked, ok, threads_ok,
         threads + nshort);
  fflush(stdout);
  int good = forked == forks && ok == forks && threads_ok == threads + nshort;
  free(w);
  return good ? 0 : 1;
}

int main(int argc, char **argv)
{
  int rounds = 20, forks = 50, threads = 3, outstanding = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    int v = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--rounds"))
      rounds = v;
    else if (!strcmp(argv[i], "--forks"))
      forks = v;
    else if (!strcmp(argv[i], "--threads"))
      threads = v;
    else if (!strcmp(argv[i], "--outstanding"))
      outstanding = v;
    else
      argc = 0;
  }
  if (argc % 2 == 0 || rounds < 1 || forks < 1 || threads < 0 || outstanding < 1) {
    fprintf(stderr, "usage: fork_stress [--rounds R] [--forks F] [--threads T] "
                    "[--outstanding K]\n");
    return 2;
  }

  int failed = 0;
  for (int r = 0; r < rounds; r++) {
    if (r == rounds / 2 && r > 0) {
      CUcontext ctx;
      CUdeviceptr p;
      GMT_CU_CHECK("fork_stress", first_use(&ctx) ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN);
      GMT_CU_CHECK("fork_stress", cuMemAlloc(&p, MIB));
      GMT_CU_CHECK("fork_stress", cuMemFree(p));
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
      exit(round_main(r, forks, threads, outstanding));
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) < 0) {
      perror("fork_stress: round");
      return 1;
    }
    failed += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  printf("DONE rounds=%d failed=%d\n", rounds, failed);
  return failed ? 1 : 0;
}
