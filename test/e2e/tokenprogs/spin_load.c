/* A GPU-time load for the token tests: launches "spin" kernels of
 * --kernel-us µs back to back (or in bursts of --burst-ms separated by
 * --gap-ms of idleness) for --seconds, or until stdin closes when
 * --seconds is 0. Launches return at once and kernels run later, one at a
 * time per device across all processes (on a GPU, and on the fake driver's
 * worker), so each launch is followed by a cuStreamSynchronize; with
 * --queue N, N launches are followed by one, as a training step queues
 * its kernels and then waits for them. Counts are taken after the
 * synchronize, so the GPU time this process got is exactly its
 * launches x kernel-us. With --every-ms G it is a request loop instead: a
 * kernel of --kernel-us every G ms of idleness, each waited for, and DONE
 * also says how long the requests took (lat_p50_ms, lat_p90_ms,
 * lat_max_ms: launch to the synchronize's return, the token wait in it).
 * With --at-once N, N requests come together every G ms, served one after
 * the other as a server serves its queue, each timed from their arrival
 * (--cpu-us: the server's own work after each).
 * With --cpu-us C each synchronize is followed by C us of the CPU's own work
 * (a busy loop), as an inference server computes between small kernels.
 * Prints
 *   READY pid=<pid>
 *   T t_ms=<ms since READY> busy_us=<kernel time so far> launches=<n> mono_ms=<now>
 *     every 500 ms (mono_ms: CLOCK_MONOTONIC, as Python's time.monotonic())
 *   DONE t_ms=... busy_us=... launches=...
 * Every CUDA return code is checked; a failure exits 1 naming the call. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "../../common/cudaprog.h"

#define CHECK(call) GMT_CU_CHECK("spin_load", call)

static atomic_int stdin_closed;

static double now_ms(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void *watch_stdin(void *arg)
{
  char buf[256];

  (void)arg;
  while (fgets(buf, sizeof buf, stdin))
    ;
  atomic_store(&stdin_closed, 1);
  return NULL;
}

static void sleep_ms(double ms)
{
  struct timespec ts = {(time_t)(ms / 1e3), (long)((ms - (double)(time_t)(ms / 1e3) * 1e3) * 1e6)};

  while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
    ;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void usage(void)
{
  fprintf(stderr,
          "usage: spin_load [--seconds S] [--kernel-us U] [--device D] "
          "[--burst-ms B --gap-ms G] [--queue N] [--every-ms G [--at-once N]] [--cpu-us C]\n");
  exit(2);
}

/* us of the CPU's own work: a busy loop. */
static void spin_cpu(double us)
{
  for (double until = now_ms() + us / 1e3; us > 0 && now_ms() < until;)
    ;
}

int main(int argc, char **argv)
{
  double seconds = 0, burst_ms = 0, gap_ms = 0, every_ms = 0, cpu_us = 0;
  unsigned int kernel_us = 2000;
  unsigned long queue = 1;   /* launches per synchronize */
  unsigned long at_once = 1; /* requests that come together (--every-ms) */
  int device = 0;
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction fn;
  pthread_t th;

  for (int i = 1; i < argc; i++) {
    if (i + 1 >= argc)
      usage();
    if (!strcmp(argv[i], "--seconds"))
      seconds = atof(argv[++i]);
    else if (!strcmp(argv[i], "--kernel-us"))
      kernel_us = (unsigned int)strtoul(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--device"))
      device = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--burst-ms"))
      burst_ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--gap-ms"))
      gap_ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--cpu-us"))
      cpu_us = atof(argv[++i]);
    else if (!strcmp(argv[i], "--every-ms"))
      every_ms = atof(argv[++i]);
    else if (!strcmp(argv[i], "--at-once"))
      at_once = strtoul(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--queue"))
      queue = strtoul(argv[++i], NULL, 10);
    else
      usage();
  }
  if (queue == 0 || at_once == 0)
    usage();
  setvbuf(stdout, NULL, _IOLBF, 0);

  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, device));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  CHECK(cuModuleLoadData(&mod, gmt_spin_ptx));
  CHECK(cuModuleGetFunction(&fn, mod, "spin"));
  if (seconds <= 0 && pthread_create(&th, NULL, watch_stdin, NULL) != 0) {
    fprintf(stderr, "spin_load: cannot start the stdin thread\n");
    return 1;
  }

  printf("READY pid=%d\n", (int)getpid());
  double t0 = now_ms(), next_print = t0 + 500, burst_start = t0;
  unsigned long long launches = 0;
  double *lat = NULL;
  size_t nlat = 0, caplat = 0;
  for (;;) {
    double now = now_ms();
    if (now >= next_print) {
      printf("T t_ms=%.1f busy_us=%llu launches=%llu mono_ms=%.1f\n", now - t0,
             launches * (unsigned long long)kernel_us, launches, now);
      next_print += 500;
    }
    if ((seconds > 0 && now - t0 >= seconds * 1e3) || (seconds <= 0 && atomic_load(&stdin_closed)))
      break;
    if (burst_ms > 0 && now - burst_start >= burst_ms) {
      /* Idle, but still printing progress and seeing stdin close. */
      if (now - burst_start < burst_ms + gap_ms) {
        sleep_ms(10);
        continue;
      }
      burst_start = now;
    }
    void *params[] = {&kernel_us};
    if (every_ms > 0) {
      sleep_ms(every_ms);
      double t = now_ms();
      for (unsigned long j = 0; j < at_once; j++) {
        CHECK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
        CHECK(cuStreamSynchronize(NULL));
        if (nlat == caplat) {
          caplat = caplat ? 2 * caplat : 256;
          lat = realloc(lat, caplat * sizeof *lat);
          if (!lat) {
            fprintf(stderr, "spin_load: out of memory\n");
            return 1;
          }
        }
        lat[nlat++] = now_ms() - t;
        launches++;
        spin_cpu(cpu_us);
      }
      continue;
    }
    for (unsigned long k = 0; k < queue; k++)
      CHECK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    CHECK(cuStreamSynchronize(NULL));
    launches += queue;
    spin_cpu(cpu_us);
  }
  CHECK(cuCtxSynchronize());
  double end = now_ms();
  printf("DONE t_ms=%.1f busy_us=%llu launches=%llu mono_ms=%.1f", end - t0,
         launches * (unsigned long long)kernel_us, launches, end);
  if (nlat > 0) {
    qsort(lat, nlat, sizeof *lat, cmp_double);
    printf(" requests=%zu lat_p50_ms=%.3f lat_p90_ms=%.3f lat_max_ms=%.3f", nlat, lat[nlat / 2],
           lat[nlat * 9 / 10], lat[nlat - 1]);
  }
  printf("\n");
  free(lat);
  CHECK(cuModuleUnload(mod));
  CHECK(cuDevicePrimaryCtxRelease(dev));
  return 0;
}
