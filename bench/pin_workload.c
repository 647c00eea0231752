/* The pin-advice benchmark's workload (issue 11, bench/pin_advice.py): the
 * eBPF CUDA tracer design's hot/cold transfer pattern. N hot host buffers
 * go K times to the device and K times back, M cold ones C times each way,
 * all of SIZE bytes, through one device buffer.
 *
 * Every host buffer comes from one call site (host_alloc_one), in a loop,
 * in the same order on every run: the nth allocation at that site names a
 * buffer from one run to the next, which is how gmt's pin profiles key
 * buffers (executable, site, nth, size class). With --alloc malloc the
 * buffers are plain malloc'd memory, which the hook may pin on advice;
 * --alloc pinned takes them from cuMemHostAlloc instead (the "all pinned"
 * mode). The hot buffers sit spread among the cold ones, not first, so that
 * "pin the first N" cannot pass for advice.
 *
 * One run: allocate all, fill each with its own pattern, then K rounds in
 * which every hot buffer goes H2D and D2H once and the cold copies are
 * spread evenly over the rounds, then free all. Each buffer has its own
 * pattern and shares the one device buffer, so a lost H2D brings another
 * buffer's bytes back; a few words are overwritten before each D2H, so a
 * lost D2H shows too; every byte is checked at the end (exit 1 on a wrong
 * one). Timed: the whole run (allocation, fill, copies, free: pinning has
 * a cost of its own) and the copy phase alone; the check and the count of
 * page-locked buffers are left out. The count asks the driver which
 * buffers are page-locked at the end of the copy phase.
 *
 * --by-hand all|hot|pays pins by the program's own hand, with no hook: the
 * bound on what advice could reach. At a buffer's first copy (all: every
 * buffer, as pin=profile; hot: the hot ones, as pin=use) or a hot buffer's
 * third (pays: as pin=adaptive with its priors) the workload registers it
 * (cuMemHostRegister, PORTABLE, as the hook does) and unregisters it
 * before its free.
 *
 * Prints one JSON line (after a HOLD line per run with --hold). --repeat R
 * runs the whole thing R times in this process (the allocations of run 2
 * are then the site's 28th and on). */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cuda.h>

#include "../test/common/cudaprog.h"

#define CHECK(call) GMT_CU_CHECK("pin_workload", call)
#define MAX_BUFS 4096
#define MAX_REPEAT 64

typedef struct {
  size_t size;
  int hot, hot_copies, cold, cold_copies;
  int pinned; /* --alloc pinned */
  int repeat;
  int hold; /* --hold: wait for a line on stdin after the copy phase */
  enum { HAND_NONE, HAND_ALL, HAND_HOT, HAND_PAYS } by_hand;
} opts_t;

/* What one run measured. */
typedef struct {
  double whole_s, alloc_s, fill_s, copy_s, free_s, verify_s;
  int pinned_buffers, hot_pinned, cold_pinned; /* -1: cannot tell */
  uint64_t pinned_bytes;
  long bad_words; /* words that came back wrong */
  long bad_trips; /* round trips whose overwritten words did not come back */
  long trips;     /* round trips made: the schedule's own check */
} run_t;

static char *g_bufs[MAX_BUFS];
static unsigned char g_hot[MAX_BUFS];
/* --by-hand: each buffer's copies so far, and whether it is registered. */
static int g_by_hand;
static int g_copies[MAX_BUFS];
static unsigned char g_registered[MAX_BUFS];

/* ---- which host memory is page-locked ---- */

typedef CUresult (*pointer_attr_fn)(void *, CUpointer_attribute, CUdeviceptr);
static enum { DETECT_NONE, DETECT_GETFLAGS, DETECT_POINTER_ATTR } g_detect;
static pointer_attr_fn g_pointer_attr;

static int locked_getflags(void *p)
{
  unsigned int flags;
  return cuMemHostGetFlags(&flags, p) == CUDA_SUCCESS;
}

static int locked_pointer_attr(void *p)
{
  unsigned int type = 0;
  return g_pointer_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p) ==
             CUDA_SUCCESS &&
         type == CU_MEMORYTYPE_HOST;
}

static int locked(void *p)
{
  switch (g_detect) {
  case DETECT_GETFLAGS: return locked_getflags(p);
  case DETECT_POINTER_ATTR: return locked_pointer_attr(p);
  default: return -1;
  }
}

static const char *detect_name(void)
{
  switch (g_detect) {
  case DETECT_GETFLAGS: return "cuMemHostGetFlags";
  case DETECT_POINTER_ATTR: return "cuPointerGetAttribute";
  default: return "none";
  }
}

/* Which query tells registered memory from pageable here. The driver's
 * documentation promises cuMemHostGetFlags only for cuMemHostAlloc'd
 * memory, and the hook pins malloc'd buffers with cuMemHostRegister: so
 * try it on memory of our own (mmap'd, not malloc'd, so that the hook's
 * count of allocations at the benchmark's site is not disturbed) before
 * and after registering it, and fall back to the pointer's memory type. */
static void detect_choose(void)
{
  size_t len = 2 * (size_t)sysconf(_SC_PAGESIZE);
  char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

  g_detect = DETECT_NONE;
  if (p == MAP_FAILED) {
    fprintf(stderr, "pin_workload: mmap: %s\n", strerror(errno));
    exit(1);
  }
  memset(p, 1, len);
  g_pointer_attr = (pointer_attr_fn)dlsym(RTLD_DEFAULT, "cuPointerGetAttribute");
  int flags_pageable = locked_getflags(p);
  int attr_pageable = g_pointer_attr ? locked_pointer_attr(p) : 1;
  CHECK(cuMemHostRegister(p, len, 0));
  if (!flags_pageable && locked_getflags(p) && locked_getflags(p + len - 1))
    g_detect = DETECT_GETFLAGS;
  else if (!attr_pageable && locked_pointer_attr(p) && locked_pointer_attr(p + len - 1))
    g_detect = DETECT_POINTER_ATTR;
  CHECK(cuMemHostUnregister(p));
  munmap(p, len);
  if (g_detect == DETECT_NONE)
    fprintf(stderr, "pin_workload: no driver query tells registered memory from pageable: "
                    "pinned counts will be null\n");
}

/* ---- the buffers ---- */

/* The one call site of every host buffer (not inlined, so that the site is
 * one return address however the loop around it is compiled). */
__attribute__((noinline)) static char *host_alloc_one(size_t size, int pinned)
{
  void *p = NULL;

  if (pinned)
    CHECK(cuMemHostAlloc(&p, size, 0));
  else
    p = malloc(size);
  if (!p) {
    fprintf(stderr, "pin_workload: out of host memory (%zu bytes)\n", size);
    exit(1);
  }
  return p;
}

static void host_free_one(int i, int pinned)
{
  char *p = g_bufs[i];

  if (g_registered[i]) {
    CHECK(cuMemHostUnregister(p));
    g_registered[i] = 0;
  }
  if (pinned)
    CHECK(cuMemFreeHost(p));
  else
    free(p);
}

/* Word j of buffer i: no two buffers agree on any word (their seeds
 * differ and the step is the same), and it is cheap enough to vectorize, so
 * that the fill measures the pages' first touch, not arithmetic. */
static inline uint64_t pattern(int i, size_t j)
{
  return (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull + (uint64_t)j * 0xD1B54A32D192ED03ull;
}

static void fill(char *b, int i, size_t size)
{
  uint64_t *w = (uint64_t *)b;
  size_t n = size / 8;

  for (size_t j = 0; j < n; j++)
    w[j] = pattern(i, j);
  for (size_t k = n * 8; k < size; k++)
    b[k] = (char)pattern(i, n + k);
}

static long verify(const char *b, int i, size_t size)
{
  const uint64_t *w = (const uint64_t *)b;
  size_t n = size / 8;
  long bad = 0;

  for (size_t j = 0; j < n; j++)
    if (w[j] != pattern(i, j)) {
      if (!bad)
        fprintf(stderr, "pin_workload: buffer %d: first wrong word at byte %zu\n", i, j * 8);
      bad++;
    }
  for (size_t k = n * 8; k < size; k++)
    bad += b[k] != (char)pattern(i, n + k);
  return bad;
}

/* The words overwritten before a D2H: the first, the middle and the last
 * whole word. */
static size_t scribble_word(size_t size, int which)
{
  size_t n = size / 8;
  return which == 0 ? 0 : which == 1 ? n / 2 : n - 1;
}

/* --by-hand: registers buffer i before the copy its policy pins it at. */
static void hand_pin(int i, size_t size)
{
  int copies = g_copies[i]++;
  int now = g_by_hand == HAND_ALL   ? copies == 0
            : g_by_hand == HAND_HOT ? g_hot[i] && copies == 0
                                    : g_by_hand == HAND_PAYS && g_hot[i] && copies == 2;
  if (now && !g_registered[i]) {
    CHECK(cuMemHostRegister(g_bufs[i], size, CU_MEMHOSTREGISTER_PORTABLE));
    g_registered[i] = 1;
  }
}

/* One buffer there and back. */
static void round_trip(run_t *r, CUdeviceptr d, int i, size_t size)
{
  char *b = g_bufs[i];
  uint64_t *w = (uint64_t *)b;

  r->trips++;
  hand_pin(i, size);
  CHECK(cuMemcpyHtoD(d, b, size));
  if (size >= 8)
    for (int k = 0; k < 3; k++)
      w[scribble_word(size, k)] = ~pattern(i, scribble_word(size, k));
  CHECK(cuMemcpyDtoH(b, d, size));
  if (size >= 8)
    for (int k = 0; k < 3; k++)
      if (w[scribble_word(size, k)] != pattern(i, scribble_word(size, k))) {
        r->bad_trips++;
        break;
      }
}

/* The round in which cold copy c of cold buffer j runs: the M*C cold copies
 * spread evenly over the rounds, each buffer's copies far apart. */
static int cold_round(const opts_t *o, int j, int c, int rounds)
{
  long k = (long)c * o->cold + j;
  return (int)(k * rounds / ((long)o->cold * o->cold_copies));
}

static void one_run(const opts_t *o, CUdeviceptr d, run_t *r)
{
  int n = o->hot + o->cold;
  int rounds = o->hot_copies > 0 ? o->hot_copies : 1;

  memset(r, 0, sizeof *r);
  memset(g_copies, 0, sizeof g_copies);
  double t0 = gmt_prog_now_s();
#pragma GCC unroll 1
  for (int i = 0; i < n; i++)
    g_bufs[i] = host_alloc_one(o->size, o->pinned);
  double t1 = gmt_prog_now_s();
  for (int i = 0; i < n; i++)
    fill(g_bufs[i], i, o->size);
  double t2 = gmt_prog_now_s();
  for (int round = 0; round < rounds; round++) {
    if (round < o->hot_copies)
      for (int i = 0; i < n; i++)
        if (g_hot[i])
          round_trip(r, d, i, o->size);
    int j = 0;
    for (int i = 0; i < n; i++) {
      if (g_hot[i])
        continue;
      for (int c = 0; c < o->cold_copies; c++)
        if (cold_round(o, j, c, rounds) == round)
          round_trip(r, d, i, o->size);
      j++;
    }
  }
  CHECK(cuCtxSynchronize());
  double t3 = gmt_prog_now_s();

  /* Untimed: what is page-locked now, and whether every byte came back. */
  if (g_detect == DETECT_NONE) {
    r->pinned_buffers = r->hot_pinned = r->cold_pinned = -1;
  } else {
    for (int i = 0; i < n; i++)
      if (locked(g_bufs[i]) == 1 && locked(g_bufs[i] + o->size - 1) == 1) {
        r->pinned_buffers++;
        r->pinned_bytes += o->size;
        if (g_hot[i])
          r->hot_pinned++;
        else
          r->cold_pinned++;
      }
  }
  if (o->hold) {
    /* The runner reads `gmt status` now, while the buffers are pinned. */
    char line[64];
    printf("HOLD pinned_bytes=%lld pinned_buffers=%d\n",
           r->pinned_buffers < 0 ? -1LL : (long long)r->pinned_bytes, r->pinned_buffers);
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin))
      clearerr(stdin);
  }
  double t4 = gmt_prog_now_s();
  for (int i = 0; i < n; i++)
    r->bad_words += verify(g_bufs[i], i, o->size);
  double t5 = gmt_prog_now_s();
  for (int i = 0; i < n; i++)
    host_free_one(i, o->pinned);
  double t6 = gmt_prog_now_s();

  r->alloc_s = t1 - t0;
  r->fill_s = t2 - t1;
  r->copy_s = t3 - t2;
  r->verify_s = t5 - t4;
  r->free_s = t6 - t5;
  r->whole_s = (t3 - t0) + (t6 - t5);
}

/* ---- options and output ---- */

static void usage(void)
{
  fprintf(stderr, "usage: pin_workload --size BYTES [--hot N] [--hot-copies K] [--cold M]\n"
                  "                    [--cold-copies C] [--alloc malloc|pinned] [--repeat R]\n"
                  "                    [--hold] [--by-hand all|hot|pays]\n"
                  "  defaults: --hot 2 --hot-copies 175 --cold 25 --cold-copies 1 --alloc malloc\n"
                  "  --repeat 1; --hold prints HOLD after the copy phase and waits for a line\n"
                  "  on stdin (untimed), so that a reader of `gmt status` sees the pinned bytes.\n"
                  "  --by-hand: the program registers buffers itself (no hook needed): at the\n"
                  "  first copy of every buffer (all), of the hot ones (hot), or at a hot one's\n"
                  "  third copy (pays); unregistered before free.\n");
  exit(2);
}

static long parse_num(const char *opt, const char *s, long lo, long hi)
{
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) {
    fprintf(stderr, "pin_workload: %s '%s': want an integer from %ld to %ld\n", opt, s, lo, hi);
    exit(2);
  }
  return (long)v;
}

static void parse(int argc, char **argv, opts_t *o)
{
  enum {
    O_SIZE = 1,
    O_HOT,
    O_HOT_COPIES,
    O_COLD,
    O_COLD_COPIES,
    O_ALLOC,
    O_REPEAT,
    O_HOLD,
    O_BY_HAND
  };
  static const struct option longopts[] = {
      {"size", required_argument, NULL, O_SIZE},
      {"hot", required_argument, NULL, O_HOT},
      {"hot-copies", required_argument, NULL, O_HOT_COPIES},
      {"cold", required_argument, NULL, O_COLD},
      {"cold-copies", required_argument, NULL, O_COLD_COPIES},
      {"alloc", required_argument, NULL, O_ALLOC},
      {"repeat", required_argument, NULL, O_REPEAT},
      {"hold", no_argument, NULL, O_HOLD},
      {"by-hand", required_argument, NULL, O_BY_HAND},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  int c;

  *o = (opts_t){0, 2, 175, 25, 1, 0, 1, 0, HAND_NONE};
  while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
    switch (c) {
    case O_SIZE: o->size = (size_t)parse_num("--size", optarg, 1, 1L << 40); break;
    case O_HOT: o->hot = (int)parse_num("--hot", optarg, 0, MAX_BUFS); break;
    case O_HOT_COPIES: o->hot_copies = (int)parse_num("--hot-copies", optarg, 0, 1000000); break;
    case O_COLD: o->cold = (int)parse_num("--cold", optarg, 0, MAX_BUFS); break;
    case O_COLD_COPIES: o->cold_copies = (int)parse_num("--cold-copies", optarg, 0, 1000000); break;
    case O_ALLOC:
      if (strcmp(optarg, "malloc") == 0)
        o->pinned = 0;
      else if (strcmp(optarg, "pinned") == 0)
        o->pinned = 1;
      else {
        fprintf(stderr, "pin_workload: --alloc '%s': want malloc or pinned\n", optarg);
        exit(2);
      }
      break;
    case O_REPEAT: o->repeat = (int)parse_num("--repeat", optarg, 1, MAX_REPEAT); break;
    case O_HOLD: o->hold = 1; break;
    case O_BY_HAND:
      if (strcmp(optarg, "all") == 0)
        o->by_hand = HAND_ALL;
      else if (strcmp(optarg, "hot") == 0)
        o->by_hand = HAND_HOT;
      else if (strcmp(optarg, "pays") == 0)
        o->by_hand = HAND_PAYS;
      else {
        fprintf(stderr, "pin_workload: --by-hand '%s': want all, hot or pays\n", optarg);
        exit(2);
      }
      break;
    default: usage();
    }
  }
  if (optind != argc || o->size == 0) {
    if (o->size == 0)
      fprintf(stderr, "pin_workload: --size is required\n");
    usage();
  }
  if (o->hot + o->cold == 0 || o->hot + o->cold > MAX_BUFS) {
    fprintf(stderr, "pin_workload: --hot plus --cold must be 1 to %d buffers\n", MAX_BUFS);
    exit(2);
  }
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median run by whole time: its numbers go on the top level. */
static const run_t *median_run(const run_t *runs, int n)
{
  double w[MAX_REPEAT];
  for (int i = 0; i < n; i++)
    w[i] = runs[i].whole_s;
  qsort(w, (size_t)n, sizeof w[0], cmp_double);
  for (int i = 0; i < n; i++)
    if (runs[i].whole_s == w[(n - 1) / 2])
      return &runs[i];
  return &runs[0];
}

static void print_run(const opts_t *o, const run_t *r)
{
  int n = o->hot + o->cold;
  uint64_t total = (uint64_t)n * o->size;

  printf("\"whole_s\": %.6f, \"alloc_s\": %.6f, \"fill_s\": %.6f, \"copy_s\": %.6f, "
         "\"free_s\": %.6f, \"verify_s\": %.6f, ",
         r->whole_s, r->alloc_s, r->fill_s, r->copy_s, r->free_s, r->verify_s);
  if (r->pinned_buffers < 0)
    printf("\"pinned_buffers\": null, \"hot_pinned\": null, \"cold_pinned\": null, "
           "\"pinned_bytes\": null, \"pinned_pct\": null, ");
  else
    printf("\"pinned_buffers\": %d, \"hot_pinned\": %d, \"cold_pinned\": %d, "
           "\"pinned_bytes\": %llu, \"pinned_pct\": %.3f, ",
           r->pinned_buffers, r->hot_pinned, r->cold_pinned, (unsigned long long)r->pinned_bytes,
           100.0 * (double)r->pinned_bytes / (double)total);
  printf("\"bad_words\": %ld, \"bad_trips\": %ld", r->bad_words, r->bad_trips);
}

static const char *const hand_names[] = {"none", "all", "hot", "pays"};

int main(int argc, char **argv)
{
  opts_t o;
  CUcontext ctx;
  CUdevice dev;
  CUdeviceptr d;
  run_t runs[MAX_REPEAT];

  parse(argc, argv, &o);
  g_by_hand = o.by_hand;
  int n = o.hot + o.cold;
  for (int j = 0; j < o.hot; j++)
    g_hot[((2 * (long)j + 1) * n) / (2 * o.hot)] = 1;

  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  detect_choose();
  CHECK(cuMemAlloc(&d, o.size));
  for (int i = 0; i < o.repeat; i++)
    one_run(&o, d, &runs[i]);
  CHECK(cuMemFree(d));
  CHECK(cuDevicePrimaryCtxRelease(dev));

  long bad = 0, bad_trips = 0;
  uint64_t copies = (uint64_t)o.hot * o.hot_copies * 2 + (uint64_t)o.cold * o.cold_copies * 2;
  for (int i = 0; i < o.repeat; i++) {
    bad += runs[i].bad_words;
    bad_trips += runs[i].bad_trips;
    if ((uint64_t)runs[i].trips * 2 != copies) {
      fprintf(stderr, "pin_workload: run %d made %ld round trips, not %llu\n", i, runs[i].trips,
              (unsigned long long)copies / 2);
      return 1;
    }
  }
  const run_t *m = median_run(runs, o.repeat);
  printf("{\"pid\": %d, \"size\": %zu, \"hot\": %d, \"hot_copies\": %d, \"cold\": %d, "
         "\"cold_copies\": %d, \"alloc\": \"%s\", \"by_hand\": \"%s\", \"repeat\": %d, "
         "\"buffers\": %d, "
         "\"total_bytes\": %llu, \"copies\": %llu, \"copied_bytes\": %llu, \"hot_index\": [",
         (int)getpid(), o.size, o.hot, o.hot_copies, o.cold, o.cold_copies,
         o.pinned ? "pinned" : "malloc", hand_names[o.by_hand], o.repeat, n,
         (unsigned long long)n * o.size, (unsigned long long)copies,
         (unsigned long long)(copies * o.size));
  for (int i = 0, first = 1; i < n; i++)
    if (g_hot[i]) {
      printf("%s%d", first ? "" : ", ", i);
      first = 0;
    }
  printf("], \"detect\": \"%s\", \"verified\": %s, ", detect_name(),
         bad == 0 && bad_trips == 0 ? "true" : "false");
  print_run(&o, m);
  printf(", \"copy_gbps\": %.3f, \"runs\": [",
         m->copy_s > 0 ? (double)(copies * o.size) / m->copy_s / 1e9 : 0.0);
  for (int i = 0; i < o.repeat; i++) {
    printf("%s{", i ? ", " : "");
    print_run(&o, &runs[i]);
    printf("}");
  }
  printf("]}\n");
  fflush(stdout);
  if (bad || bad_trips) {
    fprintf(stderr,
            "pin_workload: data check failed: %ld wrong words, %ld round trips came back wrong\n",
            bad, bad_trips);
    return 1;
  }
  return 0;
}
