/* `gmt top`'s screen as text (top_view.h). Rows are gathered first and cut
 * to the screen at the end, so that every section is written the same way
 * whatever the terminal's size, and a test reads what a person sees. */
#include "top_view.h"

#include <ctype.h>
#include <errno.h>
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

/* The widest pod name column; a longer name pushes its row right. */
#define NAME_MAX_WIDTH 32
/* The last row, always shown. */
#define KEYS_TEXT "q quit  s/m/n sort by share/memory/name  p pause  ? help"

typedef struct {
  char **text;
  unsigned char *style;
  size_t n, cap;
  int err;
} lines_t;

static void addv(lines_t *l, int style, const char *fmt, va_list ap)
{
  if (l->err)
    return;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 64;
    char **t = realloc(l->text, cap * sizeof *t);
    if (t)
      l->text = t;
    unsigned char *st = t ? realloc(l->style, cap * sizeof *st) : NULL;
    if (!t || !st) {
      l->err = -ENOMEM;
      return;
    }
    l->style = st;
    l->cap = cap;
  }
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0) {
    l->err = -ENOMEM;
    return;
  }
  l->text[l->n] = s;
  l->style[l->n++] = (unsigned char)style;
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
  for (size_t i = 0; i < l->n; i++)
    free(l->text[i]);
  free(l->text);
  free(l->style);
}

/* ---- the screen ---- */

int gmt_top_screen_init(gmt_top_screen_t *s, int rows, int cols)
{
  memset(s, 0, sizeof *s);
  if (rows < 1 || cols < 1)
    return -EINVAL;
  s->text = calloc((size_t)rows, (size_t)cols + 1);
  s->style = calloc((size_t)rows, 1);
  if (!s->text || !s->style) {
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
  memset(s, 0, sizeof *s);
}

const char *gmt_top_row(const gmt_top_screen_t *s, int r)
{
  if (r < 0 || r >= s->used)
    return "";
  return s->text + (size_t)r * ((size_t)s->cols + 1);
}

/* Names, paths and errors come from processes and daemons: only printable
 * ASCII reaches the terminal. */
static void put_row(gmt_top_screen_t *s, int r, const char *text, int style)
{
  char *dst = s->text + (size_t)r * ((size_t)s->cols + 1);
  int i = 0;
  for (; i < s->cols && text[i]; i++) {
    unsigned char c = (unsigned char)text[i];
    dst[i] = c < 0x20 || c >= 0x7f ? '?' : (char)c;
  }
  dst[i] = '\0';
  s->style[r] = (unsigned char)style;
}

/* ---- sorting ---- */

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

/* ---- sections ---- */

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

static int name_width(const Gmt__StatusReply *st)
{
  int w = 3;
  for (size_t i = 0; i < st->n_pods; i++) {
    int n = (int)strlen(pod_name(st->pods[i]));
    if (n > w)
      w = n;
  }
  return w > NAME_MAX_WIDTH ? NAME_MAX_WIDTH : w;
}

/* On several GPUs: each one's memory and share ('*': its token). */
static void per_gpu_row(lines_t *l, const Gmt__PodStatus *pod, int w)
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
  add(l, GMT_TOP_PLAIN, "%*s  per GPU: %s", w, "", per);
}

/* A pod's processes under its row, at most PROC_ROWS, then how many
 * more: pid, program, memory, launches, and why it waits (token, now). */
#define PROC_ROWS 8

static void process_rows(lines_t *l, const Gmt__PodStatus *pod, int w)
{
  for (size_t i = 0; i < pod->n_processes && i < PROC_ROWS; i++) {
    const Gmt__ProcessStatus *p = pod->processes[i];
    const Gmt__ProcessCounters *c = gmt_counters_of(p->counters);
    const char *exe = p->exe && *p->exe ? p->exe : "?";
    const char *base = strrchr(exe, '/');
    char mem[32], wait[48];
    gmt_human_bytes(mem, sizeof mem, c->memory_used);
    int n = snprintf(wait, sizeof wait, "%.1f s", (double)c->token_wait_us / 1e6);
    if (c->token_waiting_us && n > 0 && (size_t)n < sizeof wait)
      snprintf(wait + n, sizeof wait - (size_t)n, ", now %.1f", (double)c->token_waiting_us / 1e6);
    add(l, GMT_TOP_PLAIN, "%*s  pid %-8u %-16.16s  %-10s  launches %-10llu  token wait %s", w, "",
        (unsigned)p->pid, base ? base + 1 : exe, mem, (unsigned long long)c->launches, wait);
  }
  if (pod->n_processes > PROC_ROWS)
    add(l, GMT_TOP_PLAIN, "%*s  +%zu more processes (gmt status)", w, "",
        pod->n_processes - PROC_ROWS);
}

static void pods_section(lines_t *l, const gmt_top_view_t *v, const size_t *order, int w)
{
  const Gmt__StatusReply *st = v->st;
  if (st->n_pods == 0) {
    add(l, GMT_TOP_PLAIN, "no pods configured");
    return;
  }
  add(l, GMT_TOP_HEADING,
      "%-*s  %-4s  %-6s  %-9s  %-5s  %-8s  %-23s  %-10s  %-10s  %-10s  %-10s  %s", w, "POD", "CONN",
      "MODE", "REQ/LIM", "SHARE", "TOKEN", "MEMORY / QUOTA", "GPU", "HOST", "DISK", "CONTEXT",
      "PROCS");
  for (size_t k = 0; k < st->n_pods; k++) {
    const Gmt__PodStatus *pod = st->pods[order[k]];
    const Gmt__PodConfig *cfg = pod->config;
    const Gmt__ProcessCounters *t = gmt_counters_of(pod->totals);
    char used[32], quota[32], mem[72], share[32], token[64], g[32], h[32], d[32], ctx[32];
    gmt_human_bytes(used, sizeof used, t->memory_used);
    gmt_human_bytes(quota, sizeof quota, cfg ? cfg->memory_limit : 0);
    snprintf(mem, sizeof mem, "%s / %s", used, quota);
    snprintf(share, sizeof share, "%.2f/%.2f", cfg ? cfg->request : 0, cfg ? cfg->limit : 0);
    token_text(pod, token, sizeof token);
    /* Per tier only where the pod's memory moves (mode=swap, um). */
    if (cfg && gmt_mem_mode_moves(cfg->mode)) {
      gmt_human_bytes(g, sizeof g, t->swap_gpu);
      gmt_human_bytes(h, sizeof h, t->swap_host);
      gmt_human_bytes(d, sizeof d, t->swap_disk);
    } else {
      snprintf(g, sizeof g, "-");
      snprintf(h, sizeof h, "-");
      snprintf(d, sizeof d, "-");
    }
    if (pod->context_bytes) /* 0: not known */
      gmt_human_bytes(ctx, sizeof ctx, pod->context_bytes);
    else
      snprintf(ctx, sizeof ctx, "-");
    add(l, GMT_TOP_PLAIN,
        "%-*s  %-4s  %-6s  %-9s  %-5.2f  %-8s  %-23s  %-10s  %-10s  %-10s  %-10s  %zu", w,
        pod_name(pod), pod->connected ? "yes" : "no", gmt_mem_mode_name(cfg ? cfg->mode : 0), share,
        pod->gpu_time_share, token, mem, g, h, d, ctx, pod->n_processes);
    if (pod->n_devices >= 2)
      per_gpu_row(l, pod, w);
    process_rows(l, pod, w);
  }
}

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

static void hot_section(lines_t *l, const gmt_top_view_t *v, const size_t *order, int w)
{
  const Gmt__StatusReply *st = v->st;
  if (v->spots_off) {
    add(l, GMT_TOP_PLAIN, "hottest buffers: not shown, %s", v->spots_off);
    return;
  }
  if (!v->spots)
    return;
  size_t shown = 0;
  int hw = (int)strlen("HOTTEST BUFFERS"); /* the pod's column, under its title */
  if (w > hw)
    hw = w;
  for (size_t k = 0; k < st->n_pods; k++) {
    const Gmt__TraceSpotsReply *r = v->spots[order[k]];
    const Gmt__PodStatus *pod = st->pods[order[k]];
    for (size_t i = 0; r && i < r->n_hot; i++) {
      const Gmt__TraceAllocation *a = r->hot[i];
      if (shown++ == 0)
        add(l, GMT_TOP_HEADING, "%-*s  %7s  %-13s  %10s  %8s  %8s  %10s  %10s  %s", hw,
            "HOTTEST BUFFERS", "PID", "KIND", "SIZE", "H2D", "D2H", "H2D BYTES", "D2H BYTES",
            "SITE");
      char kind[32], size[32], hb[32], db[32], site[256];
      gmt_human_bytes(size, sizeof size, a->size);
      gmt_human_bytes(hb, sizeof hb, a->h2d_bytes);
      gmt_human_bytes(db, sizeof db, a->d2h_bytes);
      site_text(a, site, sizeof site);
      add(l, GMT_TOP_PLAIN, "%-*s  %7u  %-13s  %10s  %8llu  %8llu  %10s  %10s  %s%s", hw,
          pod_name(pod), a->pid, kind_name(a->kind, kind, sizeof kind), size,
          (unsigned long long)a->h2d_count, (unsigned long long)a->d2h_count, hb, db, site,
          a->active ? "" : " (freed)");
    }
  }
  if (!shown)
    add(l, GMT_TOP_PLAIN, "hottest buffers: none traced yet (gmt-schd's tracer runs)");
}

static void gpus_section(lines_t *l, const Gmt__StatusReply *st)
{
  if (st->n_devices == 0) {
    add(l, GMT_TOP_PLAIN, "GPUs: none known to gmt-schd");
    return;
  }
  add(l, GMT_TOP_HEADING, "%-3s  %-23s  %-5s  %-14s  %-12s  %s", "GPU", "FREE / TOTAL", "UTIL",
      "TOKENS WAITING", "TOKEN HOLDER", "NAME");
  for (size_t i = 0; i < st->n_devices; i++) {
    const Gmt__DeviceStatus *d = st->devices[i];
    char mem[72], util[16];
    gmt_status_device_memory(mem, sizeof mem, d);
    if (d->utilization >= 0)
      snprintf(util, sizeof util, "%.0f%%", d->utilization * 100);
    else
      snprintf(util, sizeof util, "-");
    add(l, GMT_TOP_PLAIN, "%-3d  %-23s  %-5s  %-14u  %-12s  %s", d->index, mem, util,
        d->tokens_waiting, d->token_holder && d->token_holder[0] ? d->token_holder : "-",
        d->name && d->name[0] ? d->name : "?");
  }
}

static void help_section(lines_t *l, const gmt_top_view_t *v)
{
  add(l, GMT_TOP_ALERT, "gmt top: keys (any key returns)");
  add(l, GMT_TOP_PLAIN, "  q        quit");
  add(l, GMT_TOP_PLAIN, "  s        sort pods by measured share of GPU time, highest first");
  add(l, GMT_TOP_PLAIN, "  m        sort pods by device memory used, most first");
  add(l, GMT_TOP_PLAIN, "  n        sort pods by name");
  add(l, GMT_TOP_PLAIN, "  p        pause (stop asking gmt-schd) / go on");
  add(l, GMT_TOP_PLAIN, "  ?        this help");
  add(l, GMT_TOP_PLAIN, "%s", "");
  add(l, GMT_TOP_PLAIN,
      "Refreshed every %.1f s (-d SECONDS). Columns: REQ/LIM the pod's configured", v->interval_s);
  add(l, GMT_TOP_PLAIN,
      "share of GPU time, SHARE what it used over gmt-schd's window, TOKEN the GPUs");
  add(l, GMT_TOP_PLAIN,
      "whose token it holds, MEMORY / QUOTA its device memory against GPU_MEM, GPU");
  add(l, GMT_TOP_PLAIN,
      "HOST DISK where a mode=swap or um pod's bytes are, CONTEXT its processes'");
  add(l, GMT_TOP_PLAIN,
      "context memory (shown, not charged). Hottest buffers come from gmt-schd's");
  add(l, GMT_TOP_PLAIN, "tracer (root); `gmt status` and `gmt trace --pod NAME` say more.");
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
      int w = name_width(st);
      add(&l, GMT_TOP_PLAIN, "%s", "");
      gpus_section(&l, st);
      add(&l, GMT_TOP_PLAIN, "%s", "");
      pods_section(&l, v, order, w);
      add(&l, GMT_TOP_PLAIN, "%s", "");
      hot_section(&l, v, order, w);
    }
  }
  free(order);
  if (l.err) {
    lines_free(&l);
    return l.err;
  }

  /* The keys take the last row; the rest what fits, the last one that
   * does saying how many did not. */
  int body = s->rows - 1;
  int r = 0;
  for (size_t i = 0; i < l.n && r < body; i++) {
    if (r == body - 1 && i + 1 < l.n) {
      char more[96];
      snprintf(more, sizeof more, "... %zu more rows (a taller terminal shows them)", l.n - i);
      put_row(s, r++, more, GMT_TOP_PLAIN);
      break;
    }
    put_row(s, r++, l.text[i], l.style[i]);
  }
  while (r < body)
    put_row(s, r++, "", GMT_TOP_PLAIN);
  put_row(s, r++, KEYS_TEXT, GMT_TOP_HEADING);
  s->used = r;
  lines_free(&l);
  return 0;
}
