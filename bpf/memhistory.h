/* MemHistory: what every traced allocation went through. One
 * AllocationHistory per allocation (its kind, range, call site, events in
 * time order and transfer counters); a freed allocation's history stays,
 * inactive, when its address is handed out again.
 *
 * One writer (the tracer's event handler) and any number of readers: every
 * function takes the history's rwlock itself. Readers get copies
 * (gmt_alloc_info_t) so that nothing they hold changes under them; code that
 * walks whole histories (the dumps) holds gmt_memhistory_rdlock() around
 * gmt_memhistory_at(). */
#ifndef GMT_TRACE_MEMHISTORY_H
#define GMT_TRACE_MEMHISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
  GMT_ALLOC_DEVICE = 0,
  GMT_ALLOC_HOST_PINNED = 1,
  GMT_ALLOC_HOST_PAGEABLE = 2,
  GMT_ALLOC_MANAGED = 3,
  GMT_ALLOC_KIND_MAX
} gmt_alloc_kind_t;

/* How an allocation came to be tracked. */
typedef enum {
  GMT_ORIGIN_CALL = 0,     /* a driver allocation call */
  GMT_ORIGIN_MMAP = 1,     /* a large anonymous mmap (pageable host memory) */
  GMT_ORIGIN_REGISTER = 2, /* cuMemHostRegister of memory we had not seen */
  GMT_ORIGIN_MAP = 3,      /* cuMemMap of physical memory (cuMemCreate) */
  GMT_ORIGIN_ATTACH = 4,   /* never seen allocated (made before the trace, or
                            * carved out of the heap): found by the copies
                            * that touched it (gmt_memhistory_set_attach()) */
  GMT_ORIGIN_MAX
} gmt_alloc_origin_t;

/* What happened to an allocation. The numbers are those of the dumps. */
typedef enum {
  GMT_AEV_ALLOC = 1,
  GMT_AEV_FREE = 2,
  GMT_AEV_H2D = 3, /* a copy host to device touching this allocation */
  GMT_AEV_D2H = 4,
  GMT_AEV_D2D = 5,
  GMT_AEV_FAULT = 6, /* bytes = how many faults this event stands for */
  GMT_AEV_PREFETCH = 7,
  GMT_AEV_PIN = 8, /* cuMemHostRegister */
  GMT_AEV_UNPIN = 9,
  GMT_AEV_EXIT = 10,     /* its process exited while it was active */
  GMT_AEV_REPLACED = 11, /* a new allocation overlapped it: it was gone */
  /* gmt's hook moved it off the GPU (mode=swap: copied to host memory and
   * unmapped; mode=um: prefetched to the host) or back: bytes moved, and
   * dur_ns how long the move took, ending at ts_ns (gmt_memhistory_moved) */
  GMT_AEV_MOVE_OUT = 12,
  GMT_AEV_MOVE_IN = 13,
  GMT_AEV_MAX
} gmt_aev_type_t;

const char *gmt_alloc_kind_name(int kind);
int gmt_alloc_kind_parse(const char *name);    /* -EINVAL when unknown */
const char *gmt_alloc_origin_name(int origin); /* "call", "mmap", ..., "attach" */
int gmt_alloc_origin_parse(const char *name);  /* -EINVAL when unknown */
const char *gmt_aev_name(int type);
int gmt_aev_parse(const char *name);

typedef struct gmt_alloc_event {
  uint64_t ts_ns;
  uint64_t dur_ns;
  uint64_t addr;  /* where in the allocation (copies, faults) */
  uint64_t bytes; /* copy size, fault count */
  uint64_t stream;
  uint32_t tid;
  uint32_t type; /* gmt_aev_type_t */
} gmt_alloc_event_t;

#define GMT_SITE_MODULE_LEN 160
#define GMT_SITE_FUNC_LEN 128

/* Where an allocation was made: the first return address outside the
 * driver, the runtime and the hook. */
typedef struct gmt_alloc_site {
  uint64_t pc;                      /* as seen in the process */
  uint64_t offset;                  /* in the module's ELF address space */
  char module[GMT_SITE_MODULE_LEN]; /* path; "" when unknown */
  char function[GMT_SITE_FUNC_LEN]; /* "name+0x12"; "" when unknown */
} gmt_alloc_site_t;

/* "module+0xoffset (function)" or "0xpc". */
void gmt_alloc_site_format(const gmt_alloc_site_t *s, char *buf, size_t len);

/* The scalar part of an allocation's history: what readers get. */
typedef struct gmt_alloc_info {
  uint64_t id; /* 1, 2, ... in the order allocations were seen */
  uint32_t pid;
  uint8_t kind;    /* gmt_alloc_kind_t */
  uint8_t origin;  /* gmt_alloc_origin_t */
  bool registered; /* host memory registered with the driver now */
  /* gmt's hook registered it (pin advice), not the program, and has not
   * unregistered it since; kept when the buffer ends while gmt holds it */
  bool pinned_by_gmt;
  bool active;
  uint64_t address;
  uint64_t size;
  gmt_alloc_site_t site;
  uint32_t site_nth; /* 1 for the first allocation made at this site */
  uint64_t alloc_ns; /* for an attach one: when a copy first touched it */
  uint64_t free_ns;  /* 0 while active */
  uint64_t h2d_count, h2d_bytes;
  uint64_t d2h_count, d2h_bytes;
  uint64_t d2d_count, d2d_bytes;
  uint64_t faults;
  uint64_t prefetches;
  uint64_t events_dropped; /* past GMT_HISTORY_MAX_EVENTS; counters stay exact */
  /* gmt's moves of it off the GPU and back (mode=swap, mode=um): how
   * many, their bytes and the time they took (bandwidth: bytes / ns) */
  uint64_t moves_out, moves_out_bytes, moves_out_ns;
  uint64_t moves_in, moves_in_bytes, moves_in_ns;
} gmt_alloc_info_t;

static inline uint64_t gmt_alloc_transfers(const gmt_alloc_info_t *i)
{
  return i->h2d_count + i->d2h_count;
}

typedef struct gmt_alloc_history {
  gmt_alloc_info_t info;
  gmt_alloc_event_t *events; /* in time order */
  size_t nevents, capevents;
  /* internal */
  size_t hot_pos, cold_pos;            /* places in the two heaps */
  struct gmt_alloc_history *prev_same; /* earlier history at this address */
  struct gmt_alloc_history *hash_next;
} gmt_alloc_history_t;

/* Events kept per allocation; past it only the counters grow. */
#define GMT_HISTORY_MAX_EVENTS 100000

/* What the kernel made a process wait for, and its page-cache faults. */
typedef struct gmt_trace_kernel {
  uint64_t reclaim_stalls, reclaim_ns; /* direct reclaim */
  uint64_t compact_stalls, compact_ns; /* compaction runs */
  uint64_t pagecache_faults;
} gmt_trace_kernel_t;

/* A traced process. */
typedef struct gmt_trace_process {
  uint32_t pid;
  uint32_t parent; /* 0 for a root */
  uint64_t start_ns;
  uint64_t exit_ns;
  bool exited;
  int exit_code;
  gmt_trace_kernel_t kernel;
  /* What this process did, each copy counted once (as the history's
   * totals count it): what the daemon reports per pod without a scan.
   * Not in the dumps, which sum the histories instead. */
  uint64_t allocations;
  uint64_t h2d_count, h2d_bytes, d2h_count, d2h_bytes, d2d_count, d2d_bytes;
  uint64_t faults;
} gmt_trace_process_t;

typedef struct gmt_memhistory gmt_memhistory_t;

int gmt_memhistory_new(gmt_memhistory_t **mh);
void gmt_memhistory_free(gmt_memhistory_t *mh);
/* Events kept per allocation from now on (0: GMT_HISTORY_MAX_EVENTS). An
 * always-on tracer keeps fewer; the counters stay exact either way. */
void gmt_memhistory_set_max_events(gmt_memhistory_t *mh, size_t max);
/* Ended histories kept at most (0: every one); past it the oldest-ended
 * are let go, their copies still counted in the totals and they in
 * dropped_histories. */
void gmt_memhistory_set_max_ended(gmt_memhistory_t *mh, size_t max);

/* ---- the writer ---- */

/* A new allocation. Active allocations of pid that it overlaps were freed
 * without our seeing it: they end (REPLACED). */
int gmt_memhistory_alloc(gmt_memhistory_t *mh, uint32_t pid, int kind, int origin, uint64_t addr,
                         uint64_t size, const gmt_alloc_site_t *site, uint64_t ts, uint32_t tid);
/* The active allocation of pid starting at addr ends (an attach one ends
 * when addr is anywhere in it: where it starts was never seen). -ENOENT if
 * none. */
int gmt_memhistory_free_at(gmt_memhistory_t *mh, uint32_t pid, uint64_t addr, uint64_t ts,
                           uint32_t tid);
/* munmap of [addr, addr+len): host allocations of pid inside it end. */
void gmt_memhistory_unmap(gmt_memhistory_t *mh, uint32_t pid, uint64_t addr, uint64_t len,
                          uint64_t ts, uint32_t tid);

typedef enum {
  GMT_COPY_UNKNOWN = 0, /* cuMemcpy: classified by what src and dst are */
  GMT_COPY_H2D = 1,
  GMT_COPY_D2H = 2,
} gmt_copy_dir_t;

/* Where a host address lies, for memory never seen allocated: the
 * mapping that holds it. whole: the mapping is one object mapped once (a
 * file, shared memory), and a buffer in it is all of it; else (anonymous
 * memory, the heap: the kernel merges neighbouring mappings, so one holds
 * many allocations) a buffer is the span that copies touched, within it. */
typedef struct gmt_host_region {
  uint64_t start, end;
  bool whole;
} gmt_host_region_t;
/* 0 and *out, or -ENOENT when no mapping that the process may read or
 * write holds addr. Called with MemHistory's write lock held, from the
 * writer's thread. */
typedef int (*gmt_host_region_fn)(void *arg, uint32_t pid, uint64_t addr, gmt_host_region_t *out);

typedef struct gmt_attach_opts {
  gmt_host_region_fn host_region; /* NULL: host ends are never placed */
  void *arg;
  uint64_t min_host_bytes; /* a new host buffer spans at least this much */
} gmt_attach_opts_t;

/* From now on, a copy's end that lies in no active allocation of its
 * process makes one of origin GMT_ORIGIN_ATTACH (a tracer attached to a
 * running job finds its buffers this way), on the side the copy's
 * direction says: a device one spanning the bytes the copy touched; a
 * host one (host_pageable: pinned memory made before the trace cannot be
 * told apart) spanning them too, or the whole mapping when it is one
 * object, and only when that span is at least min_host_bytes (smaller
 * host memory stays out, as mmaps below the tracer's --min-mmap do).
 * Later copies that reach past such a buffer's end, or overlap it, grow
 * it, and attach buffers of one side that come to overlap merge into the
 * oldest (counters summed, events interleaved). A buffer seen allocated
 * is never grown or merged: an attach span stops where one begins. */
void gmt_memhistory_set_attach(gmt_memhistory_t *mh, const gmt_attach_opts_t *o);

/* A copy of bytes from src to dst. Both ends that are tracked get the
 * event; with gmt_memhistory_set_attach(), ends that are not are placed
 * first. A copy whose direction is known (given, or told by a tracked
 * device end) counts in the totals. Returns the direction it was counted
 * as (GMT_AEV_H2D, _D2H, _D2D), or 0 when it matched no allocation (an
 * unmatched copy: a unified copy neither of whose ends is known device
 * memory, or one whose ends could not be placed, such as address 0). */
int gmt_memhistory_copy(gmt_memhistory_t *mh, uint32_t pid, int dir, uint64_t dst, uint64_t src,
                        uint64_t bytes, uint64_t ts, uint64_t dur, uint32_t tid, uint64_t stream);
/* n page faults at addr. -ENOENT when addr is in no active allocation. */
int gmt_memhistory_fault(gmt_memhistory_t *mh, uint32_t pid, uint64_t addr, uint64_t n, uint64_t ts,
                         uint32_t tid);
int gmt_memhistory_prefetch(gmt_memhistory_t *mh, uint32_t pid, uint64_t addr, uint64_t bytes,
                            uint64_t ts, uint32_t tid, uint64_t stream);
/* cuMemHostRegister: pageable memory we track becomes pinned; memory we
 * did not track becomes a host_pinned allocation of its own. */
int gmt_memhistory_pin(gmt_memhistory_t *mh, uint32_t pid, uint64_t addr, uint64_t size,
                       const gmt_alloc_site_t *site, uint64_t ts, uint32_t tid);
int gmt_memhistory_unpin(gmt_memhistory_t *mh, uint32_t pid, uint64_t addr, uint64_t ts,
                         uint32_t tid);
/* gmt's hook says that the registration (pinned) or unregistration (not)
 * of the buffer at addr just before was its own: pinned_by_gmt of the
 * allocation holding addr follows. A registration of memory not tracked
 * makes it a host_pinned allocation of [addr, addr+size) first, as
 * gmt_memhistory_pin() does (the registration's own event was missed);
 * an unregistration that ended an allocation (one tracked only from its
 * registration) clears it on that one. -ENOENT when nothing holds addr. */
int gmt_memhistory_pinned_by_gmt(gmt_memhistory_t *mh, uint32_t pid, uint64_t addr, uint64_t size,
                                 bool pinned, uint64_t ts, uint32_t tid);
/* gmt's hook moved bytes of the allocation at addr off the GPU (out) or
 * back, in dur ns ending at ts: a MOVE_OUT or MOVE_IN event and its
 * counters, on the active allocation holding addr, else on the newest
 * history that started at addr (mode=swap unmaps what it moved out, which
 * ended that history just before). The move's own copies or prefetches
 * stay in the history as the driver calls they were. -ENOENT when
 * nothing holds addr. */
int gmt_memhistory_moved(gmt_memhistory_t *mh, uint32_t pid, uint64_t addr, uint64_t bytes,
                         bool out, uint64_t ts, uint64_t dur, uint32_t tid);

int gmt_memhistory_process_start(gmt_memhistory_t *mh, uint32_t pid, uint32_t parent, uint64_t ts);
/* Ends the process and every allocation it still held. */
void gmt_memhistory_process_exit(gmt_memhistory_t *mh, uint32_t pid, int code, uint64_t ts);
/* The kernel's side of a process: a direct reclaim or compaction stall of
 * dur_ns, or n page-cache faults. */
typedef enum { GMT_PROC_RECLAIM, GMT_PROC_COMPACT, GMT_PROC_PCFAULTS } gmt_proc_event_t;
void gmt_memhistory_process_event(gmt_memhistory_t *mh, uint32_t pid, gmt_proc_event_t what,
                                  uint64_t n, uint64_t dur_ns);
/* Drops every history of pid and its process records, as if it had never
 * been traced (the daemon forgets processes gone long ago). Ids of the
 * histories that stay do not change. Returns how many histories went. */
size_t gmt_memhistory_forget_process(gmt_memhistory_t *mh, uint32_t pid);

/* Loading a dump: a whole history as it was (events are copied). */
int gmt_memhistory_restore(gmt_memhistory_t *mh, const gmt_alloc_info_t *info,
                           const gmt_alloc_event_t *events, size_t nevents);
int gmt_memhistory_restore_process(gmt_memhistory_t *mh, const gmt_trace_process_t *p);

/* ---- readers (each takes the read lock) ---- */

/* The active allocation of pid holding addr (any byte inside it). */
int gmt_memhistory_lookup(gmt_memhistory_t *mh, uint32_t pid, uint64_t addr, gmt_alloc_info_t *out);
/* The k allocations with the most transfers (H2D + D2H), most first; ties:
 * more bytes, then the older. Active and inactive. Returns how many. */
size_t gmt_memhistory_hotspots(gmt_memhistory_t *mh, size_t k, gmt_alloc_info_t *out);
/* The k with the fewest transfers, fewest first; ties: bigger, then older. */
size_t gmt_memhistory_coldspots(gmt_memhistory_t *mh, size_t k, gmt_alloc_info_t *out);
/* The same among the histories of some processes only (pids sorted
 * ascending, npids of them): one pod's share of a node-wide history. The
 * heap walk skips other processes' entries, so it costs O(m log m) for the
 * m entries it passes, at most every history. */
size_t gmt_memhistory_hotspots_of(gmt_memhistory_t *mh, const uint32_t *pids, size_t npids,
                                  size_t k, gmt_alloc_info_t *out);
size_t gmt_memhistory_coldspots_of(gmt_memhistory_t *mh, const uint32_t *pids, size_t npids,
                                   size_t k, gmt_alloc_info_t *out);
/* The k allocations gmt moved the most bytes of (out and back), most
 * first; ties: the older. Only those moved at all. A scan: O(n k). */
size_t gmt_memhistory_most_moved(gmt_memhistory_t *mh, size_t k, gmt_alloc_info_t *out);
/* The newest record of pid (a copy); -ENOENT if none. */
int gmt_memhistory_process_info(gmt_memhistory_t *mh, uint32_t pid, gmt_trace_process_t *out);

typedef struct gmt_memhistory_totals {
  size_t allocations, active;
  size_t by_kind[GMT_ALLOC_KIND_MAX];
  size_t by_origin[GMT_ORIGIN_MAX];
  size_t pinned_by_gmt; /* allocations marked pinned_by_gmt */
  /* gmt's moves, summed over the histories kept */
  uint64_t moves_out, moves_out_bytes, moves_out_ns;
  uint64_t moves_in, moves_in_bytes, moves_in_ns;
  uint64_t h2d_count, h2d_bytes, d2h_count, d2h_bytes, d2d_count, d2d_bytes;
  uint64_t faults, unmatched_faults, unmatched_copies;
  size_t processes;
  gmt_trace_kernel_t kernel;  /* summed over the processes */
  uint64_t dropped_histories; /* ended ones let go (gmt_memhistory_set_max_ended) */
} gmt_memhistory_totals_t;
void gmt_memhistory_totals(gmt_memhistory_t *mh, gmt_memhistory_totals_t *t);

/* Whole histories: hold the read lock while using what these return. */
void gmt_memhistory_rdlock(gmt_memhistory_t *mh);
void gmt_memhistory_unlock(gmt_memhistory_t *mh);
size_t gmt_memhistory_size(const gmt_memhistory_t *mh); /* histories, by id */
const gmt_alloc_history_t *gmt_memhistory_at(const gmt_memhistory_t *mh, size_t i);
/* Every history that started at addr in pid, newest first (address reuse). */
size_t gmt_memhistory_at_address(const gmt_memhistory_t *mh, uint32_t pid, uint64_t addr,
                                 const gmt_alloc_history_t **out, size_t n);
size_t gmt_memhistory_nprocesses(const gmt_memhistory_t *mh);
const gmt_trace_process_t *gmt_memhistory_process(const gmt_memhistory_t *mh, size_t i);
/* Counters that are not in any one history (for the dumps): what matched
 * no allocation, and every copy counted once. */
typedef struct gmt_memhistory_counters {
  uint64_t unmatched_faults, unmatched_copies;
  uint64_t h2d_count, h2d_bytes, d2h_count, d2h_bytes, d2d_count, d2d_bytes;
} gmt_memhistory_counters_t;
void gmt_memhistory_counters(const gmt_memhistory_t *mh, gmt_memhistory_counters_t *c);
void gmt_memhistory_set_counters(gmt_memhistory_t *mh, const gmt_memhistory_counters_t *c);

#endif
