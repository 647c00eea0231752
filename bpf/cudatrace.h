/* Events of the CUDA tracer, shared by cudatrace.bpf.c (kernel side) and
 * the user side beside it (probes.c, agent.c). One fixed-size, tagged record per event on
 * one ring buffer: simpler to read than variable records, and at ~150 bytes
 * an event the ring buffer holds tens of thousands before anything drops.
 *
 * Times are bpf_ktime_get_ns(): CLOCK_MONOTONIC, as gmt_now_ns() reads. */
#ifndef GMT_CUDATRACE_H
#define GMT_CUDATRACE_H

#define GMT_TRACE_STACK_DEPTH 8
#define GMT_TRACE_TEXT_LEN 64
/* Host buffers are tracked for page faults in chunks of this many bytes
 * (a BPF hash of (tgid, address >> shift)). 2 MiB: one huge page. */
#define GMT_TRACE_CHUNK_SHIFT 21
/* The BPF side wakes the reader only once this much waits in the ring
 * buffer (of 16 MiB); besides, the CLI's reader looks every
 * GMT_TRACE_POLL_MS, and gmt-schd at each query and each 1 s sweep. */
#define GMT_TRACE_WAKEUP_BYTES (256 << 10)
#define GMT_TRACE_POLL_MS 100
/* Anonymous mmaps at least this big are host buffers (--min-mmap), and
 * so are host spans that copies touch in memory never seen allocated. */
#define GMT_TRACE_MIN_MMAP_BYTES (1u << 20)

/* What an event is (gmt_trace_event.type). */
enum gmt_trace_ev_type {
  GMT_TEV_CALL = 1, /* a probed driver call; fn says which. Sent at the
                       return, or at the entry for entry-only calls
                       (copies, prefetches: GMT_TCOOKIE_ENTRY_ONLY) */
  GMT_TEV_MMAP = 2, /* a large anonymous mmap: addr, size; addr2 = the
                       word on top of the user stack (mmap's return address) */
  GMT_TEV_MUNMAP = 3,
  GMT_TEV_FAULT = 4,    /* user page faults in a tracked host buffer: addr,
                           size = how many since the last one (rate limited) */
  GMT_TEV_FORK = 5,     /* pid = the new process, addr = its parent's tgid */
  GMT_TEV_EXIT = 6,     /* a traced process exited */
  GMT_TEV_XID = 7,      /* nvidia:nvidia_dev_xid: flags = Xid, text = message */
  GMT_TEV_RECLAIM = 8,  /* a direct reclaim stall: dur_ns, size = pages */
  GMT_TEV_COMPACT = 9,  /* a compaction run the process waited for: dur_ns */
  GMT_TEV_PCFAULT = 10, /* page faults served from the page cache (file-backed
                           mappings): size = how many since the last one
                           (rate limited), addr = the last one's file offset */
};

/* Which driver entry point a GMT_TEV_CALL comes from (the uprobe's
 * bpf_cookie). Names and argument layouts are in probes.c. */
enum gmt_trace_fn {
  GMT_TFN_MEM_ALLOC = 1,        /* cuMemAlloc_v2(CUdeviceptr *, size) */
  GMT_TFN_MEM_ALLOC_PITCH,      /* cuMemAllocPitch_v2(dptr, *pitch, w, h, elem) */
  GMT_TFN_MEM_ALLOC_MANAGED,    /* cuMemAllocManaged(dptr, size, flags) */
  GMT_TFN_MEM_ALLOC_ASYNC,      /* cuMemAllocAsync(dptr, size, stream) */
  GMT_TFN_MEM_ALLOC_POOL_ASYNC, /* cuMemAllocFromPoolAsync(dptr, size, pool, stream) */
  GMT_TFN_MEM_FREE,             /* cuMemFree_v2(dptr) */
  GMT_TFN_MEM_FREE_ASYNC,       /* cuMemFreeAsync(dptr, stream) */
  GMT_TFN_HOST_ALLOC,           /* cuMemAllocHost_v2(void **, size) */
  GMT_TFN_HOST_ALLOC_FLAGS,     /* cuMemHostAlloc(void **, size, flags) */
  GMT_TFN_HOST_FREE,            /* cuMemFreeHost(p) */
  GMT_TFN_HOST_REGISTER,        /* cuMemHostRegister_v2(p, size, flags) */
  GMT_TFN_HOST_UNREGISTER,      /* cuMemHostUnregister(p) */
  GMT_TFN_MEMCPY_HTOD,          /* cuMemcpyHtoD*(dst dev, src host, n[, stream]) */
  GMT_TFN_MEMCPY_DTOH,          /* cuMemcpyDtoH*(dst host, src dev, n[, stream]) */
  GMT_TFN_MEMCPY,               /* cuMemcpy[Async](dst, src, n[, stream]) */
  GMT_TFN_PREFETCH,             /* cuMemPrefetchAsync(p, n, dev, stream) */
  GMT_TFN_PREFETCH_V2,          /* cuMemPrefetchAsync_v2(p, n, loc, flags, stream) */
  GMT_TFN_MEMCPY_2D,            /* cuMemcpy2D*(const CUDA_MEMCPY2D *[, stream]) */
  GMT_TFN_MEMCPY_3D,            /* cuMemcpy3D*(const CUDA_MEMCPY3D *[, stream]) */
  GMT_TFN_MEM_MAP,              /* cuMemMap(ptr, size, offset, handle, flags) */
  GMT_TFN_MEM_UNMAP,            /* cuMemUnmap(ptr, size) */
  /* Not the driver's: gmt_trace_pinned(addr, size, pinned) in libgmthook.so,
   * which the hook calls right after it registered a buffer itself (pinned
   * 1) or unregistered one (0, size 0): the HOST_REGISTER or _UNREGISTER
   * just before it on the thread was gmt's, not the program's. Entry only;
   * the event's flags carry pinned. */
  GMT_TFN_GMT_PINNED,
  /* Not the driver's either: gmt_trace_moved(addr, bytes, out, ns) in
   * libgmthook.so, which the hook calls after it moved a whole allocation
   * off the GPU (out 1) or back (0) in mode=swap or mode=um, the move
   * having taken ns. Entry only; flags carry out, dur_ns the move's ns. */
  GMT_TFN_GMT_MOVED,
  GMT_TFN_MAX
};

/* The driver's CUDA_MEMCPY2D and CUDA_MEMCPY3D as the probes read them
 * (the BPF side cannot include cuda.h; test/unit/test_trace_abi.c checks
 * the layouts against it). A 2D/3D copy's event carries the fn of its
 * direction (HTOD, DTOH, or MEMCPY to classify by address), the first byte
 * of each side, and width x height x depth bytes. */
enum {
  GMT_CU_MEMORYTYPE_HOST = 1,
  GMT_CU_MEMORYTYPE_DEVICE = 2,
  GMT_CU_MEMORYTYPE_ARRAY = 3,
  GMT_CU_MEMORYTYPE_UNIFIED = 4
};
struct gmt_cu_memcpy2d {
  unsigned long long src_x, src_y;
  unsigned int src_type, pad0;
  unsigned long long src_host, src_device, src_array, src_pitch;
  unsigned long long dst_x, dst_y;
  unsigned int dst_type, pad1;
  unsigned long long dst_host, dst_device, dst_array, dst_pitch;
  unsigned long long width, height;
};
struct gmt_cu_memcpy3d {
  unsigned long long src_x, src_y, src_z, src_lod;
  unsigned int src_type, pad0;
  unsigned long long src_host, src_device, src_array, reserved0, src_pitch, src_height;
  unsigned long long dst_x, dst_y, dst_z, dst_lod;
  unsigned int dst_type, pad1;
  unsigned long long dst_host, dst_device, dst_array, reserved1, dst_pitch, dst_height;
  unsigned long long width, height, depth;
};

/* bpf_cookie of a uprobe: the fn in the low 16 bits, flags above. */
#define GMT_TCOOKIE_ASYNC (1u << 16) /* the entry point takes a stream */
/* Entry probe only, no return probe: the entry sends the event itself,
 * with rc 0 (the result is not seen: assumed success) and dur_ns 0 (not
 * measured). Copies and prefetches, whose arguments say everything: a
 * return probe costs a second trap and an in-flight map update + delete
 * per call, most of the tracer's cost on a copy-heavy program. */
#define GMT_TCOOKIE_ENTRY_ONLY (1u << 17)
#define GMT_TCOOKIE_FN(c) ((c)&0xffffu)

/* gmt_trace_event.flags of a FAULT: the x86 page-fault error code. */

/* Indexes of the per-CPU counters map "counters". */
enum gmt_trace_counter {
  GMT_TCNT_RINGBUF_FULL = 0, /* an event dropped: ring buffer full */
  GMT_TCNT_INFLIGHT_FULL,    /* a call not recorded: in-flight map full */
  GMT_TCNT_CHUNKS_FULL,      /* a host buffer not tracked for faults */
  GMT_TCNT_MAX
};

struct gmt_trace_event {
  unsigned int type; /* gmt_trace_ev_type */
  unsigned int fn;   /* gmt_trace_fn for GMT_TEV_CALL */
  unsigned int pid;  /* tgid */
  unsigned int tid;
  unsigned long long ts_ns;  /* at the return of a call (at its entry for an
                                entry-only call), else when seen */
  unsigned long long dur_ns; /* call or stall duration; 0 for entry-only
                                calls (not measured) */
  unsigned long long addr;   /* allocation / copy destination / fault address */
  unsigned long long addr2;  /* copy source */
  unsigned long long size;
  unsigned long long stream;
  int rc;              /* CUresult (0 for entry-only calls: not seen), or a
                          syscall's return */
  unsigned int flags;  /* alloc flags, fault error code, Xid */
  unsigned int nstack; /* frames in stack[] (allocations only) */
  unsigned int pad;
  union {
    unsigned long long stack[GMT_TRACE_STACK_DEPTH]; /* user return addresses */
    char text[GMT_TRACE_TEXT_LEN];
  };
};

/* Values of the pc_faults map (tgid ->), which user space also reads. */
struct gmt_trace_pcfault_val {
  unsigned long long pending;   /* faults not yet sent */
  unsigned long long last_emit; /* ns */
  unsigned long long last_off;  /* file offset of the last one */
};

/* Keys and values of the host_chunks map, which user space also reads
 * (faults counted but not yet sent, at the end of a trace). */
struct gmt_trace_chunk_key {
  unsigned int tgid;
  unsigned int pad;
  unsigned long long chunk; /* address >> GMT_TRACE_CHUNK_SHIFT */
};
struct gmt_trace_chunk_val {
  unsigned long long pending;   /* faults not yet sent */
  unsigned long long last_emit; /* ns */
  unsigned long long last_addr; /* where the last fault was */
  unsigned int refs;            /* tracked buffers that touch this chunk */
  unsigned int pad;
};
struct gmt_trace_host_key {
  unsigned int tgid;
  unsigned int pad;
  unsigned long long start;
};

#endif
