/* `gmt top`'s column fitting (top_columns.h). A column is either there
 * at a readable width or not there at all: a table whose every column is
 * cut is harder to read than one with fewer columns. */
#include "top_columns.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define FIT_MAX_COLS 64

static int max_of(const gmt_top_col_t *c)
{
  int want = c->want > c->min ? c->want : c->min;
  return c->max > want ? c->max : want;
}

/* Widens the shown columns of prio range [lo, hi] towards their want, in
 * order, while the row has room. */
static void towards_want(const gmt_top_col_t *cols, const size_t *order, size_t n, int lo, int hi,
                         int width, int *widths, int *used)
{
  for (size_t k = 0; k < n && *used < width; k++) {
    size_t i = order[k];
    if (!widths[i] || cols[i].prio < lo || cols[i].prio > hi || cols[i].want <= widths[i])
      continue;
    int more = cols[i].want - widths[i];
    if (more > width - *used)
      more = width - *used;
    widths[i] += more;
    *used += more;
  }
}

int gmt_top_fit(const gmt_top_col_t *cols, size_t n, int width, int gap, int *widths)
{
  size_t order[FIT_MAX_COLS] = {0};
  if (n > FIT_MAX_COLS)
    n = FIT_MAX_COLS;
  /* By prio, ties left first: a stable insertion sort of at most a few
   * dozen columns. */
  for (size_t i = 0; i < n; i++) {
    size_t j = i;
    while (j > 0 && cols[order[j - 1]].prio > cols[i].prio) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = i;
  }
  int used = 0, shown = 0;
  for (size_t i = 0; i < n; i++)
    widths[i] = 0;
  /* What matters, at the width it reads best at, before anything else. */
  for (size_t k = 0; k < n && cols[order[k]].prio == 0; k++) {
    widths[order[k]] = cols[order[k]].min > 0 ? cols[order[k]].min : 1;
    used += widths[order[k]] + (shown++ ? gap : 0);
  }
  towards_want(cols, order, n, 0, 0, width, widths, &used);
  for (size_t k = 0; k < n; k++) {
    const gmt_top_col_t *c = &cols[order[k]];
    if (c->prio == 0)
      continue;
    int w = c->min > 0 ? c->min : 1;
    int need = w + (shown ? gap : 0);
    if (used + need > width)
      break;
    widths[order[k]] = w;
    used += need;
    shown++;
  }
  towards_want(cols, order, n, 1, INT_MAX, width, widths, &used);
  for (size_t k = 0; k < n; k++) {
    size_t i = order[k];
    int more = max_of(&cols[i]) - widths[i];
    if (widths[i] && cols[i].jump && more > 0 && more <= width - used) {
      widths[i] += more;
      used += more;
    }
  }
  /* The rest to the columns that grow, a cell each in turn: bars side by
   * side stay alike. */
  bool grew = true;
  while (used < width && grew) {
    grew = false;
    for (size_t k = 0; k < n && used < width; k++) {
      size_t i = order[k];
      if (widths[i] && !cols[i].jump && widths[i] < max_of(&cols[i])) {
        widths[i]++;
        used++;
        grew = true;
      }
    }
  }
  return used;
}

int gmt_top_width(const char *columns_env, int tty_cols)
{
  if (columns_env && *columns_env) {
    char *end = NULL;
    errno = 0;
    long v = strtol(columns_env, &end, 10);
    if (!errno && end != columns_env && !*end && v >= 1 && v <= 1000)
      return (int)v;
  }
  return tty_cols > 0 ? tty_cols : 80;
}
