/* A value as cells of `gmt top`'s screen: text cut to a column, the bars
 * of a share against its REQUEST and of memory against its quota, a
 * sparkline of a share's history; and what the terminal can show (colour,
 * glyphs beyond ASCII). Pure: cmd_top.c asks the terminal and draws, so
 * that a unit test reads the cells a person sees. */
#ifndef GMT_TOP_GLYPHS_H
#define GMT_TOP_GLYPHS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a cell means, drawn as a colour where the terminal has one (and
 * not at all where it has none: the glyphs alone say it too). */
enum {
  GMT_TOP_C_NONE = 0,
  GMT_TOP_C_GOOD = 1, /* used within what the pod is entitled to (green) */
  GMT_TOP_C_WARN = 2, /* a share above REQUEST, memory past 75% of its quota (yellow) */
  GMT_TOP_C_BAD = 3,  /* memory past 90% of its quota: allocations near refusal (red) */
  GMT_TOP_C_DIM = 4,  /* entitled but not used */
  GMT_TOP_C_COUNT = 5,
};

/* The widest run of cells one value takes. */
#define GMT_TOP_CELLS_MAX 256

/* A run of n cells: text is UTF-8 (every glyph gmt writes is one cell
 * wide), color[i] the meaning of cell i. */
typedef struct gmt_top_cells {
  char text[GMT_TOP_CELLS_MAX * 3 + 1];
  unsigned char color[GMT_TOP_CELLS_MAX];
  int n;
} gmt_top_cells_t;

/* s, which may come from a process or a daemon, in exactly width cells
 * (0 to GMT_TOP_CELLS_MAX): printable ASCII only ('?' for any other
 * byte), a longer text cut with '~' as its last cell, padded with spaces
 * (on the left when right). Every cell gets color. */
void gmt_top_cells_text(gmt_top_cells_t *c, const char *s, int width, bool right,
                        unsigned char color);

/* A bar of width cells scaled to full, "[" and "]" included (nothing but
 * spaces below 3 cells): '|' what is used within what it is entitled to,
 * '+' what is used beyond it, '.' what it is entitled to and does not
 * use, ' ' the rest. A value above 0 shows at least one cell, so that a
 * pod that runs at all never looks idle. used_color is the '|' cells'
 * meaning; '+' is GMT_TOP_C_WARN and '.' GMT_TOP_C_DIM. */
void gmt_top_bar(gmt_top_cells_t *c, int width, double used, double entitled, double full,
                 unsigned char used_color);

/* A pod's measured share of the GPU against its REQUEST, on a bar of the
 * whole GPU: within its request green, the time it borrowed above it
 * yellow, the part of its request it left unused dim. */
void gmt_top_share_bar(gmt_top_cells_t *c, int width, double share, double request);

/* Memory used against its quota (the whole bar; no quota, an empty
 * bar): green, yellow past 75%, red past 90%. */
void gmt_top_memory_bar(gmt_top_cells_t *c, int width, uint64_t used, uint64_t quota);

/* The colour of memory at used of quota (GMT_TOP_C_GOOD, _WARN, _BAD). */
unsigned char gmt_top_memory_color(uint64_t used, uint64_t quota);

/* The last width of the n values v (oldest first) as one cell each, the
 * newest on the right, each of 0..full as one of eight heights: Unicode
 * blocks ("▁" to "█") with utf8, else "_.-:=+*#". Cells with no value
 * yet are spaces. */
void gmt_top_spark(gmt_top_cells_t *c, int width, const double *v, size_t n, double full,
                   bool utf8);

/* Whether to colour: standard output is a terminal, TERM names one that
 * is not "dumb", and NO_COLOR is unset or empty (no-color.org). */
bool gmt_top_use_color(bool tty, const char *term, const char *no_color);

/* Whether glyphs beyond ASCII can be written: the locale's character set
 * (nl_langinfo(CODESET)) is UTF-8. */
bool gmt_top_use_utf8(const char *codeset);

#endif
