/* mode=swap's driver work (see swap.h): allocations backed by cuMemCreate
 * and cuMemMap of the REAL driver (gmt's own wrappers of those would
 * charge the quota a second time), moved out to host memory and back at
 * the same address, and the Resident RPC that asks the scheduler for the
 * bytes on the GPU.
 *
 * Locks (hook/base/fork.h has the whole order): gmt__swap_rw (SWAP), then
 * g_tab_mu (SWAPTAB: the table, calls nothing while held). g_res_mu
 * (RESIDENT) serialises Resident RPCs and the granted totals; it is held
 * across the RPC, never with gmt__swap_rw.
 *
 * Test knob: GMT_SWAP_TEST_EVICT_MS=N makes the reporter thread move every
 * swap allocation out once N ms have passed since the last allocation or
 * restore, without a scheduler's Evict. For end-to-end tests of the data
 * path only (test/e2e/test_swap_hook.py); never set it in production. */
#include "swap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "channel.h"
#include "counters.h" /* gmt__token_held */
#include "devmap.h"
#include "faultahead.h"
#include "fork.h"
#include "frame.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_wire.h"
#include "log.h"
#include "swaphost.h"
#include "swaptab.h"
#include "swapum.h"
#include "thread.h"

#define GMT_SWAP_DEVICES 64
#define GMT_SWAP_WAIT_DEFAULT_MS 60000
#define GMT_SWAP_RETRY_MIN_MS 5
#define GMT_SWAP_RETRY_MAX_MS 200
#define GMT_SWAP_OOM_RETRY_MS 20 /* the card itself was full during a restore */
#define GMT_RESIDENT_TIMEOUT_MS 1500
/* How long a host copy stays with an allocation brought back, for its
 * next move out (GMT_SWAP_KEEP_MS; 0: freed at once). */
#define GMT_SWAP_KEEP_DEFAULT_MS 10000

_Atomic int gmt__swap_on;
_Atomic int gmt__swap_nout;
_Atomic int gmt__swap_waiting;
pthread_rwlock_t gmt__swap_rw = PTHREAD_RWLOCK_INITIALIZER;

static pthread_mutex_t g_tab_mu = PTHREAD_MUTEX_INITIALIZER;
static gmt_swaptab_t g_tab;
static int g_device = -1;
static uint64_t g_gen, g_gen_seen; /* moves, for the reporter */
static uint64_t g_last_in_ms;      /* the last allocation or restore (the test knob) */
/* What the moves cost since start (gmt_swap_stats_t). */
static _Atomic uint64_t g_out_bytes, g_in_bytes, g_move_ns, g_wait_ns, g_out_ns;
/* What the program's frees and releases cost, by step (said at exit with
 * GMT_HOOK_DEBUG): a job's last step freed its 450 segments of 20 MiB in
 * about 0.5 s, its turn held meanwhile (H200). */
static _Atomic uint64_t g_rel_res_ns, g_rel_res_n, g_rel_host_ns, g_rel_host_n, g_rel_drv_ns;

static pthread_mutex_t g_res_mu = PTHREAD_MUTEX_INITIALIZER;
/* The totals Resident granted, per device: written under g_res_mu, read
 * by the token's idle thread without it (gmt__swap_claimed). */
static _Atomic uint64_t g_claimed[GMT_SWAP_DEVICES];
static char g_pod[256];
static int g_res_said; /* "acting as granted" logged */
static int g_move_said;

static const gmt_swap_prog_ops_t *g_prog; /* swapvmm.c's, set before main */

static uint64_t g_wait_ms = GMT_SWAP_WAIT_DEFAULT_MS;
static uint64_t g_test_evict_ms;
static uint64_t g_keep_ms = GMT_SWAP_KEEP_DEFAULT_MS;
static int g_prep_off; /* GMT_SWAP_PREPARE=0: no prepared host copies */
/* The threads that fault a move out's new copies in ahead of it
 * (GMT_SWAP_FAULT_AHEAD, default none, at most this many), and how far
 * ahead. None by default: on an H200 the driver's mappings and releases
 * of each step took 1.3-4.7 ms while they faulted, 0.15-0.2 ms without
 * them, and a job's first move out (140 PyTorch segments, about 100 new
 * copies) took 604 ms with two threads and 471 ms with none (2026-11-30;
 * its host faulted 5-7 GB/s on one thread, no more on two or four). */
#define GMT_SWAP_FAULT_AHEAD_MAX 4
static int g_fault_threads; /* GMT_SWAP_FAULT_AHEAD: threads faulting a move's copies ahead */

/* gmt's moves, for the tracer: `gmt trace` and gmt-schd's tracer put a
 * uprobe on this exported no-op (bpf/probes.c) and record a move of the
 * allocation at addr off the GPU (out 1) or back (0), bytes in ns, in its
 * history (bpf/memhistory.h, GMT_AEV_MOVE_OUT/_IN). Called once per
 * allocation, right after its move succeeded. */
GMT_EXPORT __attribute__((noinline, used)) void gmt_trace_moved(uint64_t addr, uint64_t bytes,
                                                                int out, uint64_t ns)
{
  __asm__ volatile("" : : "r"(addr), "r"(bytes), "r"(out), "r"(ns) : "memory");
}

static void sleep_ms(uint64_t ms)
{
  struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* The environment's name as a number of what (dflt when unset or not a
 * number, said on stderr). */
static uint64_t env_num(const char *name, uint64_t dflt, const char *what)
{
  const char *v = getenv(name);
  if (!v || !*v)
    return dflt;
  char *end;
  unsigned long long n = strtoull(v, &end, 10);
  if (*end) {
    fprintf(stderr, "gmt: %s=%s is not a number of %s; using %llu\n", name, v, what,
            (unsigned long long)dflt);
    return dflt;
  }
  return n;
}

static uint64_t env_ms(const char *name, uint64_t dflt)
{
  return env_num(name, dflt, "ms");
}

void gmt__swap_configure(int how, const char *pod)
{
  pthread_mutex_lock(&g_res_mu);
  snprintf(g_pod, sizeof g_pod, "%s", pod ? pod : "");
  pthread_mutex_unlock(&g_res_mu);
  g_wait_ms = env_ms("GMT_SWAP_WAIT_MS", GMT_SWAP_WAIT_DEFAULT_MS);
  g_test_evict_ms = env_ms("GMT_SWAP_TEST_EVICT_MS", 0);
  g_keep_ms = env_ms("GMT_SWAP_KEEP_MS", GMT_SWAP_KEEP_DEFAULT_MS);
  const char *prep = getenv("GMT_SWAP_PREPARE");
  g_prep_off = prep && !strcmp(prep, "0");
  uint64_t fa = env_num("GMT_SWAP_FAULT_AHEAD", 0, "threads");
  g_fault_threads = fa < GMT_SWAP_FAULT_AHEAD_MAX ? (int)fa : GMT_SWAP_FAULT_AHEAD_MAX;
  atomic_store_explicit(&gmt__swap_on, how, memory_order_release);
}

static int managed_mode(void)
{
  return atomic_load_explicit(&gmt__swap_on, memory_order_relaxed) == GMT_SWAP_MANAGED;
}

/* A failed move, on stderr the first time, in the debug log after. */
#define SAY_ONCE(...)                                                                              \
  do {                                                                                             \
    if (!g_move_said) {                                                                            \
      g_move_said = 1;                                                                             \
      fprintf(stderr, "gmt[%d]: ", (int)getpid());                                                 \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
    } else {                                                                                       \
      GMT_HOOK_DEBUG(__VA_ARGS__);                                                                 \
    }                                                                                              \
  } while (0)

/* ---- Resident ---- */

/* RES_CARD: never, mode=um's managed memory would pass the card's free
 * memory (ResidentRequest.card_free). RES_PART: granted in part (a
 * restore's at_least). */
enum { RES_GRANTED, RES_WAIT, RES_NEVER, RES_CARD, RES_PART };

/* Asks for total swap bytes on dev (g_res_mu held); card_free: a new
 * managed allocation's (0: none); at_least: the least raise worth
 * granting in part (0: all or nothing), the total then granted in *part.
 * A pod manager that cannot be reached or does not serve Resident counts
 * as a grant: the card's own out-of-memory is then the backstop. */
static int rpc_resident(int dev, uint64_t total, uint64_t card_free, uint64_t at_least,
                        uint32_t *retry_ms, uint64_t *part)
{
  Gmt__ResidentRequest rq = GMT__RESIDENT_REQUEST__INIT;
  rq.pod = g_pod;
  rq.pid = (uint32_t)getpid();
  rq.device = gmt__node_device(dev);
  rq.bytes = total;
  rq.card_free = card_free;
  rq.at_least = at_least;
  Gmt__Envelope env = GMT__ENVELOPE__INIT;
  env.body_case = GMT__ENVELOPE__BODY_RESIDENT_REQ;
  env.resident_req = &rq;
  Gmt__Envelope *rep = NULL;
  char err[256] = "";
  int rc = gmt__channel_call(GMT_CH_MEMORY, &env, &rep, GMT_RESIDENT_TIMEOUT_MS);
  if (rc == 0)
    rc = gmt_wire_expect(rep, GMT__ENVELOPE__BODY_RESIDENT_REP, err, sizeof err);
  if (rc == 0 && !rep->resident_rep)
    rc = -EPROTO;
  if (rc < 0) {
    gmt_wire_free(rep);
    if (rc != -ENOTCONN && !g_res_said) {
      g_res_said = 1;
      fprintf(stderr,
              "gmt[%d]: Resident not answered (%s%s%s); swap allocations go on the GPU as if "
              "granted\n",
              (int)getpid(), gmt_strerror(rc), *err ? ": " : "", err);
    }
    return RES_GRANTED;
  }
  const Gmt__ResidentReply *r = rep->resident_rep;
  int partial = r->granted && r->reason == GMT__RESIDENT_REASON__RESIDENT_REASON_PARTIAL &&
                at_least && r->granted_bytes < total;
  if (partial && part)
    *part = r->granted_bytes;
  int out = partial                                                        ? RES_PART
            : r->granted                                                   ? RES_GRANTED
            : r->reason == GMT__RESIDENT_REASON__RESIDENT_REASON_TOO_BIG   ? RES_NEVER
            : r->reason == GMT__RESIDENT_REASON__RESIDENT_REASON_CARD_FULL ? RES_CARD
                                                                           : RES_WAIT;
  uint32_t ms = r->retry_ms;
  *retry_ms = ms < GMT_SWAP_RETRY_MIN_MS   ? GMT_SWAP_RETRY_MIN_MS
              : ms > GMT_SWAP_RETRY_MAX_MS ? GMT_SWAP_RETRY_MAX_MS
                                           : ms;
  GMT_HOOK_DEBUG("resident %llu bytes on device %d: %s (reason %d, room %llu)",
                 (unsigned long long)total, dev, r->granted ? "granted" : "not granted",
                 (int)r->reason, (unsigned long long)r->room);
  gmt_wire_free(rep);
  return out;
}

static int clamp_dev(int dev)
{
  return dev >= 0 && dev < GMT_SWAP_DEVICES ? dev : 0;
}

/* The spans of what is out on dev (the Resident lock held: a move out
 * changes the table and its claim under that lock, so the two agree);
 * *least (may be NULL): the smallest of them. */
static uint64_t out_on(int dev, uint64_t *least)
{
  uint64_t need = 0, none[1];
  pthread_mutex_lock(&g_tab_mu);
  gmt__swaptab_out_on(&g_tab, dev, none, 0, &need);
  if (least)
    *least = gmt__swaptab_out_least(&g_tab, dev);
  pthread_mutex_unlock(&g_tab_mu);
  return need;
}

/* mode=um: what the card has free for a new managed allocation on dev:
 * its free memory now (*card, may be NULL) less this process's managed
 * bytes off it (*own_off, may be NULL: they come back first). */
static CUresult um_room(int dev, uint64_t *avail, uint64_t *card, uint64_t *own_off)
{
  uint64_t free_b = 0;
  CUresult rc = gmt__um_card_free(&free_b);
  if (rc != CUDA_SUCCESS)
    return rc;
  uint64_t off = out_on(dev, NULL);
  *avail = free_b > off ? free_b - off : 0;
  if (card)
    *card = free_b;
  if (own_off)
    *own_off = off;
  return CUDA_SUCCESS;
}

/* Asks Resident for bytes more on dev (restore: for what is out there
 * now, read at each try, taking any part that lets its smallest
 * allocation in; card_free: a new managed allocation's, else 0, read
 * again before each retry: others' moves out while it waits free the
 * card as they add to what is off it), waiting
 * out refusals until deadline_ms. 0 with *got the bytes granted (0 when
 * nothing was left to ask for; a restore's may be part of what is out),
 * -E2BIG when they can never fit, -EFBIG when managed memory would pass
 * the card's, -ENOSPC past the deadline. A refusal as too big
 * while this process holds grants of its own is waited out like any
 * other: a move out or a free in flight is about to lower them. */
static int claim(int dev, uint64_t bytes, int restore, uint64_t card_free, uint64_t deadline_ms,
                 gmt_swap_gate_fn gate, uint64_t *got)
{
  int d = clamp_dev(dev);
  *got = 0;
  for (int tries = 0;; tries++) {
    uint32_t retry = GMT_SWAP_RETRY_MIN_MS;
    /* Asks holding the token (see gmt_swap_gate_fn): a restore from its
     * first ask, or a process whose memory was just moved out took the
     * room straight back while the pod it was moved out for held the
     * token and waited for it, again and again (the fake driver, two busy
     * pods on a loaded machine: one check in 10 s); an allocation asks
     * once without it, as most fit. */
    if (gate && (tries || restore))
      gate();
    uint64_t fresh;
    if (tries && card_free && um_room(dev, &fresh, NULL, NULL) == CUDA_SUCCESS)
      card_free = fresh ? fresh : 1; /* 0 would mean "not managed" */
    pthread_mutex_lock(&g_res_mu);
    uint64_t least = 0, part = 0;
    if (restore)
      bytes = out_on(dev, &least);
    int r = bytes ? rpc_resident(dev, g_claimed[d] + bytes, card_free, least, &retry, &part)
                  : RES_GRANTED;
    if (r == RES_PART && part > g_claimed[d]) {
      bytes = part - g_claimed[d];
      r = RES_GRANTED;
    }
    if (r == RES_GRANTED)
      g_claimed[d] += bytes;
    uint64_t own = g_claimed[d];
    pthread_mutex_unlock(&g_res_mu);
    if (r == RES_GRANTED) {
      *got = bytes;
      return 0;
    }
    if (r == RES_NEVER && own == 0)
      return -E2BIG;
    if (r == RES_CARD)
      return -EFBIG;
    if (gmt_now_ms() + retry > deadline_ms)
      return -ENOSPC;
    sleep_ms(retry);
  }
}

/* Takes bytes off dev's granted total and says so (lowering is always
 * granted: the answer does not matter). */
static void unclaim_locked(int dev, uint64_t bytes)
{
  if (!bytes)
    return;
  int d = clamp_dev(dev);
  uint32_t retry;
  g_claimed[d] -= bytes < g_claimed[d] ? bytes : g_claimed[d];
  rpc_resident(dev, g_claimed[d], 0, 0, &retry, NULL);
}

static void unclaim(int dev, uint64_t bytes)
{
  pthread_mutex_lock(&g_res_mu);
  unclaim_locked(dev, bytes);
  pthread_mutex_unlock(&g_res_mu);
}

/* ---- driver steps ---- */

static CUmemAllocationProp dev_prop(int dev)
{
  CUmemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = dev;
  return p;
}

/* Physical memory for [addr, addr+span) on dev, mapped read/write. */
static CUresult back(CUdeviceptr addr, uint64_t span, int dev, CUmemGenericAllocationHandle *out)
{
  __typeof__(&cuMemCreate) create = GMT_REAL(cuMemCreate);
  __typeof__(&cuMemRelease) release = GMT_REAL(cuMemRelease);
  __typeof__(&cuMemMap) map = GMT_REAL(cuMemMap);
  __typeof__(&cuMemUnmap) unmap = GMT_REAL(cuMemUnmap);
  __typeof__(&cuMemSetAccess) access = GMT_REAL(cuMemSetAccess);
  if (!create || !release || !map || !unmap || !access)
    return CUDA_ERROR_NOT_FOUND;
  CUmemAllocationProp prop = dev_prop(dev);
  CUmemGenericAllocationHandle h = 0;
  CUresult rc = create(&h, span, &prop, 0);
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = map(addr, span, 0, h, 0);
  if (rc == CUDA_SUCCESS) {
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    rc = access(addr, span, &acc, 1);
    if (rc != CUDA_SUCCESS)
      unmap(addr, span);
  }
  if (rc != CUDA_SUCCESS) {
    release(h);
    return rc;
  }
  *out = h;
  return CUDA_SUCCESS;
}

static void publish_nout(void)
{
  atomic_store_explicit(&gmt__swap_nout, (int)g_tab.nout, memory_order_relaxed);
}

/* ---- allocation and free ---- */

/* A new allocation into the table, on the GPU: 0, or -EEXIST / -ENOMEM. */
static int table_add(const gmt_swap_entry_t *e)
{
  pthread_mutex_lock(&g_tab_mu);
  int added = gmt__swaptab_add(&g_tab, e);
  if (added == 0) {
    if (g_device < 0)
      g_device = e->device;
    g_last_in_ms = gmt_now_ms();
  }
  pthread_mutex_unlock(&g_tab_mu);
  return added;
}

/* mode=um: managed memory (swapum.h), granted as a swap allocation is;
 * bounded too by the card's free memory less every process's managed
 * bytes off the card (they come back): this process's here, the others'
 * by the scheduler. */
static CUresult alloc_managed(CUdeviceptr *dptr, size_t bytes, int dev, uint64_t max_addr,
                              gmt_swap_gate_fn gate, CUcontext ctx)
{
  uint64_t span = gmt__um_span(bytes), card = 0, own_off = 0, avail = 0;
  CUresult rc = um_room(dev, &avail, &card, &own_off);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (span > avail) {
    fprintf(stderr,
            "gmt[%d]: %llu bytes of managed memory refused on device %d: the card has %llu free "
            "and %llu of this process's managed memory off it comes back first; managed memory "
            "past the card's free memory can hang the GPU\n",
            (int)getpid(), (unsigned long long)span, dev, (unsigned long long)card,
            (unsigned long long)own_off);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  uint64_t got;
  atomic_fetch_add(&gmt__swap_waiting, 1);
  int c = claim(dev, span, 0, avail, gmt_now_ms() + g_wait_ms, gate, &got);
  atomic_fetch_sub(&gmt__swap_waiting, 1);
  if (c < 0) {
    fprintf(stderr, "gmt[%d]: the scheduler did not grant %llu more bytes on device %d%s\n",
            (int)getpid(), (unsigned long long)span, dev,
            c == -EFBIG ? ": with other processes' managed memory off the card, it would pass the "
                          "card's free memory"
                        : "");
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUdeviceptr p = 0;
  rc = gmt__um_alloc(&p, bytes);
  if (rc == CUDA_SUCCESS && p + bytes - 1 > max_addr) {
    gmt__um_free(p);
    rc = CUDA_ERROR_NOT_SUPPORTED;
  }
  if (rc == CUDA_SUCCESS) {
    gmt_swap_entry_t e = {
        .addr = p, .size = bytes, .span = span, .ctx = ctx, .device = dev, .managed = 1};
    if (table_add(&e) < 0) {
      gmt__um_free(p);
      rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  if (rc != CUDA_SUCCESS) {
    unclaim(dev, span);
    return rc;
  }
  *dptr = p;
  return CUDA_SUCCESS;
}

CUresult gmt__swap_alloc(CUdeviceptr *dptr, size_t bytes, int dev, uint64_t max_addr,
                         gmt_swap_gate_fn gate)
{
  if (managed_mode()) {
    if (!dptr || !bytes)
      return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx = gmt__current_ctx();
    return ctx ? alloc_managed(dptr, bytes, dev, max_addr, gate, ctx) : CUDA_ERROR_INVALID_CONTEXT;
  }
  __typeof__(&cuMemGetAllocationGranularity) gran_fn = GMT_REAL(cuMemGetAllocationGranularity);
  __typeof__(&cuMemAddressReserve) reserve = GMT_REAL(cuMemAddressReserve);
  __typeof__(&cuMemAddressFree) addr_free = GMT_REAL(cuMemAddressFree);
  __typeof__(&cuMemUnmap) unmap = GMT_REAL(cuMemUnmap);
  __typeof__(&cuMemRelease) release = GMT_REAL(cuMemRelease);
  if (!gran_fn || !reserve || !addr_free || !unmap || !release)
    return CUDA_ERROR_NOT_FOUND;
  if (!dptr || !bytes)
    return CUDA_ERROR_INVALID_VALUE;
  CUcontext ctx = gmt__current_ctx();
  if (!ctx)
    return CUDA_ERROR_INVALID_CONTEXT;
  CUmemAllocationProp prop = dev_prop(dev);
  size_t gran = 0;
  CUresult rc = gran_fn(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!gran)
    return CUDA_ERROR_INVALID_VALUE;
  uint64_t span = ((uint64_t)bytes + gran - 1) / gran * gran;
  CUdeviceptr base = 0;
  rc = reserve(&base, span, 0, 0, 0);
  if (rc != CUDA_SUCCESS)
    return rc;
  if (base + span - 1 > max_addr) {
    addr_free(base, span);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  uint64_t got;
  atomic_fetch_add(&gmt__swap_waiting, 1);
  int c = claim(dev, span, 0, 0, gmt_now_ms() + g_wait_ms, gate, &got);
  atomic_fetch_sub(&gmt__swap_waiting, 1);
  if (c < 0) {
    addr_free(base, span);
    fprintf(stderr, "gmt[%d]: the scheduler did not grant %llu more bytes on device %d\n",
            (int)getpid(), (unsigned long long)span, dev);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUmemGenericAllocationHandle h = 0;
  rc = back(base, span, dev, &h);
  gmt_swap_entry_t e = {
      .addr = base, .size = bytes, .span = span, .handle = h, .ctx = ctx, .device = dev};
  if (rc == CUDA_SUCCESS) {
    if (table_add(&e) < 0) {
      unmap(base, span);
      release(h);
      rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  if (rc != CUDA_SUCCESS) {
    addr_free(base, span);
    unclaim(dev, span);
    return rc;
  }
  *dptr = base;
  return CUDA_SUCCESS;
}

/* A freed allocation's host copy goes (counted for the exit line). */
static void release_host(void *p, int kind, uint64_t size)
{
  if (!p)
    return;
  uint64_t t0 = gmt_now_ns();
  gmt__swaphost_free(p, kind, size);
  atomic_fetch_add(&g_rel_host_ns, gmt_now_ns() - t0);
  atomic_fetch_add(&g_rel_host_n, 1);
}

/* A freed allocation's bytes come off dev's claim (timed for the exit
 * line). */
static void release_unclaim(int dev, uint64_t bytes)
{
  if (!bytes)
    return;
  uint64_t t0 = gmt_now_ns();
  unclaim(dev, bytes);
  atomic_fetch_add(&g_rel_res_ns, gmt_now_ns() - t0);
  atomic_fetch_add(&g_rel_res_n, 1);
}

void gmt__swap_note_release(uint64_t ns)
{
  atomic_fetch_add(&g_rel_drv_ns, ns);
}

CUresult gmt__swap_free(CUdeviceptr p, int *owned)
{
  *owned = 0;
  if (!atomic_load_explicit(&gmt__swap_on, memory_order_relaxed) || !p)
    return CUDA_SUCCESS;
  __typeof__(&cuMemAddressFree) addr_free = GMT_REAL(cuMemAddressFree);
  __typeof__(&cuMemUnmap) unmap = GMT_REAL(cuMemUnmap);
  __typeof__(&cuMemRelease) release = GMT_REAL(cuMemRelease);
  __typeof__(&cuCtxSynchronize) sync = GMT_REAL(cuCtxSynchronize);
  /* Shared: a free of one allocation may run beside the program's other
   * calls, but not beside a move. */
  pthread_rwlock_rdlock(&gmt__swap_rw);
  gmt_swap_entry_t e;
  pthread_mutex_lock(&g_tab_mu);
  int found = gmt__swaptab_remove(&g_tab, (uint64_t)p, &e) == 0;
  publish_nout();
  pthread_mutex_unlock(&g_tab_mu);
  if (!found) {
    pthread_rwlock_unlock(&gmt__swap_rw);
    return CUDA_SUCCESS;
  }
  *owned = 1;
  CUresult rc = CUDA_SUCCESS;
  if (!addr_free || !unmap || !release || !sync) {
    rc = CUDA_ERROR_NOT_FOUND;
    goto undo;
  }
  int entered = gmt__ctx_enter(e.ctx);
  if (e.managed) {
    rc = gmt__um_free(p);
    gmt__ctx_leave(entered);
    if (rc != CUDA_SUCCESS)
      goto undo;
    pthread_rwlock_unlock(&gmt__swap_rw);
    if (!e.out)
      release_unclaim(e.device, e.span);
    return rc;
  }
  if (!e.out) {
    /* cuMemFree waits for work that may still use the memory; unmapping
     * does not, so wait here. */
    rc = sync();
    if (rc == CUDA_SUCCESS)
      rc = unmap(p, e.span);
    if (rc != CUDA_SUCCESS) {
      gmt__ctx_leave(entered);
      goto undo;
    }
    uint64_t t0 = gmt_now_ns();
    rc = release(e.handle);
    gmt__swap_note_release(gmt_now_ns() - t0);
    if (rc != CUDA_SUCCESS)
      GMT_HOOK_DEBUG("cuMemRelease of a freed swap allocation failed (%d)", (int)rc);
    release_host(e.kept, e.host_kind, e.size);
  } else {
    release_host(e.host, e.host_kind, e.size);
  }
  CUresult rc2 = addr_free(p, e.span);
  if (rc2 != CUDA_SUCCESS)
    GMT_HOOK_DEBUG("cuMemAddressFree of a freed swap allocation failed (%d)", (int)rc2);
  gmt__ctx_leave(entered);
  pthread_rwlock_unlock(&gmt__swap_rw);
  if (!e.out)
    release_unclaim(e.device, e.span);
  return rc == CUDA_SUCCESS ? rc2 : rc;
undo:
  /* Nothing was let go: the allocation stays as it was. */
  pthread_mutex_lock(&g_tab_mu);
  if (gmt__swaptab_add(&g_tab, &e) == 0 && e.out) {
    gmt_swap_entry_t *back_e = gmt__swaptab_find(&g_tab, e.addr);
    gmt__swaptab_mark_out(&g_tab, back_e, e.host, e.host_kind);
    g_tab.outs--; /* not a new move */
  }
  publish_nout();
  pthread_mutex_unlock(&g_tab_mu);
  pthread_rwlock_unlock(&gmt__swap_rw);
  return rc;
}

/* ---- the program's own physical memory (swapvmm.c) ---- */

void gmt__swap_prog_register(const gmt_swap_prog_ops_t *ops)
{
  g_prog = ops;
}

uint64_t gmt__swap_claimed(int dev)
{
  return atomic_load_explicit(&g_claimed[clamp_dev(dev)], memory_order_relaxed);
}

int gmt__swap_prog_claim(int dev, uint64_t bytes, gmt_swap_gate_fn gate)
{
  uint64_t got;
  atomic_fetch_add(&gmt__swap_waiting, 1);
  int c = claim(dev, bytes, 0, 0, gmt_now_ms() + g_wait_ms, gate, &got);
  atomic_fetch_sub(&gmt__swap_waiting, 1);
  return c;
}

void gmt__swap_prog_unclaim(int dev, uint64_t bytes)
{
  release_unclaim(dev, bytes);
}

int gmt__swap_prog_track(const gmt_swap_entry_t *e)
{
  return table_add(e);
}

uint64_t gmt__swap_prog_untrack(uint64_t key, int *device)
{
  gmt_swap_entry_t e;
  pthread_mutex_lock(&g_tab_mu);
  int found = gmt__swaptab_remove(&g_tab, key, &e) == 0;
  publish_nout();
  pthread_mutex_unlock(&g_tab_mu);
  *device = found ? e.device : 0;
  if (!found)
    return 0;
  int entered = gmt__ctx_enter(e.ctx);
  GMT_FRAME_IN();
  release_host(e.out ? e.host : e.kept, e.host_kind, e.size);
  GMT_FRAME_OUT();
  gmt__ctx_leave(entered);
  return e.out ? 0 : e.span;
}

void gmt__swap_prog_stays(uint64_t key)
{
  pthread_mutex_lock(&g_tab_mu);
  gmt_swap_entry_t *e = gmt__swaptab_find(&g_tab, key);
  if (e)
    e->stays = 1;
  pthread_mutex_unlock(&g_tab_mu);
}

/* ---- prepared host copies ---- */

/* A move out needs a pinned host copy, and pinning fresh pages costs about
 * nine times the copy (158 against 18 ms/GiB on the H200). While the
 * scheduler says this process's card is contested (ReportReply.prepare:
 * docs/tiers.md, "Prepared host copies"), a thread of its own pins copies
 * for the allocations on the GPU ahead of their first move out, in the
 * order they would move, as kept copies: the move out then only copies.
 * g_prep_mu (in SWAP, between g_res_mu and g_tab_mu) guards what follows
 * and calls nothing while held; the pin itself runs without it, the
 * allocation being pinned for named by g_prep_addr.
 *
 * A pin of 128 MiB of fresh pages held the driver 30-45 ms (H200), and the
 * program's launches and allocations waited behind it: two AdamW jobs
 * pinning ahead while they ran lost 1.5-2 s each in their first step. The
 * pages are now faulted in first, on this thread without the driver, and
 * registering them holds the driver about 4 ms per 128 MiB
 * (gmt__swaphost_pinned). Still, while the process holds a token the
 * driver is held at most a tenth of the time (after a registration of d
 * ms, none for GMT_SWAP_PREPARE_RUNNING_GAP x d), and freely while it
 * holds none (it waits for the token, or has no GPU work: pins cost it
 * nothing). The gap is kept at the registration, which may come after a
 * grant that came while the pages were faulted in (a loaded machine saw a
 * registration 7 ms after another while running). Not at all while
 * running left a job that ran alone for long with nothing prepared when
 * another pod woke: its first moves out pinned as they went and an idle
 * pod's wake took 0.66-1.08 s instead of 0.35. */
#define GMT_SWAP_PREPARE_HOLD_MS 1000  /* a signal stands this long (they come every 20 ms) */
#define GMT_SWAP_PREPARE_RUNNING_GAP 9 /* while running: idle 9x each pin's time after it */
#define GMT_SWAP_PREPARE_RUNNING_MS 20 /* while running and waiting out the gap: look again */
#define GMT_SWAP_PREPARE_WAIT_MS 10000 /* a move out waits at most this for the pin under way */

static pthread_mutex_t g_prep_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_prep_cv = PTHREAD_COND_INITIALIZER;
static int g_prep_started;       /* the thread runs */
static uint64_t g_prep_until_ms; /* the last signal + GMT_SWAP_PREPARE_HOLD_MS */
static int g_prep_bounded;       /* the host space is bounded: at most g_prep_room more */
static uint64_t g_prep_room;
static uint64_t g_prep_addr; /* the allocation being pinned for (0: none), in g_prep_ctx */
static void *g_prep_ctx;
static double g_prep_next_ms; /* while running, a registration may start from then */
static int g_prep_hurry;      /* threads waiting for the pin under way: no gap kept */
/* The allocation a move out is taking out (0: none): from taking its copy
 * until it is out it looks unprepared, and must get none. */
static uint64_t g_prep_moving;
/* Moves out under way: the preparer starts no pin. It pins the next
 * allocation the move will take, so a move that caught up with it went at
 * its pace, one pin at a time (about 4.6 ms per 20 MiB, H200), while
 * fault-ahead threads had faulted that copy in already. */
static int g_prep_evicting;

/* Whether a signal stands (g_prep_mu held). */
static int prep_due(uint64_t now)
{
  return now < g_prep_until_ms;
}

/* The ms left of the gap after the last registration while the process
 * holds a token; 0 when none is to be kept (g_prep_mu held). */
static double prep_gap_ms(void)
{
  if (atomic_load_explicit(&gmt__token_held, memory_order_relaxed) <= 0)
    return 0;
  double left = g_prep_next_ms - gmt_now_ms_f();
  return left > 0 ? left : 0;
}

/* The gap kept, unless a thread waits for the pin under way (a move out
 * of it, or its context going): called by gmt__swaphost_pinned as its
 * registration is about to hold the driver. */
static void prep_pace(void)
{
  pthread_mutex_lock(&g_prep_mu);
  double left;
  while (!g_prep_hurry && (left = prep_gap_ms()) > 0)
    gmt__cond_wait_ms(&g_prep_cv, &g_prep_mu,
                      left < GMT_SWAP_PREPARE_RUNNING_MS ? (uint64_t)left + 1
                                                         : GMT_SWAP_PREPARE_RUNNING_MS);
  pthread_mutex_unlock(&g_prep_mu);
}

/* One allocation's copy (g_prep_mu held on entry and on return, not
 * during the pin): 1 when it pinned one for e, 0 when it could not;
 * *driver_ms how long its registration held the driver. */
static int prepare_one(const gmt_swap_entry_t *e, double *driver_ms)
{
  g_prep_addr = e->addr;
  g_prep_ctx = e->ctx;
  pthread_mutex_unlock(&g_prep_mu);
  double t0 = gmt_now_ms_f();
  void *host = NULL;
  int given = -1;
  /* A copy pinned ahead must not press on the rest of the node. */
  uint64_t room = gmt__swaphost_room();
  if (e->size > room) {
    GMT_HOOK_DEBUG("no host copy prepared for 0x%llx: %llu bytes, the node has room for %llu",
                   (unsigned long long)e->addr, (unsigned long long)e->size,
                   (unsigned long long)room);
  } else {
    GMT_FRAME_IN();
    int entered = gmt__ctx_enter(e->ctx);
    /* One thread faults the pages in: nothing waits for this copy. */
    host = entered < 0 ? NULL : gmt__swaphost_pinned(e->size, e->device, 1, prep_pace, driver_ms);
    if (host) {
      pthread_mutex_lock(&g_prep_mu);
      pthread_mutex_lock(&g_tab_mu);
      gmt_swap_entry_t *t = gmt__swaptab_find(&g_tab, e->addr);
      given =
          t && g_prep_moving != e->addr
              ? gmt__swaptab_give_kept(&g_tab, t, host, e->size, GMT_SWAP_HOST_PINNED, gmt_now_ms())
              : -ENOENT;
      pthread_mutex_unlock(&g_tab_mu);
      pthread_mutex_unlock(&g_prep_mu);
      if (given < 0) /* freed, moving or moved out, or given a copy meanwhile */
        gmt__swaphost_free(host, GMT_SWAP_HOST_PINNED, e->size);
    }
    gmt__ctx_leave(entered);
    GMT_FRAME_OUT();
    if (given == 0)
      GMT_HOOK_DEBUG("prepared a host copy of %llu bytes for 0x%llx in %.3f ms (%.3f ms in the "
                     "driver)",
                     (unsigned long long)e->size, (unsigned long long)e->addr, gmt_now_ms_f() - t0,
                     *driver_ms);
    else if (host)
      GMT_HOOK_DEBUG("a host copy prepared for 0x%llx went unused: it was freed, moved out or "
                     "given one meanwhile",
                     (unsigned long long)e->addr);
    else
      GMT_HOOK_DEBUG("cannot prepare a host copy of %llu bytes for 0x%llx",
                     (unsigned long long)e->size, (unsigned long long)e->addr);
  }
  pthread_mutex_lock(&g_prep_mu);
  g_prep_addr = 0;
  g_prep_ctx = NULL;
  pthread_cond_broadcast(&g_prep_cv);
  return host != NULL;
}

static void *prep_main(void *arg)
{
  (void)arg;
  pthread_mutex_lock(&g_prep_mu);
  for (;;) {
    if (!prep_due(gmt_now_ms())) {
      gmt__cond_wait_ms(&g_prep_cv, &g_prep_mu, GMT_SWAP_PREPARE_HOLD_MS);
      continue;
    }
    if (g_prep_evicting || prep_gap_ms() > 0) {
      gmt__cond_wait_ms(&g_prep_cv, &g_prep_mu, GMT_SWAP_PREPARE_RUNNING_MS);
      continue;
    }
    gmt_swap_entry_t e;
    pthread_mutex_lock(&g_tab_mu);
    int have = gmt__swaptab_unprepared(&g_tab, &e) && e.addr != g_prep_moving;
    pthread_mutex_unlock(&g_tab_mu);
    /* Nothing to do, no room, or no pin made: look again later. */
    double driver_ms = 0;
    if (!have || (g_prep_bounded && e.size > g_prep_room) || !prepare_one(&e, &driver_ms)) {
      gmt__cond_wait_ms(&g_prep_cv, &g_prep_mu, 100);
      continue;
    }
    g_prep_next_ms = gmt_now_ms_f() + GMT_SWAP_PREPARE_RUNNING_GAP * driver_ms;
    if (g_prep_bounded)
      g_prep_room -= e.size;
  }
  return NULL;
}

void gmt__swap_prepare(int bounded, uint64_t host_room)
{
  if (g_prep_off || atomic_load_explicit(&gmt__swap_on, memory_order_relaxed) != GMT_SWAP_COPIES)
    return;
  pthread_mutex_lock(&g_prep_mu);
  g_prep_until_ms = gmt_now_ms() + GMT_SWAP_PREPARE_HOLD_MS;
  /* The scheduler's room counts the copies this process reported: one
   * pinned since its last report may be counted twice or not yet. */
  g_prep_bounded = bounded;
  g_prep_room = host_room;
  if (!g_prep_started && gmt__thread_start("gmt-swap", prep_main) == 0)
    g_prep_started = 1;
  pthread_cond_broadcast(&g_prep_cv);
  pthread_mutex_unlock(&g_prep_mu);
}

/* A move out of the allocation at addr takes its kept or prepared copy
 * (NULL: none; *kind what it is), after waiting for one being pinned for
 * it rather than pin a second. Until prepared_moved() the preparer gives
 * it none. */
static void *prepared_take(uint64_t addr, int *kind)
{
  uint64_t until = gmt_now_ms() + GMT_SWAP_PREPARE_WAIT_MS;
  pthread_mutex_lock(&g_prep_mu);
  int hurry = g_prep_addr == addr;
  g_prep_hurry += hurry;
  pthread_cond_broadcast(&g_prep_cv);
  while (g_prep_addr == addr && gmt_now_ms() < until)
    gmt__cond_wait_ms(&g_prep_cv, &g_prep_mu, 100);
  g_prep_hurry -= hurry;
  g_prep_moving = addr;
  pthread_mutex_lock(&g_tab_mu);
  gmt_swap_entry_t *k = gmt__swaptab_find(&g_tab, addr);
  void *host = k ? gmt__swaptab_take_kept(&g_tab, k) : NULL;
  *kind = k ? k->host_kind : GMT_SWAP_HOST_MALLOC;
  pthread_mutex_unlock(&g_tab_mu);
  pthread_mutex_unlock(&g_prep_mu);
  return host;
}

/* A move out begins (by 1) or ends (by -1): the preparer waits meanwhile. */
static void prep_hold(int by)
{
  pthread_mutex_lock(&g_prep_mu);
  g_prep_evicting += by;
  pthread_cond_broadcast(&g_prep_cv);
  pthread_mutex_unlock(&g_prep_mu);
}

static void prepared_moved(void)
{
  pthread_mutex_lock(&g_prep_mu);
  g_prep_moving = 0;
  pthread_mutex_unlock(&g_prep_mu);
}

/* A context going waits for a pin made in it (g_prep_mu held on return,
 * so that no new one starts in it until the caller lets go). */
static void prepared_ctx_lock(void *ctx)
{
  pthread_mutex_lock(&g_prep_mu);
  int hurry = g_prep_addr && g_prep_ctx == ctx;
  g_prep_hurry += hurry;
  pthread_cond_broadcast(&g_prep_cv);
  while (g_prep_addr && g_prep_ctx == ctx)
    pthread_cond_wait(&g_prep_cv, &g_prep_mu);
  g_prep_hurry -= hurry;
}

/* ---- moving out ---- */

/* A new copy made in a move's step is faulted in by this many threads;
 * those faulted ahead (GMT_SWAP_FAULT_AHEAD) at most this far ahead. */
#define GMT_SWAP_MOVE_FAULT_THREADS 4
#define GMT_SWAP_FAULT_AHEAD_BYTES (1ull << 30)

/* A host copy for e, within what w allows (taken off w): new host memory
 * (pinned if the driver will, else malloc), else a spill file. NULL when
 * neither may or can be had (said once, with why). */
static void *new_copy(const gmt_swap_entry_t *e, gmt_swap_where_t *w, int *kind)
{
  void *host = NULL;
  if (!w->bounded || e->size <= w->host_room) {
    /* A move waits for this copy: its pages are faulted in by several
     * threads (a fresh copy is the first move out's cost). */
    host = gmt__swaphost_pinned(e->size, e->device, GMT_SWAP_MOVE_FAULT_THREADS, NULL, NULL);
    *kind = host ? GMT_SWAP_HOST_PINNED : GMT_SWAP_HOST_MALLOC;
    if (*kind == GMT_SWAP_HOST_MALLOC)
      host = malloc(e->size);
    if (!host)
      SAY_ONCE("cannot move %llu bytes at 0x%llx off the GPU: no host memory",
               (unsigned long long)e->size, (unsigned long long)e->addr);
    else if (w->bounded)
      w->host_room -= e->size;
    return host;
  }
  if (!w->dir[0] || e->size > w->disk_room) {
    SAY_ONCE("cannot move %llu bytes at 0x%llx off the GPU: the host space has room for %llu "
             "more and %s %llu; it stays on the GPU",
             (unsigned long long)e->size, (unsigned long long)e->addr,
             (unsigned long long)w->host_room,
             w->dir[0] ? "the disk tier for" : "there is no disk tier (gmt-schd --disk-tier), room",
             (unsigned long long)(w->dir[0] ? w->disk_room : 0));
    return NULL;
  }
  int err = 0;
  host = gmt__swaphost_spill(w->dir, e->size, &err);
  if (!host) {
    SAY_ONCE("cannot move %llu bytes at 0x%llx off the GPU into a spill file in %s: %s; it "
             "stays on the GPU",
             (unsigned long long)e->size, (unsigned long long)e->addr, w->dir, strerror(err));
    return NULL;
  }
  *kind = GMT_SWAP_HOST_FILE;
  w->disk_room -= e->size;
  return host;
}

/* mode=um: prefetched to the host, within the host space's room (managed
 * memory has no spill file). */
static int move_out_managed(const gmt_swap_entry_t *e, gmt_swap_where_t *w)
{
  if (w->bounded && e->size > w->host_room) {
    SAY_ONCE("cannot move %llu bytes of managed memory at 0x%llx off the GPU: the host space has "
             "room for %llu more (managed memory does not go to a disk tier); it stays on the GPU",
             (unsigned long long)e->size, (unsigned long long)e->addr,
             (unsigned long long)w->host_room);
    return -1;
  }
  CUresult rc = gmt__um_move(e->addr, e->size, -1);
  if (rc != CUDA_SUCCESS) {
    SAY_ONCE("cannot prefetch %llu bytes of managed memory at 0x%llx to the host (%d); counted as "
             "on the GPU",
             (unsigned long long)e->size, (unsigned long long)e->addr, (int)rc);
    return -1;
  }
  if (w->bounded)
    w->host_room -= e->size;
  pthread_mutex_lock(&g_tab_mu);
  gmt_swap_entry_t *t = gmt__swaptab_find(&g_tab, e->addr);
  if (t)
    gmt__swaptab_mark_out(&g_tab, t, NULL, GMT_SWAP_HOST_MALLOC);
  pthread_mutex_unlock(&g_tab_mu);
  return 0;
}

/* One allocation off the GPU into host (of kind pinned; NULL: a new copy,
 * counted in *fresh). 0, or -1 when it stays where it was (host freed). */
static int move_out_into(gmt_swap_entry_t *e, void *host, int pinned, gmt_swap_where_t *w,
                         size_t *fresh, gmt_swap_out_times_t *t)
{
  __typeof__(&cuMemcpyDtoH_v2) dtoh = GMT_REAL(cuMemcpyDtoH_v2);
  __typeof__(&cuMemUnmap) unmap = GMT_REAL(cuMemUnmap);
  __typeof__(&cuMemRelease) release = GMT_REAL(cuMemRelease);
  __typeof__(&cuMemMap) map = GMT_REAL(cuMemMap);
  __typeof__(&cuMemSetAccess) access = GMT_REAL(cuMemSetAccess);
  if (!dtoh || !unmap || !release || !map || !access) {
    gmt__swaphost_free(host, pinned, e->size);
    return -1;
  }
  if (!host) {
    if (!(host = new_copy(e, w, &pinned)))
      return -1;
    (*fresh)++;
  }
  if (e->prog) {
    CUresult pr = g_prog ? g_prog->out(e, host, t) : CUDA_ERROR_NOT_FOUND;
    if (pr != CUDA_SUCCESS) {
      SAY_ONCE("cannot move the program's %llu bytes of physical memory off the GPU (%d); they "
               "stay",
               (unsigned long long)e->size, (int)pr);
      gmt__swaphost_free(host, pinned, e->size);
      return -1;
    }
    goto moved;
  }
  uint64_t t0 = gmt_now_ns();
  CUresult rc = dtoh(host, e->addr, e->size);
  uint64_t t1 = gmt_now_ns();
  t->copy_ns += t1 - t0;
  if (rc == CUDA_SUCCESS)
    rc = unmap(e->addr, e->span);
  if (rc != CUDA_SUCCESS) {
    SAY_ONCE("cannot move %llu bytes at 0x%llx off the GPU: copy or unmap failed (%d)",
             (unsigned long long)e->size, (unsigned long long)e->addr, (int)rc);
    gmt__swaphost_free(host, pinned, e->size);
    return -1;
  }
  rc = release(e->handle);
  t->map_ns += gmt_now_ns() - t1;
  if (rc != CUDA_SUCCESS) {
    /* Map it back: the allocation stays on the GPU. */
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = e->device;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CUresult rb = map(e->addr, e->span, 0, e->handle, 0);
    if (rb == CUDA_SUCCESS)
      rb = access(e->addr, e->span, &acc, 1);
    SAY_ONCE("cannot release %llu bytes at 0x%llx (%d); mapped back (%d)",
             (unsigned long long)e->span, (unsigned long long)e->addr, (int)rc, (int)rb);
    gmt__swaphost_free(host, pinned, e->size);
    return -1;
  }
moved:
  pthread_mutex_lock(&g_tab_mu);
  gmt_swap_entry_t *te = gmt__swaptab_find(&g_tab, e->addr);
  if (te)
    gmt__swaptab_mark_out(&g_tab, te, host, pinned);
  pthread_mutex_unlock(&g_tab_mu);
  return 0;
}

/* This move out's numbers, for its debug lines (the exclusive lock
 * held): its copies faulted in ahead, and its steps by whether the copy
 * was ready (kept or prepared: 0) or new (1), each step's time and the
 * parts of it in the Resident lowering and in the driver. */
static struct {
  size_t took;      /* copies taken from the threads */
  uint64_t wait_ns; /* waiting for them */
  double driver_ms; /* registering them */
  size_t steps[2];
  uint64_t step_ns[2], resident_ns[2];
  gmt_swap_out_times_t in_driver[2];
} g_out;

/* Copy i's pages faulted in ahead (faultahead.h), registered, within
 * what w allows (taken off w, counted in *fresh): NULL when there are
 * none, or they cannot be pinned or held (new_copy then decides). */
static void *ahead_copy(gmt_fault_ahead_t *ahead, size_t i, const gmt_swap_entry_t *e,
                        gmt_swap_where_t *w, size_t *fresh)
{
  uint64_t t0 = gmt_now_ns();
  void *p = gmt__fault_ahead_take(ahead, i);
  g_out.wait_ns += gmt_now_ns() - t0;
  if (!p)
    return NULL;
  if (w->bounded && e->size > w->host_room) {
    munmap(p, e->size);
    return NULL;
  }
  double ms = 0;
  p = gmt__swaphost_register(p, e->size, &ms);
  g_out.driver_ms += ms;
  if (!p)
    return NULL;
  g_out.took++;
  if (w->bounded)
    w->host_room -= e->size;
  (*fresh)++;
  return p;
}

/* One allocation off the GPU (exclusive lock held, its context current,
 * its work synchronized), into its kept or prepared copy, else copy i of
 * ahead (may be NULL), else a new one (counted in *fresh); its time in
 * the driver added to *t. 0, or -1 when it stays where it was. */
static int move_out(gmt_swap_entry_t *e, gmt_swap_where_t *w, size_t *fresh,
                    gmt_fault_ahead_t *ahead, size_t i, gmt_swap_out_times_t *t)
{
  if (e->managed)
    return move_out_managed(e, w);
  int pinned;
  void *host = prepared_take(e->addr, &pinned);
  if (!host && (host = ahead_copy(ahead, i, e, w, fresh)))
    pinned = GMT_SWAP_HOST_PINNED;
  int rc = move_out_into(e, host, pinned, w, fresh, t);
  prepared_moved();
  return rc;
}

/* Where the tracer is told a move of e happened: its address, or for the
 * program's own physical memory where the program mapped it (0: nowhere,
 * not told). */
static uint64_t trace_addr(const gmt_swap_entry_t *e)
{
  if (!e->prog)
    return e->addr;
  return g_prog ? g_prog->addr(e->addr) : 0;
}

/* Synchronizes each distinct context among n entries; 0, or -1 when one
 * could not be (its work may still use the memory: nothing moves). */
static int sync_contexts(const gmt_swap_entry_t *es, size_t n)
{
  __typeof__(&cuCtxSynchronize) sync = GMT_REAL(cuCtxSynchronize);
  if (!sync)
    return -1;
  for (size_t i = 0; i < n; i++) {
    int seen = 0;
    for (size_t j = 0; j < i && !seen; j++)
      seen = es[j].ctx == es[i].ctx;
    if (seen)
      continue;
    int entered = gmt__ctx_enter(es[i].ctx);
    CUresult rc = entered < 0 ? CUDA_ERROR_INVALID_CONTEXT : sync();
    gmt__ctx_leave(entered);
    if (rc != CUDA_SUCCESS) {
      SAY_ONCE("cannot synchronize before moving memory off the GPU (%d); nothing moved", (int)rc);
      return -1;
    }
  }
  return 0;
}

static void place_ahead(void *p, uint64_t size, size_t i, void *arg)
{
  gmt__swaphost_place(p, size, ((const gmt_swap_entry_t *)arg)[i].device);
}

/* The new pinned copies a move out of es[0..n) will want, faulted in
 * ahead of it by several threads (faultahead.h): those with no kept copy
 * yet, within the host space's room. NULL when none; *sizes (the caller
 * frees it) must outlive it. */
static gmt_fault_ahead_t *fault_ahead(const gmt_swap_entry_t *es, size_t n,
                                      const gmt_swap_where_t *w, uint64_t **sizes)
{
  uint64_t room = w->host_room;
  size_t wanted = 0;
  *sizes = calloc(n, sizeof **sizes);
  for (size_t i = 0; *sizes && i < n; i++) {
    if (es[i].managed || es[i].kept || (w->bounded && es[i].size > room))
      continue;
    (*sizes)[i] = es[i].size;
    room -= w->bounded ? es[i].size : 0;
    wanted++;
  }
  if (wanted < 2 || !g_fault_threads) /* one is made as fast where it is wanted */
    return NULL;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = cpus >= 2 * g_fault_threads ? g_fault_threads : 1;
  return gmt__fault_ahead_start(*sizes, n, threads, GMT_SWAP_FAULT_AHEAD_BYTES, place_ahead,
                                (void *)es);
}

void gmt__swap_evict(uint64_t keep, const gmt_swap_where_t *where, int granted)
{
  if (!atomic_load_explicit(&gmt__swap_on, memory_order_relaxed))
    return;
  gmt_swap_where_t w = where ? *where : (gmt_swap_where_t){0};
  prep_hold(1);
  /* Busy while it moves: a launch waits behind it on the lock, and the
   * token, granted as the move began, is not idle (an AdamW job at 2.0x an
   * H200 gave a 7.3 s turn back as idle 0.17 s in, moving out). */
  atomic_fetch_add(&gmt__swap_waiting, 1);
  pthread_rwlock_wrlock(&gmt__swap_rw);
  /* Held until the claims are lowered: a restore asking meanwhile sees
   * the table and the claims agree (see out_on). */
  pthread_mutex_lock(&g_res_mu);
  pthread_mutex_lock(&g_tab_mu);
  size_t cap = g_tab.n;
  uint64_t *addrs = cap ? malloc(cap * sizeof(*addrs)) : NULL;
  gmt_swap_entry_t *es = cap ? malloc(cap * sizeof(*es)) : NULL;
  size_t n = addrs && es ? gmt__swaptab_pick_out(&g_tab, keep, addrs, cap) : 0;
  for (size_t i = 0; i < n; i++)
    es[i] = *gmt__swaptab_find(&g_tab, addrs[i]);
  pthread_mutex_unlock(&g_tab_mu);
  uint64_t moved_bytes = 0;
  size_t nmoved = 0, fresh = 0, left = 0;
  double t0 = gmt_now_ms_f();
  GMT_FRAME_IN(); /* a driver calling its own entry points passes the gates */
  gmt_fault_ahead_t *ahead = NULL;
  uint64_t *sizes = NULL;
  memset(&g_out, 0, sizeof g_out);
  if (n && sync_contexts(es, n) == 0) {
    ahead = fault_ahead(es, n, &w, &sizes);
    for (size_t i = 0; i < n; i++) {
      /* Granted as it moves: the rest would come back at once. A job
       * granted its turn as a 9.2 GB move out began moved it all out in
       * 0.89 s, then back in 0.30 s (H200). */
      if (granted && atomic_load_explicit(&gmt__token_held, memory_order_relaxed) > 0) {
        left = n - i;
        break;
      }
      int entered = gmt__ctx_enter(es[i].ctx);
      uint64_t m0 = gmt_now_ns();
      size_t made = fresh;
      gmt_swap_out_times_t t = {0, 0};
      int rc = entered >= 0 ? move_out(&es[i], &w, &fresh, ahead, i, &t) : -1;
      int k = fresh > made; /* the step made a new copy */
      g_out.in_driver[k].copy_ns += t.copy_ns;
      g_out.in_driver[k].map_ns += t.map_ns;
      if (rc == 0) {
        uint64_t took = gmt_now_ns() - m0;
        uint64_t at = trace_addr(&es[i]);
        if (at)
          gmt_trace_moved(at, es[i].size, 1, took);
        atomic_fetch_add(&g_out_bytes, es[i].size);
        atomic_fetch_add(&g_move_ns, took);
        /* Its room is the scheduler's at once: a process waiting for it
         * brings its own memory back while the rest moves out. */
        uint64_t r0 = gmt_now_ns();
        unclaim_locked(es[i].device, es[i].span);
        uint64_t m1 = gmt_now_ns();
        g_out.steps[k]++;
        g_out.step_ns[k] += m1 - m0;
        atomic_fetch_add(&g_out_ns, m1 - m0);
        g_out.resident_ns[k] += m1 - r0;
        moved_bytes += es[i].size;
        nmoved++;
      }
      gmt__ctx_leave(entered);
    }
  }
  GMT_FRAME_OUT();
  int faulted_ahead = ahead != NULL;
  size_t unused = gmt__fault_ahead_end(ahead);
  free(sizes);
  pthread_mutex_lock(&g_tab_mu);
  publish_nout();
  if (nmoved)
    g_gen++;
  pthread_mutex_unlock(&g_tab_mu);
  pthread_mutex_unlock(&g_res_mu);
  pthread_rwlock_unlock(&gmt__swap_rw);
  atomic_fetch_sub(&gmt__swap_waiting, 1);
  prep_hold(-1);
  free(addrs);
  free(es);
  if (nmoved) {
    GMT_HOOK_DEBUG("moved %zu allocations (%llu bytes) off the GPU in %.3f ms (keep %llu, %zu new "
                   "host copies)",
                   nmoved, (unsigned long long)moved_bytes, gmt_now_ms_f() - t0,
                   (unsigned long long)keep, fresh);
    GMT_HOOK_DEBUG("its steps: %zu with a copy ready %.1f ms (Resident %.1f ms), %zu with a new "
                   "copy %.1f ms (Resident %.1f ms)",
                   g_out.steps[0], (double)g_out.step_ns[0] / 1e6,
                   (double)g_out.resident_ns[0] / 1e6, g_out.steps[1],
                   (double)g_out.step_ns[1] / 1e6, (double)g_out.resident_ns[1] / 1e6);
    GMT_HOOK_DEBUG(
        "its steps in the driver: copying %.1f ms ready, %.1f ms new; mapping and "
        "releasing %.1f ms ready, %.1f ms new",
        (double)g_out.in_driver[0].copy_ns / 1e6, (double)g_out.in_driver[1].copy_ns / 1e6,
        (double)g_out.in_driver[0].map_ns / 1e6, (double)g_out.in_driver[1].map_ns / 1e6);
  }
  if (left)
    GMT_HOOK_DEBUG("granted the token while moving out: %zu allocations left on the GPU", left);
  if (faulted_ahead)
    GMT_HOOK_DEBUG("of its new host copies %zu were faulted in ahead: %.1f ms waited for, %.1f ms "
                   "registering; %zu went unused",
                   g_out.took, (double)g_out.wait_ns / 1e6, g_out.driver_ms, unused);
}

/* ---- bringing back ---- */

/* One allocation back at its address (exclusive lock held, its context
 * current); its host copy is kept for the next move out (GMT_SWAP_KEEP_MS),
 * or freed. */
static CUresult move_in(const gmt_swap_entry_t *e)
{
  if (e->managed) {
    CUresult rc = gmt__um_move(e->addr, e->size, e->device);
    if (rc != CUDA_SUCCESS)
      return rc;
    pthread_mutex_lock(&g_tab_mu);
    gmt_swap_entry_t *t = gmt__swaptab_find(&g_tab, e->addr);
    if (t)
      gmt__swaptab_mark_in(&g_tab, t, 0, 0, gmt_now_ms());
    g_last_in_ms = gmt_now_ms();
    pthread_mutex_unlock(&g_tab_mu);
    return CUDA_SUCCESS;
  }
  __typeof__(&cuMemcpyHtoD_v2) htod = GMT_REAL(cuMemcpyHtoD_v2);
  __typeof__(&cuMemUnmap) unmap = GMT_REAL(cuMemUnmap);
  __typeof__(&cuMemRelease) release = GMT_REAL(cuMemRelease);
  if (!htod || !unmap || !release)
    return CUDA_ERROR_NOT_FOUND;
  CUmemGenericAllocationHandle h = 0;
  CUresult rc;
  if (e->prog) {
    uint64_t real = 0;
    rc = g_prog ? g_prog->in(e, &real) : CUDA_ERROR_NOT_FOUND;
    if (rc != CUDA_SUCCESS)
      return rc;
    h = real;
  } else {
    rc = back(e->addr, e->span, e->device, &h);
    if (rc != CUDA_SUCCESS)
      return rc;
    rc = htod(e->addr, e->host, e->size);
    if (rc != CUDA_SUCCESS) {
      unmap(e->addr, e->span);
      release(h);
      return rc;
    }
  }
  pthread_mutex_lock(&g_tab_mu);
  gmt_swap_entry_t *t = gmt__swaptab_find(&g_tab, e->addr);
  int keep = t && g_keep_ms > 0 && e->host_kind != GMT_SWAP_HOST_FILE;
  if (t)
    gmt__swaptab_mark_in(&g_tab, t, h, keep, gmt_now_ms());
  g_last_in_ms = gmt_now_ms();
  pthread_mutex_unlock(&g_tab_mu);
  if (!keep)
    gmt__swaphost_free(e->host, e->host_kind, e->size);
  return CUDA_SUCCESS;
}

/* Brings back what is out on one device, within what Resident granted:
 * CUDA_SUCCESS (maybe with some still out: the caller goes around),
 * CUDA_ERROR_OUT_OF_MEMORY from the card, or another driver error. */
static CUresult restore_device(int dev, uint64_t granted)
{
  pthread_rwlock_wrlock(&gmt__swap_rw);
  pthread_mutex_lock(&g_tab_mu);
  size_t cap = g_tab.n;
  uint64_t *addrs = cap ? malloc(cap * sizeof(*addrs)) : NULL;
  uint64_t need = 0;
  size_t n = addrs ? gmt__swaptab_out_on(&g_tab, dev, addrs, cap, &need) : 0;
  pthread_mutex_unlock(&g_tab_mu);
  CUresult rc = addrs || !cap ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
  uint64_t used = 0, copied = 0;
  double t0 = gmt_now_ms_f();
  GMT_FRAME_IN();
  for (size_t i = 0; i < n && rc == CUDA_SUCCESS; i++) {
    pthread_mutex_lock(&g_tab_mu);
    gmt_swap_entry_t *t = gmt__swaptab_find(&g_tab, addrs[i]);
    gmt_swap_entry_t e = t ? *t : (gmt_swap_entry_t){0};
    pthread_mutex_unlock(&g_tab_mu);
    if (!t || !e.out || used + e.span > granted)
      continue;
    int entered = gmt__ctx_enter(e.ctx);
    uint64_t m0 = gmt_now_ns();
    rc = entered < 0 ? CUDA_ERROR_INVALID_CONTEXT : move_in(&e);
    uint64_t ns = gmt_now_ns() - m0;
    gmt__ctx_leave(entered);
    if (rc == CUDA_SUCCESS) {
      uint64_t at = trace_addr(&e);
      if (at)
        gmt_trace_moved(at, e.size, 0, ns);
      atomic_fetch_add(&g_in_bytes, e.size);
      atomic_fetch_add(&g_move_ns, ns);
      used += e.span;
      copied += e.size;
    }
  }
  GMT_FRAME_OUT();
  pthread_mutex_lock(&g_tab_mu);
  publish_nout();
  if (used)
    g_gen++;
  pthread_mutex_unlock(&g_tab_mu);
  pthread_rwlock_unlock(&gmt__swap_rw);
  free(addrs);
  if (used)
    GMT_HOOK_DEBUG("brought %llu bytes back to device %d in %.3f ms", (unsigned long long)copied,
                   dev, gmt_now_ms_f() - t0);
  unclaim(dev, granted - used); /* asked for but not brought back */
  return rc;
}

static CUresult enter_slow(int *held, gmt_swap_gate_fn gate, int *restored);

CUresult gmt__swap_enter_slow(int *held, gmt_swap_gate_fn gate)
{
  uint64_t t0 = gmt_now_ms();
  int restored = 0;
  atomic_fetch_add(&gmt__swap_waiting, 1);
  CUresult rc = enter_slow(held, gate, &restored);
  atomic_fetch_sub(&gmt__swap_waiting, 1);
  if (rc == CUDA_SUCCESS && restored) {
    uint64_t waited = gmt_now_ms() - t0;
    atomic_fetch_add(&g_wait_ns, waited * 1000000);
    GMT_HOOK_DEBUG("waited %llu ms for memory to come back", (unsigned long long)waited);
  }
  return rc;
}

static CUresult enter_slow(int *held, gmt_swap_gate_fn gate, int *restored)
{
  uint64_t deadline = gmt_now_ms() + g_wait_ms;
  for (;;) {
    pthread_mutex_lock(&g_tab_mu);
    int dev = gmt__swaptab_out_device(&g_tab);
    pthread_mutex_unlock(&g_tab_mu);
    if (dev < 0) {
      pthread_rwlock_rdlock(&gmt__swap_rw);
      if (!atomic_load_explicit(&gmt__swap_nout, memory_order_relaxed)) {
        *held = 1;
        return CUDA_SUCCESS;
      }
      pthread_rwlock_unlock(&gmt__swap_rw); /* moved out again meanwhile */
      continue;
    }
    uint64_t got = 0;
    int c = claim(dev, 0, 1, 0, deadline, gate, &got);
    if (c == -E2BIG) {
      fprintf(stderr,
              "gmt[%d]: %llu bytes of swap allocations can never come back to device %d: more "
              "than its space's limit; the call fails with CUDA_ERROR_OUT_OF_MEMORY\n",
              (int)getpid(), (unsigned long long)out_on(dev, NULL), dev);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult rc = c < 0 ? CUDA_ERROR_OUT_OF_MEMORY : got ? restore_device(dev, got) : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS) {
      *restored |= got > 0;
      continue;
    }
    if (rc != CUDA_ERROR_OUT_OF_MEMORY)
      return rc;
    /* Not granted in time, or the card itself is full (another process
     * beside gmt): wait as if not granted, within the same bound. */
    if (gmt_now_ms() + GMT_SWAP_OOM_RETRY_MS > deadline) {
      fprintf(stderr,
              "gmt[%d]: %llu bytes of swap allocations could not come back to device %d within "
              "GMT_SWAP_WAIT_MS=%llu; the call fails with CUDA_ERROR_OUT_OF_MEMORY\n",
              (int)getpid(), (unsigned long long)out_on(dev, NULL), dev,
              (unsigned long long)g_wait_ms);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    sleep_ms(GMT_SWAP_OOM_RETRY_MS);
  }
}

/* ---- contexts, reports, fork ---- */

void gmt__swap_ctx_going(CUcontext ctx)
{
  if (!ctx || !atomic_load_explicit(&gmt__swap_on, memory_order_relaxed))
    return;
  __typeof__(&cuMemAddressFree) addr_free = GMT_REAL(cuMemAddressFree);
  __typeof__(&cuMemUnmap) unmap = GMT_REAL(cuMemUnmap);
  __typeof__(&cuMemRelease) release = GMT_REAL(cuMemRelease);
  pthread_rwlock_wrlock(&gmt__swap_rw);
  prepared_ctx_lock(ctx);
  pthread_mutex_lock(&g_tab_mu);
  size_t cap = g_tab.n;
  uint64_t *addrs = cap ? malloc(cap * sizeof(*addrs)) : NULL;
  gmt_swap_entry_t *es = cap ? malloc(cap * sizeof(*es)) : NULL;
  size_t found = addrs && es ? gmt__swaptab_of_ctx(&g_tab, ctx, addrs, cap) : 0, n = 0;
  for (size_t i = 0; i < found; i++) {
    gmt_swap_entry_t *t = gmt__swaptab_find(&g_tab, addrs[i]);
    /* The program's physical memory outlives the context it was made in
     * (it is the device's): on the GPU it stays there, with no context
     * left to move it in. */
    if (t && t->prog && !t->out) {
      t->stays = 1;
      continue;
    }
    gmt__swaptab_remove(&g_tab, addrs[i], &es[n++]);
  }
  publish_nout();
  pthread_mutex_unlock(&g_tab_mu);
  pthread_mutex_unlock(&g_prep_mu);
  uint64_t was_in[GMT_SWAP_DEVICES] = {0};
  /* Best effort: the context may be gone already (a primary context's last
   * release), and then so are its pinned host copies. */
  int entered = gmt__ctx_enter(ctx);
  for (size_t i = 0; i < n; i++) {
    gmt_swap_entry_t *e = &es[i];
    if (e->prog) { /* out (see above): its bytes go with the context */
      gmt__swaphost_free(e->host, e->host_kind, e->size);
      if (g_prog)
        g_prog->lost(e->addr);
      continue;
    }
    if (e->managed) { /* the driver's, gone with the context */
      if (!e->out)
        was_in[clamp_dev(e->device)] += e->span;
      continue;
    }
    if (!e->out) {
      was_in[clamp_dev(e->device)] += e->span;
      if (unmap && unmap(e->addr, e->span) == CUDA_SUCCESS && release)
        release(e->handle);
      gmt__swaphost_free(e->kept, e->host_kind, e->size);
    } else {
      gmt__swaphost_free(e->host, e->host_kind, e->size);
    }
    if (addr_free)
      addr_free(e->addr, e->span);
  }
  gmt__ctx_leave(entered);
  pthread_rwlock_unlock(&gmt__swap_rw);
  free(addrs);
  free(es);
  if (n)
    GMT_HOOK_DEBUG("a context went with %zu swap allocations", n);
  for (int d = 0; d < GMT_SWAP_DEVICES; d++)
    unclaim(d, was_in[d]);
}

void gmt__swap_stats(gmt_swap_stats_t *s)
{
  pthread_mutex_lock(&g_tab_mu);
  s->gpu = g_tab.gpu_bytes;
  s->host = g_tab.host_bytes;
  s->kept = g_tab.kept_bytes;
  s->disk = g_tab.disk_bytes;
  s->outs = g_tab.outs;
  s->ins = g_tab.ins;
  s->device = g_device;
  pthread_mutex_unlock(&g_tab_mu);
  s->out_bytes = atomic_load(&g_out_bytes);
  s->in_bytes = atomic_load(&g_in_bytes);
  s->move_ns = atomic_load(&g_move_ns);
  s->wait_ns = atomic_load(&g_wait_ns);
  s->out_ns = atomic_load(&g_out_ns);
}

/* Frees the kept host copies older than GMT_SWAP_KEEP_MS, but none while
 * the card is contested (they are the prepared copies then). Exclusive: a
 * move out may be reusing one. Skipped when the program is using the GPU
 * now; the next tick tries again. */
static void release_kept(void)
{
  uint64_t now = gmt_now_ms();
  pthread_mutex_lock(&g_prep_mu);
  int contested = prep_due(now);
  pthread_mutex_unlock(&g_prep_mu);
  /* Checked before the exclusive lock, which stalls the program's calls. */
  if (contested || pthread_rwlock_trywrlock(&gmt__swap_rw) != 0)
    return;
  pthread_mutex_lock(&g_tab_mu);
  size_t cap = g_tab.kept_bytes ? g_tab.n : 0, n = 0;
  gmt_swap_entry_t *es = cap ? malloc(cap * sizeof(*es)) : NULL;
  for (size_t i = 0; es && i < g_tab.n; i++) {
    gmt_swap_entry_t *e = &g_tab.v[i];
    if (e->kept && now - e->kept_ms >= g_keep_ms) {
      es[n] = *e;
      es[n++].kept = gmt__swaptab_take_kept(&g_tab, e);
    }
  }
  pthread_mutex_unlock(&g_tab_mu);
  GMT_FRAME_IN();
  for (size_t i = 0; i < n; i++) {
    int entered = es[i].host_kind == GMT_SWAP_HOST_PINNED ? gmt__ctx_enter(es[i].ctx) : 0;
    gmt__swaphost_free(es[i].kept, es[i].host_kind, es[i].size);
    gmt__ctx_leave(entered);
  }
  GMT_FRAME_OUT();
  pthread_rwlock_unlock(&gmt__swap_rw);
  free(es);
}

int gmt__swap_tick(void)
{
  if (!atomic_load_explicit(&gmt__swap_on, memory_order_relaxed))
    return 0;
  pthread_mutex_lock(&g_tab_mu);
  int stale = g_tab.kept_bytes != 0;
  pthread_mutex_unlock(&g_tab_mu);
  if (stale)
    release_kept();
  pthread_mutex_lock(&g_tab_mu);
  int due = g_test_evict_ms && g_tab.gpu_bytes && gmt_now_ms() - g_last_in_ms >= g_test_evict_ms;
  pthread_mutex_unlock(&g_tab_mu);
  if (due)
    gmt__swap_evict(0, NULL, 0);
  pthread_mutex_lock(&g_tab_mu);
  int changed = g_gen != g_gen_seen;
  g_gen_seen = g_gen;
  pthread_mutex_unlock(&g_tab_mu);
  return changed;
}

/* The exclusive lock is not taken at fork (it is held across driver calls,
 * like the token's); the table's and Resident's are. The child holds no
 * device memory: it starts with an empty table and registers again. */
static void swap_prepare(void)
{
  pthread_mutex_lock(&g_res_mu);
  pthread_mutex_lock(&g_prep_mu);
  pthread_mutex_lock(&g_tab_mu);
}

static void swap_parent(void)
{
  pthread_mutex_unlock(&g_tab_mu);
  pthread_mutex_unlock(&g_prep_mu);
  pthread_mutex_unlock(&g_res_mu);
}

static void swap_child(void)
{
  /* Host copies are the child's too (malloc'd, or mapped: its copies of
   * the parent's pages); the parent's registrations are its driver's. */
  for (size_t i = 0; i < g_tab.n; i++) {
    gmt_swap_entry_t *e = &g_tab.v[i];
    void *h = e->out ? e->host : e->kept;
    if (h && e->host_kind == GMT_SWAP_HOST_PINNED)
      munmap(h, e->size);
    else
      gmt__swaphost_free(h, e->host_kind, e->size);
  }
  gmt__swaptab_close(&g_tab);
  for (int i = 0; i < GMT_SWAP_DEVICES; i++)
    atomic_store_explicit(&g_claimed[i], 0, memory_order_relaxed);
  g_device = -1;
  g_gen = g_gen_seen = 0;
  g_res_said = g_move_said = 0;
  atomic_store_explicit(&gmt__swap_on, 0, memory_order_relaxed);
  atomic_store_explicit(&gmt__swap_nout, 0, memory_order_relaxed);
  atomic_store_explicit(&gmt__swap_waiting, 0, memory_order_relaxed); /* the waiters stayed */
  /* No preparer in the child (threads do not fork), nothing being pinned. */
  g_prep_started = 0;
  g_prep_until_ms = 0;
  g_prep_addr = 0;
  g_prep_ctx = NULL;
  g_prep_moving = 0;
  g_prep_next_ms = 0;
  g_prep_hurry = 0;
  g_prep_evicting = 0;
  pthread_mutex_init(&g_tab_mu, NULL);
  pthread_mutex_init(&g_prep_mu, NULL);
  pthread_cond_init(&g_prep_cv, NULL);
  pthread_mutex_init(&g_res_mu, NULL);
  pthread_rwlock_init(&gmt__swap_rw, NULL);
  if (g_prog)
    g_prog->child();
}

static const gmt_fork_ops_t g_fork_ops = {swap_prepare, swap_parent, swap_child};

__attribute__((constructor)) static void swap_register(void)
{
  gmt__fork_register(GMT_LOCK_SWAP, &g_fork_ops);
}

/* With GMT_HOOK_DEBUG, what the frees cost, by step. */
__attribute__((destructor)) static void swap_exit(void)
{
  uint64_t n = atomic_load(&g_rel_res_n), h = atomic_load(&g_rel_host_n);
  if (!gmt__debug || (!n && !h))
    return;
  gmt__say("frees: %llu Resident lowerings %.1f ms, %llu host copies freed %.1f ms, the "
           "driver's releases %.1f ms",
           (unsigned long long)n, (double)atomic_load(&g_rel_res_ns) / 1e6, (unsigned long long)h,
           (double)atomic_load(&g_rel_host_ns) / 1e6, (double)atomic_load(&g_rel_drv_ns) / 1e6);
}
