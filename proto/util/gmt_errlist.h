/* The problems of a file being read, one "path:line: reason\n" each,
 * gathered so that an operator fixing the file sees all of them at once.
 * Both of gmt's file readers use it: the settings file (settings.c) and
 * resource-config.txt (server/config.c). In proto/ because it is the lower
 * of the two; plain C, libc only. */
#ifndef GMT_ERRLIST_H
#define GMT_ERRLIST_H

#include <stdbool.h>
#include <stddef.h>

/* Set path and max, everything else zero:
 *   gmt_errlist_t e = {.path = path, .max = 50};
 * buf is malloc'd text (NULL while empty): the reader hands it to its
 * caller or frees it. */
typedef struct gmt_errlist {
  const char *path; /* names the file on each line */
  int max;          /* lines kept; a binary file must not give pages */
  char *buf;        /* the lines, NUL-terminated */
  size_t len, cap;
  int count;   /* lines kept */
  int dropped; /* lines past max, counted but not kept */
  bool oom;    /* out of memory on the way: buf is incomplete */
} gmt_errlist_t;

/* One line, "path:line: reason\n", or "path: reason\n" where line <= 0
 * (a problem of the whole file). Past max only counted in dropped. */
void gmt_errlist_add(gmt_errlist_t *e, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The same, kept even past max: the last line, saying how many were
 * dropped. */
void gmt_errlist_add_summary(gmt_errlist_t *e, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
