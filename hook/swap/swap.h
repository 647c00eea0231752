/* mode=swap in the process (docs/tiers.md, "Swap mode in the process"):
 * cuMemAlloc and cuMemAllocPitch backed by the driver's virtual memory, so
 * that an allocation's bytes can leave the GPU for host memory (evict)
 * and come back at the same address before the process next touches the
 * GPU (restore), with the scheduler's leave (Resident) for the bytes on
 * the GPU. The table is swaptab.c's; this file makes the driver calls.
 *
 * The gate: every wrapper of a call that touches the GPU (launches,
 * copies, memsets) brackets its real call with gmt__swap_enter and
 * gmt__swap_leave. Not in swap mode: one relaxed atomic load. In swap mode
 * with everything on the GPU: a shared lock, one atomic load, the call,
 * the unlock. The lock is held shared across the real call so that an
 * eviction cannot start between the check and the enqueue; an eviction
 * takes it exclusively and synchronizes first, so work already queued
 * finishes before its memory goes. It is glibc's default rwlock, which
 * prefers readers, so a driver that calls its own entry point while a
 * wrapper holds it shared does not deadlock (an eviction may wait while
 * calls keep overlapping; the scheduler evicts pods that are not running).
 * Never held while waiting for a token or sleeping for a Resident retry. */
#ifndef GMT_HOOK_SWAP_H
#define GMT_HOOK_SWAP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "driver.h"
#include "swaptab.h"

/* How a process's cuMemAlloc* memory moves: not at all (strict), by copies
 * to host memory and back (mode=swap), or by prefetches of managed memory
 * (mode=um, swapum.h). Everything else in this file is the same for both. */
enum { GMT_SWAP_OFF = 0, GMT_SWAP_COPIES = 1, GMT_SWAP_MANAGED = 2 };
extern _Atomic int gmt__swap_on;   /* GMT_SWAP_*: this process's mode */
extern _Atomic int gmt__swap_nout; /* its allocations off the GPU now */
extern pthread_rwlock_t gmt__swap_rw;
/* Threads now waiting for the scheduler's leave to bring memory back or
 * allocate, or moving memory out: the token's idle thread counts them as
 * busy, so a pod does not give its token back while it waits for room or
 * while its launches wait behind a move (token.c). */
extern _Atomic int gmt__swap_waiting;
/* The bytes this process holds on CUDA ordinal dev by the scheduler's
 * leave (its Resident granted): no lock, for the token's idle thread. */
uint64_t gmt__swap_claimed(int dev);

/* What a wait for room passes before each ask: the caller's token gate.
 * The scheduler asks only pods that are not running to make room, so the
 * asker must hold its token while it asks, or a busy holder is never
 * asked and the asker starves (docs/tiers.md). A parameter, not a call:
 * the token's files reach this one through the reporter. */
typedef void (*gmt_swap_gate_fn)(void);

/* The slow path of the gate: brings every allocation back (waiting for
 * Resident, bounded by GMT_SWAP_WAIT_MS), then holds the lock shared. */
CUresult gmt__swap_enter_slow(int *held, gmt_swap_gate_fn gate);

/* Before a call that touches the GPU: CUDA_SUCCESS and *held (pass it to
 * gmt__swap_leave after the call), or the error to return instead
 * (CUDA_ERROR_OUT_OF_MEMORY when the memory could not come back). */
static inline CUresult gmt__swap_enter(int *held, gmt_swap_gate_fn gate)
{
  *held = 0;
  if (!atomic_load_explicit(&gmt__swap_on, memory_order_relaxed))
    return CUDA_SUCCESS;
  pthread_rwlock_rdlock(&gmt__swap_rw);
  /* Relaxed: moves change it under the exclusive lock, which we now hold
   * shared. */
  if (!atomic_load_explicit(&gmt__swap_nout, memory_order_relaxed)) {
    *held = 1;
    return CUDA_SUCCESS;
  }
  pthread_rwlock_unlock(&gmt__swap_rw);
  return gmt__swap_enter_slow(held, gate);
}

/* The lock held shared as the gate holds it, with nothing brought back
 * and no token asked for: for calls that touch no allocation's bytes and
 * need only that no move runs beside them: the program's unmaps and
 * releases of its own physical memory (gmt__swap_free takes it so too).
 * Pass the result to gmt__swap_leave. */
static inline int gmt__swap_hold(void)
{
  if (!atomic_load_explicit(&gmt__swap_on, memory_order_relaxed))
    return 0;
  pthread_rwlock_rdlock(&gmt__swap_rw);
  return 1;
}

static inline void gmt__swap_leave(int held)
{
  if (held)
    pthread_rwlock_unlock(&gmt__swap_rw);
}

/* At registration (report.c): how memory moves (GMT_SWAP_*) and the pod's
 * name. */
void gmt__swap_configure(int how, const char *pod);

/* cuMemAlloc's and cuMemAllocPitch's allocation in swap or um mode: bytes
 * on device dev of the calling thread's context, at an address whose last
 * byte is at most max_addr (the v1 entry points' 32-bit pointers).
 * CUDA_ERROR_NOT_SUPPORTED when the driver placed it higher: the caller
 * then allocates as in strict mode. The quota is the caller's. In um mode,
 * CUDA_ERROR_OUT_OF_MEMORY when the card's free memory could not take it
 * with every process's managed bytes off the card (docs/tiers.md). */
CUresult gmt__swap_alloc(CUdeviceptr *dptr, size_t bytes, int dev, uint64_t max_addr,
                         gmt_swap_gate_fn gate);

/* cuMemFree of p: *owned 0 when p is not a swap allocation (the caller
 * frees it as usual); else the result of freeing it here. */
CUresult gmt__swap_free(CUdeviceptr p, int *owned);

/* Where moved bytes may go (ReportReply's rooms): when bounded, at most
 * host_room bytes of new host copies, then at most disk_room bytes in
 * spill files in dir ("" : no disk tier). Not bounded: host memory. */
typedef struct {
  int bounded;
  uint64_t host_room, disk_room;
  char dir[4096];
} gmt_swap_where_t;

/* Reporter thread: moves allocations off the GPU until at most keep bytes
 * of them stay there (ReportReply's evict), where w allows (NULL:
 * unbounded host memory). granted: stop once the process holds a token
 * (the scheduler's target was for a pod waiting; its turn has come). */
void gmt__swap_evict(uint64_t keep, const gmt_swap_where_t *w, int granted);

/* ReportReply's prepare (mode=swap): the card is contested, so host
 * copies of the allocations on the GPU are to be pinned ahead of their
 * moves out, within host_room when bounded (docs/tiers.md, "Prepared host
 * copies"). Returns at once: a thread of the hook's does it. A signal
 * stands for a second; GMT_SWAP_PREPARE=0 ignores them. */
void gmt__swap_prepare(int bounded, uint64_t host_room);

/* A context goes (ctx.c): its swap allocations go with it. */
void gmt__swap_ctx_going(CUcontext ctx);

typedef struct {
  uint64_t gpu, host, disk, kept, outs, ins;
  int device; /* -1 until a swap allocation exists */
  /* What its moves cost since start: bytes each way, the moves' time, the
   * time its calls waited for memory to come back (ns); out_ns: the moves
   * out's steps, their room given back included. */
  uint64_t out_bytes, in_bytes, move_ns, wait_ns, out_ns;
} gmt_swap_stats_t;

void gmt__swap_stats(gmt_swap_stats_t *s);

/* Reporter thread: the test knob GMT_SWAP_TEST_EVICT_MS (swap.c). 1 when
 * an allocation moved since the last call (a report is due). */
int gmt__swap_tick(void);

/* ---- the program's own physical memory (swapvmm.c) ----
 *
 * A mode=swap program's cuMemCreate handles ride on this file's table,
 * Resident and moves: their entries carry prog and a key with
 * GMT_SWAP_PROG_KEY set (never a device address: those stay below 2^57),
 * and the moves' driver steps are swapvmm.c's, through the ops it
 * registers from its constructor, so that this file names no user. Each
 * op runs under the exclusive lock with the entry's context current. */
#define GMT_SWAP_PROG_KEY (1ULL << 63)

/* Where a move out's step spent its time in the driver, added to by the
 * step: the copy, and the mappings and the release. */
typedef struct {
  uint64_t copy_ns, map_ns;
} gmt_swap_out_times_t;

typedef struct {
  /* e on the GPU, its work done: its bytes into host (e->size), the
   * program's mappings unmapped, the driver's handle released; the time
   * of each part added to *t. On an error nothing changed. */
  CUresult (*out)(const gmt_swap_entry_t *e, void *host, gmt_swap_out_times_t *t);
  /* e out: new physical memory from e->host, mapped and given access as
   * the program had it; the driver's new handle in *real. On an error
   * nothing changed. */
  CUresult (*in)(const gmt_swap_entry_t *e, uint64_t *real);
  /* An address the program mapped it at, for the tracer (0: none). */
  uint64_t (*addr)(uint64_t key);
  /* e was out when its context went: its bytes went with it. */
  void (*lost)(uint64_t key);
  void (*child)(void); /* in a forked child, after this file's own */
} gmt_swap_prog_ops_t;

void gmt__swap_prog_register(const gmt_swap_prog_ops_t *ops);
/* Resident for bytes more on dev, waiting for room as an allocation does
 * (GMT_SWAP_WAIT_MS): 0, or -E2BIG / -ENOSPC. */
int gmt__swap_prog_claim(int dev, uint64_t bytes, gmt_swap_gate_fn gate);
/* Bytes fewer on dev (never with gmt__swap_rw held). */
void gmt__swap_prog_unclaim(int dev, uint64_t bytes);
/* e into the table, on the GPU: 0, or -EEXIST / -ENOMEM. */
int gmt__swap_prog_track(const gmt_swap_entry_t *e);
/* The entry of key out of the table, its kept copy freed (gmt__swap_rw
 * held, shared at least): the bytes its device now holds fewer, to
 * unclaim once the lock is let go (0 when it was out, or unknown). */
uint64_t gmt__swap_prog_untrack(uint64_t key, int *device);
/* The entry of key stays on the GPU from now on. */
void gmt__swap_prog_stays(uint64_t key);
/* A release by the driver of freed swap memory took ns (for the exit
 * line's cost of frees). */
void gmt__swap_note_release(uint64_t ns);

#endif
