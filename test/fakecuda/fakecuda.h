/* Internals shared by the files of the fake libcuda.so.1: process state, the
 * handle registry, the device-address table and the cross-process memory
 * ledger. Nothing here is exported except through the cu* entry points. */
#ifndef GMT_FAKECUDA_H
#define GMT_FAKECUDA_H

/* Declare every raw symbol (cuMemAlloc and cuMemAlloc_v2, cuLaunchKernel and
 * cuLaunchKernel_ptsz) with its own signature, as the real driver does. */
#define __CUDA_API_VERSION_INTERNAL
#include <cuda.h>

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "machine.h" /* the devices, their memory and topology, the ledger */

#define GMT_FAKE_DRIVER_VERSION 13000
#define GMT_FAKE_GRANULARITY ((size_t)2 << 20)
#define GMT_FAKE_ALIGN ((size_t)512)

/* Kinds of handle the registry knows; a handle of the wrong kind is refused. */
enum gmt__kind {
  GMT__K_CTX = 1,
  GMT__K_STREAM,
  GMT__K_EVENT,
  GMT__K_MODULE,
  GMT__K_FUNC,
  GMT__K_LIBRARY,
  GMT__K_POOL,
  GMT__K_VMM,
  GMT__K_ARRAY,
  GMT__K_MIPMAP,
  GMT__K_GRAPH,
  GMT__K_NODE,
  GMT__K_EXEC,
};

struct gmt__fake {
  int inited;
  /* The devices CUDA_VISIBLE_DEVICES shows: ordinal i is the machine's
   * physical device phys[i] (machine.h), whose ledger entry, lock file,
   * UUID and bus id it uses. */
  int ndev;
  int phys[GMT_FAKE_MAX_DEVICES];
  /* Host<->device copy rates, bytes per second (0: free), so that pinned
   * memory is worth pinning here too: GMT_FAKE_PAGEABLE_GBPS (default 4)
   * and GMT_FAKE_PINNED_GBPS (default 20): the 5x of an H100 on PCIe Gen5
   * (10 and 50 GB/s there), slower so that it shows beside the fake's
   * own memmove. */
  double pageable_bps, pinned_bps;
  /* Page-locking costs, ns per byte: cuMemHostRegister and
   * cuMemHostUnregister each GMT_FAKE_REGISTER_MS_PER_GIB (default 46, as
   * measured on an H100; a registration holds the fake's lock meanwhile,
   * as the real driver stalls the process's launches behind a pin), and a
   * registration GMT_FAKE_FAULT_MS_PER_GIB more (default 200; 171-250 on
   * an H200) for the pages not yet in memory, which it faults in;
   * cuMemHostAlloc/cuMemAllocHost GMT_FAKE_HOSTALLOC_MS_PER_GIB (default
   * 374). */
  double register_npb, fault_npb, hostalloc_npb;
  /* GMT_FAKE_MEMSET_WAITS=1: a memset, when its turn comes, first waits
   * for the kernel running on its device (any process's) to end, as work
   * on a GPU waits for another context's time slice. So gmt-probe's tiny
   * memsets take longer on a device another process keeps busy, which
   * best-GPU selection reads (docs/devices.md). Off by default: memsets
   * otherwise never wait for other processes' kernels here. */
  int memset_waits;
  pthread_mutex_t lock; /* guards every per-process table */
};
extern struct gmt__fake gmt__fake;
extern int gmt__fake_log_on;

/* state.c */
CUresult gmt__fake_trace(const char *fn, CUresult r);
#define GMT_FAKE_RET(r) return gmt__fake_trace(__func__, (r))
void gmt__fake_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
CUresult gmt__fake_init(void);
void gmt__fake_lock(void);
void gmt__fake_unlock(void);
/* Charge bytes to this process's slot on dev; fails with
 * CUDA_ERROR_OUT_OF_MEMORY when the machine-wide free memory is short. */
CUresult gmt__fake_charge(int dev, uint64_t bytes);
void gmt__fake_uncharge(int dev, uint64_t bytes);
void gmt__fake_meminfo(int dev, uint64_t *free_b, uint64_t *total_b);
/* This process has a context on dev: NVML lists it there. */
void gmt__fake_mark_ctx(int dev);
int gmt__fake_dev_ok(CUdevice dev);
/* Handle registry (caller holds the lock). */
int gmt__handle_add(const void *h, int kind);
int gmt__handle_ok(const void *h, int kind);
void gmt__handle_del(const void *h);
void gmt__handle_each(int kind, void (*fn)(void *));

/* Enter an API that needs cuInit; on success returns 0. */
#define GMT_FAKE_NEED_INIT()                                                                       \
  do {                                                                                             \
    if (!gmt__fake.inited)                                                                         \
      GMT_FAKE_RET(CUDA_ERROR_NOT_INITIALIZED);                                                    \
  } while (0)

/* A _ptsz or _ptds entry point's stream: NULL there means the calling
 * thread's per-thread default stream, not the legacy one. */
#define GMT_PTSZ(s) ((s) == NULL ? CU_STREAM_PER_THREAD : (s))

/* device.c */
struct gmt__ctx {
  int dev;
  int primary;
  int refs;
  unsigned flags;
};
/* Device of the calling thread's current context (lock held). */
CUresult gmt__ctx_dev_locked(int *dev);
/* Device a stream runs on: its own, or the current context's for the
 * legacy and per-thread default streams (lock held). */
CUresult gmt__stream_dev_locked(CUstream s, int *dev);
struct gmt__queue;
/* The same, and the queue that work on the stream goes to (lock held). */
CUresult gmt__stream_queue_locked(CUstream s, int *dev, struct gmt__queue **q);
void gmt__device_reset_child(void);

/* memory.c: the table of fake device-address ranges. */
enum gmt__mem_kind {
  GMT__MEM_ALLOC = 1, /* cuMemAlloc, cuMemAllocPitch */
  GMT__MEM_MANAGED,
  GMT__MEM_POOL,        /* live block of a memory pool */
  GMT__MEM_POOL_CACHED, /* freed block the pool still holds */
  GMT__MEM_RESERVE,     /* cuMemAddressReserve: mapped piecewise */
};
struct gmt__vmm {
  int dev;
  size_t size;
  char *host;
  int maps;
  int refs; /* cuMemCreate's and each cuMemRetainAllocationHandle's, less the releases */
  unsigned long long flags;
  CUmemAllocationProp prop; /* as created: requestedHandleTypes says what it may be exported as */
  int exported;             /* cuMemExportToShareableHandle succeeded once */
};
struct gmt__map {
  CUdeviceptr base;
  size_t size;
  struct gmt__vmm *h;
  size_t offset;
  /* What cuMemSetAccess gave each device on this mapping
   * (CU_MEM_ACCESS_FLAGS_PROT_*): a fresh mapping gives none, and memory
   * no device may access faults (a copy of it fails), as on a GPU. */
  unsigned char prot[GMT_FAKE_MAX_DEVICES];
};
struct gmt__pool;
struct gmt__range {
  CUdeviceptr base;
  size_t size;
  int kind;
  int dev;
  char *host;
  size_t charged;
  struct gmt__pool *pool;
  struct gmt__map *maps;
  size_t nmaps, capmaps;
};
/* New range of `size` bytes of address space; charges `charge` bytes to dev
 * and backs it with zeroed host memory when `backed`. low: below 4 GiB, for
 * the v1 (32-bit CUdeviceptr) entry points. */
CUresult gmt__mem_new(int dev, int kind, size_t size, size_t charge, int backed, int low,
                      size_t align, struct gmt__range **out);
struct gmt__range *gmt__mem_find_base(CUdeviceptr p);
struct gmt__range *gmt__mem_find(CUdeviceptr p);
void gmt__mem_delete(struct gmt__range *r);
/* Host address behind device address p and how many bytes from p are
 * contiguous there; NULL if p is not live device memory (lock held). */
char *gmt__mem_resolve(CUdeviceptr p, size_t *avail);
char *gmt__hostbuf_new(size_t n);
void gmt__hostbuf_free(char *p, size_t n);
void gmt__mem_detach_pool(const struct gmt__pool *p);
void gmt__mem_reset_child(void);

/* pool.c */
void gmt__pool_free_block_locked(struct gmt__range *r);
void gmt__pool_sync_locked(void); /* release above each threshold */
void gmt__pool_reset_child(void);

/* vmm.c */
void gmt__vmm_reset_child(void);

/* hostmem.c */
void gmt__hostmem_reset_child(void);
/* [p, p+n) lies in one page-locked range, which the driver reads and
 * writes when a queued copy runs, not when it is issued (lock held). */
int gmt__hostmem_pinned_locked(const void *p, size_t n);

/* kernel.c */
struct gmt__func {
  struct gmt__module *mod;
  char name[64];
  int spin; /* first parameter is the duration in µs */
};
/* Duration in µs a launch of f with these parameters takes. */
uint64_t gmt__kernel_duration(const struct gmt__func *f, void **params, void **extra);
/* An operation that runs a kernel of `us` µs on dev, one at a time per
 * device machine-wide; NULL when out of memory. */
struct gmt__op *gmt__kernel_op(int dev, uint64_t us);
/* The device's time for an operation ready at ready_ns that runs now: when
 * this process's last kernel on dev ended, if that was a moment ago (the
 * thread running it woke late), so that an event's time is when the work
 * before it ended, as kernels' starts are (kernel.c). */
uint64_t gmt__kernel_clock(int dev, uint64_t ready_ns);
void gmt__kernel_reset_child(void);

/* The monotonic clock, and a wait until a time on it (spinning its tail,
 * so that it ends on time). */
uint64_t gmt__fake_now_ns(void);
void gmt__fake_run_until(uint64_t end_ns);

/* stream.c, graph.c */
void gmt__stream_reset_child(void);
void gmt__graph_reset_child(void);

/* queue.c: per-stream queues of work and a worker thread per device that
 * runs it, so that work runs after the call that issued it, as on a GPU.
 * Order, hand-offs and locks are explained there. */
struct gmt__mark; /* an event's records: issued, run, and when */
struct gmt__op {
  void (*run)(struct gmt__op *op);  /* by the worker or a waiter, without the fake's lock */
  void (*drop)(struct gmt__op *op); /* frees what arg owns, run or not; may be NULL */
  void (*fn)(void *);               /* for run: a host function, say */
  void *arg;
  uint64_t val;
  int dev;
  int worker_only; /* never run by a thread waiting in a synchronize */
  /* queue.c's own */
  int kind;
  uint64_t seq, gen, queued_ns;
  struct gmt__mark *mark;
  struct gmt__queue *q;
  struct gmt__op *next; /* also chains operations submitted together */
};
struct gmt__op *gmt__op_new(void);
void gmt__op_free(struct gmt__op *chain); /* one never submitted, and those after it */
struct gmt__queue *gmt__queue_new(int dev, int nonblocking);
/* Its stream is destroyed: the queue goes once its work has run. */
void gmt__queue_release(struct gmt__queue *q);
struct gmt__queue *gmt__queue_legacy(int dev);
struct gmt__queue *gmt__queue_per_thread(int dev); /* NULL when out of memory */
/* Queue the chain of operations, in order; *last (if not NULL) gets the
 * number of the last. On failure the operations are freed. */
CUresult gmt__queue_submit(struct gmt__queue *q, struct gmt__op *chain, uint64_t *last);
CUresult gmt__queue_record(struct gmt__queue *q, struct gmt__mark *m);
CUresult gmt__queue_wait_mark(struct gmt__queue *q, struct gmt__mark *m);
/* Whether an operation queued on q now would wait for work queued before. */
int gmt__queue_would_wait(const struct gmt__queue *q);
/* Waits, never with the fake's lock held: until q's work up to number seq
 * has run; for what cuStreamSynchronize of q waits for; for all work on
 * dev; for all work of the process. */
void gmt__queue_wait(const struct gmt__queue *q, uint64_t seq);
void gmt__queue_sync(const struct gmt__queue *q);
void gmt__queue_sync_device(int dev);
void gmt__queue_drain(void);
/* 1 when nothing a synchronize of q would wait for is pending. */
int gmt__queue_query(const struct gmt__queue *q);
struct gmt__mark *gmt__mark_new(void);
void gmt__mark_release(struct gmt__mark *m); /* the event is destroyed */
/* -1 never recorded, 0 the last record has not run, 1 it has, at *ns. */
int gmt__mark_query(struct gmt__mark *m, uint64_t *ns);
void gmt__mark_sync(struct gmt__mark *m);
void gmt__queue_fork_prepare(void);
void gmt__queue_fork_parent(void);
void gmt__queue_reset_child(void);
void gmt__queue_exit(void);

static inline size_t gmt__round_up(size_t n, size_t a)
{
  return (n + a - 1) / a * a;
}

#endif
