/* `gmt top`'s screen as text (top_view.h). Rows are gathered first and cut
 * to the screen at the end, so that every section is written the same way
 * whatever the terminal's size, and a test reads what a person sees. Each
 * table is measured, fitted to the width (top_columns.h) and then
 * written from cells (top_glyphs.h), so that a bar or a name never runs
 * into the next column. */
#include "top_view.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_counters.h"
#include "gmt_wire.h"
#include "status_devices.h"
#include "status_json.h"
#include "status_waits.h"
#include "top_columns.h"
#include "top_glyphs.h"

/* The widest pod name column; a longer name is cut with '~'. Below 80
 * cells of room names are cut at NAME_MIN_WIDTH first. */
#define NAME_MAX_WIDTH 32
#define NAME_MIN_WIDTH 12
/* Cells between two columns. */
#define GAP 2
/* The last row, always shown. */
#define KEYS_TEXT "q quit  j/k select  enter fold  s/m/n sort share/memory/name  p pause  ? help"
/* A row of a table: at most this many cells (wider screens get the rest
 * blank). */
#define ROW_CELLS 1024
/* The most columns of a table. */
#define TABLE_COLS 24
/* A pod's processes under its row: at most PROC_ROWS, then how many more. */
#define PROC_ROWS 8

typedef struct {
  char *text;
  unsigned char *color; /* cells of a table row; NULL for a line of text */
  int style;
} line_t;

typedef struct {
  line_t *v;
  size_t n, cap;
  int err;
  int wrap; /* lines of text longer than this many cells go on below (0: cut) */
} lines_t;

static line_t *line_new(lines_t *l)
{
  if (l->err)
    return NULL;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 64;
    line_t *v = realloc(l->v, cap * sizeof *v);
    if (!v) {
      l->err = -ENOMEM;
      return NULL;
    }
    l->v = v;
    l->cap = cap;
  }
  line_t *ln = &l->v[l->n];
  memset(ln, 0, sizeof *ln);
  return ln;
}

static void add_text(lines_t *l, int style, char *text)
{
  line_t *ln = line_new(l);
  if (!ln) {
    free(text);
    return;
  }
  ln->text = text;
  ln->style = style;
  l->n++;
}

/* A line of text: names, paths and errors in it come from processes and
 * daemons, so put_row lets only printable ASCII of it reach the terminal.
 * A message longer than the screen is wide goes on on the next rows,
 * broken at a space and indented, rather than cut: its end is often the
 * reason. */
static void addv(lines_t *l, int style, const char *fmt, va_list ap)
{
  char *text = NULL;
  if (l->err)
    return;
  if (vasprintf(&text, fmt, ap) < 0) {
    l->err = -ENOMEM;
    return;
  }
  const char *rest = text;
  bool first = true;
  while (l->wrap > 4 && (int)strlen(rest) + (first ? 0 : 2) > l->wrap) {
    int room = l->wrap - (first ? 0 : 2), cut = room;
    while (cut > room / 2 && rest[cut] != ' ')
      cut--;
    if (rest[cut] != ' ')
      cut = room;
    char *part = NULL;
    if (asprintf(&part, "%s%.*s", first ? "" : "  ", cut, rest) < 0) {
      l->err = -ENOMEM;
      free(text);
      return;
    }
    add_text(l, style, part);
    rest += cut;
    while (*rest == ' ')
      rest++;
    first = false;
  }
  if (first) {
    add_text(l, style, text);
    return;
  }
  char *part = NULL;
  if (asprintf(&part, "  %s", rest) < 0)
    l->err = -ENOMEM;
  else
    add_text(l, style, part);
  free(text);
}

static void add(lines_t *l, int style, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(lines_t *l, int style, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  addv(l, style, fmt, ap);
  va_end(ap);
}

static void lines_free(lines_t *l)
{
  for (size_t i = 0; i < l->n; i++) {
    free(l->v[i].text);
    free(l->v[i].color);
  }
  free(l->v);
}

/* ---- tables ---- */

typedef struct {
  gmt_top_col_t col;
  int id;     /* the table's own name for the column */
  bool right; /* numbers: right-aligned */
} tcol_t;

typedef struct {
  tcol_t c[TABLE_COLS];
  int width[TABLE_COLS];
  size_t n;
} table_t;

static tcol_t *table_col(table_t *t, int id, const char *title, int min, int want, int max,
                         int prio, bool right)
{
  tcol_t *c = &t->c[t->n++];
  int tl = (int)strlen(title);
  /* A title is never cut: a column is at least as wide as its title. */
  c->col = (gmt_top_col_t){.title = title,
                           .min = min > tl ? min : tl,
                           .want = want > tl ? want : tl,
                           .max = max,
                           .prio = prio};
  c->id = id;
  c->right = right;
  return c;
}

static void want_text(tcol_t *c, const char *s)
{
  int n = (int)strlen(s);
  if (n > c->col.want)
    c->col.want = n;
}

/* A value with a short and a long form (bytes): the short one is what
 * the column needs, the long one what it takes whole where there is room. */
static void want_forms(tcol_t *c, const char *short_form, const char *long_form)
{
  int n = (int)strlen(short_form), l = (int)strlen(long_form);
  if (n > c->col.want)
    c->col.want = n;
  c->col.min = c->col.want;
  if (l > c->col.max)
    c->col.max = l;
  c->col.jump = true;
}

static void table_fit(table_t *t, int cols)
{
  gmt_top_col_t cs[TABLE_COLS];
  for (size_t i = 0; i < t->n; i++)
    cs[i] = t->c[i].col;
  gmt_top_fit(cs, t->n, cols, GAP, t->width);
}

/* The cells of one row, gap cells between shown columns, as a line. */
static void add_cells(lines_t *l, int style, const table_t *t, const gmt_top_cells_t *cells)
{
  line_t *ln = line_new(l);
  if (!ln)
    return;
  size_t bytes = 1;
  for (size_t i = 0; i < t->n; i++)
    if (t->width[i])
      bytes += strlen(cells[i].text) + GAP;
  ln->text = malloc(bytes);
  ln->color = calloc(ROW_CELLS, 1);
  if (!ln->text || !ln->color) {
    free(ln->text);
    free(ln->color);
    l->err = -ENOMEM;
    return;
  }
  char *p = ln->text;
  int n = 0;
  bool first = true;
  for (size_t i = 0; i < t->n; i++) {
    if (!t->width[i])
      continue;
    if (!first)
      for (int g = 0; g < GAP; g++, n++)
        *p++ = ' ';
    first = false;
    size_t len = strlen(cells[i].text);
    memcpy(p, cells[i].text, len);
    p += len;
    for (int k = 0; k < cells[i].n && n < ROW_CELLS; k++)
      ln->color[n++] = cells[i].color[k];
  }
  *p = '\0';
  ln->style = style;
  l->n++;
}

static void add_heading(lines_t *l, const table_t *t)
{
  gmt_top_cells_t cells[TABLE_COLS];
  for (size_t i = 0; i < t->n; i++)
    gmt_top_cells_text(&cells[i], t->c[i].col.title, t->width[i], t->c[i].right, GMT_TOP_C_NONE);
  add_cells(l, GMT_TOP_HEADING, t, cells);
}

/* A text cell of column i (its own alignment). */
static void text_cell(gmt_top_cells_t *cells, const table_t *t, size_t i, const char *s)
{
  gmt_top_cells_text(&cells[i], s, t->width[i], t->c[i].right, GMT_TOP_C_NONE);
}

/* Bytes as short as they read: "96.0M", "2.0G", "512B". */
static void short_bytes(char *buf, size_t len, uint64_t b)
{
  static const char units[] = "KMGTPE";
  if (b < 1024) {
    snprintf(buf, len, "%" PRIu64 "B", b);
    return;
  }
  double v = (double)b / 1024;
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    u++;
  }
  snprintf(buf, len, "%.1f%c", v, units[u]);
}

/* ---- the screen ---- */

int gmt_top_screen_init(gmt_top_screen_t *s, int rows, int cols)
{
  memset(s, 0, sizeof *s);
  if (rows < 1 || cols < 1)
    return -EINVAL;
  s->text = calloc((size_t)rows, GMT_TOP_ROW_BYTES(cols));
  s->style = calloc((size_t)rows, 1);
  s->color = calloc((size_t)rows, (size_t)cols);
  if (!s->text || !s->style || !s->color) {
    gmt_top_screen_close(s);
    return -ENOMEM;
  }
  s->rows = rows;
  s->cols = cols;
  return 0;
}

void gmt_top_screen_close(gmt_top_screen_t *s)
{
  free(s->text);
  free(s->style);
  free(s->color);
  memset(s, 0, sizeof *s);
}

const char *gmt_top_row(const gmt_top_screen_t *s, int r)
{
  if (r < 0 || r >= s->used)
    return "";
  return s->text + (size_t)r * GMT_TOP_ROW_BYTES(s->cols);
}

const unsigned char *gmt_top_row_colors(const gmt_top_screen_t *s, int r)
{
  static const unsigned char none[1];
  if (r < 0 || r >= s->used)
    return none;
  return s->color + (size_t)r * (size_t)s->cols;
}

/* A line of text keeps only printable ASCII; a table row is cells made
 * of it already, and glyphs of ours. Either is cut at s->cols cells. */
static void put_row(gmt_top_screen_t *s, int r, const line_t *ln)
{
  char *dst = s->text + (size_t)r * GMT_TOP_ROW_BYTES(s->cols);
  unsigned char *color = s->color + (size_t)r * (size_t)s->cols;
  memset(color, 0, (size_t)s->cols);
  const unsigned char *src = (const unsigned char *)(ln ? ln->text : "");
  int cells = 0;
  size_t o = 0;
  while (*src && cells < s->cols) {
    if (!ln->color) {
      unsigned char c = *src++;
      dst[o++] = c < 0x20 || c >= 0x7f ? '?' : (char)c;
    } else {
      /* One UTF-8 character: its lead byte, then its continuation bytes. */
      size_t k = 0;
      do
        dst[o++] = (char)src[k++];
      while (src[k] && (src[k] & 0xc0) == 0x80 && k < 4);
      src += k;
      if (cells < ROW_CELLS)
        color[cells] = ln->color[cells];
    }
    cells++;
  }
  dst[o] = '\0';
  s->style[r] = (unsigned char)(ln ? ln->style : GMT_TOP_PLAIN);
}

/* ---- sorting and picking ---- */

const char *gmt_top_sort_name(gmt_top_sort_t by)
{
  switch (by) {
  case GMT_TOP_SORT_MEMORY: return "memory";
  case GMT_TOP_SORT_NAME: return "name";
  case GMT_TOP_SORT_SHARE: break;
  }
  return "share";
}

static const char *pod_name(const Gmt__PodStatus *pod)
{
  return pod->config && pod->config->name ? pod->config->name : "";
}

typedef struct {
  size_t idx;
  gmt_top_sort_t by;
  double share;
  uint64_t memory;
  const char *name;
} sort_item_t;

/* The key first (share and memory highest first), then the name, then
 * the scheduler's order: the same replies always show the same way. */
static int cmp_items(const void *pa, const void *pb)
{
  const sort_item_t *a = pa, *b = pb;
  if (a->by == GMT_TOP_SORT_SHARE && a->share != b->share)
    return a->share > b->share ? -1 : 1;
  if (a->by == GMT_TOP_SORT_MEMORY && a->memory != b->memory)
    return a->memory > b->memory ? -1 : 1;
  int c = strcmp(a->name, b->name);
  if (c)
    return c;
  return a->idx < b->idx ? -1 : a->idx > b->idx;
}

void gmt_top_sort_pods(const Gmt__StatusReply *st, gmt_top_sort_t by, size_t *idx)
{
  size_t n = st->n_pods;
  sort_item_t *items = calloc(n ? n : 1, sizeof *items);
  if (!items) { /* out of memory: the scheduler's order */
    for (size_t i = 0; i < n; i++)
      idx[i] = i;
    return;
  }
  for (size_t i = 0; i < n; i++) {
    const Gmt__PodStatus *p = st->pods[i];
    double share = p->gpu_time_share;
    items[i] = (sort_item_t){.idx = i,
                             .by = by,
                             .share = isnan(share) ? 0 : share,
                             .memory = gmt_counters_of(p->totals)->memory_used,
                             .name = pod_name(p)};
  }
  qsort(items, n, sizeof *items, cmp_items);
  for (size_t i = 0; i < n; i++)
    idx[i] = items[i].idx;
  free(items);
}

const char *gmt_top_select(const Gmt__StatusReply *st, gmt_top_sort_t by, const char *current,
                           int step)
{
  if (!st || !st->n_pods)
    return NULL;
  size_t *order = calloc(st->n_pods, sizeof *order);
  if (!order)
    return pod_name(st->pods[0]);
  gmt_top_sort_pods(st, by, order);
  long at = -1;
  for (size_t k = 0; current && k < st->n_pods && at < 0; k++)
    if (!strcmp(pod_name(st->pods[order[k]]), current))
      at = (long)k;
  if (at < 0) {
    at = 0;
  } else {
    at += step;
    if (at < 0)
      at = 0;
    if (at >= (long)st->n_pods)
      at = (long)st->n_pods - 1;
  }
  const char *name = pod_name(st->pods[order[at]]);
  free(order);
  return name;
}

/* ---- the GPUs ---- */

enum { G_INDEX, G_UTILBAR, G_UTIL, G_MEM, G_WAITING, G_HOLDER, G_NAME };

static void gpus_section(lines_t *l, const Gmt__StatusReply *st, int cols)
{
  if (st->n_devices == 0) {
    add(l, GMT_TOP_PLAIN, "GPUs: none known to gmt-schd");
    return;
  }
  table_t t = {0};
  tcol_t *idx = table_col(&t, G_INDEX, "GPU", 1, 1, 0, 0, false);
  table_col(&t, G_UTILBAR, "UTIL", 10, 12, 24, 0, false);
  table_col(&t, G_UTIL, "", 4, 4, 0, 0, true);
  tcol_t *mem = table_col(&t, G_MEM, "FREE/TOTAL", 1, 1, 0, 0, false);
  table_col(&t, G_WAITING, "WAITING", 1, 1, 0, 1, false);
  tcol_t *holder = table_col(&t, G_HOLDER, "HOLDER", 1, 1, 0, 1, false);
  tcol_t *name = table_col(&t, G_NAME, "NAME", 8, 1, 0, 2, false);
  for (size_t i = 0; i < st->n_devices; i++) {
    const Gmt__DeviceStatus *d = st->devices[i];
    char buf[96], fr[32], tot[32];
    snprintf(buf, sizeof buf, "%d", d->index);
    want_text(idx, buf);
    char full[96];
    gmt_status_device_memory(full, sizeof full, d);
    short_bytes(fr, sizeof fr, d->memory_free);
    short_bytes(tot, sizeof tot, d->memory_total);
    snprintf(buf, sizeof buf, "%s/%s", fr, d->memory_total ? tot : "?");
    want_forms(mem, buf, full);
    want_text(holder, d->token_holder && d->token_holder[0] ? d->token_holder : "-");
    want_text(name, d->name && d->name[0] ? d->name : "?");
  }
  table_fit(&t, cols);
  add_heading(l, &t);
  for (size_t i = 0; i < st->n_devices; i++) {
    const Gmt__DeviceStatus *d = st->devices[i];
    gmt_top_cells_t cells[TABLE_COLS];
    for (size_t c = 0; c < t.n; c++) {
      char buf[96], fr[32], tot[32];
      switch (t.c[c].id) {
      case G_INDEX: snprintf(buf, sizeof buf, "%d", d->index); break;
      case G_UTILBAR:
        gmt_top_bar(&cells[c], t.width[c], d->utilization >= 0 ? d->utilization : 0, 1.0, 1.0,
                    GMT_TOP_C_GOOD);
        continue;
      case G_UTIL:
        if (d->utilization >= 0)
          snprintf(buf, sizeof buf, "%.0f%%", d->utilization * 100);
        else
          snprintf(buf, sizeof buf, "-");
        break;
      case G_MEM:
        gmt_status_device_memory(buf, sizeof buf, d);
        if ((int)strlen(buf) > t.width[c]) {
          short_bytes(fr, sizeof fr, d->memory_free);
          short_bytes(tot, sizeof tot, d->memory_total);
          snprintf(buf, sizeof buf, "%s/%s", fr, d->memory_total ? tot : "?");
        }
        break;
      case G_WAITING: snprintf(buf, sizeof buf, "%u", d->tokens_waiting); break;
      case G_HOLDER:
        snprintf(buf, sizeof buf, "%s",
                 d->token_holder && d->token_holder[0] ? d->token_holder : "-");
        break;
      default: snprintf(buf, sizeof buf, "%s", d->name && d->name[0] ? d->name : "?"); break;
      }
      text_cell(cells, &t, c, buf);
    }
    add_cells(l, GMT_TOP_PLAIN, &t, cells);
  }
}

/* ---- GPU processes outside gmt ---- */

void gmt_top_unmanaged_line(gmt_top_cells_t *c, const Gmt__StatusReply *st, int width)
{
  static const char label[] = "UNMANAGED";
  c->text[0] = '\0';
  c->n = 0;
  if (!st || !st->n_unmanaged || width < 1)
    return;
  uint64_t total = 0;
  for (size_t i = 0; i < st->n_unmanaged; i++)
    total += st->unmanaged[i]->memory_used;
  /* Only what can show is written: once the text is past width it is
   * cut there anyway. */
  char text[2 * GMT_TOP_CELLS_MAX + 1], mem[32];
  gmt_human_bytes(mem, sizeof mem, total);
  int off = snprintf(text, sizeof text, "%s %zu process%s, %s", label, st->n_unmanaged,
                     st->n_unmanaged == 1 ? "" : "es", mem);
  if (off < 0)
    off = 0;
  text[off] = '\0';
  for (size_t i = 0; i < st->n_unmanaged && off <= width; i++) {
    const Gmt__UnmanagedProcess *u = st->unmanaged[i];
    const char *exe = u->exe ? u->exe : "", *slash = strrchr(exe, '/');
    const char *base = slash && slash[1] ? slash + 1 : exe;
    gmt_human_bytes(mem, sizeof mem, u->memory_used);
    int w = snprintf(text + off, sizeof text - (size_t)off, "%s%u %s (%s)", i ? ", " : ": ", u->pid,
                     base[0] ? base : "?", mem);
    if (w < 0)
      break;
    off = off + w < (int)sizeof text ? off + w : (int)sizeof text - 1;
  }
  int len = (int)strlen(text);
  gmt_top_cells_text(c, text, len < width ? len : width, false, GMT_TOP_C_WARN);
  for (int i = 0; i < c->n && i < (int)sizeof label - 1; i++)
    c->color[i] = GMT_TOP_C_BAD;
}

/* The line above as a row of its own cells (a table of one column). */
static void unmanaged_row(lines_t *l, const Gmt__StatusReply *st, int cols)
{
  gmt_top_cells_t cells[1];
  gmt_top_unmanaged_line(&cells[0], st, cols);
  if (!cells[0].n)
    return;
  table_t t = {.n = 1};
  t.width[0] = cells[0].n;
  add_cells(l, GMT_TOP_ALERT, &t, cells);
}

/* ---- the pods ---- */

enum {
  P_NAME,
  P_CONN,
  P_MODE,
  P_REQLIM,
  P_SHAREBAR,
  P_SHARE,
  P_HISTORY,
  P_TOKEN,
  P_MEMBAR,
  P_MEM,
  P_GPU,
  P_HOST,
  P_DISK,
  P_CONTEXT,
  P_PROCS,
};

/* The GPUs whose token the pod holds: "gpu 0", "gpu 0,1", or "-". */
static void token_text(const Gmt__PodStatus *pod, char *buf, size_t len)
{
  size_t off = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < pod->n_devices && off < len; i++) {
    if (!pod->devices[i]->holds_token)
      continue;
    int w = snprintf(buf + off, len - off, "%s%d", off ? "," : "gpu ", pod->devices[i]->device);
    if (w < 0)
      break;
    off += (size_t)w;
  }
  if (!buf[0])
    snprintf(buf, len, "%s", pod->holds_token ? "yes" : "-");
}

static bool is_folded(const gmt_top_view_t *v, const char *name)
{
  for (size_t i = 0; i < v->n_folded; i++)
    if (v->folded[i] && !strcmp(v->folded[i], name))
      return true;
  return false;
}

static bool is_selected(const gmt_top_view_t *v, const char *name)
{
  return v->selected && !strcmp(v->selected, name);
}

/* The text of one of a pod's text columns. */
static void pod_text(const gmt_top_view_t *v, const Gmt__PodStatus *pod, int id, bool wide,
                     char *buf, size_t len)
{
  const Gmt__PodConfig *cfg = pod->config;
  const Gmt__ProcessCounters *t = gmt_counters_of(pod->totals);
  bool moves = cfg && gmt_mem_mode_moves(cfg->mode);
  char a[32], b[32];
  switch (id) {
  case P_NAME: {
    /* The gutter: '>' the pod picked; '-' its processes shown, '+' folded. */
    const char *name = pod_name(pod);
    char fold = !pod->n_processes ? ' ' : is_folded(v, name) ? '+' : '-';
    snprintf(buf, len, "%c%c%s", is_selected(v, name) ? '>' : ' ', fold, name);
    break;
  }
  case P_CONN: snprintf(buf, len, "%s", pod->connected ? "yes" : "no"); break;
  case P_MODE: snprintf(buf, len, "%s", gmt_mem_mode_name(cfg ? cfg->mode : 0)); break;
  case P_REQLIM:
    snprintf(buf, len, "%.2f/%.2f", cfg ? cfg->request : 0, cfg ? cfg->limit : 0);
    break;
  case P_SHARE:
    snprintf(buf, len, "%.2f/%.2f", isnan(pod->gpu_time_share) ? 0 : pod->gpu_time_share,
             cfg ? cfg->request : 0);
    break;
  case P_TOKEN: token_text(pod, buf, len); break;
  case P_MEM:
    if (wide) {
      gmt_human_bytes(a, sizeof a, t->memory_used);
      gmt_human_bytes(b, sizeof b, cfg ? cfg->memory_limit : 0);
      snprintf(buf, len, "%s / %s", a, b);
    } else {
      short_bytes(a, sizeof a, t->memory_used);
      short_bytes(b, sizeof b, cfg ? cfg->memory_limit : 0);
      snprintf(buf, len, "%s/%s", a, b);
    }
    break;
  /* Per tier only where the pod's memory moves (mode=swap, um). */
  case P_GPU:
  case P_HOST:
  case P_DISK:
    if (moves)
      gmt_human_bytes(buf, len,
                      id == P_GPU    ? t->swap_gpu
                      : id == P_HOST ? t->swap_host
                                     : t->swap_disk);
    else
      snprintf(buf, len, "-");
    break;
  case P_CONTEXT:
    if (pod->context_bytes) /* 0: not known */
      gmt_human_bytes(buf, len, pod->context_bytes);
    else
      snprintf(buf, len, "-");
    break;
  case P_PROCS: snprintf(buf, len, "%zu", pod->n_processes); break;
  default: buf[0] = '\0'; break;
  }
}

/* A process's columns, under its pod's row. */
enum { Q_INDENT, Q_PID, Q_EXE, Q_MEM, Q_LAUNCHES, Q_WAIT };

static void proc_text(const Gmt__ProcessStatus *p, int id, bool wide, char *buf, size_t len)
{
  const Gmt__ProcessCounters *c = gmt_counters_of(p->counters);
  switch (id) {
  case Q_PID: snprintf(buf, len, "pid %u", (unsigned)p->pid); break;
  case Q_EXE: {
    const char *exe = p->exe && *p->exe ? p->exe : "?";
    const char *base = strrchr(exe, '/');
    snprintf(buf, len, "%s", base && base[1] ? base + 1 : exe);
    break;
  }
  case Q_MEM:
    if (wide)
      gmt_human_bytes(buf, len, c->memory_used);
    else
      short_bytes(buf, len, c->memory_used);
    break;
  case Q_LAUNCHES: snprintf(buf, len, "launches %llu", (unsigned long long)c->launches); break;
  case Q_WAIT: {
    char w[48];
    gmt_status_proc_wait(w, sizeof w, c);
    snprintf(buf, len, "token wait %s", w);
    break;
  }
  default: buf[0] = '\0'; break;
  }
}

/* On several GPUs: each one's memory and share ('*': its token). */
static void per_gpu_row(lines_t *l, const Gmt__PodStatus *pod)
{
  char per[512];
  size_t off = 0;
  per[0] = '\0';
  for (size_t i = 0; i < pod->n_devices && off < sizeof per; i++) {
    const Gmt__PodDeviceStatus *dv = pod->devices[i];
    char m[32];
    gmt_human_bytes(m, sizeof m, dv->memory_used);
    int n = snprintf(per + off, sizeof per - off, "%sgpu %d: %s, %.2f%s", i ? "; " : "", dv->device,
                     m, dv->gpu_time_share, dv->holds_token ? " *" : "");
    if (n < 0)
      break;
    off += (size_t)n;
  }
  add(l, GMT_TOP_PLAIN, "    per GPU: %s", per);
}

static bool shows_processes(const gmt_top_view_t *v, const Gmt__PodStatus *pod)
{
  return pod->n_processes && !is_folded(v, pod_name(pod));
}

static void pods_table(table_t *t, const gmt_top_view_t *v, int cols)
{
  const Gmt__StatusReply *st = v->st;
  bool moves = false;
  for (size_t i = 0; i < st->n_pods; i++)
    moves |= st->pods[i]->config && gmt_mem_mode_moves(st->pods[i]->config->mode);
  tcol_t *name = table_col(t, P_NAME, "  POD", 5, 5, 0, 0, false);
  tcol_t *conn = table_col(t, P_CONN, "CONN", 1, 1, 0, 3, false);
  tcol_t *mode = table_col(t, P_MODE, "MODE", 1, 1, 0, 4, false);
  tcol_t *reqlim = table_col(t, P_REQLIM, "REQ/LIM", 1, 1, 0, 5, false);
  table_col(t, P_SHAREBAR, "SHARE", 10, 10, 30, 0, false);
  tcol_t *share = table_col(t, P_SHARE, "SHARE/REQ", 1, 1, 0, 0, false);
  size_t depth = v->history ? gmt_top_history_depth(v->history) : 0;
  table_col(t, P_HISTORY, "HISTORY", 10, 10, depth > 10 ? (int)depth : 10, 0, false);
  tcol_t *token = table_col(t, P_TOKEN, "TOKEN", 5, 1, 0, 2, false);
  table_col(t, P_MEMBAR, "MEMORY", 10, 10, 30, 0, false);
  tcol_t *mem = table_col(t, P_MEM, "USED/QUOTA", 1, 1, 0, 0, false);
  tcol_t *tier[3] = {NULL, NULL, NULL};
  if (moves) {
    tier[0] = table_col(t, P_GPU, "GPU", 1, 1, 0, 7, false);
    tier[1] = table_col(t, P_HOST, "HOST", 1, 1, 0, 7, false);
    tier[2] = table_col(t, P_DISK, "DISK", 1, 1, 0, 7, false);
  }
  tcol_t *ctx = table_col(t, P_CONTEXT, "CONTEXT", 1, 1, 0, 6, false);
  tcol_t *procs = table_col(t, P_PROCS, "PROCS", 1, 1, 0, 1, false);
  tcol_t *texts[] = {conn, mode, reqlim, share, token, ctx, procs, tier[0], tier[1], tier[2]};
  for (size_t i = 0; i < st->n_pods; i++) {
    const Gmt__PodStatus *pod = st->pods[i];
    char buf[128];
    int nl = (int)strlen(pod_name(pod));
    if (nl > NAME_MAX_WIDTH)
      nl = NAME_MAX_WIDTH;
    if (2 + nl > name->col.want)
      name->col.want = 2 + nl;
    int nmin = 2 + (nl < NAME_MIN_WIDTH ? nl : NAME_MIN_WIDTH);
    if (nmin > name->col.min)
      name->col.min = nmin;
    for (size_t k = 0; k < sizeof texts / sizeof *texts; k++) {
      if (!texts[k])
        continue;
      pod_text(v, pod, texts[k]->id, true, buf, sizeof buf);
      want_text(texts[k], buf);
    }
    char full[128];
    pod_text(v, pod, P_MEM, false, buf, sizeof buf);
    pod_text(v, pod, P_MEM, true, full, sizeof full);
    want_forms(mem, buf, full);
  }
  /* Short words and numbers are shown whole or not at all. */
  for (size_t k = 0; k < sizeof texts / sizeof *texts; k++)
    if (texts[k])
      texts[k]->col.min = texts[k]->col.want;
  table_fit(t, cols);
}

static void pod_row(lines_t *l, const table_t *t, const gmt_top_view_t *v,
                    const Gmt__PodStatus *pod)
{
  const Gmt__PodConfig *cfg = pod->config;
  const Gmt__ProcessCounters *tot = gmt_counters_of(pod->totals);
  gmt_top_cells_t cells[TABLE_COLS];
  for (size_t c = 0; c < t->n; c++) {
    char buf[128];
    int w = t->width[c];
    switch (t->c[c].id) {
    case P_SHAREBAR:
      gmt_top_share_bar(&cells[c], w, pod->gpu_time_share, cfg ? cfg->request : 0);
      break;
    case P_MEMBAR:
      gmt_top_memory_bar(&cells[c], w, tot->memory_used, cfg ? cfg->memory_limit : 0);
      break;
    case P_HISTORY: {
      double hist[GMT_TOP_CELLS_MAX];
      size_t n = gmt_top_history_get(v->history, pod_name(pod), hist, GMT_TOP_CELLS_MAX);
      gmt_top_spark(&cells[c], w, hist, n, 1.0, v->utf8);
      break;
    }
    case P_MEM:
      pod_text(v, pod, P_MEM, true, buf, sizeof buf);
      if ((int)strlen(buf) > w)
        pod_text(v, pod, P_MEM, false, buf, sizeof buf);
      gmt_top_cells_text(&cells[c], buf, w, false,
                         gmt_top_memory_color(tot->memory_used, cfg ? cfg->memory_limit : 0));
      break;
    default:
      pod_text(v, pod, t->c[c].id, true, buf, sizeof buf);
      text_cell(cells, t, c, buf);
      break;
    }
  }
  add_cells(l, is_selected(v, pod_name(pod)) ? GMT_TOP_SELECTED : GMT_TOP_PLAIN, t, cells);
}

static void procs_table(table_t *t, const gmt_top_view_t *v, int cols)
{
  const Gmt__StatusReply *st = v->st;
  table_col(t, Q_INDENT, "", 2, 2, 0, 0, false);
  tcol_t *pid = table_col(t, Q_PID, "", 1, 1, 0, 0, false);
  tcol_t *exe = table_col(t, Q_EXE, "", 8, 1, 0, 0, false);
  tcol_t *mem = table_col(t, Q_MEM, "", 1, 1, 0, 0, false);
  tcol_t *launches = table_col(t, Q_LAUNCHES, "", 1, 1, 0, 2, false);
  tcol_t *wait = table_col(t, Q_WAIT, "", 1, 1, 0, 1, false);
  for (size_t i = 0; i < st->n_pods; i++) {
    const Gmt__PodStatus *pod = st->pods[i];
    if (!shows_processes(v, pod))
      continue;
    for (size_t k = 0; k < pod->n_processes && k < PROC_ROWS; k++) {
      const Gmt__ProcessStatus *p = pod->processes[k];
      char buf[128];
      proc_text(p, Q_PID, true, buf, sizeof buf);
      want_text(pid, buf);
      proc_text(p, Q_EXE, true, buf, sizeof buf);
      want_text(exe, buf);
      char full[128];
      proc_text(p, Q_MEM, false, buf, sizeof buf);
      proc_text(p, Q_MEM, true, full, sizeof full);
      want_forms(mem, buf, full);
      proc_text(p, Q_LAUNCHES, true, buf, sizeof buf);
      want_text(launches, buf);
      proc_text(p, Q_WAIT, true, buf, sizeof buf);
      want_text(wait, buf);
    }
  }
  if (exe->col.want > 16)
    exe->col.want = 16;
  pid->col.min = pid->col.want;
  table_fit(t, cols);
}

static void process_rows(lines_t *l, const table_t *t, const Gmt__PodStatus *pod)
{
  for (size_t i = 0; i < pod->n_processes && i < PROC_ROWS; i++) {
    const Gmt__ProcessStatus *p = pod->processes[i];
    gmt_top_cells_t cells[TABLE_COLS];
    for (size_t c = 0; c < t->n; c++) {
      char buf[128];
      proc_text(p, t->c[c].id, true, buf, sizeof buf);
      if (t->c[c].id == Q_MEM && (int)strlen(buf) > t->width[c])
        proc_text(p, Q_MEM, false, buf, sizeof buf);
      text_cell(cells, t, c, buf);
    }
    add_cells(l, GMT_TOP_PLAIN, t, cells);
  }
  if (pod->n_processes > PROC_ROWS)
    add(l, GMT_TOP_PLAIN, "    +%zu more processes (gmt status)", pod->n_processes - PROC_ROWS);
}

static void pods_section(lines_t *l, const gmt_top_view_t *v, const size_t *order, int cols)
{
  const Gmt__StatusReply *st = v->st;
  if (st->n_pods == 0) {
    add(l, GMT_TOP_PLAIN, "no pods configured");
    return;
  }
  table_t pods = {0}, procs = {0};
  pods_table(&pods, v, cols);
  procs_table(&procs, v, cols);
  add_heading(l, &pods);
  for (size_t k = 0; k < st->n_pods; k++) {
    const Gmt__PodStatus *pod = st->pods[order[k]];
    pod_row(l, &pods, v, pod);
    if (pod->n_devices >= 2)
      per_gpu_row(l, pod);
    /* Why it waits (status_waits.h): for tokens, now, at its LIMIT. */
    char waits[160];
    if (gmt_status_pod_waits(waits, sizeof waits, pod))
      add(l, GMT_TOP_PLAIN, "    waited %s", waits);
    if (shows_processes(v, pod))
      process_rows(l, &procs, pod);
  }
}

/* ---- the hottest buffers ---- */

/* "device" for TRACE_ALLOC_DEVICE: the schema's own names. */
static const char *kind_name(int kind, char *buf, size_t len)
{
  const ProtobufCEnumValue *ev =
      protobuf_c_enum_descriptor_get_value(&gmt__trace_alloc_kind__descriptor, kind);
  const char *n = ev ? ev->name : "?";
  if (!strncmp(n, "TRACE_ALLOC_", 12))
    n += 12;
  size_t i = 0;
  for (; n[i] && i + 1 < len; i++)
    buf[i] = (char)tolower((unsigned char)n[i]);
  buf[i] = '\0';
  return buf;
}

/* Where a buffer was made: its function, and the file it is in. */
static void site_text(const Gmt__TraceAllocation *a, char *buf, size_t len)
{
  if (a->origin == 4) { /* attach: never seen allocated, found by its copies */
    snprintf(buf, len, "(not seen allocated)");
    return;
  }
  const Gmt__TraceSite *s = a->site;
  const char *fn = s && s->function && s->function[0] ? s->function : NULL;
  const char *mod = s && s->module && s->module[0] ? s->module : NULL;
  if (mod && strrchr(mod, '/'))
    mod = strrchr(mod, '/') + 1;
  if (fn && mod)
    snprintf(buf, len, "%s (%s)", fn, mod);
  else
    snprintf(buf, len, "%s", fn ? fn : mod ? mod : "?");
}

/* Whether buffer a belongs to a process that is alive: one the pod has
 * in this Status (by its pid on the node, the tracer's) that the tracer
 * does not say is gone. An exited process's buffers stay in the tracer's
 * history; the view is of what runs now. */
static bool buffer_live(const Gmt__PodStatus *pod, const Gmt__TraceSpotsReply *r,
                        const Gmt__TraceAllocation *a)
{
  for (size_t i = 0; i < r->n_processes; i++)
    if (r->processes[i]->pid == a->pid && !r->processes[i]->active)
      return false;
  for (size_t i = 0; i < pod->n_processes; i++) {
    const Gmt__ProcessStatus *p = pod->processes[i];
    if ((p->node_pid ? p->node_pid : p->pid) == a->pid)
      return true;
  }
  return false;
}

enum { H_POD, H_PID, H_KIND, H_SIZE, H_H2D, H_D2H, H_H2DB, H_D2HB, H_SITE };

static void hot_text(const Gmt__PodStatus *pod, const Gmt__TraceAllocation *a, int id, char *buf,
                     size_t len)
{
  char site[256];
  switch (id) {
  case H_POD: snprintf(buf, len, "%s", pod_name(pod)); break;
  case H_PID: snprintf(buf, len, "%u", a->pid); break;
  case H_KIND: kind_name(a->kind, buf, len); break;
  case H_SIZE: gmt_human_bytes(buf, len, a->size); break;
  case H_H2D: snprintf(buf, len, "%llu", (unsigned long long)a->h2d_count); break;
  case H_D2H: snprintf(buf, len, "%llu", (unsigned long long)a->d2h_count); break;
  case H_H2DB: gmt_human_bytes(buf, len, a->h2d_bytes); break;
  case H_D2HB: gmt_human_bytes(buf, len, a->d2h_bytes); break;
  default:
    site_text(a, site, sizeof site);
    snprintf(buf, len, "%s%s", site, a->active ? "" : " (freed)");
    break;
  }
}

static void hot_section(lines_t *l, const gmt_top_view_t *v, const size_t *order, int cols)
{
  const Gmt__StatusReply *st = v->st;
  if (v->spots_off) {
    add(l, GMT_TOP_PLAIN, "hottest buffers: not shown, %s", v->spots_off);
    return;
  }
  if (!v->spots)
    return;
  table_t t = {0};
  tcol_t *c[9];
  c[H_POD] = table_col(&t, H_POD, "HOTTEST BUFFERS", 1, 1, 0, 0, false);
  c[H_PID] = table_col(&t, H_PID, "PID", 1, 1, 0, 0, true);
  c[H_KIND] = table_col(&t, H_KIND, "KIND", 1, 1, 0, 0, false);
  c[H_SIZE] = table_col(&t, H_SIZE, "SIZE", 1, 1, 0, 0, true);
  c[H_H2D] = table_col(&t, H_H2D, "H2D", 1, 1, 0, 0, true);
  c[H_D2H] = table_col(&t, H_D2H, "D2H", 1, 1, 0, 0, true);
  c[H_H2DB] = table_col(&t, H_H2DB, "H2D BYTES", 1, 1, 0, 2, true);
  c[H_D2HB] = table_col(&t, H_D2HB, "D2H BYTES", 1, 1, 0, 2, true);
  c[H_SITE] = table_col(&t, H_SITE, "SITE", 16, 1, 0, 1, false);
  size_t shown = 0;
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1) {
      if (!shown)
        break;
      for (int i = 0; i < H_SITE; i++) /* numbers and kinds whole */
        c[i]->col.min = c[i]->col.want;
      c[H_SITE]->col.max = c[H_SITE]->col.want;
      if (c[H_SITE]->col.min > c[H_SITE]->col.want) /* a short site: no more */
        c[H_SITE]->col.min = c[H_SITE]->col.want;
      table_fit(&t, cols);
      add_heading(l, &t);
    }
    for (size_t k = 0; k < st->n_pods; k++) {
      const Gmt__TraceSpotsReply *r = v->spots[order[k]];
      const Gmt__PodStatus *pod = st->pods[order[k]];
      for (size_t i = 0; r && i < r->n_hot; i++) {
        const Gmt__TraceAllocation *a = r->hot[i];
        if (!buffer_live(pod, r, a))
          continue;
        gmt_top_cells_t cells[TABLE_COLS];
        for (size_t j = 0; j < t.n; j++) {
          char buf[300];
          hot_text(pod, a, t.c[j].id, buf, sizeof buf);
          if (pass == 0)
            want_text(&t.c[j], buf);
          else
            text_cell(cells, &t, j, buf);
        }
        if (pass == 0)
          shown++;
        else
          add_cells(l, GMT_TOP_PLAIN, &t, cells);
      }
    }
  }
  if (!shown)
    add(l, GMT_TOP_PLAIN,
        "hottest buffers: none of the live processes' traced yet (gmt-schd's "
        "tracer runs)");
}

/* ---- the rest ---- */

static void help_section(lines_t *l, const gmt_top_view_t *v)
{
  add(l, GMT_TOP_ALERT, "gmt top: keys (any key returns)");
  add(l, GMT_TOP_PLAIN, "  q              quit");
  add(l, GMT_TOP_PLAIN, "  up/down, k/j   pick a pod (marked '>')");
  add(l, GMT_TOP_PLAIN, "  enter, space   fold or unfold its processes ('+' folded, '-' shown)");
  add(l, GMT_TOP_PLAIN, "  s              sort pods by measured share of GPU time, highest first");
  add(l, GMT_TOP_PLAIN, "  m              sort pods by device memory used, most first");
  add(l, GMT_TOP_PLAIN, "  n              sort pods by name");
  add(l, GMT_TOP_PLAIN, "  p              pause (stop asking gmt-schd) / go on");
  add(l, GMT_TOP_PLAIN, "  ?              this help");
  add(l, GMT_TOP_PLAIN, "%s", "");
  add(l, GMT_TOP_PLAIN, "Refreshed every %.1f s (-d SECONDS). SHARE: the GPU time the pod used",
      v->interval_s);
  add(l, GMT_TOP_PLAIN, "over gmt-schd's window on a bar of the whole GPU: '|' within its");
  add(l, GMT_TOP_PLAIN, "REQUEST, '+' above it (idle time it borrowed), '.' its request unused;");
  add(l, GMT_TOP_PLAIN, "SHARE/REQ the same in numbers. HISTORY: its share at the last refreshes,");
  add(l, GMT_TOP_PLAIN, "newest on the right. MEMORY: its device memory against GPU_MEM ('.' the");
  add(l, GMT_TOP_PLAIN, "quota left; yellow past 75%%, red past 90%%). TOKEN the GPUs whose token");
  add(l, GMT_TOP_PLAIN, "it holds, REQ/LIM its configured shares, GPU HOST DISK where a mode=swap");
  add(l, GMT_TOP_PLAIN, "or um pod's bytes are, CONTEXT its processes' context memory (shown, not");
  add(l, GMT_TOP_PLAIN, "charged). A narrow terminal shows the columns that matter most. Hottest");
  add(l, GMT_TOP_PLAIN,
      "buffers of live processes come from gmt-schd's tracer (root); `gmt status`");
  add(l, GMT_TOP_PLAIN,
      "and `gmt trace --pod NAME` say more. UNMANAGED, under the GPUs: processes");
  add(l, GMT_TOP_PLAIN, "on them that no pod manager registered (no quota, no share).");
}

static void title(lines_t *l, const gmt_top_view_t *v, int cols)
{
  char left[512];
  snprintf(left, sizeof left, "gmt top  %s  every %.1f s  sort: %s%s", v->url ? v->url : "",
           v->interval_s, gmt_top_sort_name(v->sort), v->paused ? "  PAUSED" : "");
  const char *clock = v->clock ? v->clock : "";
  int pad = cols - (int)strlen(left) - (int)strlen(clock);
  add(l, GMT_TOP_PLAIN, "%s%*s%s", left, pad > 1 ? pad : 2, "", clock);
}

static void state_line(lines_t *l, const gmt_top_view_t *v)
{
  const Gmt__StatusReply *st = v->st;
  if (v->error) {
    if (st)
      add(l, GMT_TOP_ALERT, "gmt-schd unreachable: %s; retrying (below: its last answer, at %s)",
          v->error, v->st_clock ? v->st_clock : "?");
    else
      add(l, GMT_TOP_ALERT, "gmt-schd unreachable: %s; retrying", v->error);
    return;
  }
  if (!st) {
    add(l, GMT_TOP_PLAIN, "asking gmt-schd...");
    return;
  }
  size_t conn = 0, procs = 0;
  for (size_t i = 0; i < st->n_pods; i++) {
    conn += st->pods[i]->connected;
    procs += st->pods[i]->n_processes;
  }
  add(l, GMT_TOP_PLAIN, "%zu pod%s (%zu connected), %zu process%s, %zu GPU%s; answered at %s",
      st->n_pods, st->n_pods == 1 ? "" : "s", conn, procs, procs == 1 ? "" : "es", st->n_devices,
      st->n_devices == 1 ? "" : "s", v->st_clock ? v->st_clock : "?");
}

int gmt_top_render(const gmt_top_view_t *v, gmt_top_screen_t *s)
{
  lines_t l = {0};
  size_t *order = NULL;
  title(&l, v, s->cols);
  l.wrap = s->cols;
  if (v->help) {
    help_section(&l, v);
  } else {
    state_line(&l, v);
    if (v->st) {
      const Gmt__StatusReply *st = v->st;
      order = calloc(st->n_pods ? st->n_pods : 1, sizeof *order);
      if (!order) {
        lines_free(&l);
        return -ENOMEM;
      }
      gmt_top_sort_pods(st, v->sort, order);
      add(&l, GMT_TOP_PLAIN, "%s", "");
      gpus_section(&l, st, s->cols);
      unmanaged_row(&l, st, s->cols);
      add(&l, GMT_TOP_PLAIN, "%s", "");
      pods_section(&l, v, order, s->cols);
      add(&l, GMT_TOP_PLAIN, "%s", "");
      hot_section(&l, v, order, s->cols);
    }
  }
  free(order);
  if (l.err) {
    lines_free(&l);
    return l.err;
  }

  int r = 0;
  if (v->batch) {
    for (size_t i = 0; i < l.n && r < s->rows; i++)
      put_row(s, r++, &l.v[i]);
    s->used = r;
    lines_free(&l);
    return 0;
  }
  /* The keys take the last row; the rest what fits, the last one that
   * does saying how many did not. */
  int body = s->rows - 1;
  for (size_t i = 0; i < l.n && r < body; i++) {
    if (r == body - 1 && i + 1 < l.n) {
      line_t more = {.style = GMT_TOP_PLAIN};
      char text[96];
      snprintf(text, sizeof text, "... %zu more rows (a taller terminal shows them)", l.n - i);
      more.text = text;
      put_row(s, r++, &more);
      break;
    }
    put_row(s, r++, &l.v[i]);
  }
  while (r < body)
    put_row(s, r++, NULL);
  char keys_text[] = KEYS_TEXT;
  line_t keys = {.text = keys_text, .style = GMT_TOP_HEADING};
  put_row(s, r++, &keys);
  s->used = r;
  lines_free(&l);
  return 0;
}
