/* Modules, kernels and launches of the fake driver. Any image loads; a
 * function named "spin" runs for as many microseconds as its first
 * parameter says, any other name for none. A launch checks its arguments,
 * queues the kernel on its stream (queue.c) and returns; the device's
 * worker runs it holding the device's lock file, so kernels on one device
 * run one at a time across every process on the machine and contention is
 * real. */
#include "fakecuda.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct gmt__module {
  int is_library;
};

static pthread_mutex_t dev_mu[GMT_FAKE_MAX_DEVICES];
static int dev_fd[GMT_FAKE_MAX_DEVICES];
static uint64_t dev_end[GMT_FAKE_MAX_DEVICES]; /* this process's last kernel's end (dev_mu) */
static pthread_once_t dev_once = PTHREAD_ONCE_INIT;

static void dev_init(void)
{
  for (int i = 0; i < GMT_FAKE_MAX_DEVICES; i++) {
    pthread_mutex_init(&dev_mu[i], NULL);
    dev_fd[i] = -1;
  }
}

void gmt__kernel_reset_child(void)
{
  /* The lock files' descriptions are shared with the parent: a child that
   * kept them would hold the parent's lock. Open its own later. */
  pthread_once(&dev_once, dev_init);
  for (int i = 0; i < GMT_FAKE_MAX_DEVICES; i++) {
    pthread_mutex_init(&dev_mu[i], NULL);
    if (dev_fd[i] >= 0)
      close(dev_fd[i]);
    dev_fd[i] = -1;
    dev_end[i] = 0;
  }
}

uint64_t gmt__fake_now_ns(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* A kernel may start up to this long before the worker got to it: see
 * kernel_start(). */
#define CATCHUP_NS 2000000ull

#define now_ns gmt__fake_now_ns

/* Sleeps most of the time until end (CLOCK_MONOTONIC ns), then spins the
 * tail so the end is accurate. */
void gmt__fake_run_until(uint64_t end)
{
  if (end > now_ns() + 300000ull) {
    uint64_t wake = end - 150000ull;
    struct timespec ts = {(time_t)(wake / 1000000000ull), (long)(wake % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
  }
  while (now_ns() < end) {
  }
}

/* When a kernel that was ready at ready_ns starts, the device lock held:
 * when the device's previous kernel (of any process: its end is kept in
 * the lock file) ended, if that is later, as on a GPU, which starts queued
 * work the moment the previous finishes, however late the thread that runs
 * it here wakes up. A thread that wakes late on a loaded machine would
 * otherwise stretch every kernel and the device's busy time with it. The
 * catch-up is bounded (CATCHUP_NS), so work on a device that sat idle is
 * never dated back into the past. */
static uint64_t catch_up(uint64_t ready_ns, uint64_t last_end)
{
  uint64_t now = now_ns(), start = now - CATCHUP_NS;
  if (ready_ns > start)
    start = ready_ns;
  if (last_end > start)
    start = last_end;
  return start < now ? start : now;
}

static uint64_t kernel_start(int fd, uint64_t ready_ns)
{
  uint64_t last = 0;
  if (fd >= 0 && pread(fd, &last, sizeof last, 0) != (ssize_t)sizeof last)
    last = 0;
  return catch_up(ready_ns, last);
}

uint64_t gmt__kernel_clock(int dev, uint64_t ready_ns)
{
  pthread_once(&dev_once, dev_init);
  pthread_mutex_lock(&dev_mu[dev]);
  uint64_t t = catch_up(ready_ns, dev_end[dev]);
  pthread_mutex_unlock(&dev_mu[dev]);
  return t;
}

static void kernel_run(int dev, uint64_t us, uint64_t ready_ns)
{
  pthread_once(&dev_once, dev_init);
  /* flock is per open file description, so threads of this process first
   * queue on a mutex; processes then queue on the file. */
  pthread_mutex_lock(&dev_mu[dev]);
  if (dev_fd[dev] < 0) {
    char path[PATH_MAX + 32];
    gmt__machine_dev_lock_path(gmt__fake.phys[dev], path, sizeof path);
    dev_fd[dev] = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (dev_fd[dev] < 0)
      fprintf(stderr, "fakecuda: cannot open %s: %s\n", path, strerror(errno));
    else
      (void)fchmod(dev_fd[dev], 0666);
  }
  int fd = dev_fd[dev];
  if (fd >= 0)
    flock(fd, LOCK_EX);
  uint64_t end = kernel_start(fd, ready_ns) + us * 1000ull;
  /* The end is written before the kernel runs, so that NVML sees the
   * device busy while it does (gmt__machine_dev_busy); the next kernel
   * reads it only once it holds the lock, after this one. */
  if (fd >= 0 && pwrite(fd, &end, sizeof end, 0) != (ssize_t)sizeof end)
    fprintf(stderr, "fakecuda: cannot record the device's time: %s\n", strerror(errno));
  gmt__fake_run_until(end);
  dev_end[dev] = end;
  if (fd >= 0)
    flock(fd, LOCK_UN);
  pthread_mutex_unlock(&dev_mu[dev]);
}

static void kernel_op_run(struct gmt__op *op)
{
  kernel_run(op->dev, op->val, op->queued_ns);
}

struct gmt__op *gmt__kernel_op(int dev, uint64_t us)
{
  struct gmt__op *op = gmt__op_new();
  if (op) {
    op->run = kernel_op_run;
    op->dev = dev;
    op->val = us;
  }
  return op;
}

uint64_t gmt__kernel_duration(const struct gmt__func *f, void **params, void **extra)
{
  if (!f->spin)
    return 0;
  unsigned int us = 0;
  if (params && params[0]) {
    memcpy(&us, params[0], sizeof us);
  } else if (extra) {
    /* CU_LAUNCH_PARAM_BUFFER_POINTER: the parameters packed in a buffer. */
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2)
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER && extra[i + 1])
        memcpy(&us, extra[i + 1], sizeof us);
  }
  return us;
}

static CUresult launch_check_locked(CUfunction f, CUstream s, unsigned gx, unsigned gy, unsigned gz,
                                    unsigned bx, unsigned by, unsigned bz, int *dev,
                                    struct gmt__queue **q)
{
  if (!gmt__handle_ok(f, GMT__K_FUNC))
    return CUDA_ERROR_INVALID_HANDLE;
  if (!gx || !gy || !gz || !bx || !by || !bz)
    return CUDA_ERROR_INVALID_VALUE;
  if ((uint64_t)bx * by * bz > 1024 || bz > 64)
    return CUDA_ERROR_INVALID_VALUE;
  return gmt__stream_queue_locked(s, dev, q);
}

/* ---- modules and libraries ---- */

static CUresult module_new(void **out, int is_library)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  gmt__fake_lock();
  int dev = 0;
  CUresult r = is_library ? CUDA_SUCCESS : gmt__ctx_dev_locked(&dev);
  struct gmt__module *m = NULL;
  if (r == CUDA_SUCCESS) {
    m = calloc(1, sizeof *m);
    if (!m || gmt__handle_add(m, is_library ? GMT__K_LIBRARY : GMT__K_MODULE) != 0) {
      free(m);
      m = NULL;
      r = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  if (m) {
    m->is_library = is_library;
    *out = m;
  }
  gmt__fake_unlock();
  return r;
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
  if (!module || !image)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  GMT_FAKE_RET(module_new((void **)module, 0));
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                            CUjit_option *options, void **optionValues)
{
  (void)numOptions, (void)options, (void)optionValues;
  if (!module || !image)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  GMT_FAKE_RET(module_new((void **)module, 0));
}

CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
  if (!module || !fatCubin)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  GMT_FAKE_RET(module_new((void **)module, 0));
}

CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
  if (!module || !fname)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  if (access(fname, R_OK) != 0)
    GMT_FAKE_RET(CUDA_ERROR_FILE_NOT_FOUND);
  GMT_FAKE_RET(module_new((void **)module, 0));
}

static CUresult func_new(void **out, void *mod, int mod_kind, const char *name)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!out || !name)
    return CUDA_ERROR_INVALID_VALUE;
  gmt__fake_lock();
  CUresult r = CUDA_SUCCESS;
  struct gmt__func *f = NULL;
  if (!gmt__handle_ok(mod, mod_kind)) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else {
    f = calloc(1, sizeof *f);
    if (!f || gmt__handle_add(f, GMT__K_FUNC) != 0) {
      free(f);
      f = NULL;
      r = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  if (f) {
    f->mod = mod;
    snprintf(f->name, sizeof f->name, "%s", name);
    f->spin = strcmp(name, "spin") == 0;
    *out = f;
  }
  gmt__fake_unlock();
  return r;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
  GMT_FAKE_RET(func_new((void **)hfunc, hmod, GMT__K_MODULE, name));
}

static struct gmt__module *unloading;
static void drop_func_of_unloading(void *p)
{
  struct gmt__func *f = p;
  if (f->mod != unloading)
    return;
  gmt__handle_del(f);
  free(f);
}

static CUresult module_unload(void *m, int kind)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  gmt__fake_lock();
  CUresult r = CUDA_ERROR_INVALID_HANDLE;
  if (gmt__handle_ok(m, kind)) {
    unloading = m;
    gmt__handle_each(GMT__K_FUNC, drop_func_of_unloading);
    unloading = NULL;
    gmt__handle_del(m);
    free(m);
    r = CUDA_SUCCESS;
  }
  gmt__fake_unlock();
  return r;
}

CUresult cuModuleUnload(CUmodule hmod)
{
  GMT_FAKE_RET(module_unload(hmod, GMT__K_MODULE));
}

CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                           void **jitOptionsValues, unsigned int numJitOptions,
                           CUlibraryOption *libraryOptions, void **libraryOptionValues,
                           unsigned int numLibraryOptions)
{
  (void)jitOptions, (void)jitOptionsValues, (void)numJitOptions;
  (void)libraryOptions, (void)libraryOptionValues, (void)numLibraryOptions;
  if (!library || !code)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  GMT_FAKE_RET(module_new((void **)library, 1));
}

CUresult cuLibraryUnload(CUlibrary library)
{
  GMT_FAKE_RET(module_unload(library, GMT__K_LIBRARY));
}

CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
  /* A CUkernel is launched like a CUfunction, so they share one object. */
  GMT_FAKE_RET(func_new((void **)pKernel, library, GMT__K_LIBRARY, name));
}

CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
  GMT_FAKE_NEED_INIT();
  if (!pFunc)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  gmt__fake_lock();
  int ok = gmt__handle_ok(kernel, GMT__K_FUNC);
  gmt__fake_unlock();
  if (!ok)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_HANDLE);
  *pFunc = (CUfunction)kernel;
  GMT_FAKE_RET(CUDA_SUCCESS);
}

CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
  GMT_FAKE_NEED_INIT();
  if (!pi)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  gmt__fake_lock();
  int ok = gmt__handle_ok(hfunc, GMT__K_FUNC);
  gmt__fake_unlock();
  if (!ok)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_HANDLE);
  *pi = attrib == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 0;
  GMT_FAKE_RET(CUDA_SUCCESS);
}

CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
  GMT_FAKE_NEED_INIT();
  (void)attrib, (void)value;
  gmt__fake_lock();
  int ok = gmt__handle_ok(hfunc, GMT__K_FUNC);
  gmt__fake_unlock();
  GMT_FAKE_RET(ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE);
}

/* ---- launches ---- */

static CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, CUstream s, void **params, void **extra)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  gmt__fake_lock();
  int dev = 0;
  struct gmt__queue *q = NULL;
  CUresult r = launch_check_locked(f, s, gx, gy, gz, bx, by, bz, &dev, &q);
  uint64_t us = 0;
  if (r == CUDA_SUCCESS) {
    /* The parameters are read now, as the driver copies them at launch. */
    us = gmt__kernel_duration((struct gmt__func *)f, params, extra);
    struct gmt__op *op = gmt__kernel_op(dev, us);
    r = op ? gmt__queue_submit(q, op, NULL) : CUDA_ERROR_OUT_OF_MEMORY;
  }
  gmt__fake_unlock();
  if (r == CUDA_SUCCESS)
    gmt__fake_log("launch %s on device %d for %llu us: queued", ((struct gmt__func *)f)->name, dev,
                  (unsigned long long)us);
  return r;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz,
                        unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
                        void **extra)
{
  (void)sharedMemBytes;
  GMT_FAKE_RET(launch(f, gx, gy, gz, bx, by, bz, hStream, kernelParams, extra));
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                             unsigned int bx, unsigned int by, unsigned int bz,
                             unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
                             void **extra)
{
  (void)sharedMemBytes;
  GMT_FAKE_RET(launch(f, gx, gy, gz, bx, by, bz, GMT_PTSZ(hStream), kernelParams, extra));
}

static CUresult launch_ex(const CUlaunchConfig *c, CUfunction f, void **params, void **extra,
                          int ptsz)
{
  if (!c)
    return CUDA_ERROR_INVALID_VALUE;
  return launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                ptsz ? GMT_PTSZ(c->hStream) : c->hStream, params, extra);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                          void **extra)
{
  GMT_FAKE_RET(launch_ex(config, f, kernelParams, extra, 0));
}
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                               void **extra)
{
  GMT_FAKE_RET(launch_ex(config, f, kernelParams, extra, 1));
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz,
                                   unsigned int sharedMemBytes, CUstream hStream,
                                   void **kernelParams)
{
  (void)sharedMemBytes;
  GMT_FAKE_RET(launch(f, gx, gy, gz, bx, by, bz, hStream, kernelParams, NULL));
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int sharedMemBytes,
                                        CUstream hStream, void **kernelParams)
{
  (void)sharedMemBytes;
  GMT_FAKE_RET(launch(f, gx, gy, gz, bx, by, bz, GMT_PTSZ(hStream), kernelParams, NULL));
}

static CUresult launch_multi(CUDA_LAUNCH_PARAMS *list, unsigned n)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!list || n == 0 || n > GMT_FAKE_MAX_DEVICES)
    return CUDA_ERROR_INVALID_VALUE;
  /* Every launch is checked before any is queued: all or none. */
  gmt__fake_lock();
  int dev[GMT_FAKE_MAX_DEVICES];
  struct gmt__queue *q[GMT_FAKE_MAX_DEVICES];
  struct gmt__op *op[GMT_FAKE_MAX_DEVICES] = {NULL};
  CUresult r = CUDA_SUCCESS;
  for (unsigned i = 0; r == CUDA_SUCCESS && i < n; i++) {
    CUDA_LAUNCH_PARAMS *l = &list[i];
    r = launch_check_locked(l->function, l->hStream, l->gridDimX, l->gridDimY, l->gridDimZ,
                            l->blockDimX, l->blockDimY, l->blockDimZ, &dev[i], &q[i]);
    if (r == CUDA_SUCCESS) {
      uint64_t us = gmt__kernel_duration((struct gmt__func *)l->function, l->kernelParams, NULL);
      op[i] = gmt__kernel_op(dev[i], us);
      if (!op[i])
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  for (unsigned i = 0; i < n; i++) {
    if (r == CUDA_SUCCESS)
      r = gmt__queue_submit(q[i], op[i], NULL);
    else
      gmt__op_free(op[i]);
    op[i] = NULL;
  }
  gmt__fake_unlock();
  return r;
}

CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *list, unsigned int numDevices,
                                              unsigned int flags)
{
  (void)flags;
  GMT_FAKE_RET(launch_multi(list, numDevices));
}

static void host_op_run(struct gmt__op *op)
{
  op->fn(op->arg);
}

static CUresult host_func(CUstream s, CUhostFn fn, void *data)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!fn)
    return CUDA_ERROR_INVALID_VALUE;
  gmt__fake_lock();
  int dev = 0;
  struct gmt__queue *q = NULL;
  CUresult r = gmt__stream_queue_locked(s, &dev, &q);
  if (r == CUDA_SUCCESS) {
    /* Called on the worker when the stream reaches it, as the driver calls
     * it on a thread of its own. */
    struct gmt__op *op = gmt__op_new();
    if (op) {
      op->run = host_op_run;
      op->fn = fn;
      op->arg = data;
      op->worker_only = 1;
    }
    r = op ? gmt__queue_submit(q, op, NULL) : CUDA_ERROR_OUT_OF_MEMORY;
  }
  gmt__fake_unlock();
  return r;
}

CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
  GMT_FAKE_RET(host_func(hStream, fn, userData));
}
CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
  GMT_FAKE_RET(host_func(GMT_PTSZ(hStream), fn, userData));
}
