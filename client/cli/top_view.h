/* What `gmt top` shows, as rows of cells: the node's GPUs and the GPU
 * processes outside gmt; the pods sorted by a key, each with bars of its
 * measured share against its REQUEST and of its memory against its
 * quota, the history of its share, the GPUs whose token it holds, its
 * context memory (and per tier for a pod whose memory moves), and its
 * live processes under it unless folded; the hottest buffers of those
 * processes from gmt-schd's tracer. The columns fit the screen's width
 * (top_columns.h). Pure: no curses and no socket here
 * (client/cli/cmd_top.c draws the rows and fetches the replies), so that
 * a unit test renders a reply built in memory and reads the screen back. */
#ifndef GMT_TOP_VIEW_H
#define GMT_TOP_VIEW_H

#include <stdbool.h>
#include <stddef.h>

#include "gmt.pb-c.h"
#include "top_glyphs.h"
#include "top_history.h"

typedef enum {
  GMT_TOP_SORT_SHARE,  /* measured share of GPU time, highest first */
  GMT_TOP_SORT_MEMORY, /* device memory used, most first */
  GMT_TOP_SORT_NAME,   /* pod name, A to Z */
} gmt_top_sort_t;

/* How a row is drawn. */
enum {
  GMT_TOP_PLAIN = 0,
  GMT_TOP_HEADING = 1,  /* a table's column names (reverse video) */
  GMT_TOP_ALERT = 2,    /* the scheduler unreachable, GPU processes outside
                         * gmt, a help title (bold) */
  GMT_TOP_SELECTED = 3, /* the pod picked with the arrows (bold) */
};

typedef struct gmt_top_view {
  const char *url;   /* the scheduler asked */
  double interval_s; /* seconds between refreshes */
  const char *clock; /* "HH:MM:SS" now, shown in the title */
  gmt_top_sort_t sort;
  bool paused;
  bool help; /* the keys' help instead of the tables */
  /* The last StatusReply that came; NULL before the first. */
  const Gmt__StatusReply *st;
  const char *st_clock; /* "HH:MM:SS" when st came */
  /* Why the last call for it failed (shown as "gmt-schd unreachable:
   * ERROR"); NULL when it answered. st is then the last answer, shown as
   * such. */
  const char *error;
  /* Per pod of st (index as in st->pods): its TraceSpots reply, or NULL
   * when none was fetched for it. */
  const Gmt__TraceSpotsReply *const *spots;
  /* Why there are no hottest buffers at all (the tracer is off, or the
   * scheduler refused the call); NULL when the tracer answers. */
  const char *spots_off;
  /* Each pod's share at the last refreshes (the HISTORY column); NULL:
   * none yet. */
  const gmt_top_history_t *history;
  /* The pod picked with up/down, by name so that it stays picked when
   * the sort moves it; NULL: none (gmt top -n). */
  const char *selected;
  /* Pods whose processes are folded away (Enter on the pod). */
  const char *const *folded;
  size_t n_folded;
  bool utf8;  /* the sparkline in Unicode blocks, else ASCII */
  bool batch; /* gmt top -n: every row, no keys row, no padding */
} gmt_top_view_t;

/* A screen of rows x cols cells: row r is UTF-8 text at text + r *
 * GMT_TOP_ROW_BYTES(cols), NUL-terminated, at most cols cells (every
 * glyph is one cell; all but the sparkline's are ASCII), drawn as
 * style[r]; cell c of row r means color[r * cols + c] (GMT_TOP_C_*,
 * top_glyphs.h). */
#define GMT_TOP_ROW_BYTES(cols) ((size_t)(cols)*3 + 1)
typedef struct gmt_top_screen {
  int rows, cols;
  int used; /* rows written by the last render */
  char *text;
  unsigned char *style;
  unsigned char *color;
} gmt_top_screen_t;

/* 0, or -ENOMEM; -EINVAL for rows or cols below 1. */
int gmt_top_screen_init(gmt_top_screen_t *s, int rows, int cols);
void gmt_top_screen_close(gmt_top_screen_t *s);
/* Row r of s (an empty string past s->used). */
const char *gmt_top_row(const gmt_top_screen_t *s, int r);
/* The meanings of row r's cells (s->cols of them; none past s->used). */
const unsigned char *gmt_top_row_colors(const gmt_top_screen_t *s, int r);

/* Fills idx[0..st->n_pods) with the pods' indices in the order shown:
 * by the key, ties by name, then by their order in st. */
void gmt_top_sort_pods(const Gmt__StatusReply *st, gmt_top_sort_t by, size_t *idx);

/* The pod step rows from the pod named current in the order shown
 * (clamped to the first and last), or the first when current is NULL or
 * not among them; NULL when there are no pods. The name is st's. */
const char *gmt_top_select(const Gmt__StatusReply *st, gmt_top_sort_t by, const char *current,
                           int step);

/* Renders v into s: the title, the scheduler's state, the GPUs, the
 * pods, the hottest buffers, and the keys on the last row; what does not
 * fit is cut, saying how much was. With v->batch every row up to
 * s->rows, no keys and no padding (s->used says how many). Returns 0 or
 * -ENOMEM. */
int gmt_top_render(const gmt_top_view_t *v, gmt_top_screen_t *s);

/* The GPU processes NVML sees that no pod manager registered
 * (st->unmanaged) as one line of at most width cells, under the GPUs:
 * "UNMANAGED 2 processes, 1.5 GiB: 4242 python (1.0 GiB), 4243 ...", in
 * the reply's order (by pid), each exe by its base name; a longer line is
 * cut with '~' (gmt_top_cells_text). The label is red, the rest yellow:
 * no quota and no share hold those bytes. c->n is 0 when there are
 * none. */
void gmt_top_unmanaged_line(gmt_top_cells_t *c, const Gmt__StatusReply *st, int width);

/* A sort key's name ("share", "memory", "name"). */
const char *gmt_top_sort_name(gmt_top_sort_t by);

#endif
