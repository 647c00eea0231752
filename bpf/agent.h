/* TracerAgent: the tracer as a whole. Starts the probes, turns their
 * events into MemHistory entries (allocations with call sites, copies,
 * faults, forks and exits), and answers for the history: hot and cold
 * spots, dumps. Either runs its own polling thread (the CLI) or is polled
 * by its owner when gmt_tracer_fd() is readable (gmt-schd's loop).
 *
 * The tracer's one door: gmt-schd (server/rpc_trace.c) and `gmt trace`
 * (client/cli/cmd_trace.c) include this header only. The headers below come
 * through it for their types and value helpers (gmt_alloc_site_format(),
 * gmt_trace_alloc_to_pb(), gmt_probes_find_libcuda(), ...); the history
 * itself is reached through the accessors here, each of which takes
 * MemHistory's lock, so readers may ask while it runs, from any thread. */
#ifndef GMT_TRACE_AGENT_H
#define GMT_TRACE_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dump.h"
#include "memhistory.h"
#include "probes.h"

typedef struct gmt_tracer gmt_tracer_t;

typedef struct gmt_tracer_opts {
  int pid; /* the process to trace from the start; 0: none, processes join
            * with gmt_tracer_add_pid() (the node daemon) */
  bool follow_forks;
  uint64_t min_mmap_bytes; /* 0: 1 MiB */
  int64_t fault_sample_ns; /* <0: default (1 ms) */
  bool own_thread;         /* poll on a thread of its own */
  const char *libcuda;     /* NULL: the one pid mapped */
  size_t max_events;       /* kept per allocation; 0: GMT_HISTORY_MAX_EVENTS */
  size_t max_ended;        /* ended histories kept; 0: all (gmt_memhistory_set_max_ended) */
  bool bpf_stats;          /* count each BPF program's runs and time */
} gmt_tracer_opts_t;

int gmt_tracer_new(gmt_tracer_t **t, const gmt_tracer_opts_t *o);
/* Loads and attaches (to opts.pid's libcuda, and to gmt's marker in the
 * libgmthook.so it runs under, if any). On failure err holds one line
 * saying what failed; -EPERM/-EACCES when this user may not load BPF
 * programs. */
int gmt_tracer_start(gmt_tracer_t *t, char *err, size_t errlen);
/* Without own_thread: handle what the probes sent, waiting at most
 * timeout_ms. */
int gmt_tracer_poll(gmt_tracer_t *t, int timeout_ms);
int gmt_tracer_fd(gmt_tracer_t *t);
/* Stops polling, detaches, and takes in what was still on its way (the
 * ring buffer, faults counted but not yet sent). The history stays. */
void gmt_tracer_stop(gmt_tracer_t *t);
void gmt_tracer_free(gmt_tracer_t *t);

/* ---- many processes (gmt-schd): after a successful start ---- */

/* Probes the driver entry points in one more libcuda (a path this process
 * can open; gmt_probes_find_libcuda() gives one). Each file is probed
 * once, whatever path reaches it. */
int gmt_tracer_attach_libcuda(gmt_tracer_t *t, const char *path, char *err, size_t errlen);
/* Traces pid (and, with follow_forks, the children it forks from now on),
 * with gmt's marker probed in the libgmthook.so it runs under, if any. */
int gmt_tracer_add_pid(gmt_tracer_t *t, uint32_t pid);
/* pid ended without its exit reaching us (it exited before it was added,
 * or the event was lost): it is no longer traced, and what it held ends
 * now. Its histories stay. */
void gmt_tracer_pid_gone(gmt_tracer_t *t, uint32_t pid);
/* Takes in what the kernel has sent so far, and the faults it only
 * counted (rate limiting), so that a reader sees exact counters. */
void gmt_tracer_sync(gmt_tracer_t *t);
/* Stops tracing pid if it still runs and drops every history it left
 * (see gmt_memhistory_forget_process()). */
void gmt_tracer_forget_pid(gmt_tracer_t *t, uint32_t pid);

/* The root process exited (a GMT_TEV_EXIT for it was handled). */
bool gmt_tracer_root_exited(gmt_tracer_t *t);
/* Events lost in the kernel so far. */
uint64_t gmt_tracer_dropped(gmt_tracer_t *t);
const gmt_probes_info_t *gmt_tracer_probes_info(gmt_tracer_t *t);
/* Each BPF program's runs and time so far (opts.bpf_stats; before
 * gmt_tracer_stop): see gmt_probes_prog_stats(). */
int gmt_tracer_prog_stats(gmt_tracer_t *t, gmt_probes_prog_stat_t *out, size_t max);

/* ---- the history: copies, each taken under MemHistory's lock ---- */

/* The record of every traced process, in the order the tracer first saw
 * them (a forked child after its parent): *out is malloc'd (NULL when
 * none), the caller frees it. */
int gmt_tracer_processes(gmt_tracer_t *t, gmt_trace_process_t **out, size_t *n);
/* The newest record of pid; -ENOENT if none. */
int gmt_tracer_process_info(gmt_tracer_t *t, uint32_t pid, gmt_trace_process_t *out);
/* The k hottest and the k coldest allocations, ranked as by
 * gmt_memhistory_hotspots() and _coldspots(), of the processes in pids
 * (sorted ascending, npids of them), or of every process when pids is
 * NULL. hot and cold have room for k each. */
void gmt_tracer_spots(gmt_tracer_t *t, const uint32_t *pids, size_t npids, size_t k,
                      gmt_alloc_info_t *hot, size_t *nhot, gmt_alloc_info_t *cold, size_t *ncold);
/* The k allocations gmt's hook moved most (gmt_memhistory_most_moved()). */
size_t gmt_tracer_most_moved(gmt_tracer_t *t, size_t k, gmt_alloc_info_t *out);
void gmt_tracer_totals(gmt_tracer_t *t, gmt_memhistory_totals_t *tot);
void gmt_tracer_meta(gmt_tracer_t *t, gmt_trace_meta_t *meta);
/* By extension: .json, .gmtz, .trace.json. */
int gmt_tracer_dump(gmt_tracer_t *t, const char *path);

/* ---- a dump read back (`gmt trace --load`) ---- */

/* A tracer that never runs, holding what a .json or .gmtz dump holds: its
 * histories, and its meta for gmt_tracer_meta(). GMT_EDECODE for a file
 * that is neither. */
int gmt_tracer_load(gmt_tracer_t **t, const char *path);

#endif
