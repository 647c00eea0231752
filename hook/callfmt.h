/* The text of Alnair's per-call logs, and the rules around their files
 * (pure: no I/O, no CUDA; test/unit/test_callfmt.c checks it). calllog.c
 * gathers the calls and writes what these functions format.
 *
 * Alnair's profiler hook (alnair-profiler/profiler-hook-lib) writes, and
 * gmt follows it:
 *   metrics.log   one line per API:   name:cuLaunchKernel,count:186804,burst:1414970
 *                 (burst: total microseconds spent in the calls)
 *   timeline.log  one line per call:  name:cuMemAlloc_v2, start:1663174512512732618, burst:1192
 *                 (start: nanoseconds since the Unix epoch; burst: microseconds)
 * Alnair's non-API line (name:mem_used,count:<bytes>) is the model for
 * gmt's one extra line, name:timeline_dropped,count:<lines>. */
#ifndef GMT_HOOK_CALLFMT_H
#define GMT_HOOK_CALLFMT_H

#include <stddef.h>
#include <stdint.h>

/* timeline.log's bound when GMT_LOG_MAX_BYTES is not set. */
#define GMT_CALLLOG_DEFAULT_MAX_BYTES (64ull << 20)

/* A metrics.log line for one API (burst_ns summed over its calls, written
 * in whole microseconds). Returns the line's length with its newline, or
 * 0 when it does not fit in len bytes (nothing usable is written then). */
size_t gmt__callfmt_metric(char *buf, size_t len, const char *name, uint64_t count,
                           uint64_t burst_ns);

/* A timeline.log line for one call: start_ns since the epoch, written as
 * is; dur_ns written in whole microseconds (rounded down, as Alnair's). */
size_t gmt__callfmt_timeline(char *buf, size_t len, const char *name, uint64_t start_ns,
                             uint64_t dur_ns);

/* metrics.log's line for timeline lines that were not written. */
size_t gmt__callfmt_dropped(char *buf, size_t len, uint64_t lines);

/* Whether a line of n bytes must start a fresh timeline.log, the current
 * one holding size bytes: when it would pass max. An empty file takes any
 * line, so a line longer than max still gets written, alone. */
static inline int gmt__callfmt_must_rotate(uint64_t size, uint64_t n, uint64_t max)
{
  return size > 0 && n > max - (size < max ? size : max);
}

/* The files of process pid in dir. plain: Alnair's own names, for the
 * process holding the folder's lock; else each name carries the pid. */
typedef struct {
  char lock[4096];     /* dir/.gmt-calllog.lock: whoever holds it has the plain names */
  char metrics[4096];  /* dir/metrics.log or dir/metrics.<pid>.log */
  char tmp[4096];      /* dir/.metrics.<pid>.log.tmp, renamed over metrics */
  char timeline[4096]; /* dir/timeline.log or dir/timeline.<pid>.log */
  char rotated[4096];  /* timeline + ".1" */
} gmt_callpaths_t;

/* Fills p (tmp always carries the pid). 0, or -ENAMETOOLONG. */
int gmt__callfmt_paths(gmt_callpaths_t *p, const char *dir, int pid, int plain);

#endif
