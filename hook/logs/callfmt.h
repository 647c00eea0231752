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
 * gmt's extra lines: name:timeline_dropped,count:<lines>, and the
 * pseudo-API tokenWait (GMT_CALLFMT_WAIT_NAME): the holds of calls at the
 * token gate, a count and a burst like an API's in metrics.log and a line
 * per hold in timeline.log, so that a launch's own line is its call time
 * without the wait for GPU time (gmt__callfmt_own_ns).
 *
 * That is GMT_LOG_FORMAT=entry. The default, GMT_LOG_FORMAT=seed, is the
 * format of Alnair's first hook (cuda_metrics.cpp), which existing parsers
 * read: seven names only, the variants of an entry point counted under one
 * (gmt__callfmt_seed_name), three lines each, every one always written:
 *   metrics.log   name:cuMemAlloc
 *                 count:124
 *                 burst:174295
 *   timeline.log  name:cuMemAlloc start:1663174512512732618 burst:1192
 * and the dropped lines and tokenWait as triples of the same shape; both
 * only when there are some, so a process that never waited writes the
 * seed's 21 lines exactly, and a parser that reads the seven names skips
 * the others. */
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

/* The pseudo-API of the token gate's holds (written in both formats). */
#define GMT_CALLFMT_WAIT_NAME "tokenWait"

/* A call's own time for its line: its duration dur_ns less the ns it was
 * held at the token gate (logged as tokenWait), never below 0. */
static inline uint64_t gmt__callfmt_own_ns(uint64_t dur_ns, uint64_t held_ns)
{
  return held_ns < dur_ns ? dur_ns - held_ns : 0;
}

/* The seed's names, in its order (GMT_CALLFMT_SEED_NAMES of them). */
#define GMT_CALLFMT_SEED_NAMES 7
extern const char *const gmt__callfmt_seed_names[GMT_CALLFMT_SEED_NAMES];

/* The index in gmt__callfmt_seed_names that entry point name counts under
 * (cuMemAlloc_v2 under cuMemAlloc, cuMemcpyHtoDAsync_v2 under
 * cuMemcpyH2D, ...), or -1 for one the seed does not log. */
int gmt__callfmt_seed_name(const char *name);

/* The seed's lines: a metrics.log triple, a timeline.log line, and the
 * dropped lines' triple. As the functions above otherwise. */
size_t gmt__callfmt_seed_metric(char *buf, size_t len, const char *name, uint64_t count,
                                uint64_t burst_ns);
size_t gmt__callfmt_seed_timeline(char *buf, size_t len, const char *name, uint64_t start_ns,
                                  uint64_t dur_ns);
size_t gmt__callfmt_seed_dropped(char *buf, size_t len, uint64_t lines);

/* Whether a line of n bytes must start a fresh timeline.log, the current
 * one holding size bytes: when it would pass max. An empty file takes any
 * line, so a line longer than max still gets written, alone. */
static inline int gmt__callfmt_must_rotate(uint64_t size, uint64_t n, uint64_t max)
{
  return size > 0 && n > max - (size < max ? size : max);
}

/* The names of process pid's files in the log folder (calllog.c makes
 * them there by name, relative to the folder it opened). plain: Alnair's
 * own names, for the process holding the folder's lock; else each name
 * carries the pid. */
typedef struct {
  char lock[32];     /* .gmt-calllog.lock: whoever holds it has the plain names */
  char metrics[48];  /* metrics.log or metrics.<pid>.log */
  char timeline[48]; /* timeline.log or timeline.<pid>.log */
  char rotated[52];  /* timeline + ".1" */
} gmt_callpaths_t;

void gmt__callfmt_paths(gmt_callpaths_t *p, int pid, int plain);

/* metrics.log is written into a temporary file renamed over it. Its name
 * carries random bits (rnd): a name another user can foresee is one they
 * can plant a link at first. At least 40 bytes. */
void gmt__callfmt_tmp_name(char *buf, size_t len, int pid, uint64_t rnd);

/* The logs' files are private unless GMT_LOG_MODE widens them. */
#define GMT_CALLLOG_DEFAULT_MODE 0600u

/* GMT_LOG_MODE: an octal file mode that keeps the owner's read and write
 * and adds only reads and writes (0600 to 0666: 0640, 0644, ...). 0 with
 * *mode, or -EINVAL. */
int gmt__callfmt_mode(const char *text, unsigned *mode);

/* The mode of a folder the hook makes for files of mode file_mode: the
 * owner's, plus reading and entering for whoever may read the files;
 * never writing, which would let them replace the files. */
unsigned gmt__callfmt_dir_mode(unsigned file_mode);

/* Who, other than the folder's owner, can rename and replace the files in
 * a folder of mode dir_mode: "others", "its group", or NULL when nobody
 * can (not writable by them, or sticky as /tmp, where only a file's owner
 * may rename it). */
const char *gmt__callfmt_dir_open_to(unsigned dir_mode);

/* Whether a file opened (without following a link) in the folder is one
 * the logs may write: a regular file of user euid with no other name.
 * Else 0 with why ("belongs to uid 65534", ...) filled, 1 when it may. */
int gmt__callfmt_file_ours(unsigned mode, unsigned uid, unsigned long nlink, unsigned euid,
                           char *why, size_t len);

#endif
