/* ProbeManager: the eBPF side of the tracer, seen from user space. Opens
 * the cudatrace skeleton, sets its configuration, loads it, attaches the
 * uprobes to a libcuda.so.1 (and to gmt's marker in libgmthook.so) and
 * the kernel tracepoints, and hands each ring-buffer event to a callback
 * from gmt_probes_poll() (own thread) or when gmt_probes_fd() is readable
 * (a libuv loop's uv_poll).
 *
 * Uprobes are one uprobe_multi link per libcuda where the kernel has them
 * (6.6+), else one perf-event uprobe per entry point;
 * GMT_TRACE_NO_UPROBE_MULTI=1 forces the latter (to test it).
 * GMT_TRACE_SKIP=sys_enter,sys_exit,... leaves those kernel-side programs
 * out (to measure what each costs; -v lists them as left out).
 *
 * Needs root, or CAP_BPF + CAP_PERFMON (+ CAP_SYS_RESOURCE on old
 * kernels): without them gmt_probes_open() fails with -EPERM. */
#ifndef GMT_TRACE_PROBES_H
#define GMT_TRACE_PROBES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cudatrace.h"

typedef struct gmt_probes gmt_probes_t;
typedef void (*gmt_probes_cb)(void *arg, const struct gmt_trace_event *ev);

typedef struct gmt_probes_opts {
  int pid;                 /* traced from the start; 0: only gmt_probes_add_pid() */
  bool follow_forks;       /* children of traced processes are traced too */
  uint64_t min_mmap_bytes; /* 0: 1 MiB */
  int64_t fault_sample_ns; /* <0: 1 ms; 0: every fault is an event */
  bool bpf_stats;          /* the kernel counts each program's runs and time
                              (a clock read more per run) while traced */
  gmt_probes_cb cb;
  void *arg;
} gmt_probes_opts_t;

/* What was attached, for -v and the summary. */
typedef struct gmt_probes_info {
  int uprobes;   /* entry points probed (an entry probe each) */
  int retprobes; /* of those, with a return probe too (not copies,
                    prefetches: GMT_TCOOKIE_ENTRY_ONLY) */
  int missing;   /* entry points the driver lacks, skipped */
  char missing_names[512];
  int slow; /* probed where a hit single-steps (~10x the cost, see prologue.c) */
  char slow_names[512];
  int hooks;                /* libgmthook files whose markers are probed */
  int kernel_attached;      /* tracepoint programs attached */
  char kernel_skipped[256]; /* those that could not be, and why */
} gmt_probes_info_t;

/* Opens, configures, loads, and attaches the kernel tracepoints. On
 * failure err says what failed, naming what it was attaching to. */
int gmt_probes_open(gmt_probes_t **pm, const gmt_probes_opts_t *o, char *err, size_t errlen);
/* Probes the driver entry points in one libcuda (a path as this process
 * sees it). Entry points the file does not export are skipped. */
int gmt_probes_attach_libcuda(gmt_probes_t *pm, const char *path, char *err, size_t errlen);
/* Probes gmt's markers (gmt_trace_pinned, GMT_TFN_GMT_PINNED;
 * gmt_trace_moved, GMT_TFN_GMT_MOVED) in one libgmthook.so, once per file
 * as libcuda is. A hook without a marker gets no probe for it, and that is
 * no error (said in the debug log). */
int gmt_probes_attach_hook(gmt_probes_t *pm, const char *path, char *err, size_t errlen);
/* Traces pid too (the daemon adds processes as they register). */
int gmt_probes_add_pid(gmt_probes_t *pm, uint32_t pid);
/* Stops tracing pid (0, or -ENOENT when it was not traced). */
int gmt_probes_remove_pid(gmt_probes_t *pm, uint32_t pid);

/* Hands waiting events to the callback; waits at most timeout_ms for a
 * wakeup, which the BPF side sends only once a batch waits (so call it at
 * least every GMT_TRACE_POLL_MS). Returns how many, or a negative code. */
int gmt_probes_poll(gmt_probes_t *pm, int timeout_ms);
int gmt_probes_fd(gmt_probes_t *pm);
/* Faults counted in the kernel but not yet sent (rate limiting): sent now,
 * as FAULT and PCFAULT events through the callback. pid 0: every process. With forget,
 * the kernel also stops tracking pid's host buffers (it exited). */
void gmt_probes_flush_faults(gmt_probes_t *pm, uint32_t pid, bool forget);

/* The kernel side's counters (gmt_trace_counter), summed over CPUs. */
void gmt_probes_counters(gmt_probes_t *pm, uint64_t out[GMT_TCNT_MAX]);
/* Events lost: ring buffer full or in-flight map full. */
uint64_t gmt_probes_dropped(gmt_probes_t *pm);
const gmt_probes_info_t *gmt_probes_info(const gmt_probes_t *pm);

/* One BPF program's runs so far (with opts.bpf_stats): the time the
 * tracer's kernel side took, in the traced processes and the kernel. */
typedef struct gmt_probes_prog_stat {
  char name[32];
  uint64_t runs, run_ns;
} gmt_probes_prog_stat_t;
/* Fills up to max; returns how many programs are loaded, or -ENOTSUP
 * without opts.bpf_stats (or when the kernel refused them). */
int gmt_probes_prog_stats(gmt_probes_t *pm, gmt_probes_prog_stat_t *out, size_t max);

void gmt_probes_free(gmt_probes_t *pm);

/* Where pid mapped libcuda.so.1, as a path this process can open
 * (through /proc/PID/root). -ESRCH: no such process; -ENOENT: not mapped. */
int gmt_probes_find_libcuda(int pid, char *path, size_t len);
/* The same for gmt's hook (libgmthook.so): -ENOENT for a process that
 * runs without it. */
int gmt_probes_find_hook(int pid, char *path, size_t len);

#endif
