/* The hook's lines on stderr (see log.h). */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int gmt__debug;

void gmt__say(const char *fmt, ...)
{
  char line[512];
  int n;
  if (gmt__debug > 1) { /* GMT_HOOK_DEBUG=2: each line with CLOCK_MONOTONIC seconds */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    n = snprintf(line, sizeof(line), "gmt[%d] %ld.%06ld: ", (int)getpid(), (long)ts.tv_sec,
                 ts.tv_nsec / 1000);
  } else
    n = snprintf(line, sizeof(line), "gmt[%d]: ", (int)getpid());
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
