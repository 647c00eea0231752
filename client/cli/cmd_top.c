/* gmt top: a live full-screen view of the node, like nvtop. Every interval
 * it asks gmt-schd for its Status (and, where its tracer runs, each busy
 * pod's hottest buffers: TraceSpots), renders them with client/cli/top_view.c
 * and draws the rows with curses; keys sort, pause and quit. Every call is
 * bounded, so a scheduler that died or hangs shows as unreachable in the
 * view while it retries, and the keys keep working. */
#include <curses.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_wire.h"
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

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
  (void)sig;
  stop_requested = 1;
}

static void usage(FILE *f)
{
  fprintf(f,
          "usage: gmt [--schd URL] top [-d SECONDS]\n"
          "\n"
          "A live full-screen view of the node, refreshed every SECONDS (default 1):\n"
          "per pod its request/limit and measured share of GPU time, the GPUs whose\n"
          "token it holds, its device memory against its quota (and per tier, GPU,\n"
          "host and disk, for a mode=swap or um pod), its processes' context memory,\n"
          "and the hottest buffers where gmt-schd's tracer runs; then the node's GPUs\n"
          "(free memory, utilization, token requests waiting, the token's holder).\n"
          "Keys: q quit, s/m/n sort by share/memory/name, p pause, ? help.\n"
          "It needs a terminal; for a snapshot, or a pipe, use 'gmt status [--json]'.\n"
          "\n"
          "  -d, --delay SECONDS   seconds between refreshes (%.1f to %.0f)\n"
          "  -h, --help            show this help\n",
          MIN_INTERVAL_S, MAX_INTERVAL_S);
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
  uint64_t spots_retry_ms; /* when to ask a tracer that was off again */
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
  fetch_spots(t);
}

static void draw(const gmt_top_screen_t *s)
{
  erase();
  for (int r = 0; r < s->used; r++) {
    const char *row = gmt_top_row(s, r);
    attr_t a = s->style[r] == GMT_TOP_HEADING ? A_REVERSE
               : s->style[r] == GMT_TOP_ALERT ? A_BOLD
                                              : A_NORMAL;
    attrset(a);
    mvaddnstr(r, 0, row, s->cols);
    /* A heading's reverse video runs to the edge, but not into the last
     * cell of the screen (writing there scrolls some terminals). */
    if (a == A_REVERSE)
      for (int c = (int)strlen(row); c < s->cols - (r == s->rows - 1); c++)
        addch(' ');
  }
  attrset(A_NORMAL);
  refresh();
}

static int show(const top_t *t, const gmt_top_view_t *base)
{
  gmt_top_view_t v = *base;
  char clock[16];
  clock_now(clock, sizeof clock);
  v.clock = clock;
  v.st = t->st ? t->st->status_rep : NULL;
  v.st_clock = t->st_clock;
  v.error = t->failed ? t->error : NULL;
  v.spots = NULL;
  v.spots_off = t->spots_are_off ? t->spots_off : NULL;
  /* The spots are replies in envelopes: the view wants the replies. */
  const Gmt__TraceSpotsReply **spots = NULL;
  if (v.st && t->spots) {
    spots = calloc(v.st->n_pods ? v.st->n_pods : 1, sizeof *spots);
    if (spots)
      for (size_t i = 0; i < v.st->n_pods; i++)
        spots[i] = t->spots[i] ? t->spots[i]->trace_spots_rep : NULL;
    v.spots = spots;
  }
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

int gmt_cmd_top(const gmt_cmd_ctx_t *ctx, int argc, char **argv)
{
  double interval = 1.0;
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
    } else {
      fprintf(stderr, "gmt top: unknown argument '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (!isatty(STDOUT_FILENO) || !isatty(STDIN_FILENO)) {
    fprintf(stderr,
            "gmt top: needs a terminal (its %s is not one); for a snapshot use "
            "'gmt status', or 'gmt status --json' for programs\n",
            isatty(STDOUT_FILENO) ? "standard input" : "standard output");
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
    fprintf(stderr, "gmt top: cannot drive this terminal (TERM=%s); use 'gmt status'\n",
            term ? term : "(unset)");
    return 1;
  }
  cbreak();
  noecho();
  keypad(stdscr, TRUE);
  curs_set(0);

  top_t t = {.url = ctx->schd_url};
  gmt_top_view_t view = {.url = ctx->schd_url, .interval_s = interval, .sort = GMT_TOP_SORT_SHARE};
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
