/* call_counts: known numbers of driver calls, for the tests of the
 * per-call logs (test_calllog.py): on each of T threads, A cuMemAlloc,
 * C cuMemcpyHtoD of 64 KiB, L cuLaunchKernel of an empty kernel, then the
 * A cuMemFree (through cuda.h these are the _v2 entry points, and
 * cuLaunchKernel itself).
 *
 *   call_counts [--allocs A] [--copies C] [--launches L] [--threads T]
 *               [--hold] [--fork-launches N]
 *
 * After the calls (before the frees) it prints READY pid=<pid>; with
 * --hold it then waits for a line on stdin. With --fork-launches N it then
 * forks a child that makes calls of its own (cuInit, its context, one
 * cuMemAlloc and cuMemFree, N launches), prints CHILD pid=<pid> and exits
 * 0 through exit(), and the parent waits for it. Last, after the frees:
 * DONE pid=<pid>, and exit 0. A failed call exits 1, naming it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>

#include "../../common/cudaprog.h"

#define CHECK(call) GMT_CU_CHECK("call_counts", call)

static const char empty_ptx[] = ".version 7.0\n.target sm_75\n.address_size 64\n"
                                ".visible .entry empty()\n{\n  ret;\n}\n";

static struct {
  long allocs, copies, launches;
  CUcontext ctx;
  CUfunction fn;
} g = {3, 2, 10, NULL, NULL};

static CUdeviceptr *work(long allocs, long copies, long launches)
{
  static char host[64 << 10];
  CUdeviceptr *bufs = calloc((size_t)allocs + 1, sizeof(*bufs));
  if (!bufs)
    exit(1);
  CHECK(cuCtxSetCurrent(g.ctx));
  for (long i = 0; i < allocs; i++)
    CHECK(cuMemAlloc(&bufs[i], sizeof(host)));
  for (long i = 0; i < copies; i++)
    CHECK(cuMemcpyHtoD(bufs[i % allocs], host, sizeof(host)));
  for (long i = 0; i < launches; i++)
    CHECK(cuLaunchKernel(g.fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
  CHECK(cuCtxSynchronize());
  return bufs;
}

static void unwork(CUdeviceptr *bufs, long allocs)
{
  CHECK(cuCtxSetCurrent(g.ctx));
  for (long i = 0; i < allocs; i++)
    CHECK(cuMemFree(bufs[i]));
  free(bufs);
}

static void *thread_main(void *arg)
{
  (void)arg;
  return work(g.allocs, g.copies, g.launches);
}

int main(int argc, char **argv)
{
  long threads = 1, fork_launches = -1;
  int hold = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    long *v = !strcmp(a, "--allocs")          ? &g.allocs
              : !strcmp(a, "--copies")        ? &g.copies
              : !strcmp(a, "--launches")      ? &g.launches
              : !strcmp(a, "--threads")       ? &threads
              : !strcmp(a, "--fork-launches") ? &fork_launches
                                              : NULL;
    if (!strcmp(a, "--hold")) {
      hold = 1;
    } else if (v && i + 1 < argc) {
      *v = atol(argv[++i]);
    } else {
      fprintf(stderr, "usage: call_counts [--allocs A] [--copies C] [--launches L] "
                      "[--threads T] [--hold] [--fork-launches N]\n");
      return 2;
    }
  }
  if (threads < 1 || threads > 64 || g.allocs < 0 || g.copies < 0 || g.launches < 0 ||
      (g.copies && !g.allocs)) {
    fprintf(stderr, "call_counts: 1 to 64 threads, no negative counts, copies need allocs\n");
    return 2;
  }

  CUdevice dev;
  CUmodule mod;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&g.ctx, dev));
  CHECK(cuCtxSetCurrent(g.ctx));
  CHECK(cuModuleLoadData(&mod, empty_ptx));
  CHECK(cuModuleGetFunction(&g.fn, mod, "empty"));

  pthread_t th[64];
  CUdeviceptr *bufs[64];
  for (long t = 0; t < threads; t++)
    if (pthread_create(&th[t], NULL, thread_main, NULL) != 0) {
      fprintf(stderr, "call_counts: cannot start a thread\n");
      return 1;
    }
  for (long t = 0; t < threads; t++)
    pthread_join(th[t], (void **)&bufs[t]);
  printf("READY pid=%d\n", (int)getpid());
  fflush(stdout);
  if (hold)
    gmt_prog_wait_line();

  if (fork_launches >= 0) {
    pid_t child = fork();
    if (child < 0) {
      perror("call_counts: fork");
      return 1;
    }
    if (child == 0) {
      CHECK(cuInit(0));
      CHECK(cuDevicePrimaryCtxRetain(&g.ctx, dev));
      CHECK(cuCtxSetCurrent(g.ctx));
      CHECK(cuModuleLoadData(&mod, empty_ptx));
      CHECK(cuModuleGetFunction(&g.fn, mod, "empty"));
      unwork(work(1, 0, fork_launches), 1);
      printf("CHILD pid=%d\n", (int)getpid());
      fflush(stdout);
      exit(0);
    }
    int status = 0;
    if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "call_counts: child %d did not exit 0 (status 0x%x)\n", (int)child, status);
      return 1;
    }
  }

  for (long t = 0; t < threads; t++)
    unwork(bufs[t], g.allocs);
  CHECK(cuModuleUnload(mod));
  printf("DONE pid=%d\n", (int)getpid());
  return 0;
}
