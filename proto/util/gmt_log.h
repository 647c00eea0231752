/* Logging for the daemons and the CLI: one line per message on stderr,
 * prefixed with the program name; debug lines only with -v. */
#ifndef GMT_LOG_H
#define GMT_LOG_H

#include <stddef.h>
#include <stdint.h>

enum { GMT_LOG_ERROR = 0, GMT_LOG_WARN = 1, GMT_LOG_INFO = 2, GMT_LOG_DEBUG = 3 };

void gmt_log_init(const char *prog, int level);
int gmt_log_level(void);
void gmt_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define gmt_error(...) gmt_log(GMT_LOG_ERROR, __VA_ARGS__)
#define gmt_warn(...) gmt_log(GMT_LOG_WARN, __VA_ARGS__)
#define gmt_info(...) gmt_log(GMT_LOG_INFO, __VA_ARGS__)
#define gmt_debug(...)                                                                             \
  do {                                                                                             \
    if (gmt_log_level() >= GMT_LOG_DEBUG)                                                          \
      gmt_log(GMT_LOG_DEBUG, __VA_ARGS__);                                                         \
  } while (0)

/* A string from outside (the wire, a file), fit to be quoted in a message
 * or a log line: unprintable bytes become '?', and one too long for buf
 * (at least 4 bytes) is cut and ends in "...". NULL is shown as "". */
const char *gmt_shown(const char *s, char *buf, size_t size);

/* The monotonic clock now as "SECONDS.MICROSECONDS" in buf: the time a
 * daemon's line (GMT_LOG_TIMES=1) and a hook's (GMT_HOOK_DEBUG=2) carry,
 * so that the two line up. Returns buf. */
const char *gmt_log_stamp(char *buf, size_t size);

/* Monotonic clock in nanoseconds and milliseconds. */
uint64_t gmt_now_ns(void);
static inline uint64_t gmt_now_ms(void)
{
  return gmt_now_ns() / 1000000u;
}
/* The same clock in ms with sub-ms precision. */
static inline double gmt_now_ms_f(void)
{
  return (double)gmt_now_ns() / 1e6;
}
/* The wall clock in Unix seconds (the times status shows). */
double gmt_unix_now(void);

#endif
