/* gmt top: a live full-screen view of the node, like nvtop. Every interval
 * it asks gmt-schd for its Status (and, where its tracer runs, each busy
 * pod's hottest buffers: TraceSpots), keeps each pod's share for the
 * history (top_history.c), renders them with client/cli/top_view.c and
 * draws the rows with curses, in colour where the terminal has it; keys
 * sort, pick and fold pods, pause and quit. With -n it prints that many
 * refreshes as text instead, for scripts. Every call is bounded, so a
 * scheduler that died or hangs shows as unreachable in the view while it
 * retries, and the keys keep working. */
#include <curses.h>
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_wire.h"
#include "top_columns.h"
#include "top_glyphs.h"
#include "top_history.h"
#include "top_view.h"

/* Each call's bound: the Status call (with its dial), and the TraceSpots
 * calls of one refresh together, each at most SPOTS_CALL_MS. */
#define STATUS_BOUND_MS 1000
#define SPOTS_BUDGET_MS 1000
#define SPOTS_CALL_MS 500
/* Hot buffers shown per pod. */
#define SPOTS_K 3
/* A tracer that is off (or refused us) is asked again this often. */
#define SPOTS_RETRY_MS 10000
#define MIN_INTERVAL_S 0.1
#define MAX_INTERVAL_S 3600.0
/* Refreshes of history kept per pod (the widest HISTORY column). */
#define HISTORY_DEPTH 60
/* gmt top -n: at most this many refreshes, and rows of one. */
#define MAX_COUNT 1000000
#define BATCH_ROWS 10000
/* Pods folded at once (Enter): more are unfolded first. */
#define MAX_FOLDED 64

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
  (void)sig;
  stop_requested = 1;
}

static void usage(FILE *f)
{
  fprintf(f,
          "usage: gmt [--schd URL] top [-d SECONDS] [-n COUNT]\n"
          "\n"
          "A live full-screen view of the node, refreshed every SECONDS (default 1):\n"
          "the node's GPUs (utilization, free memory, token requests waiting, the\n"
          "token's holder) and, under them, the processes on the GPUs outside gmt\n"
          "(UNMANAGED: no quota, no share); per pod a bar of its measured share of\n"
          "GPU time against its REQUEST, the history of that share over the last\n"
          "refreshes, a bar of its device memory against its quota, the GPUs whose\n"
          "token it holds, its request/limit, memory per tier (GPU, host, disk) for a\n"
          "mode=swap or um pod, its processes' context memory, and its live processes\n"
          "under it; the hottest buffers of those processes where gmt-schd's tracer\n"
          "runs. The columns fit the terminal's width; colour where the terminal has\n"
          "it (not with NO_COLOR set or TERM=dumb).\n"
          "Keys: q quit, up/down or k/j pick a pod, enter or space fold its processes,\n"
          "s/m/n sort by share/memory/name, p pause, ? help.\n"
          "It needs a terminal, but with -n: then it prints COUNT refreshes as text\n"
          "(COLUMNS cells wide, else the terminal's width, else 80) and exits, 1 if\n"
          "the last found gmt-schd unreachable. For programs use 'gmt status --json'.\n"
          "\n"
          "  -d, --delay SECONDS   seconds between refreshes (%.1f to %.0f)\n"
          "  -n, --count COUNT     print COUNT refreshes and exit (1 to %d)\n"
          "  -h, --help            show this help\n",
          MIN_INTERVAL_S, MAX_INTERVAL_S, MAX_COUNT);
}

static int parse_interval(const char *s, double *out)
{
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v) || v < MIN_INTERVAL_S || v > MAX_INTERVAL_S) {
    fprintf(stderr, "gmt top: -d wants seconds from %.1f to %.0f, not '%s'\n", MIN_INTERVAL_S,
            MAX_INTERVAL_S, s);
    return -EINVAL;
  }
  *out = v;
  return 0;
}

static int parse_count(const char *s, int *out)
{
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < 1 || v > MAX_COUNT) {
    fprintf(stderr, "gmt top: -n wants a count from 1 to %d, not '%s'\n", MAX_COUNT, s);
    return -EINVAL;
  }
  *out = (int)v;
  return 0;
}

/* What the view shows, and the connection it comes from. */
typedef struct {
  const char *url;
  gmt_client_t *c;
  Gmt__Envelope *st;     /* the last StatusReply that came */
  Gmt__Envelope **spots; /* per pod of st: a TraceSpotsReply, or NULL */
  char st_clock[16];
  char error[1024];
  bool failed;
  char spots_off[700];
  bool spots_are_off;
  uint64_t spots_retry_ms;    /* when to ask a tracer that was off again */
  gmt_top_history_t *history; /* each pod's share at the last refreshes */
  char selected[256];         /* the pod picked ("": none yet) */
  char *folded[MAX_FOLDED];   /* pods whose processes are folded away */
  size_t n_folded;
} top_t;

static void clock_now(char *buf, size_t len)
{
  time_t now = time(NULL);
  struct tm tm;
  if (!localtime_r(&now, &tm) || !strftime(buf, len, "%H:%M:%S", &tm))
    snprintf(buf, len, "?");
}

static void drop_spots(top_t *t)
{
  if (t->spots && t->st)
    for (size_t i = 0; i < t->st->status_rep->n_pods; i++)
      gmt_wire_free(t->spots[i]);
  free(t->spots);
  t->spots = NULL;
}

static void top_close(top_t *t)
{
  for (size_t i = 0; i < t->n_folded; i++)
    free(t->folded[i]);
  t->n_folded = 0;
  gmt_top_history_free(t->history);
  t->history = NULL;
  drop_spots(t);
  gmt_wire_free(t->st);
  t->st = NULL;
  gmt_client_close(t->c);
  t->c = NULL;
}

static int call(top_t *t, const Gmt__Envelope *req, Gmt__Envelope__BodyCase want, int bound_ms,
                Gmt__Envelope **rep, char *err, size_t errlen)
{
  *rep = NULL;
  err[0] = '\0';
  int rc = gmt_client_call(t->c, req, rep, bound_ms < 1 ? 1 : bound_ms);
  if (rc < 0) {
    snprintf(err, errlen, "%s", gmt_strerror(rc));
    return rc;
  }
  rc = gmt_wire_expect(*rep, want, err, errlen);
  if (rc < 0) {
    if (!err[0])
      snprintf(err, errlen, "%s", gmt_strerror(rc));
    gmt_wire_free(*rep);
    *rep = NULL;
  }
  return rc;
}

/* The hottest buffers of each pod with processes, within SPOTS_BUDGET_MS
 * in all; pods past the budget show none this time. */
static void fetch_spots(top_t *t)
{
  const Gmt__StatusReply *st = t->st->status_rep;
  uint64_t start = gmt_now_ms();
  if (t->spots_are_off && start < t->spots_retry_ms)
    return;
  t->spots = calloc(st->n_pods ? st->n_pods : 1, sizeof *t->spots);
  if (!t->spots)
    return;
  for (size_t i = 0; i < st->n_pods; i++) {
    const Gmt__PodStatus *pod = st->pods[i];
    uint64_t spent = gmt_now_ms() - start;
    if (!pod->n_processes || !pod->config || !pod->config->name)
      continue;
    if (spent >= SPOTS_BUDGET_MS)
      break;
    Gmt__TraceSpotsRequest body = GMT__TRACE_SPOTS_REQUEST__INIT;
    Gmt__Envelope req = GMT__ENVELOPE__INIT;
    body.pod = pod->config->name;
    body.k = SPOTS_K;
    gmt_wire_set_body(&req, GMT__ENVELOPE__BODY_TRACE_SPOTS_REQ, &body);
    int left = SPOTS_BUDGET_MS - (int)spent;
    char err[640];
    int rc = call(t, &req, GMT__ENVELOPE__BODY_TRACE_SPOTS_REP,
                  left < SPOTS_CALL_MS ? left : SPOTS_CALL_MS, &t->spots[i], err, sizeof err);
    if (rc == 0 || rc == GMT_ENOPOD) /* a pod gone since the Status: none */
      continue;
    if (rc == -ETIMEDOUT)
      break;
    /* The tracer is off, or the scheduler does not let us ask: the view
     * says so instead of buffers, and asks again later. */
    snprintf(t->spots_off, sizeof t->spots_off, "gmt-schd says: %s", err);
    t->spots_are_off = true;
    t->spots_retry_ms = gmt_now_ms() + SPOTS_RETRY_MS;
    return;
  }
  t->spots_are_off = false;
}

/* One refresh: a new Status (and spots), or the reason there is none. The
 * last answer stays for the view either way. */
static void fetch(top_t *t)
{
  uint64_t start = gmt_now_ms();
  char err[640] = "";
  int rc = 0;
  if (!t->c && (rc = gmt_client_open(&t->c, t->url, GMT_CLIENT_DIAL_NOW)) < 0) {
    t->c = NULL;
    gmt__cmd_no_schd(t->error, sizeof t->error, t->url, rc);
    t->failed = true;
    return;
  }
  Gmt__StatusRequest sreq = GMT__STATUS_REQUEST__INIT;
  Gmt__Envelope req = GMT__ENVELOPE__INIT;
  Gmt__Envelope *rep = NULL;
  gmt_wire_set_body(&req, GMT__ENVELOPE__BODY_STATUS_REQ, &sreq);
  rc = call(t, &req, GMT__ENVELOPE__BODY_STATUS_REP, STATUS_BOUND_MS - (int)(gmt_now_ms() - start),
            &rep, err, sizeof err);
  if (rc < 0) {
    snprintf(t->error, sizeof t->error, "%s: %s", t->url, err);
    t->failed = true;
    /* No answer: dial afresh next time, so that a scheduler that comes
     * back (or never will) is found at once. */
    gmt_client_close(t->c);
    t->c = NULL;
    return;
  }
  drop_spots(t);
  gmt_wire_free(t->st);
  t->st = rep;
  t->failed = false;
  clock_now(t->st_clock, sizeof t->st_clock);
  /* Only answers go into the history: a pause or an outage is a gap in
   * time, not a share of 0. */
  const Gmt__StatusReply *st = rep->status_rep;
  gmt_top_history_begin(t->history);
  for (size_t i = 0; i < st->n_pods; i++) {
    const Gmt__PodStatus *p = st->pods[i];
    if (p->config && p->config->name)
      (void)gmt_top_history_add(t->history, p->config->name,
                                isnan(p->gpu_time_share) ? 0 : p->gpu_time_share);
  }
  gmt_top_history_end(t->history);
  fetch_spots(t);
}

/* Enter on a pod: its processes folded away, or back. */
static void toggle_fold(top_t *t, const char *name)
{
  for (size_t i = 0; i < t->n_folded; i++) {
    if (!strcmp(t->folded[i], name)) {
      free(t->folded[i]);
      t->folded[i] = t->folded[--t->n_folded];
      return;
    }
  }
  if (t->n_folded == MAX_FOLDED) { /* the oldest fold goes */
    free(t->folded[0]);
    memmove(t->folded, t->folded + 1, (MAX_FOLDED - 1) * sizeof *t->folded);
    t->n_folded--;
  }
  char *copy = strdup(name);
  if (copy)
    t->folded[t->n_folded++] = copy;
}

/* The pod picked moves step rows (0: stays, or the first when it is
 * gone). */
static void select_step(top_t *t, gmt_top_sort_t by, int step)
{
  const Gmt__StatusReply *st = t->st ? t->st->status_rep : NULL;
  const char *name = gmt_top_select(st, by, t->selected[0] ? t->selected : NULL, step);
  snprintf(t->selected, sizeof t->selected, "%s", name ? name : "");
}

/* The curses colour pair of each cell meaning (0: the terminal's own). */
static bool use_colour;

static void colours_start(void)
{
  static const short fg[GMT_TOP_C_COUNT] = {[GMT_TOP_C_GOOD] = COLOR_GREEN,
                                            [GMT_TOP_C_WARN] = COLOR_YELLOW,
                                            [GMT_TOP_C_BAD] = COLOR_RED,
                                            [GMT_TOP_C_DIM] = COLOR_BLUE};
  if (!use_colour || !has_colors() || start_color() == ERR) {
    use_colour = false;
    return;
  }
  use_default_colors();
  for (short c = 1; c < GMT_TOP_C_COUNT; c++)
    init_pair(c, fg[c], -1);
}

/* Bytes of the UTF-8 character at p (1 for a stray byte). */
static int char_len(const char *p)
{
  int k = 1;
  while (k < 4 && p[k] && ((unsigned char)p[k] & 0xc0) == 0x80)
    k++;
  return k;
}

static void draw(const gmt_top_screen_t *s)
{
  erase();
  for (int r = 0; r < s->used; r++) {
    const char *row = gmt_top_row(s, r);
    const unsigned char *color = gmt_top_row_colors(s, r);
    attr_t a = s->style[r] == GMT_TOP_HEADING    ? A_REVERSE
               : s->style[r] == GMT_TOP_ALERT    ? A_BOLD
               : s->style[r] == GMT_TOP_SELECTED ? A_BOLD
                                                 : A_NORMAL;
    move(r, 0);
    /* Runs of cells of one meaning, each in its colour. */
    int cell = 0;
    const char *p = row;
    while (*p) {
      unsigned char c = color[cell];
      const char *run = p;
      while (*p && color[cell] == c) {
        p += char_len(p);
        cell++;
      }
      attrset(a | (use_colour && c ? COLOR_PAIR(c) : 0));
      addnstr(run, (int)(p - run));
    }
    attrset(a);
    /* A heading's reverse video runs to the edge, but not into the last
     * cell of the screen (writing there scrolls some terminals). */
    if (a == A_REVERSE)
      for (int c = cell; c < s->cols - (r == s->rows - 1); c++)
        addch(' ');
  }
  attrset(A_NORMAL);
  refresh();
}

/* gmt top -n: a refresh as text, without trailing blanks, in colour
 * (ANSI SGR) where the terminal has it. */
static void print_screen(const gmt_top_screen_t *s, bool colour)
{
  static const char *const sgr[GMT_TOP_C_COUNT] = {[GMT_TOP_C_GOOD] = "32",
                                                   [GMT_TOP_C_WARN] = "33",
                                                   [GMT_TOP_C_BAD] = "31",
                                                   [GMT_TOP_C_DIM] = "34"};
  for (int r = 0; r < s->used; r++) {
    const char *row = gmt_top_row(s, r);
    const unsigned char *color = gmt_top_row_colors(s, r);
    size_t len = strlen(row);
    while (len && row[len - 1] == ' ')
      len--;
    const char *style = s->style[r] == GMT_TOP_HEADING ? "7"
                        : s->style[r] != GMT_TOP_PLAIN ? "1"
                                                       : NULL;
    if (colour && style)
      printf("\033[%sm", style);
    int cell = 0;
    unsigned char now = 0;
    for (const char *p = row; p < row + len;) {
      int k = char_len(p);
      if (colour && color[cell] != now) {
        now = color[cell];
        printf("\033[0%s%s%s%sm", style ? ";" : "", style ? style : "", now ? ";" : "",
               now ? sgr[now] : "");
      }
      fwrite(p, 1, (size_t)k, stdout);
      p += k;
      cell++;
    }
    if (colour && (style || now))
      printf("\033[0m");
    putchar('\n');
  }
}

/* The view of t's last answer on base's settings; spots (freed by the
 * caller) holds the replies out of their envelopes. */
static gmt_top_view_t view_of(const top_t *t, const gmt_top_view_t *base,
                              const Gmt__TraceSpotsReply ***spots_out, char *clock, size_t len)
{
  gmt_top_view_t v = *base;
  clock_now(clock, len);
  v.clock = clock;
  v.st = t->st ? t->st->status_rep : NULL;
  v.st_clock = t->st_clock;
  v.error = t->failed ? t->error : NULL;
  v.spots = NULL;
  v.spots_off = t->spots_are_off ? t->spots_off : NULL;
  v.history = t->history;
  v.folded = (const char *const *)t->folded;
  v.n_folded = t->n_folded;
  v.selected = base->batch || !t->selected[0] ? NULL : t->selected;
  const Gmt__TraceSpotsReply **spots = NULL;
  if (v.st && t->spots) {
    spots = calloc(v.st->n_pods ? v.st->n_pods : 1, sizeof *spots);
    if (spots)
      for (size_t i = 0; i < v.st->n_pods; i++)
        spots[i] = t->spots[i] ? t->spots[i]->trace_spots_rep : NULL;
    v.spots = spots;
  }
  *spots_out = spots;
  return v;
}

static int show(const top_t *t, const gmt_top_view_t *base)
{
  const Gmt__TraceSpotsReply **spots = NULL;
  char clock[16];
  gmt_top_view_t v = view_of(t, base, &spots, clock, sizeof clock);
  gmt_top_screen_t s;
  int rc = gmt_top_screen_init(&s, LINES, COLS);
  if (rc == 0) {
    rc = gmt_top_render(&v, &s);
    if (rc == 0)
      draw(&s);
    gmt_top_screen_close(&s);
  } else if (rc == -EINVAL) {
    rc = 0; /* a terminal of no size: nothing to draw */
  }
  free(spots);
  return rc;
}

static void sleep_ms(uint64_t ms)
{
  struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000};
  while (!stop_requested && nanosleep(&ts, &ts) < 0 && errno == EINTR)
    ;
}

/* gmt top -n COUNT: COUNT refreshes printed as text, a blank line
 * between two. 0, or 1 when the last found no scheduler (its refresh
 * says so too) or memory ran out. */
static int batch(top_t *t, const gmt_top_view_t *base, int count)
{
  struct winsize ws;
  int tty_cols =
      isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 ? ws.ws_col : 0;
  int cols = gmt_top_width(getenv("COLUMNS"), tty_cols);
  bool colour = gmt_top_use_color(isatty(STDOUT_FILENO), getenv("TERM"), getenv("NO_COLOR"));
  uint64_t interval_ms = (uint64_t)(base->interval_s * 1000);
  for (int i = 0; i < count && !stop_requested; i++) {
    if (i)
      sleep_ms(interval_ms);
    if (stop_requested)
      break;
    fetch(t);
    const Gmt__TraceSpotsReply **spots = NULL;
    char clock[16];
    gmt_top_view_t v = view_of(t, base, &spots, clock, sizeof clock);
    gmt_top_screen_t s;
    int rc = gmt_top_screen_init(&s, BATCH_ROWS, cols);
    if (rc == 0)
      rc = gmt_top_render(&v, &s);
    if (rc == 0) {
      if (i)
        putchar('\n');
      print_screen(&s, colour);
      fflush(stdout);
    }
    gmt_top_screen_close(&s);
    free(spots);
    if (rc < 0) {
      fprintf(stderr, "gmt top: %s rendering the view\n", gmt_strerror(rc));
      return 1;
    }
  }
  if (t->failed) {
    fprintf(stderr, "gmt top: gmt-schd unreachable: %s\n", t->error);
    return 1;
  }
  return 0;
}

int gmt_cmd_top(const gmt_cmd_ctx_t *ctx, int argc, char **argv)
{
  double interval = 1.0;
  int count = 0; /* -n: refreshes to print; 0: the live view */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "-d") || !strcmp(a, "--delay")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "gmt top: %s needs SECONDS\n", a);
        return 2;
      }
      if (parse_interval(argv[++i], &interval) < 0)
        return 2;
    } else if (!strncmp(a, "--delay=", 8)) {
      if (parse_interval(a + 8, &interval) < 0)
        return 2;
    } else if (!strcmp(a, "-n") || !strcmp(a, "--count")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "gmt top: %s needs COUNT\n", a);
        return 2;
      }
      if (parse_count(argv[++i], &count) < 0)
        return 2;
    } else if (!strncmp(a, "--count=", 8)) {
      if (parse_count(a + 8, &count) < 0)
        return 2;
    } else {
      fprintf(stderr, "gmt top: unknown argument '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  /* The locale's character set says whether the history may use
   * Unicode blocks (and lets curses write them); nothing else of the
   * locale is taken, so numbers keep their '.'. */
  setlocale(LC_CTYPE, "");
  top_t t = {.url = ctx->schd_url};
  gmt_top_view_t view = {.url = ctx->schd_url,
                         .interval_s = interval,
                         .sort = GMT_TOP_SORT_SHARE,
                         .utf8 = gmt_top_use_utf8(nl_langinfo(CODESET)),
                         .batch = count > 0};
  if (gmt_top_history_new(&t.history, HISTORY_DEPTH) < 0) {
    fprintf(stderr, "gmt top: out of memory\n");
    return 1;
  }
  if (count) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int status = batch(&t, &view, count);
    top_close(&t);
    return status;
  }
  if (!isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO)) {
    fprintf(stderr,
            "gmt top: needs a terminal (its %s is not one); for text use 'gmt top -n 1', "
            "for a snapshot 'gmt status', or 'gmt status --json' for programs\n",
            isatty(STDOUT_FILENO) ? "standard input" : "standard output");
    top_close(&t);
    return 2;
  }

  /* Our handlers before curses starts, so that it keeps them (it installs
   * its own only over the default) and Ctrl-C ends the loop cleanly. */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);

  SCREEN *scr = newterm(NULL, stdout, stdin);
  if (!scr) {
    const char *term = getenv("TERM");
    fprintf(stderr, "gmt top: cannot drive this terminal (TERM=%s); use 'gmt top -n 1'\n",
            term ? term : "(unset)");
    top_close(&t);
    return 1;
  }
  cbreak();
  noecho();
  keypad(stdscr, TRUE);
  curs_set(0);
  use_colour = gmt_top_use_color(true, getenv("TERM"), getenv("NO_COLOR"));
  colours_start();

  uint64_t interval_ms = (uint64_t)(interval * 1000);
  uint64_t next = 0;
  int status = 0;
  while (!stop_requested) {
    uint64_t now = gmt_now_ms();
    if (!view.paused && now >= next) {
      fetch(&t);
      now = gmt_now_ms();
      next = now + interval_ms;
    }
    select_step(&t, view.sort, 0); /* the first pod, when none is picked or it is gone */
    if (show(&t, &view) < 0) {
      status = 1;
      break;
    }
    /* Wake for the next refresh, or each second for the clock. */
    uint64_t wait = view.paused || next <= now ? 1000 : next - now;
    timeout(wait > 1000 ? 1000 : (int)wait);
    int ch = getch();
    if (ch == ERR || ch == KEY_RESIZE)
      continue; /* a resize is drawn at the top of the loop */
    if (view.help && ch != 'q' && ch != 'Q') {
      view.help = false;
      continue;
    }
    switch (ch) {
    case 'q':
    case 'Q': stop_requested = 1; break;
    case 's': view.sort = GMT_TOP_SORT_SHARE; break;
    case 'm': view.sort = GMT_TOP_SORT_MEMORY; break;
    case 'n': view.sort = GMT_TOP_SORT_NAME; break;
    case KEY_UP:
    case 'k': select_step(&t, view.sort, -1); break;
    case KEY_DOWN:
    case 'j': select_step(&t, view.sort, 1); break;
    case KEY_ENTER:
    case '\n':
    case '\r':
    case ' ':
      if (t.selected[0])
        toggle_fold(&t, t.selected);
      break;
    case 'p':
      view.paused = !view.paused;
      next = 0; /* going on: ask at once */
      break;
    case '?':
    case 'h': view.help = true; break;
    default: break;
    }
  }
  endwin();
  delscreen(scr);
  top_close(&t);
  if (status)
    fprintf(stderr, "gmt top: out of memory drawing the view\n");
  return status;
}
