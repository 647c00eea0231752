/* One-line log messages on stderr, strings from outside made fit for
 * them, and the monotonic clock. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gmt_log.h"

static const char *log_prog = "gmt";
static int log_level = GMT_LOG_INFO;
static int log_times = -1; /* GMT_LOG_TIMES=1: each line with CLOCK_MONOTONIC seconds */

void gmt_log_init(const char *prog, int level)
{
  log_prog = prog;
  log_level = level;
}

int gmt_log_level(void)
{
  return log_level;
}

void gmt_log(int level, const char *fmt, ...)
{
  static const char *const names[] = {"error", "warning", "info", "debug"};
  char line[1024];
  va_list ap;
  int n;

  if (level > log_level)
    return;
  if (log_times < 0) {
    const char *t = getenv("GMT_LOG_TIMES");
    log_times = t && !strcmp(t, "1");
  }
  char when[32] = "";
  n = snprintf(line, sizeof(line), "%s%s%s: %s%s", log_prog, log_times ? " " : "",
               log_times ? gmt_log_stamp(when, sizeof when) : "",
               level <= GMT_LOG_WARN ? names[level] : "", level <= GMT_LOG_WARN ? ": " : "");
  va_start(ap, fmt);
  if (n > 0 && (size_t)n < sizeof(line))
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
  va_end(ap);
  /* One write per line, so lines of several threads do not interleave. */
  fprintf(stderr, "%s\n", line);
}

const char *gmt_shown(const char *s, char *buf, size_t size)
{
  size_t max = size - 4, i;

  if (!s)
    s = "";
  for (i = 0; i < max && s[i]; i++)
    buf[i] = isprint((unsigned char)s[i]) ? s[i] : '?';
  if (s[i]) {
    memcpy(buf + i, "...", 3);
    i += 3;
  }
  buf[i] = '\0';
  return buf;
}

const char *gmt_log_stamp(char *buf, size_t size)
{
  uint64_t ns = gmt_now_ns();
  snprintf(buf, size, "%llu.%06llu", (unsigned long long)(ns / 1000000000u),
           (unsigned long long)(ns % 1000000000u / 1000u));
  return buf;
}

double gmt_unix_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

uint64_t gmt_now_ns(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
