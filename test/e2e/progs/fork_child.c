/* fork_child: two processes of one program, each holding its own device
 * memory, so the end-to-end tests can check that the hook reports a forked
 * child as a process of its own (its pid, its bytes) and not as a copy of
 * its parent.
 *
 * By default the parent calls cuInit (which registers it with the pod
 * manager under the hook) and then forks; the child, which inherits the
 * hook's state from a parent that already registered, calls cuInit again
 * and both allocate. --fork-first forks before any CUDA call instead (what
 * a real driver requires: CUDA state does not survive fork).
 *
 *   fork_child [--parent-mib M] [--child-mib C] [--fork-first]
 *
 * Each process prints one line when it holds its memory:
 *   PARENT pid=<pid> bytes=<n>
 *   CHILD pid=<pid> bytes=<n>
 * (the child's line may come first). Then the parent waits for a line on
 * stdin (or SIGUSR1 / SIGTERM), stops the child with SIGTERM, waits for it
 * and exits 0 if both did their part, 1 otherwise. */
#include <cuda.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(who, call)                                                                           \
  do {                                                                                             \
    CUresult rc_ = (call);                                                                         \
    if (rc_ != CUDA_SUCCESS) {                                                                     \
      const char *name_ = NULL;                                                                    \
      cuGetErrorName(rc_, &name_);                                                                 \
      fprintf(stderr, "fork_child: %s (pid %d): %s failed: %s (%d)\n", who, (int)getpid(), #call,  \
              name_ ? name_ : "?", (int)rc_);                                                      \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static volatile sig_atomic_t g_signalled;

static void on_signal(int sig)
{
  (void)sig;
  g_signalled = 1;
}

/* Until SIGTERM or SIGUSR1, without losing one that comes just before. */
static void wait_signal(void)
{
  sigset_t s, old;
  sigemptyset(&s);
  sigaddset(&s, SIGTERM);
  sigaddset(&s, SIGUSR1);
  sigprocmask(SIG_BLOCK, &s, &old);
  while (!g_signalled)
    sigsuspend(&old);
  sigprocmask(SIG_SETMASK, &old, NULL);
}

/* cuInit unless done before the fork, a context on device 0, and mib MiB
 * in two allocations (so the report carries more than one event). */
static CUdeviceptr use_cuda(const char *who, int init, size_t mib, CUdeviceptr *second)
{
  CUdevice dev;
  CUcontext ctx;
  CUdeviceptr a;
  if (init)
    CHECK(who, cuInit(0));
  CHECK(who, cuDeviceGet(&dev, 0));
  CHECK(who, cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(who, cuCtxSetCurrent(ctx));
  size_t bytes = mib << 20;
  CHECK(who, cuMemAlloc(&a, bytes / 2));
  CHECK(who, cuMemAlloc(second, bytes - bytes / 2));
  return a;
}

int main(int argc, char **argv)
{
  size_t parent_mib = 8, child_mib = 3;
  int fork_first = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--parent-mib") && i + 1 < argc)
      parent_mib = strtoul(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--child-mib") && i + 1 < argc)
      child_mib = strtoul(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--fork-first"))
      fork_first = 1;
    else {
      fprintf(stderr, "usage: fork_child [--parent-mib M] [--child-mib C] [--fork-first]\n");
      return 2;
    }
  }

  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal; /* no SA_RESTART: a signal ends the read */
  sigaction(SIGUSR1, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  if (!fork_first)
    CHECK("parent", cuInit(0));
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) {
    perror("fork_child: fork");
    return 1;
  }
  CUdeviceptr a, b;
  if (child == 0) {
    a = use_cuda("child", 1, child_mib, &b);
    printf("CHILD pid=%d bytes=%zu\n", (int)getpid(), child_mib << 20);
    fflush(stdout);
    wait_signal();
    CHECK("child", cuMemFree(a));
    CHECK("child", cuMemFree(b));
    return 0;
  }

  a = use_cuda("parent", fork_first, parent_mib, &b);
  printf("PARENT pid=%d bytes=%zu\n", (int)getpid(), parent_mib << 20);
  fflush(stdout);
  char line[256];
  while (!g_signalled && !fgets(line, sizeof(line), stdin)) {
    if (feof(stdin)) {
      /* No input to wait for: a signal ends the wait. */
      wait_signal();
    }
    clearerr(stdin);
  }
  kill(child, SIGTERM);
  int status = 0;
  if (waitpid(child, &status, 0) < 0) {
    perror("fork_child: waitpid");
    return 1;
  }
  CHECK("parent", cuMemFree(a));
  CHECK("parent", cuMemFree(b));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "fork_child: child %d did not exit 0 (status 0x%x)\n", (int)child, status);
    return 1;
  }
  return 0;
}
