/* Alnair's per-call logs (metrics.log, timeline.log): every driver entry
 * point the hook wraps is timed where the wrapper takes its real function
 * (GMT_FRAME in frame.h), so no wrapper writes it itself.
 *
 * With GMT_LOG_DIR (or Alnair's PFLOG; GMT_LOG_DIR wins) unset, a wrapper
 * pays one relaxed load of gmt__calllog_on and one never-taken branch on
 * entry, and one test of a local on return. With it set, a call costs two
 * clock reads and a few stores into the calling thread's own counters and
 * ring: no lock, no system call, never a wait (about 100 ns on an H200).
 * A background thread drains the rings into timeline.log every 20 ms and
 * rewrites metrics.log every second; both are written again at exit. A
 * full ring drops the line (counted in metrics.log as timeline_dropped),
 * never the count. Time a call spent held at the token gate is logged
 * apart, as tokenWait (gmt__calllog_held).
 *
 * This header is the frame's timer and part of the base; the logs it
 * feeds are kept and written by hook/logs/calllog.c, which names no module
 * either (driver.c only for the names of the entry points).
 * docs/operators.md describes the files. */
#ifndef GMT_HOOK_CALLLOG_H
#define GMT_HOOK_CALLLOG_H

#include <stdatomic.h>
#include <stdint.h>

/* Nonzero while the logs are on: set at load from the environment,
 * cleared for good when the folder cannot be written. */
extern _Atomic int gmt__calllog_on;

/* One call under way: when it began (CLOCK_MONOTONIC, ns; 0 when the logs
 * were off as it began, GMT_CALLLOG_NESTED when it was made from inside
 * another timed call on the same thread) and which entry point it is. */
typedef struct {
  uint64_t t0;
  int id;
} gmt_calltimer_t;

#define GMT_CALLLOG_NESTED 1u

/* Slow halves, out of line: the clock and the thread's nesting depth. */
uint64_t gmt__calllog_enter(void);
void gmt__calllog_leave(const gmt_calltimer_t *t);

static inline gmt_calltimer_t gmt__calllog_begin(int id)
{
  gmt_calltimer_t t = {0, id};
  if (__builtin_expect(atomic_load_explicit(&gmt__calllog_on, memory_order_relaxed), 0))
    t.t0 = gmt__calllog_enter();
  return t;
}

static inline void gmt__calllog_end(gmt_calltimer_t *t)
{
  if (__builtin_expect(t->t0 != 0, 0))
    gmt__calllog_leave(t);
}

/* The token gate (hook/token) held the calling thread from t0 (CLOCK_MONOTONIC
 * ns) for ns: logged as the pseudo-API tokenWait (callfmt.h), one line a
 * hold, and left out of the burst of the call it held, so that a launch's
 * line is the launch's own time. Out of line: only a hold calls it. */
void gmt__calllog_held(uint64_t t0, uint64_t ns);

/* The gate's call after a hold, with the clock reads the gate made anyway:
 * a launch that was not held pays nothing, and with the logs off a hold
 * pays one relaxed load. */
static inline void gmt__calllog_gate_held(int64_t t0, int64_t ns)
{
  if (__builtin_expect(atomic_load_explicit(&gmt__calllog_on, memory_order_relaxed), 0) && ns > 0)
    gmt__calllog_held((uint64_t)t0, (uint64_t)ns);
}

/* Times the rest of the enclosing block as one call of symbol id: the
 * clock starts here and stops when the block is left, by any return. */
#define GMT_CALL_TIMED(id)                                                                         \
  __attribute__((cleanup(gmt__calllog_end))) gmt_calltimer_t gmt__calltimer = gmt__calllog_begin(id)

#endif
