/* Which of a table's columns `gmt top` shows at a terminal's width, and
 * how wide: every column that matters fits 80 cells, and a wider
 * terminal adds the others and then widens the bars and the history.
 * Pure, so that a unit test sets the width. */
#ifndef GMT_TOP_COLUMNS_H
#define GMT_TOP_COLUMNS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct gmt_top_col {
  const char *title;
  int min;   /* the narrowest it reads at (its values cut with '~' below want) */
  int want;  /* what its widest value needs */
  int max;   /* what it may grow to when the row has room (bars, the
              * history); at most want counts as want */
  bool jump; /* it takes max whole or not at all: a text with a longer
              * form ("2.0 GiB" for "2.0G") */
  int prio;  /* 0: always shown; otherwise left out before any column of a
              * lower prio, the highest first */
} gmt_top_col_t;

/* Sets widths[i] for the n columns of a row of width cells, gap cells
 * between two shown columns; 0 for a column left out. First the prio 0
 * columns at their min (shown even when they do not fit: the row is cut
 * then), and towards their want; then the others in prio order (ties:
 * left first) at their min, while each fits, stopping at the first that
 * does not, and towards their want; then the columns that jump to their
 * max where it fits whole; then the others with a max, one cell at a time
 * in turn, while the row has room. Returns the cells the row takes. */
int gmt_top_fit(const gmt_top_col_t *cols, size_t n, int width, int gap, int *widths);

/* The width of a terminal that is not drawn by curses (gmt top -n):
 * COLUMNS when it is a number from 1 to 1000, else the width the
 * terminal says (TIOCGWINSZ; 0: not a terminal), else 80. */
int gmt_top_width(const char *columns_env, int tty_cols);

#endif
