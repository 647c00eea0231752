/* PyTorch's cached blocks given back (see pyrelease.h). The releaser
 * thread is started at the first request; g_mu guards the request and
 * done counters and calls nothing while held. */
#include "pyrelease.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "counters.h" /* gmt__token_held */
#include "driver.h"
#include "fork.h"
#include "log.h"
#include "thread.h"

#define RELEASE_DEFAULT_MS 200
#define PY_FILE_INPUT 257 /* Python's Py_file_input */

/* torch.cuda.empty_cache() where the program has imported torch and used
 * CUDA; nothing else (a process that never imported torch is not made to).
 * Its own globals: nothing of the program's __main__ is touched. */
static const char g_code[] = "import sys\n"
                             "t = sys.modules.get('torch')\n"
                             "if t is not None and t.cuda.is_initialized():\n"
                             "    t.cuda.empty_cache()\n";

/* Python's C API, as the process has it (all stable since 3.2). */
static struct {
  int (*is_initialized)(void);
  int (*gil_ensure)(void);
  void (*gil_release)(int);
  void *(*dict_new)(void);
  void *(*run)(const char *, int, void *, void *, void *);
  void (*decref)(void *);
  void (*err_clear)(void);
} g_py;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_state;                 /* 0 unknown, 1 usable, -1 not (no Python, off) */
static int g_started;               /* the releaser thread runs */
static uint64_t g_asked, g_done;    /* requests and releases finished */
static uint64_t g_late;             /* the last request its asker stopped waiting for */
static int g_failed, g_failed_said; /* the last run's code failed */
static uint64_t g_bound_ms = RELEASE_DEFAULT_MS;

static int find_python(void)
{
  const char *off = getenv("GMT_TORCH_EMPTY_CACHE");
  if (off && strcmp(off, "0") == 0)
    return -1;
  const char *ms = getenv("GMT_TORCH_RELEASE_MS");
  if (ms && *ms) {
    char *end;
    unsigned long long v = strtoull(ms, &end, 10);
    if (*end)
      fprintf(stderr, "gmt: GMT_TORCH_RELEASE_MS=%s is not a number of ms; using %d\n", ms,
              RELEASE_DEFAULT_MS);
    else
      g_bound_ms = v;
  }
  gmt_dlsym_fn sym = gmt__dlsym_next(); /* libc's: the hook's own dlsym is for the program */
  if (!sym)
    return -1;
  *(void **)&g_py.is_initialized = sym(RTLD_DEFAULT, "Py_IsInitialized");
  *(void **)&g_py.gil_ensure = sym(RTLD_DEFAULT, "PyGILState_Ensure");
  *(void **)&g_py.gil_release = sym(RTLD_DEFAULT, "PyGILState_Release");
  *(void **)&g_py.dict_new = sym(RTLD_DEFAULT, "PyDict_New");
  *(void **)&g_py.run = sym(RTLD_DEFAULT, "PyRun_StringFlags");
  *(void **)&g_py.decref = sym(RTLD_DEFAULT, "Py_DecRef");
  *(void **)&g_py.err_clear = sym(RTLD_DEFAULT, "PyErr_Clear");
  return g_py.is_initialized && g_py.gil_ensure && g_py.gil_release && g_py.dict_new && g_py.run &&
                 g_py.decref && g_py.err_clear
             ? 1
             : -1;
}

/* One release for request upto, with the GIL. 0, 1 when it was left
 * (late, in the process's turn), or -1 when the code raised. */
static int run_once(uint64_t upto)
{
  if (!g_py.is_initialized())
    return 0; /* not started, or finalized: nothing to ask */
  int gil = g_py.gil_ensure();
  /* A request its asker stopped waiting for, with the GIL only once the
   * process holds the token: the move it was for went on without it, its
   * turn has come and its memory is back or coming, and a release now
   * only costs the turn. On an H200 a transformer job's empty_cache got
   * the GIL as its turn began and freed 20 MiB segments for 1.5 s, most
   * of them brought back a moment before. Not holding it, the release
   * still gives room back. */
  pthread_mutex_lock(&g_mu);
  int late = g_late == upto;
  pthread_mutex_unlock(&g_mu);
  if (late && atomic_load_explicit(&gmt__token_held, memory_order_relaxed) > 0) {
    g_py.gil_release(gil);
    return 1;
  }
  int rc = -1;
  void *globals = g_py.dict_new();
  if (globals) {
    void *res = g_py.run(g_code, PY_FILE_INPUT, globals, globals, NULL);
    if (res) {
      g_py.decref(res);
      rc = 0;
    }
    g_py.decref(globals);
  }
  if (rc < 0)
    g_py.err_clear();
  g_py.gil_release(gil);
  return rc;
}

static void *releaser_main(void *arg)
{
  (void)arg;
  pthread_mutex_lock(&g_mu);
  for (;;) {
    while (g_done == g_asked)
      pthread_cond_wait(&g_cv, &g_mu);
    uint64_t upto = g_asked; /* requests made meanwhile are served by this run */
    pthread_mutex_unlock(&g_mu);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = run_once(upto);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    GMT_HOOK_DEBUG("PyTorch's cache: torch.cuda.empty_cache() %s %.1f ms after it was asked for",
                   rc == 0   ? "ran"
                   : rc == 1 ? "left (late, in this process's turn)"
                             : "failed",
                   (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    pthread_mutex_lock(&g_mu);
    g_failed = rc < 0;
    g_done = upto;
    pthread_cond_broadcast(&g_cv);
  }
  return NULL;
}

int gmt__pyrelease_cached(void)
{
  pthread_mutex_lock(&g_mu);
  if (g_state == 0)
    g_state = find_python();
  if (g_state < 0) {
    pthread_mutex_unlock(&g_mu);
    return 0;
  }
  if (!g_started) {
    if (gmt__thread_start("gmt-release", releaser_main) < 0) {
      g_state = -1;
      pthread_mutex_unlock(&g_mu);
      return 0;
    }
    g_started = 1;
  }
  if (g_done != g_asked) { /* one still waits for the GIL: not again */
    pthread_mutex_unlock(&g_mu);
    return 0;
  }
  uint64_t mine = ++g_asked;
  pthread_cond_broadcast(&g_cv);
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  uint64_t ns = (uint64_t)until.tv_nsec + g_bound_ms * 1000000ull;
  until.tv_sec += (time_t)(ns / 1000000000ull);
  until.tv_nsec = (long)(ns % 1000000000ull);
  while (g_done < mine)
    if (pthread_cond_timedwait(&g_cv, &g_mu, &until) == ETIMEDOUT)
      break;
  int out = g_done < mine ? 0 : g_failed ? -1 : 1;
  if (out == 0)
    g_late = mine;
  int say = out < 0 && !g_failed_said;
  if (say)
    g_failed_said = 1;
  pthread_mutex_unlock(&g_mu);
  if (say)
    fprintf(stderr,
            "gmt[%d]: torch.cuda.empty_cache() failed before a move out; cached blocks "
            "move out with the rest\n",
            (int)getpid());
  if (out == 0)
    GMT_HOOK_DEBUG("PyTorch's cache not released within %llu ms (the GIL is held); moving out",
                   (unsigned long long)g_bound_ms);
  return out;
}

/* The child has no releaser thread: it starts one again if asked. */
static void py_prepare(void)
{
  pthread_mutex_lock(&g_mu);
}

static void py_parent(void)
{
  pthread_mutex_unlock(&g_mu);
}

static void py_child(void)
{
  g_started = 0;
  g_asked = g_done = g_late = 0;
  pthread_mutex_init(&g_mu, NULL);
  pthread_cond_init(&g_cv, NULL);
}

static const gmt_fork_ops_t g_fork_ops = {py_prepare, py_parent, py_child};

__attribute__((constructor)) static void pyrelease_register(void)
{
  gmt__fork_register(GMT_LOCK_PYRELEASE, &g_fork_ops);
}
