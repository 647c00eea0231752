// What a latency request beside a batch job can wait at best, on the real
// GPU, with no gmt at all (issue 25): two processes share a GPU the way two
// pods do (separate contexts, the driver's time slicing), and the batch
// process stops launching when told through shared memory, with no
// daemon, no socket and no token, after an optional delay that stands for
// a signal's trip through daemons. It is the floor any gmt design can
// reach for the same jobs: where the floor misses a target, no design of
// gmt's gate meets it.
//
// The batch process runs spin kernels of --batch-us each on one stream and
// keeps at most --queue-us of them queued (events after each launch), as
// the hook's queue bound does. The latency process serves requests that
// arrive at random (Poisson, --rate a second): --kernels kernels of
// --small-us each, then a 4-byte copy to the host and a synchronize (the
// .item() of an inference call). Modes, each --seconds long, in one run:
//   alone      no batch process
//   free       batch runs, never told to stop (the driver's time slicing)
//   hold       batch stops at its next launch while a request is served
//   hold+D     the same, the stop arriving D us after the request does
// Prints one row per mode: p50/p99/p99.9/max of the request latency, and
// the batch rate as a fraction of its rate alone.
//
// build: scripts/gpu-bundle.sh (.carry/gpu/handoff_floor), or
//   nvcc -O2 -arch=sm_90 -o handoff_floor bench/handoff_floor.cu
// usage: handoff_floor [--seconds S] [--rate R] [--batch-us U] [--queue-us Q]
//                      [--kernels N] [--small-us U] [--delays 500,1000]
#include <cuda_runtime.h>

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <atomic>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <vector>

#define CHECK(x)                                                                      \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      _exit(2);                                                                       \
    }                                                                                 \
  } while (0)

struct shared_t {
  std::atomic<int64_t> hold_from; // CLOCK_MONOTONIC ns: batch holds from then...
  std::atomic<int64_t> hold_to;  // ...until then (0/0: no hold)
  std::atomic<int> stop;
  std::atomic<int> ready;
  std::atomic<long> batch_done; // the batch kernels done in the mode
};

static int64_t now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__global__ void spin(long long ns)
{
  long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

static int g_shm_fd, g_argc; // what a batch process is started with
static char **g_argv;

struct opts {
  double seconds = 4, rate = 100;
  int batch_us = 25, queue_us = 500, kernels = 17, small_us = 5;
  std::vector<int> delays{500, 1000};
};

// The batch process: spin kernels, at most queue_us queued, held while
// the latency process says so (hold: honour it).
static void batch_main(shared_t *sh, const opts &o, int hold)
{
  CHECK(cudaSetDevice(0));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int ring = 256;
  cudaEvent_t ev[ring];
  for (int i = 0; i < ring; i++)
    CHECK(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
  unsigned head = 0, n = 0;
  long done = 0;
  int maxq = std::max(1, std::min(ring - 2, o.queue_us / std::max(1, o.batch_us)));
  spin<<<1, 1, 0, s>>>(1000);
  CHECK(cudaStreamSynchronize(s));
  std::atomic_store(&sh->ready, 1);
  while (!std::atomic_load(&sh->stop)) {
    while (n > 0) { // retire what is done
      cudaError_t rc = cudaEventQuery(ev[head % ring]);
      if (rc == cudaErrorNotReady)
        break;
      CHECK(rc);
      head++, n--, done++;
    }
    if (hold) {
      int64_t t = now_ns();
      if (t >= std::atomic_load(&sh->hold_from) && t < std::atomic_load(&sh->hold_to))
        continue; // held: launch nothing
    }
    if ((int)n >= maxq)
      continue; // the queue is full: wait for the oldest
    spin<<<1, 1, 0, s>>>((long long)o.batch_us * 1000);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(ev[(head + n) % ring], s));
    n++;
  }
  CHECK(cudaStreamSynchronize(s));
  std::atomic_store(&sh->batch_done, done + n);
  _exit(0);
}

static double pct(std::vector<double> &xs, double q)
{
  size_t i = (size_t)(q * xs.size());
  return xs[std::min(xs.size() - 1, i)];
}

// One mode's requests, served in this process. delay_us < 0: no hold.
static std::vector<double> serve(shared_t *sh, const opts &o, long delay_us, unsigned seed)
{
  static cudaStream_t s;
  static int *dev, *host;
  if (!s) {
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&dev, 4));
    CHECK(cudaMallocHost(&host, 4));
  }
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(o.rate);
  std::vector<double> lat;
  int64_t t0 = now_ns(), arrival = t0;
  for (;;) {
    arrival += (int64_t)(gap(rng) * 1e9);
    if (arrival - t0 >= (int64_t)(o.seconds * 1e9))
      break;
    while (now_ns() < arrival) {
      int64_t left = arrival - now_ns();
      if (left > 200000) {
        struct timespec ts = {0, left - 150000};
        nanosleep(&ts, NULL);
      }
    }
    if (delay_us >= 0) {
      std::atomic_store(&sh->hold_from, arrival + delay_us * 1000); // in the future first
      std::atomic_store(&sh->hold_to, INT64_MAX);
    }
    for (int k = 0; k < o.kernels; k++)
      spin<<<1, 1, 0, s>>>((long long)o.small_us * 1000);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpyAsync(host, dev, 4, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    int64_t end = now_ns();
    if (delay_us >= 0)
      std::atomic_store(&sh->hold_to, end);
    lat.push_back((end - arrival) / 1e6);
  }
  return lat;
}

// Runs the batch process for one mode (or none), serving meanwhile.
// Returns the batch kernels done (0 without one); fills lat.
static long mode(shared_t *sh, const opts &o, int batch, int hold, long delay_us, int serve_too,
                 std::vector<double> *lat)
{
  std::atomic_store(&sh->stop, 0);
  std::atomic_store(&sh->ready, 0);
  std::atomic_store(&sh->hold_from, 0);
  std::atomic_store(&sh->hold_to, 0);
  std::atomic_store(&sh->batch_done, 0);
  pid_t pid = -1;
  if (batch) {
    fflush(stdout);
    pid = fork();
    if (pid == 0) { // a fresh process: CUDA does not survive a fork
      char fd[16], h[4];
      snprintf(fd, sizeof fd, "%d", g_shm_fd);
      snprintf(h, sizeof h, "%d", hold);
      std::vector<char *> a{(char *)"/proc/self/exe", (char *)"--batch", fd, h};
      for (int i = 1; i < g_argc; i++)
        a.push_back(g_argv[i]);
      a.push_back(NULL);
      execv("/proc/self/exe", a.data());
      _exit(127);
    }
    int64_t limit = now_ns() + 60000000000LL;
    while (!std::atomic_load(&sh->ready) && now_ns() < limit)
      usleep(1000);
    if (!std::atomic_load(&sh->ready)) {
      fprintf(stderr, "the batch process did not start within 60 s\n");
      kill(pid, SIGKILL);
      exit(2);
    }
  }
  if (serve_too)
    *lat = serve(sh, o, hold ? delay_us : -1, 7);
  else
    usleep((useconds_t)(o.seconds * 1e6));
  std::atomic_store(&sh->stop, 1);
  if (pid > 0) {
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "the batch process failed (status %d)\n", st);
      exit(2);
    }
  }
  return std::atomic_load(&sh->batch_done);
}

int main(int argc, char **argv)
{
  opts o;
  int batch_fd = -1, batch_hold = 0, first = 1;
  if (argc >= 4 && !strcmp(argv[1], "--batch")) {
    batch_fd = atoi(argv[2]);
    batch_hold = atoi(argv[3]);
    first = 4;
  }
  for (int i = first; i + 1 < argc; i += 2) {
    const char *k = argv[i], *v = argv[i + 1];
    if (!strcmp(k, "--seconds")) o.seconds = atof(v);
    else if (!strcmp(k, "--rate")) o.rate = atof(v);
    else if (!strcmp(k, "--batch-us")) o.batch_us = atoi(v);
    else if (!strcmp(k, "--queue-us")) o.queue_us = atoi(v);
    else if (!strcmp(k, "--kernels")) o.kernels = atoi(v);
    else if (!strcmp(k, "--small-us")) o.small_us = atoi(v);
    else if (!strcmp(k, "--delays")) {
      o.delays.clear();
      for (char *p = strtok(strdup(v), ","); p; p = strtok(NULL, ","))
        o.delays.push_back(atoi(p));
    } else {
      fprintf(stderr, "unknown option %s\n", k);
      return 2;
    }
  }
  if (batch_fd >= 0) {
    shared_t *sh = (shared_t *)mmap(NULL, sizeof(shared_t), PROT_READ | PROT_WRITE, MAP_SHARED,
                                    batch_fd, 0);
    if (sh == MAP_FAILED) {
      perror("mmap");
      return 2;
    }
    batch_main(sh, o, batch_hold);
  }
  g_argc = argc;
  g_argv = argv;
  g_shm_fd = memfd_create("handoff_floor", 0);
  if (g_shm_fd < 0 || ftruncate(g_shm_fd, sizeof(shared_t)) != 0) {
    perror("memfd_create");
    return 2;
  }
  shared_t *sh = (shared_t *)mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED,
                                  g_shm_fd, 0);
  if (sh == MAP_FAILED) {
    perror("mmap");
    return 2;
  }
  std::vector<double> none;
  // The batch job alone: its rate is what the others are a fraction of.
  double solo = mode(sh, o, 1, 0, -1, 0, &none) / o.seconds;
  CHECK(cudaSetDevice(0));
  printf("batch kernels %d us, queue %d us; request %d x %d us + 4-byte copy at %.0f/s; "
         "batch alone %.0f kernels/s\n",
         o.batch_us, o.queue_us, o.kernels, o.small_us, o.rate, solo);
  printf("%-10s %8s %8s %8s %8s %8s %7s\n", "mode", "n", "p50_ms", "p99_ms", "p999_ms", "max_ms",
         "batch");
  struct row {
    const char *name;
    int batch, hold;
    long delay;
  };
  std::vector<row> rows{{"alone", 0, 0, -1}, {"free", 1, 0, -1}, {"hold", 1, 1, 0}};
  char names[16][32];
  for (size_t i = 0; i < o.delays.size() && i < 16; i++) {
    snprintf(names[i], sizeof names[i], "hold+%d", o.delays[i]);
    rows.push_back({names[i], 1, 1, o.delays[i]});
  }
  std::vector<double> warm;
  mode(sh, o, 0, 0, -1, 1, &warm); // the service's warm-up: not counted
  for (auto &r : rows) {
    std::vector<double> lat;
    long done = mode(sh, o, r.batch, r.hold, r.delay, 1, &lat);
    std::sort(lat.begin(), lat.end());
    printf("%-10s %8zu %8.3f %8.3f %8.3f %8.3f %7.3f\n", r.name, lat.size(), pct(lat, 0.5),
           pct(lat, 0.99), pct(lat, 0.999), lat.back(), r.batch ? done / o.seconds / solo : 0.0);
    fflush(stdout);
  }
  return 0;
}
