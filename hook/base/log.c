/* The hook's lines on stderr (see log.h). */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmt_log.h" /* gmt_log_stamp */

int gmt__debug;

void gmt__say(const char *fmt, ...)
{
  char line[512], when[32];
  /* GMT_HOOK_DEBUG=2: each line with the monotonic clock's time. */
  int n = snprintf(line, sizeof(line), "gmt[%d]%s%s: ", (int)getpid(), gmt__debug > 1 ? " " : "",
                   gmt__debug > 1 ? gmt_log_stamp(when, sizeof when) : "");
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (m < 0)
    m = 0;
  size_t len = (size_t)n + (size_t)m;
  if (len > sizeof(line) - 2)
    len = sizeof(line) - 2;
  line[len++] = '\n';
  ssize_t w = write(STDERR_FILENO, line, len);
  (void)w;
}

/* Runs in every process the hook is preloaded into, CUDA or not: reads one
 * variable and nothing else. */
__attribute__((constructor)) static void log_init(void)
{
  const char *d = getenv("GMT_HOOK_DEBUG");
  gmt__debug = d && *d && strcmp(d, "0") != 0 ? (strcmp(d, "2") == 0 ? 2 : 1) : 0;
}
