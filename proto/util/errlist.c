/* "path:line: reason" lines gathered (gmt_errlist.h). */
#include "gmt_errlist.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static void append(gmt_errlist_t *e, const char *fmt, va_list ap)
{
  if (e->oom)
    return;
  for (;;) {
    va_list cp;
    va_copy(cp, ap);
    size_t room = e->cap - e->len;
    int n = vsnprintf(e->buf ? e->buf + e->len : NULL, room, fmt, cp);
    va_end(cp);
    if (n < 0)
      return;
    if ((size_t)n < room) {
      e->len += (size_t)n;
      return;
    }
    size_t cap = e->cap ? e->cap * 2 : 512;
    while (cap - e->len <= (size_t)n)
      cap *= 2;
    char *nb = realloc(e->buf, cap);
    if (!nb) {
      e->oom = true;
      return;
    }
    e->buf = nb;
    e->cap = cap;
  }
}

static void append_f(gmt_errlist_t *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void append_f(gmt_errlist_t *e, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  append(e, fmt, ap);
  va_end(ap);
}

static void add_line(gmt_errlist_t *e, int line, const char *fmt, va_list ap)
{
  e->count++;
  if (line > 0)
    append_f(e, "%s:%d: ", e->path, line);
  else
    append_f(e, "%s: ", e->path);
  append(e, fmt, ap);
  append_f(e, "\n");
}

void gmt_errlist_add(gmt_errlist_t *e, int line, const char *fmt, ...)
{
  if (e->count >= e->max) {
    e->dropped++;
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  add_line(e, line, fmt, ap);
  va_end(ap);
}

void gmt_errlist_add_summary(gmt_errlist_t *e, int line, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  add_line(e, line, fmt, ap);
  va_end(ap);
}
