/* The one frame every interposed driver entry point is written in
 * (entry.c, alloc.c, hostpin.c, ctx.c, copy.c, memops.c, launch.c): the
 * steps all of them take, defined once here. A family's macro adds only
 * what is its own (alloc.c's charge, the swap gate, the token gate, pin
 * advice); no wrapper times itself, looks its driver function up by hand
 * or counts its own nesting.
 *
 *   GMT_FRAME(name)        opens the wrapper: the call is timed for the
 *                          per-call logs from here to the wrapper's return
 *                          (calllog.h), and `real` is the driver's
 *                          function with its own type; the wrapper answers
 *                          CUDA_ERROR_NOT_FOUND when the driver lacks it.
 *   GMT_FRAME_TIMED(name)  the timing alone, for a wrapper whose real
 *                          function depends on more than its name
 *                          (hostpin.c's allocators share one path).
 *   GMT_FRAME_NESTED(...)  inside another wrapper of this thread (a driver
 *                          calling its own exported entry points, or the
 *                          hook's own calls), the real call alone, with
 *                          these arguments: one call, counted once.
 *   GMT_FRAME_IN() / GMT_FRAME_OUT()
 *                          the span in which this thread's driver calls
 *                          are nested (gmt__t_depth, driver.h): around a
 *                          wrapper's work, and around the hook's own calls
 *                          made outside any wrapper (swap.c's moves,
 *                          stage.c's threads, hostpin.c's pool).
 *   GMT_FRAME_INSIDE()     nonzero inside such a span.
 *
 * Part of the base: it names no module. */
#ifndef GMT_HOOK_FRAME_H
#define GMT_HOOK_FRAME_H

#include "calllog.h"
#include "driver.h"

#define GMT_FRAME_TIMED(name) GMT_CALL_TIMED(GMT_SYM_##name)

#define GMT_FRAME(name)                                                                            \
  GMT_FRAME_TIMED(name);                                                                           \
  __typeof__(&name) real = GMT_REAL(name);                                                         \
  if (!real)                                                                                       \
  return CUDA_ERROR_NOT_FOUND

#define GMT_FRAME_INSIDE() (gmt__t_depth != 0)

#define GMT_FRAME_NESTED(...)                                                                      \
  do {                                                                                             \
    if (GMT_FRAME_INSIDE())                                                                        \
      return real(__VA_ARGS__);                                                                    \
  } while (0)

#define GMT_FRAME_IN() gmt__t_depth++
#define GMT_FRAME_OUT() gmt__t_depth--

#endif
