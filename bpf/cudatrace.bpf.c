// SPDX-License-Identifier: GPL-2.0
/* The CUDA tracer's probes: uprobes on the driver's memory entry points
 * (allocations, frees, copies, prefetches; never kernel launches, where
 * a hit of ~1 us would be a quarter of a launch and the hook counts them
 * for free) and the kernel's side of the same processes (fork, large
 * anonymous mmaps, page faults in tracked host buffers and in the page
 * cache, direct reclaim and compaction stalls, GPU Xid errors). Everything
 * goes to user space as struct gmt_trace_event on one ring buffer
 * (cudatrace.h).
 *
 * One entry and one return program serve every driver entry point: the
 * attach cookie says which function fired, so adding a function is a line
 * in the user side's table, not a new program. Allocations and frees have
 * both (the result, the new address, is only there at the return); copies
 * and prefetches only the entry (GMT_TCOOKIE_ENTRY_ONLY), which sends the
 * event by itself: they are the calls a program makes by the thousand.
 * The same entry program serves gmt's own markers in libgmthook.so
 * (GMT_TFN_GMT_PINNED, which says which registrations were gmt's, and
 * GMT_TFN_GMT_MOVED, each of gmt's moves off the GPU and back). */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "cudatrace.h"

char LICENSE[] SEC("license") = "GPL";

/* ---- configuration, set by user space before load ---- */

/* The process traced from the start (0: only those in traced_tgids). */
const volatile __u32 targ_tgid = 0;
/* Trace the children of traced processes (they join traced_tgids). */
const volatile bool follow_forks = true;
/* Anonymous mmaps at least this big are host buffers worth a history. */
const volatile __u64 min_mmap_bytes = GMT_TRACE_MIN_MMAP_BYTES;
/* At most one FAULT event per 2 MiB chunk per this many ns; the faults in
 * between are counted, not lost (0: one event per fault). */
const volatile __u64 fault_sample_ns = 1000000;
/* Frames of user stack kept for allocations (at most GMT_TRACE_STACK_DEPTH). */
const volatile __u32 stack_depth = GMT_TRACE_STACK_DEPTH;

/* ---- maps ---- */

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 16 << 20);
} events SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, GMT_TCNT_MAX);
  __type(key, __u32);
  __type(value, __u64);
} counters SEC(".maps");

/* Processes traced besides targ_tgid: children followed through fork, and
 * whatever the daemon adds. Value: the parent's tgid (0 for a root). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 8192);
  __type(key, __u32);
  __type(value, __u32);
} traced_tgids SEC(".maps");

/* A driver call between its entry and its return, keyed by pid_tgid.
 * depth counts nested probed calls on the thread (the driver calling its
 * own exported entry points): only the outermost is what the program did.
 * Entry-only calls (copies, prefetches) never enter this map: one inside
 * a call that is here is dropped without touching depth; a call made from
 * inside a copy cannot be told from the program's own (nothing marks the
 * copy's end) and is recorded as the program's. */
struct inflight {
  __u64 ts;
  __u64 args[5];
  __u32 fn;
  __u32 depth;
};
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u64);
  __type(value, struct inflight);
} inflight SEC(".maps");

/* An mmap/munmap syscall between enter and exit, keyed by pid_tgid. */
struct sys_inflight {
  __u64 addr;
  __u64 len;
  __u32 nr;
};
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u64);
  __type(value, struct sys_inflight);
} sys_inflight SEC(".maps");

/* Host buffers tracked for faults: (tgid, start) -> length, and the 2 MiB
 * chunks they cover, so that a fault is matched with one hash lookup. */
struct host_range {
  __u64 len;
  __u32 users; /* allocated once, registered again: freed when both undo */
  __u32 pad;
};
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, struct gmt_trace_host_key);
  __type(value, struct host_range);
  __uint(map_flags, BPF_F_NO_PREALLOC);
} host_ranges SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 131072); /* 256 GiB of host buffers */
  __type(key, struct gmt_trace_chunk_key);
  __type(value, struct gmt_trace_chunk_val);
  __uint(map_flags, BPF_F_NO_PREALLOC);
} host_chunks SEC(".maps");

/* Start of a direct reclaim stall, and of a compaction run, keyed by
 * pid_tgid. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u64);
  __type(value, __u64);
} reclaim_start SEC(".maps");
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u64);
  __type(value, __u64);
} compact_start SEC(".maps");

/* Page-cache faults counted per traced process, sent rate limited as the
 * host-buffer faults are: a model mmapped from disk faults by the 100k. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 8192);
  __type(key, __u32);
  __type(value, struct gmt_trace_pcfault_val);
} pc_faults SEC(".maps");

/* ---- helpers ---- */

static __always_inline void count(__u32 idx)
{
  __u64 *v = bpf_map_lookup_elem(&counters, &idx);
  if (v)
    *v += 1; /* per-CPU: no atomics needed */
}

static __always_inline bool traced(__u32 tgid)
{
  if (targ_tgid && tgid == targ_tgid)
    return true;
  return bpf_map_lookup_elem(&traced_tgids, &tgid) != NULL;
}

static __always_inline struct gmt_trace_event *reserve(__u32 type, __u64 pid_tgid)
{
  struct gmt_trace_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    count(GMT_TCNT_RINGBUF_FULL);
    return NULL;
  }
  /* The ring buffer's memory is not zeroed; user space reads every field. */
  __builtin_memset(e, 0, sizeof(*e));
  e->type = type;
  e->pid = pid_tgid >> 32;
  e->tid = (__u32)pid_tgid;
  e->ts_ns = bpf_ktime_get_ns();
  return e;
}

/* Wakes the reader only once a batch waits. Waking it for every event (an
 * IPI to its CPU: a VM exit in a VM) cost more than the probe hit itself,
 * 10-30 us a copy on the CPU VMs; readers also look on their own (see
 * GMT_TRACE_WAKEUP_BYTES), so a quiet trickle is read all the same. */
static __always_inline void submit(struct gmt_trace_event *e)
{
  __u64 waiting = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
  bpf_ringbuf_submit(e, waiting >= GMT_TRACE_WAKEUP_BYTES ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

/* Sends the page-cache faults counted since the last event. */
static __always_inline void pcfault_send(__u64 id, struct gmt_trace_pcfault_val *v)
{
  __u64 n = v->pending;
  if (!n)
    return;
  struct gmt_trace_event *e = reserve(GMT_TEV_PCFAULT, id);
  if (!e)
    return;
  __sync_fetch_and_sub(&v->pending, n);
  e->addr = v->last_off;
  e->size = n;
  submit(e);
}

/* ---- host buffers tracked for faults ---- */

struct chunk_ctx {
  __u32 tgid;
  __u64 first;
  int add; /* +1 track, -1 untrack */
};

static void flush_chunk(struct gmt_trace_chunk_key *k, struct gmt_trace_chunk_val *v)
{
  __u64 n = v->pending;
  if (!n)
    return;
  struct gmt_trace_event *e = reserve(GMT_TEV_FAULT, (__u64)k->tgid << 32);
  if (!e)
    return;
  __sync_fetch_and_sub(&v->pending, n);
  e->addr = v->last_addr;
  e->size = n;
  submit(e);
}

static long chunk_step(__u32 i, void *data)
{
  struct chunk_ctx *c = data;
  struct gmt_trace_chunk_key k = {.tgid = c->tgid, .chunk = c->first + i};
  struct gmt_trace_chunk_val *v = bpf_map_lookup_elem(&host_chunks, &k);

  if (c->add > 0) {
    if (v) {
      __sync_fetch_and_add(&v->refs, 1);
      return 0;
    }
    struct gmt_trace_chunk_val nv = {.refs = 1};
    if (bpf_map_update_elem(&host_chunks, &k, &nv, BPF_NOEXIST) != 0) {
      v = bpf_map_lookup_elem(&host_chunks, &k); /* raced with another thread */
      if (v)
        __sync_fetch_and_add(&v->refs, 1);
      else
        count(GMT_TCNT_CHUNKS_FULL);
    }
    return 0;
  }
  if (!v)
    return 0;
  if (__sync_fetch_and_sub(&v->refs, 1) <= 1) {
    flush_chunk(&k, v); /* faults counted but not yet sent go now */
    bpf_map_delete_elem(&host_chunks, &k);
  }
  return 0;
}

static void chunks_update(__u32 tgid, __u64 start, __u64 len, int add)
{
  if (!len)
    return;
  struct chunk_ctx c = {.tgid = tgid, .first = start >> GMT_TRACE_CHUNK_SHIFT, .add = add};
  __u64 last = (start + len - 1) >> GMT_TRACE_CHUNK_SHIFT;
  __u64 n = last - c.first + 1;
  if (n > 131072)
    n = 131072;
  bpf_loop((__u32)n, chunk_step, &c, 0);
}

static void host_track(__u32 tgid, __u64 start, __u64 len)
{
  struct gmt_trace_host_key k = {.tgid = tgid, .start = start};
  struct host_range *r = bpf_map_lookup_elem(&host_ranges, &k);
  if (r) {
    __sync_fetch_and_add(&r->users, 1);
    return;
  }
  struct host_range nr = {.len = len, .users = 1};
  if (bpf_map_update_elem(&host_ranges, &k, &nr, BPF_NOEXIST) != 0) {
    count(GMT_TCNT_CHUNKS_FULL);
    return;
  }
  chunks_update(tgid, start, len, 1);
}

/* all: munmap takes the memory away whoever else holds the range. */
static void host_untrack(__u32 tgid, __u64 start, bool all)
{
  struct gmt_trace_host_key k = {.tgid = tgid, .start = start};
  struct host_range *r = bpf_map_lookup_elem(&host_ranges, &k);
  if (!r)
    return;
  if (!all && __sync_fetch_and_sub(&r->users, 1) > 1)
    return;
  __u64 len = r->len;
  bpf_map_delete_elem(&host_ranges, &k);
  chunks_update(tgid, start, len, -1);
}

/* ---- driver entry points ---- */

/* One side of a 2D/3D copy: its first byte, 0 for an array (no address). */
static __always_inline __u64 copy_side(__u32 type, __u64 host, __u64 device, __u64 x, __u64 y,
                                       __u64 z, __u64 pitch, __u64 height)
{
  __u64 base = type == GMT_CU_MEMORYTYPE_HOST                                          ? host
               : type == GMT_CU_MEMORYTYPE_DEVICE || type == GMT_CU_MEMORYTYPE_UNIFIED ? device
                                                                                       : 0;
  return base ? base + (z * height + y) * pitch + x : 0;
}

/* fn of a 2D/3D copy's event: its direction when both types say it. */
static __always_inline __u32 copy_dir(__u32 src_type, __u32 dst_type)
{
  if (src_type == GMT_CU_MEMORYTYPE_HOST && dst_type == GMT_CU_MEMORYTYPE_DEVICE)
    return GMT_TFN_MEMCPY_HTOD;
  if (src_type == GMT_CU_MEMORYTYPE_DEVICE && dst_type == GMT_CU_MEMORYTYPE_HOST)
    return GMT_TFN_MEMCPY_DTOH;
  return GMT_TFN_MEMCPY;
}

static __always_inline void fill_copy_2d(struct gmt_trace_event *e, __u64 uptr)
{
  struct gmt_cu_memcpy2d c;
  if (bpf_probe_read_user(&c, sizeof c, (const void *)uptr) != 0)
    return; /* fn stays 2D: user space counts it as not understood */
  e->fn = copy_dir(c.src_type, c.dst_type);
  e->addr = copy_side(c.dst_type, c.dst_host, c.dst_device, c.dst_x, c.dst_y, 0, c.dst_pitch, 0);
  e->addr2 = copy_side(c.src_type, c.src_host, c.src_device, c.src_x, c.src_y, 0, c.src_pitch, 0);
  e->size = c.width * c.height;
}

static __always_inline void fill_copy_3d(struct gmt_trace_event *e, __u64 uptr)
{
  struct gmt_cu_memcpy3d c;
  if (bpf_probe_read_user(&c, sizeof c, (const void *)uptr) != 0)
    return;
  e->fn = copy_dir(c.src_type, c.dst_type);
  e->addr = copy_side(c.dst_type, c.dst_host, c.dst_device, c.dst_x, c.dst_y, c.dst_z, c.dst_pitch,
                      c.dst_height);
  e->addr2 = copy_side(c.src_type, c.src_host, c.src_device, c.src_x, c.src_y, c.src_z, c.src_pitch,
                       c.src_height);
  e->size = c.width * c.height * c.depth;
}

/* A copy or prefetch, sent from its entry (GMT_TCOOKIE_ENTRY_ONLY): what
 * it moves is all in its arguments, and a return probe (a second trap, the
 * return address hijacked) plus the in-flight map's update and delete cost
 * more than the rest of the probe on every copy. So: ts_ns is when the
 * call began, rc 0 (its result is not seen: assumed success), dur_ns 0
 * (not measured). */
static __always_inline int emit_entry_only(struct pt_regs *ctx, __u64 id, __u32 cookie)
{
  struct gmt_trace_event *e = reserve(GMT_TEV_CALL, id);
  if (!e)
    return 0;
  /* Read every argument register up front: a ctx offset chosen by the
   * switch (the compiler merges the cases' loads) fails the verifier. */
  __u64 a0 = PT_REGS_PARM1(ctx), a1 = PT_REGS_PARM2(ctx), a2 = PT_REGS_PARM3(ctx);
  __u64 a3 = PT_REGS_PARM4(ctx), a4 = PT_REGS_PARM5(ctx);
  __u32 fn = GMT_TCOOKIE_FN(cookie);
  e->fn = fn;
  switch (fn) {
  case GMT_TFN_MEMCPY_HTOD:
  case GMT_TFN_MEMCPY_DTOH:
  case GMT_TFN_MEMCPY:
    e->addr = a0;
    e->addr2 = a1;
    e->size = a2;
    if (cookie & GMT_TCOOKIE_ASYNC)
      e->stream = a3;
    break;
  case GMT_TFN_PREFETCH:
    e->addr = a0;
    e->size = a1;
    e->flags = (__u32)a2; /* destination device */
    e->stream = a3;
    break;
  case GMT_TFN_PREFETCH_V2:
    e->addr = a0;
    e->size = a1;
    e->flags = (__u32)(a2 >> 32); /* CUmemLocation.id, passed in a register */
    e->stream = a4;
    break;
  case GMT_TFN_GMT_PINNED:
    e->addr = a0;
    e->size = a1;
    e->flags = (__u32)a2; /* 1: gmt registered it, 0: unregistered */
    break;
  case GMT_TFN_GMT_MOVED:
    e->addr = a0;
    e->size = a1;
    e->flags = (__u32)a2; /* 1: moved off the GPU, 0: back */
    e->dur_ns = a3;       /* timed by the hook */
    break;
  case GMT_TFN_MEMCPY_2D:
  case GMT_TFN_MEMCPY_3D:
    if (fn == GMT_TFN_MEMCPY_2D)
      fill_copy_2d(e, a0);
    else
      fill_copy_3d(e, a0);
    if (cookie & GMT_TCOOKIE_ASYNC)
      e->stream = a1;
    break;
  }
  submit(e);
  return 0;
}

SEC("uprobe")
int BPF_KPROBE(cuda_enter)
{
  __u64 id = bpf_get_current_pid_tgid();
  if (!traced(id >> 32))
    return 0;

  __u32 cookie = bpf_get_attach_cookie(ctx);
  struct inflight *cur = bpf_map_lookup_elem(&inflight, &id);
  if (cookie & GMT_TCOOKIE_ENTRY_ONLY) {
    /* Inside another probed call (one with a return probe, so in the map)
     * a copy is the driver's own doing, as any nested call is: dropped.
     * It has no return to undo a depth, so it takes none. The hook's
     * markers are never the driver's doing: they always go. */
    __u32 fn = GMT_TCOOKIE_FN(cookie);
    if (!cur || fn == GMT_TFN_GMT_PINNED || fn == GMT_TFN_GMT_MOVED)
      emit_entry_only(ctx, id, cookie);
    return 0;
  }
  if (cur) {
    cur->depth++;
    return 0;
  }
  struct inflight f = {
      .ts = bpf_ktime_get_ns(),
      .fn = GMT_TCOOKIE_FN(cookie),
  };
  f.args[0] = PT_REGS_PARM1(ctx);
  f.args[1] = PT_REGS_PARM2(ctx);
  f.args[2] = PT_REGS_PARM3(ctx);
  f.args[3] = PT_REGS_PARM4(ctx);
  f.args[4] = PT_REGS_PARM5(ctx);
  if (bpf_map_update_elem(&inflight, &id, &f, BPF_ANY) != 0)
    count(GMT_TCNT_INFLIGHT_FULL);
  return 0;
}

static __always_inline __u64 read_user_u64(__u64 uptr)
{
  __u64 v = 0;
  if (uptr)
    bpf_probe_read_user(&v, sizeof(v), (const void *)uptr);
  return v;
}

SEC("uretprobe")
int BPF_KRETPROBE(cuda_exit, long ret)
{
  __u64 id = bpf_get_current_pid_tgid();
  struct inflight *f = bpf_map_lookup_elem(&inflight, &id);
  if (!f)
    return 0;
  if (f->depth) {
    f->depth--;
    return 0;
  }
  __u32 cookie = bpf_get_attach_cookie(ctx);
  __u32 fn = f->fn;
  if (fn != GMT_TCOOKIE_FN(cookie)) {
    /* A return without its entry (an entry lost earlier): drop both. */
    bpf_map_delete_elem(&inflight, &id);
    return 0;
  }

  struct gmt_trace_event *e = reserve(GMT_TEV_CALL, id);
  if (!e) {
    bpf_map_delete_elem(&inflight, &id);
    return 0;
  }
  __u64 *a = f->args;
  bool alloc = false;
  int rc = (int)ret;

  e->fn = fn;
  e->rc = rc;
  e->dur_ns = e->ts_ns - f->ts;
  switch (fn) {
  case GMT_TFN_MEM_ALLOC:
  case GMT_TFN_MEM_ALLOC_MANAGED:
  case GMT_TFN_HOST_ALLOC:
  case GMT_TFN_HOST_ALLOC_FLAGS:
    e->addr = rc == 0 ? read_user_u64(a[0]) : 0;
    e->size = a[1];
    e->flags = (__u32)a[2];
    alloc = true;
    break;
  case GMT_TFN_MEM_ALLOC_ASYNC:
    e->addr = rc == 0 ? read_user_u64(a[0]) : 0;
    e->size = a[1];
    e->stream = a[2];
    alloc = true;
    break;
  case GMT_TFN_MEM_ALLOC_POOL_ASYNC:
    e->addr = rc == 0 ? read_user_u64(a[0]) : 0;
    e->size = a[1];
    e->addr2 = a[2]; /* the pool */
    e->stream = a[3];
    alloc = true;
    break;
  case GMT_TFN_MEM_ALLOC_PITCH:
    e->addr = rc == 0 ? read_user_u64(a[0]) : 0;
    e->size = rc == 0 ? read_user_u64(a[1]) * a[3] : a[2] * a[3];
    alloc = true;
    break;
  case GMT_TFN_HOST_REGISTER:
    e->addr = a[0];
    e->size = a[1];
    e->flags = (__u32)a[2];
    alloc = true;
    break;
  case GMT_TFN_MEM_FREE:
  case GMT_TFN_HOST_FREE:
  case GMT_TFN_HOST_UNREGISTER: e->addr = a[0]; break;
  case GMT_TFN_MEM_FREE_ASYNC:
    e->addr = a[0];
    e->stream = a[1];
    break;
  case GMT_TFN_MEM_MAP: /* physical memory (cuMemCreate) mapped at ptr */
    e->addr = a[0];
    e->size = a[1];
    e->addr2 = a[3]; /* the handle */
    alloc = true;
    break;
  case GMT_TFN_MEM_UNMAP:
    e->addr = a[0];
    e->size = a[1];
    break;
    /* Copies and prefetches have no return probe: emit_entry_only(). */
  }
  bpf_map_delete_elem(&inflight, &id);

  if (alloc && rc == 0) {
    /* At the return the stack starts at the call site in the caller. */
    __u32 depth = stack_depth > GMT_TRACE_STACK_DEPTH ? GMT_TRACE_STACK_DEPTH : stack_depth;
    long n = bpf_get_stack(ctx, e->stack, depth * sizeof(__u64), BPF_F_USER_STACK);
    e->nstack = n > 0 ? n / sizeof(__u64) : 0;
    if (fn == GMT_TFN_HOST_ALLOC || fn == GMT_TFN_HOST_ALLOC_FLAGS || fn == GMT_TFN_HOST_REGISTER)
      host_track(id >> 32, e->addr, e->size);
  } else if (rc == 0 && (fn == GMT_TFN_HOST_FREE || fn == GMT_TFN_HOST_UNREGISTER)) {
    host_untrack(id >> 32, e->addr, false);
  }
  submit(e);
  return 0;
}

/* ---- processes ---- */

SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_fork, struct task_struct *parent, struct task_struct *child)
{
  if (!follow_forks)
    return 0;
  __u32 ptgid = parent->tgid, ctgid = child->tgid;
  if (ptgid == ctgid || !traced(ptgid))
    return 0; /* a thread, or not ours */
  bpf_map_update_elem(&traced_tgids, &ctgid, &ptgid, BPF_ANY);
  struct gmt_trace_event *e = reserve(GMT_TEV_FORK, (__u64)ctgid << 32 | child->pid);
  if (!e)
    return 0;
  e->addr = ptgid;
  submit(e);
  return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_exit, struct task_struct *p, bool group_dead)
{
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tgid = id >> 32;
  if (!traced(tgid))
    return 0;
  /* A thread that dies inside a driver call never returns from it. */
  bpf_map_delete_elem(&inflight, &id);
  bpf_map_delete_elem(&sys_inflight, &id);
  bpf_map_delete_elem(&reclaim_start, &id);
  bpf_map_delete_elem(&compact_start, &id);
  if (!group_dead)
    return 0;
  bpf_map_delete_elem(&traced_tgids, &tgid);
  struct gmt_trace_pcfault_val *pc = bpf_map_lookup_elem(&pc_faults, &tgid);
  if (pc) {
    pcfault_send(id, pc);
    bpf_map_delete_elem(&pc_faults, &tgid);
  }
  struct gmt_trace_event *e = reserve(GMT_TEV_EXIT, id);
  if (!e)
    return 0;
  e->rc = BPF_CORE_READ(p, exit_code);
  submit(e);
  return 0;
}

/* ---- large anonymous mmaps: where big host buffers come from ---- */

#define NR_MMAP 9 /* x86_64 */
#define NR_MUNMAP 11
#define GMT_MAP_ANONYMOUS 0x20
#define GMT_PROT_RW 0x3 /* PROT_READ | PROT_WRITE */

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long nr)
{
  if (nr != NR_MMAP && nr != NR_MUNMAP)
    return 0;
  __u64 id = bpf_get_current_pid_tgid();
  if (!traced(id >> 32))
    return 0;
  /* The driver's own mappings (inside a probed call) are its business;
   * the call's event says what they are for. Entry-only calls (copies)
   * leave no mark, so a mapping made inside one is taken as the program's. */
  if (bpf_map_lookup_elem(&inflight, &id))
    return 0;

  struct sys_inflight s = {.nr = nr, .addr = regs->di, .len = regs->si};
  if (nr == NR_MMAP) {
    /* PROT_NONE is an address-space reservation, no host buffer: the
     * driver reserves the GPU's unified address range that way. */
    if (!(regs->r10 & GMT_MAP_ANONYMOUS) || !(regs->dx & GMT_PROT_RW) || s.len < min_mmap_bytes)
      return 0;
  } else {
    struct gmt_trace_host_key k = {.tgid = id >> 32, .start = s.addr};
    if (s.len < min_mmap_bytes && !bpf_map_lookup_elem(&host_ranges, &k))
      return 0;
  }
  bpf_map_update_elem(&sys_inflight, &id, &s, BPF_ANY);
  return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
  __u64 id = bpf_get_current_pid_tgid();
  struct sys_inflight *s = bpf_map_lookup_elem(&sys_inflight, &id);
  if (!s)
    return 0;
  struct sys_inflight c = *s;
  bpf_map_delete_elem(&sys_inflight, &id);

  bool ok = c.nr == NR_MMAP ? ret >= 0 || ret < -4095 : ret == 0;
  if (!ok)
    return 0;
  __u64 addr = c.nr == NR_MMAP ? (__u64)ret : c.addr;
  if (c.nr == NR_MMAP)
    host_track(id >> 32, addr, c.len);
  else
    host_untrack(id >> 32, addr, true);

  struct gmt_trace_event *e = reserve(c.nr == NR_MMAP ? GMT_TEV_MMAP : GMT_TEV_MUNMAP, id);
  if (!e)
    return 0;
  e->addr = addr;
  e->size = c.len;
  if (c.nr == NR_MMAP) { /* where the buffer was asked for */
    __u32 depth = stack_depth > GMT_TRACE_STACK_DEPTH ? GMT_TRACE_STACK_DEPTH : stack_depth;
    long n = bpf_get_stack(ctx, e->stack, depth * sizeof(__u64), BPF_F_USER_STACK);
    e->nstack = n > 0 ? n / sizeof(__u64) : 0;
    /* libc's mmap keeps no frame of its own, so the frame-pointer walk
     * skips its caller; the return address is on top of the user stack. */
    bpf_probe_read_user(&e->addr2, sizeof(e->addr2), (const void *)regs->sp);
  }
  submit(e);
  return 0;
}

/* ---- page faults in tracked host buffers ---- */

SEC("tp_btf/page_fault_user")
int BPF_PROG(page_fault_user, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tgid = id >> 32;
  if (!traced(tgid))
    return 0;
  struct gmt_trace_chunk_key k = {.tgid = tgid, .chunk = address >> GMT_TRACE_CHUNK_SHIFT};
  struct gmt_trace_chunk_val *v = bpf_map_lookup_elem(&host_chunks, &k);
  if (!v)
    return 0;

  __sync_fetch_and_add(&v->pending, 1);
  v->last_addr = address;
  __u64 now = bpf_ktime_get_ns();
  if (fault_sample_ns && now - v->last_emit < fault_sample_ns)
    return 0;
  v->last_emit = now;

  struct gmt_trace_event *e = reserve(GMT_TEV_FAULT, id);
  if (!e)
    return 0;
  __u64 n = v->pending;
  __sync_fetch_and_sub(&v->pending, n);
  e->addr = address;
  e->size = n;
  e->flags = (__u32)error_code;
  submit(e);
  return 0;
}

/* ---- stalls of traced processes: direct reclaim, compaction ----
 * Both run in the process that needs the memory, which waits for them
 * (kcompactd's own compaction is never traced). One direct compaction may
 * run compact_zone() once per zone: each run is a stall. */

static __always_inline int stall_begin(void *start_map)
{
  __u64 id = bpf_get_current_pid_tgid();
  if (!traced(id >> 32))
    return 0;
  __u64 now = bpf_ktime_get_ns();
  bpf_map_update_elem(start_map, &id, &now, BPF_ANY);
  return 0;
}

static __always_inline int stall_end(void *start_map, __u32 type, __u64 size)
{
  __u64 id = bpf_get_current_pid_tgid();
  __u64 *start = bpf_map_lookup_elem(start_map, &id);
  if (!start)
    return 0;
  __u64 t0 = *start;
  bpf_map_delete_elem(start_map, &id);
  struct gmt_trace_event *e = reserve(type, id);
  if (!e)
    return 0;
  e->dur_ns = e->ts_ns - t0;
  e->size = size;
  submit(e);
  return 0;
}

SEC("tp_btf/mm_vmscan_direct_reclaim_begin")
int BPF_PROG(reclaim_begin, int order)
{
  return stall_begin(&reclaim_start);
}

SEC("tp_btf/mm_vmscan_direct_reclaim_end")
int BPF_PROG(reclaim_end, unsigned long nr_reclaimed)
{
  return stall_end(&reclaim_start, GMT_TEV_RECLAIM, nr_reclaimed);
}

SEC("tp_btf/mm_compaction_begin")
int BPF_PROG(compact_begin)
{
  return stall_begin(&compact_start);
}

SEC("tp_btf/mm_compaction_end")
int BPF_PROG(compact_end)
{
  return stall_end(&compact_start, GMT_TEV_COMPACT, 0);
}

/* ---- page-cache faults: file-backed mappings (models, datasets) ---- */

SEC("tp_btf/mm_filemap_fault")
int BPF_PROG(filemap_fault, struct address_space *mapping, unsigned long index)
{
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tgid = id >> 32;
  if (!traced(tgid))
    return 0;
  struct gmt_trace_pcfault_val *v = bpf_map_lookup_elem(&pc_faults, &tgid);
  if (!v) {
    struct gmt_trace_pcfault_val nv = {};
    bpf_map_update_elem(&pc_faults, &tgid, &nv, BPF_NOEXIST);
    v = bpf_map_lookup_elem(&pc_faults, &tgid);
    if (!v)
      return 0;
  }
  __sync_fetch_and_add(&v->pending, 1);
  v->last_off = (__u64)index << 12;
  __u64 now = bpf_ktime_get_ns();
  if (fault_sample_ns && now - v->last_emit < fault_sample_ns)
    return 0;
  v->last_emit = now;
  pcfault_send(id, v);
  return 0;
}

/* ---- GPU errors: only where the NVIDIA driver defines the tracepoint ----
 * raw_tp, since the module's BTF is not there to type tp_btf at build time:
 * nvidia_dev_xid(const struct pci_dev *pdev, u32 error_code, const char *msg). */

SEC("raw_tp/nvidia_dev_xid")
int nvidia_xid(struct bpf_raw_tracepoint_args *ctx)
{
  struct gmt_trace_event *e = reserve(GMT_TEV_XID, bpf_get_current_pid_tgid());
  if (!e)
    return 0;
  e->flags = (__u32)ctx->args[1];
  bpf_probe_read_kernel_str(e->text, sizeof(e->text), (const void *)ctx->args[2]);
  submit(e);
  return 0;
}
