/* The hook's own lines on stderr: debug output with GMT_HOOK_DEBUG=1, and
 * the few things it always says. Each line is one write, so lines of
 * several threads and processes do not mix. */
#ifndef GMT_HOOK_LOG_H
#define GMT_HOOK_LOG_H

extern int gmt__debug; /* GMT_HOOK_DEBUG: 0, 1, or 2 (lines timed) */

void gmt__say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define GMT_HOOK_DEBUG(...)                                                                        \
  do {                                                                                             \
    if (gmt__debug)                                                                                \
      gmt__say(__VA_ARGS__);                                                                       \
  } while (0)

#endif
