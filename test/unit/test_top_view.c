/* gmt top's screen (client/cli/top_view.c), rendered from replies built in
 * memory: the pods' order for each key, what each pod's row says (its
 * bars, its history), the tiers only where memory moves, the scheduler
 * unreachable with its last answer kept, the hottest buffers of live
 * processes or why there are none, the columns at 80 cells, the pod
 * picked and folded, text for gmt top -n, cutting to a small
 * terminal, and the GPU processes outside gmt. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmt.pb-c.h"
#include "top_glyphs.h"
#include "top_history.h"
#include "top_view.h"

#define MIB (1ull << 20)
#define GIB (1ull << 30)

typedef struct {
  Gmt__StatusReply st;
  Gmt__PodStatus pods[3], *podp[3];
  Gmt__ProcessCounters totals[3];
  Gmt__PodConfig cfg[3];
  Gmt__PodDeviceStatus dev[3], *devp[3];
  Gmt__DeviceStatus gpu, *gpup[1];
} node_t;

/* Three pods: "train" (1 GiB used, share 0.2), "infer" (64 MiB, 0.7,
 * holding GPU 0's token), "batch" (mode=swap, 512 MiB, 0.1). */
static void three_pods(node_t *n)
{
  memset(n, 0, sizeof *n);
  gmt__status_reply__init(&n->st);
  static const char *names[] = {"train", "infer", "batch"};
  static const double share[] = {0.2, 0.7, 0.1};
  static const uint64_t used[] = {GIB, 64 * MIB, 512 * MIB};
  for (int i = 0; i < 3; i++) {
    gmt__pod_status__init(&n->pods[i]);
    gmt__process_counters__init(&n->totals[i]);
    n->pods[i].totals = &n->totals[i];
    gmt__pod_config__init(&n->cfg[i]);
    gmt__pod_device_status__init(&n->dev[i]);
    n->cfg[i].name = (char *)names[i];
    n->cfg[i].request = 0.3;
    n->cfg[i].limit = 1.0;
    n->cfg[i].memory_limit = 2 * GIB;
    n->pods[i].config = &n->cfg[i];
    n->pods[i].connected = true;
    n->totals[i].memory_used = used[i];
    n->pods[i].gpu_time_share = share[i];
    n->dev[i].device = 0;
    n->dev[i].memory_used = used[i];
    n->devp[i] = &n->dev[i];
    n->pods[i].n_devices = 1;
    n->pods[i].devices = &n->devp[i];
    n->podp[i] = &n->pods[i];
  }
  n->dev[1].holds_token = true;
  n->pods[1].holds_token = true;
  n->pods[0].context_bytes = 300 * MIB;
  n->cfg[2].mode = GMT__MEM_MODE__MEM_SWAP;
  n->totals[2].swap_gpu = 256 * MIB;
  n->totals[2].swap_host = 192 * MIB;
  n->totals[2].swap_disk = 64 * MIB;
  n->st.n_pods = 3;
  n->st.pods = n->podp;
  gmt__device_status__init(&n->gpu);
  n->gpu.index = 0;
  n->gpu.name = "NVIDIA H100";
  n->gpu.memory_total = 80 * GIB;
  n->gpu.memory_free = 60 * GIB;
  n->gpu.utilization = 0.42;
  n->gpu.tokens_waiting = 2;
  n->gpu.token_holder = "infer";
  n->gpup[0] = &n->gpu;
  n->st.n_devices = 1;
  n->st.devices = n->gpup;
}

static gmt_top_view_t view_of(const node_t *n)
{
  gmt_top_view_t v = {.url = "tcp://127.0.0.1:50051",
                      .interval_s = 1.0,
                      .clock = "12:00:01",
                      .st = &n->st,
                      .st_clock = "12:00:00"};
  return v;
}

/* The screen's row that starts with prefix, or -1. */
static int row_starting(const gmt_top_screen_t *s, const char *prefix)
{
  for (int r = 0; r < s->used; r++)
    if (!strncmp(gmt_top_row(s, r), prefix, strlen(prefix)))
      return r;
  return -1;
}

/* The pods table's row of pod name: after the two cells of the gutter
 * ('>' picked, '-' / '+' processes shown / folded), the name. */
static int pod_row(const gmt_top_screen_t *s, const char *name)
{
  size_t n = strlen(name);
  for (int r = 0; r < s->used; r++) {
    const char *row = gmt_top_row(s, r);
    if (strlen(row) > n + 2 && (row[0] == ' ' || row[0] == '>') &&
        (row[1] == ' ' || row[1] == '-' || row[1] == '+') && !strncmp(row + 2, name, n) &&
        row[2 + n] == ' ')
      return r;
  }
  return -1;
}

/* Cells of a row: its UTF-8 characters. */
static int cells_of(const char *row)
{
  int n = 0;
  for (; *row; row++)
    n += ((unsigned char)*row & 0xc0) != 0x80;
  return n;
}

static int row_containing(const gmt_top_screen_t *s, const char *text)
{
  for (int r = 0; r < s->used; r++)
    if (strstr(gmt_top_row(s, r), text))
      return r;
  return -1;
}

/* TOP_DUMP=1 prints every screen rendered, to see what a failing test
 * saw. */
static void render(const gmt_top_view_t *v, gmt_top_screen_t *s, int rows, int cols)
{
  assert_int_equal(gmt_top_screen_init(s, rows, cols), 0);
  assert_int_equal(gmt_top_render(v, s), 0);
  assert_int_equal(s->used, rows);
  if (getenv("TOP_DUMP"))
    for (int r = 0; r < s->used; r++)
      fprintf(stderr, "%2d|%s|\n", r, gmt_top_row(s, r));
}

static void test_top_sorts_by_share_memory_and_name(void **state)
{
  (void)state;
  node_t n;
  three_pods(&n);
  size_t idx[3];
  gmt_top_sort_pods(&n.st, GMT_TOP_SORT_SHARE, idx);
  assert_int_equal(idx[0], 1); /* infer 0.7, train 0.2, batch 0.1 */
  assert_int_equal(idx[1], 0);
  assert_int_equal(idx[2], 2);
  gmt_top_sort_pods(&n.st, GMT_TOP_SORT_MEMORY, idx);
  assert_int_equal(idx[0], 0); /* train 1 GiB, batch 512 MiB, infer 64 MiB */
  assert_int_equal(idx[1], 2);
  assert_int_equal(idx[2], 1);
  gmt_top_sort_pods(&n.st, GMT_TOP_SORT_NAME, idx);
  assert_int_equal(idx[0], 2); /* batch, infer, train */
  assert_int_equal(idx[1], 1);
  assert_int_equal(idx[2], 0);
}

static void test_top_sort_ties_go_by_name(void **state)
{
  (void)state;
  node_t n;
  three_pods(&n);
  for (int i = 0; i < 3; i++)
    n.pods[i].gpu_time_share = 0.5;
  size_t idx[3];
  gmt_top_sort_pods(&n.st, GMT_TOP_SORT_SHARE, idx);
  assert_int_equal(idx[0], 2);
  assert_int_equal(idx[1], 1);
  assert_int_equal(idx[2], 0);
}

static void test_top_rows_follow_the_sort_key(void **state)
{
  (void)state;
  node_t n;
  three_pods(&n);
  gmt_top_view_t v = view_of(&n);
  gmt_top_screen_t s;
  v.sort = GMT_TOP_SORT_NAME;
  render(&v, &s, 40, 160);
  assert_true(pod_row(&s, "batch") > 0);
  assert_true(pod_row(&s, "batch") < pod_row(&s, "infer"));
  assert_true(pod_row(&s, "infer") < pod_row(&s, "train"));
  assert_non_null(strstr(gmt_top_row(&s, 0), "sort: name"));
  gmt_top_screen_close(&s);
  v.sort = GMT_TOP_SORT_MEMORY;
  render(&v, &s, 40, 160);
  assert_true(pod_row(&s, "train") < pod_row(&s, "batch"));
  assert_true(pod_row(&s, "batch") < pod_row(&s, "infer"));
  gmt_top_screen_close(&s);
}

static void test_top_pod_row_shows_share_token_memory_quota_and_context(void **state)
{
  (void)state;
  node_t n;
  three_pods(&n);
  gmt_top_view_t v = view_of(&n);
  gmt_top_screen_t s;
  render(&v, &s, 40, 200); /* room for every column at its widest */
  const char *infer = gmt_top_row(&s, pod_row(&s, "infer"));
  assert_non_null(strstr(infer, " yes "));
  assert_non_null(strstr(infer, "0.30/1.00")); /* REQ/LIM */
  assert_non_null(strstr(infer, "0.70/0.30")); /* SHARE/REQ */
  assert_non_null(strstr(infer, "gpu 0"));
  assert_non_null(strstr(infer, "64.0 MiB / 2.0 GiB"));
  const char *train = gmt_top_row(&s, pod_row(&s, "train"));
  assert_non_null(strstr(train, "1.0 GiB / 2.0 GiB"));
  assert_non_null(strstr(train, "300.0 MiB")); /* context */
  assert_null(strstr(train, "gpu 0"));         /* no token */
  /* The node's GPU: free / total, utilization, waiting, holder. */
  const char *gpu = gmt_top_row(&s, row_starting(&s, "0  "));
  assert_non_null(strstr(gpu, "60.0 GiB / 80.0 GiB"));
  assert_non_null(strstr(gpu, "42%"));
  assert_non_null(strstr(gpu, "infer"));
  assert_non_null(strstr(gpu, "NVIDIA H100"));
  assert_true(row_starting(&s, "GPU ") >= 0);
  assert_non_null(strstr(gmt_top_row(&s, 1), "3 pods (3 connected)"));
  gmt_top_screen_close(&s);
}

/* Each pod's processes under its row: pid, program, memory, launches and
 * token wait; past eight, how many more. A pod that waited says so first. */
static void test_top_processes_under_their_pod(void **state)
{
  (void)state;
  node_t n;
  three_pods(&n);
  Gmt__ProcessStatus procs[10], *procp[10];
  Gmt__ProcessCounters pc[10];
  for (int i = 0; i < 10; i++) {
    gmt__process_status__init(&procs[i]);
    gmt__process_counters__init(&pc[i]);
    procs[i].pid = 4200 + (uint32_t)i;
    procs[i].exe = "/usr/bin/python3.11";
    procs[i].counters = &pc[i];
    pc[i].memory_used = 48 * MIB;
    pc[i].launches = 1000 + (uint64_t)i;
    procp[i] = &procs[i];
  }
  pc[0].token_wait_us = 1500000;
  pc[0].token_waiting_us = 200000;
  n.pods[1].n_processes = 1; /* infer: one */
  n.pods[1].processes = procp;
  n.pods[0].n_processes = 9; /* train: nine, one past the rows */
  n.pods[0].processes = procp + 1;
  gmt_top_view_t v = view_of(&n);
  gmt_top_screen_t s;
  render(&v, &s, 60, 160);
  int infer = pod_row(&s, "infer"), p0 = row_containing(&s, "pid 4200 ");
  /* Under the pod, before its processes: why it waits (status_waits.h). */
  assert_int_equal(p0, infer + 2);
  assert_non_null(strstr(gmt_top_row(&s, infer + 1), "waited for tokens 0.0 s, now 0.2 s"));
  assert_int_equal(row_containing(&s, "waited for tokens"), infer + 1); /* only infer waited */
  const char *r = gmt_top_row(&s, p0);
  assert_non_null(strstr(r, "python3.11"));
  assert_null(strstr(r, "/usr/bin"));
  assert_non_null(strstr(r, "48.0 MiB"));
  assert_non_null(strstr(r, "launches 1000 "));
  assert_non_null(strstr(r, "token wait 1.5 s, now 0.2"));
  int train = pod_row(&s, "train");
  assert_int_equal(gmt_top_row(&s, train)[1], '-');                /* its processes shown */
  assert_int_equal(gmt_top_row(&s, pod_row(&s, "batch"))[1], ' '); /* none */
  assert_int_equal(row_containing(&s, "pid 4201 "), train + 1);
  assert_int_equal(row_containing(&s, "pid 4208 "), train + 8);
  assert_int_equal(row_containing(&s, "pid 4209 "), -1);
  assert_int_equal(row_containing(&s, "+1 more processes"), train + 9);
  gmt_top_screen_close(&s);
}

static void test_top_tiers_only_for_a_pod_whose_memory_moves(void **state)
{
  (void)state;
  node_t n;
  three_pods(&n);
  gmt_top_view_t v = view_of(&n);
  gmt_top_screen_t s;
  render(&v, &s, 40, 160);
  assert_non_null(
      strstr(gmt_top_row(&s, row_starting(&s, "  POD")), " GPU        HOST       DISK "));
  const char *batch = gmt_top_row(&s, pod_row(&s, "batch"));
  assert_non_null(strstr(batch, " swap "));
  assert_non_null(strstr(batch, "  256.0 MiB  192.0 MiB  64.0 MiB "));
  const char *train = gmt_top_row(&s, pod_row(&s, "train"));
  assert_non_null(strstr(train, " strict "));
  assert_non_null(strstr(train, "  -          -          -         "));
  gmt_top_screen_close(&s);
  /* No pod whose memory moves: no tier columns at all. */
  n.cfg[2].mode = GMT__MEM_MODE__MEM_STRICT;
  render(&v, &s, 40, 160);
  assert_null(strstr(gmt_top_row(&s, row_starting(&s, "  POD")), "HOST"));
  gmt_top_screen_close(&s);
}

static void test_top_unreachable_keeps_the_last_answer(void **state)
{
  (void)state;
  node_t n;
  three_pods(&n);
  gmt_top_view_t v = view_of(&n);
  v.error = "tcp://127.0.0.1:50051: Connection refused";
  gmt_top_screen_t s;
  render(&v, &s, 40, 160);
  assert_int_equal(row_starting(&s, "gmt-schd unreachable: tcp://127.0.0.1:50051: Connection "
                                    "refused; retrying (below: its last answer, at 12:00:00)"),
                   1);
  assert_int_equal(s.style[1], GMT_TOP_ALERT);
  assert_true(pod_row(&s, "infer") > 0);
  gmt_top_screen_close(&s);
  /* Before any answer: the reason alone. */
  v.st = NULL;
  render(&v, &s, 40, 160);
  assert_string_equal(gmt_top_row(&s, 1),
                      "gmt-schd unreachable: tcp://127.0.0.1:50051: Connection refused; retrying");
  assert_int_equal(row_starting(&s, "  POD"), -1);
  gmt_top_screen_close(&s);
}

static void test_top_hot_buffers_or_why_not(void **state)
{
  (void)state;
  node_t n;
  three_pods(&n);
  Gmt__TraceSpotsReply r;
  Gmt__TraceAllocation a, *ap = &a;
  Gmt__TraceSite site;
  gmt__trace_spots_reply__init(&r);
  gmt__trace_allocation__init(&a);
  gmt__trace_site__init(&site);
  site.module = "/usr/bin/trainer";
  site.function = "load_batch+0x12";
  a.pid = 4242;
  a.kind = GMT__TRACE_ALLOC_KIND__TRACE_ALLOC_HOST_PINNED;
  a.size = 8 * MIB;
  a.h2d_count = 17;
  a.h2d_bytes = 136 * MIB;
  a.active = true;
  a.site = &site;
  r.n_hot = 1;
  r.hot = &ap;
  /* Its process lives: train has it. */
  Gmt__ProcessStatus proc, *procp = &proc;
  gmt__process_status__init(&proc);
  proc.pid = 4242;
  proc.node_pid = 4242;
  proc.exe = "/usr/bin/trainer";
  n.pods[0].n_processes = 1;
  n.pods[0].processes = &procp;
  const Gmt__TraceSpotsReply *spots[3] = {&r, NULL, NULL};
  gmt_top_view_t v = view_of(&n);
  v.spots = spots;
  gmt_top_screen_t s;
  render(&v, &s, 40, 160);
  assert_true(row_starting(&s, "HOTTEST BUFFERS") >= 0);
  int hot = row_containing(&s, " 4242  host_pinned");
  assert_true(hot > row_starting(&s, "HOTTEST BUFFERS"));
  const char *row = gmt_top_row(&s, hot);
  assert_non_null(strstr(row, "train "));
  assert_non_null(strstr(row, "host_pinned"));
  assert_non_null(strstr(row, "8.0 MiB"));
  assert_non_null(strstr(row, "136.0 MiB"));
  assert_non_null(strstr(row, "load_batch+0x12 (trainer)"));
  gmt_top_screen_close(&s);

  v.spots = NULL;
  v.spots_off = "gmt-schd says: tracing is off: --no-trace";
  render(&v, &s, 40, 160);
  assert_true(row_starting(&s, "hottest buffers: not shown, gmt-schd says: tracing is off: "
                               "--no-trace") >= 0);
  assert_int_equal(row_starting(&s, "HOTTEST BUFFERS"), -1);
  gmt_top_screen_close(&s);
}

static void test_top_small_terminal_cuts_rows_and_keeps_keys(void **state)
{
  (void)state;
  node_t n;
  three_pods(&n);
  gmt_top_view_t v = view_of(&n);
  gmt_top_screen_t s;
  render(&v, &s, 6, 30);
  for (int r = 0; r < s.used; r++)
    assert_true(strlen(gmt_top_row(&s, r)) <= 30);
  assert_non_null(strstr(gmt_top_row(&s, 4), "more rows"));
  assert_string_equal(gmt_top_row(&s, 5), "q quit  j/k select  enter fold");
  gmt_top_screen_close(&s);
  assert_int_equal(gmt_top_screen_init(&s, 0, 10), -22);
}

static void test_top_control_characters_never_reach_the_terminal(void **state)
{
  (void)state;
  node_t n;
  three_pods(&n);
  n.cfg[0].name = "ev\x1b[2Jil";
  gmt_top_view_t v = view_of(&n);
  gmt_top_screen_t s;
  render(&v, &s, 40, 160);
  assert_true(pod_row(&s, "ev?[2Jil") >= 0);
  for (int r = 0; r < s.used; r++)
    for (const char *p = gmt_top_row(&s, r); *p; p++)
      assert_true(*p >= 0x20 && *p < 0x7f);
  gmt_top_screen_close(&s);
}

static void test_top_help_replaces_the_tables(void **state)
{
  (void)state;
  node_t n;
  three_pods(&n);
  gmt_top_view_t v = view_of(&n);
  v.help = true;
  v.paused = true;
  gmt_top_screen_t s;
  render(&v, &s, 40, 160);
  assert_true(row_starting(&s, "gmt top: keys") >= 0);
  assert_true(row_starting(&s, "  q              quit") >= 0);
  assert_true(row_starting(&s, "  enter, space   fold") >= 0);
  assert_int_equal(pod_row(&s, "infer"), -1);
  assert_non_null(strstr(gmt_top_row(&s, 0), "PAUSED"));
  gmt_top_screen_close(&s);
}

/* The share bar against REQUEST and the memory bar against the quota, in
 * the pod's row, with their cells' meanings. */
static void test_top_pod_row_has_share_and_memory_bars(void **state)
{
  (void)state;
  node_t n;
  three_pods(&n);
  n.totals[0].memory_used = 1946 * MIB; /* train: 95% of its 2 GiB */
  gmt_top_view_t v = view_of(&n);
  gmt_top_screen_t s;
  render(&v, &s, 40, 120);
  int hr = row_starting(&s, "  POD");
  const char *head = gmt_top_row(&s, hr);
  int r = pod_row(&s, "infer");
  const char *infer = gmt_top_row(&s, r);
  /* infer: share 0.70 against its 0.30, a bar of the whole GPU: '|' to
   * its request, '+' above it. */
  const char *bar = strstr(head, "SHARE ") - head + infer;
  assert_int_equal(bar[0], '[');
  const char *end = strchr(bar, ']');
  assert_non_null(end);
  int inner = (int)(end - bar) - 1;
  int pipes = 0, pluses = 0;
  for (const char *p = bar + 1; p < end; p++) {
    pipes += *p == '|';
    pluses += *p == '+';
  }
  assert_true(pipes >= inner * 3 / 10 - 1 && pipes <= inner * 3 / 10 + 1);
  assert_true(pipes + pluses >= inner * 7 / 10 - 1 && pipes + pluses <= inner * 7 / 10 + 1);
  const unsigned char *col = gmt_top_row_colors(&s, r);
  int at = (int)(bar - infer);
  assert_int_equal(col[at + 1], GMT_TOP_C_GOOD);
  assert_int_equal(col[at + pipes + 1], GMT_TOP_C_WARN);
  /* train: its memory bar full and red, its numbers red too. */
  r = pod_row(&s, "train");
  const char *train = gmt_top_row(&s, r);
  const char *mbar = strstr(head, "MEMORY ") - head + train;
  assert_int_equal(strncmp(mbar, "[||||", 5), 0);
  col = gmt_top_row_colors(&s, r);
  assert_int_equal(col[mbar - train + 1], GMT_TOP_C_BAD);
  const char *used = strstr(train, "1.9G/2.0G");
  assert_non_null(used);
  assert_int_equal(col[used - train], GMT_TOP_C_BAD);
  /* infer's 64 MiB of 2 GiB: one cell used, the rest of the quota dim. */
  r = pod_row(&s, "infer");
  mbar = strstr(head, "MEMORY ") - head + infer;
  assert_int_equal(strncmp(mbar, "[|....", 6), 0);
  assert_int_equal(gmt_top_row_colors(&s, r)[mbar - infer + 1], GMT_TOP_C_GOOD);
  assert_int_equal(gmt_top_row_colors(&s, r)[mbar - infer + 2], GMT_TOP_C_DIM);
  gmt_top_screen_close(&s);
}

/* Each pod's last shares as a sparkline, newest on the right, in ASCII
 * or in Unicode blocks. */
static void test_top_history_shows_in_the_pod_row(void **state)
{
  (void)state;
  node_t n;
  three_pods(&n);
  gmt_top_history_t *h;
  assert_int_equal(gmt_top_history_new(&h, 60), 0);
  const double infer[] = {0, 0.5, 1.0, 1.0};
  for (int i = 0; i < 4; i++) {
    gmt_top_history_begin(h);
    assert_int_equal(gmt_top_history_add(h, "infer", infer[i]), 0);
    assert_int_equal(gmt_top_history_add(h, "train", 0.2), 0);
    gmt_top_history_end(h);
  }
  gmt_top_view_t v = view_of(&n);
  v.history = h;
  gmt_top_screen_t s;
  render(&v, &s, 40, 160);
  assert_non_null(strstr(gmt_top_row(&s, row_starting(&s, "  POD")), "HISTORY"));
  assert_non_null(strstr(gmt_top_row(&s, pod_row(&s, "infer")), " _+## "));
  assert_non_null(strstr(gmt_top_row(&s, pod_row(&s, "train")), " .... "));
  gmt_top_screen_close(&s);
  v.utf8 = true;
  render(&v, &s, 40, 160);
  const char *row = gmt_top_row(&s, pod_row(&s, "infer"));
  assert_non_null(strstr(row, " \xe2\x96\x81\xe2\x96\x85\xe2\x96\x88\xe2\x96\x88 "));
  assert_true(cells_of(row) <= 160);
  gmt_top_screen_close(&s);
  gmt_top_history_free(h);
}

/* At 80 cells every row fits, and each pod's row keeps what matters: its
 * name, the share bar and numbers, the history, the memory bar and
 * numbers, its processes' count; a process row stays under its pod. */
static void test_top_fits_80_columns(void **state)
{
  (void)state;
  node_t n;
  three_pods(&n);
  n.cfg[1].name = "inference-server";
  Gmt__ProcessStatus proc, *procp = &proc;
  Gmt__ProcessCounters pc;
  gmt__process_status__init(&proc);
  gmt__process_counters__init(&pc);
  proc.pid = 41236;
  proc.exe = "/opt/conda/bin/python3.11";
  proc.counters = &pc;
  pc.memory_used = 64 * MIB;
  pc.launches = 8812331;
  pc.token_wait_us = 41300000;
  n.pods[1].n_processes = 1;
  n.pods[1].processes = &procp;
  gmt_top_history_t *h;
  assert_int_equal(gmt_top_history_new(&h, 60), 0);
  gmt_top_history_begin(h);
  assert_int_equal(gmt_top_history_add(h, "inference-server", 1.0), 0);
  gmt_top_history_end(h);
  gmt_top_view_t v = view_of(&n);
  v.history = h;
  v.utf8 = true;
  gmt_top_screen_t s;
  render(&v, &s, 40, 80);
  for (int r = 0; r < s.used; r++)
    assert_true(cells_of(gmt_top_row(&s, r)) <= 80);
  const char *head = gmt_top_row(&s, row_starting(&s, "  POD"));
  assert_non_null(strstr(head, "SHARE "));
  assert_non_null(strstr(head, "SHARE/REQ"));
  assert_non_null(strstr(head, "HISTORY"));
  assert_non_null(strstr(head, "MEMORY"));
  assert_non_null(strstr(head, "USED/QUOTA"));
  assert_null(strstr(head, "CONTEXT")); /* one of those left out */
  int r = pod_row(&s, "inference-server");
  assert_true(r > 0);
  const char *row = gmt_top_row(&s, r);
  assert_non_null(strstr(row, "0.70/0.30"));
  assert_non_null(strstr(row, "64.0M/2.0G"));
  assert_non_null(strstr(row, "\xe2\x96\x88"));
  assert_non_null(strstr(row, " ["));
  const char *proc_row = gmt_top_row(&s, r + 1);
  assert_non_null(strstr(proc_row, "pid 41236"));
  assert_non_null(strstr(proc_row, "python3.11"));
  assert_non_null(strstr(proc_row, "token wait 41.3 s"));
  /* The GPU keeps its numbers. */
  assert_non_null(strstr(gmt_top_row(&s, row_starting(&s, "0  ")), "60.0G/80.0G") ||
                  strstr(gmt_top_row(&s, row_starting(&s, "0  ")), "60.0 GiB / 80.0 GiB"));
  gmt_top_screen_close(&s);
  gmt_top_history_free(h);
}

/* The pod picked is marked and drawn as such; a folded pod's processes
 * are not shown, and its gutter says so. */
static void test_top_picked_and_folded_pods(void **state)
{
  (void)state;
  node_t n;
  three_pods(&n);
  Gmt__ProcessStatus proc, *procp = &proc;
  gmt__process_status__init(&proc);
  proc.pid = 4300;
  proc.exe = "trainer";
  n.pods[0].n_processes = 1;
  n.pods[0].processes = &procp;
  gmt_top_view_t v = view_of(&n);
  v.selected = "train";
  gmt_top_screen_t s;
  render(&v, &s, 40, 160);
  int r = pod_row(&s, "train");
  assert_int_equal(strncmp(gmt_top_row(&s, r), ">-train ", 8), 0);
  assert_int_equal(s.style[r], GMT_TOP_SELECTED);
  assert_int_equal(s.style[pod_row(&s, "infer")], GMT_TOP_PLAIN);
  assert_int_equal(row_containing(&s, "pid 4300 "), r + 1);
  gmt_top_screen_close(&s);
  const char *folded[] = {"train"};
  v.folded = folded;
  v.n_folded = 1;
  render(&v, &s, 40, 160);
  r = pod_row(&s, "train");
  assert_int_equal(strncmp(gmt_top_row(&s, r), ">+train ", 8), 0);
  assert_int_equal(row_containing(&s, "pid 4300 "), -1);
  gmt_top_screen_close(&s);
}

/* Up and down move through the pods in the order shown, and stop at the
 * ends; a pod gone (or none picked) gives the first. */
static void test_top_select_moves_in_the_order_shown(void **state)
{
  (void)state;
  node_t n;
  three_pods(&n);
  /* By share: infer, train, batch. */
  assert_string_equal(gmt_top_select(&n.st, GMT_TOP_SORT_SHARE, NULL, 1), "infer");
  assert_string_equal(gmt_top_select(&n.st, GMT_TOP_SORT_SHARE, "infer", 1), "train");
  assert_string_equal(gmt_top_select(&n.st, GMT_TOP_SORT_SHARE, "train", 1), "batch");
  assert_string_equal(gmt_top_select(&n.st, GMT_TOP_SORT_SHARE, "batch", 1), "batch");
  assert_string_equal(gmt_top_select(&n.st, GMT_TOP_SORT_SHARE, "infer", -1), "infer");
  assert_string_equal(gmt_top_select(&n.st, GMT_TOP_SORT_SHARE, "batch", 0), "batch");
  assert_string_equal(gmt_top_select(&n.st, GMT_TOP_SORT_SHARE, "gone", -1), "infer");
  /* By name: batch, infer, train. */
  assert_string_equal(gmt_top_select(&n.st, GMT_TOP_SORT_NAME, "batch", 1), "infer");
  n.st.n_pods = 0;
  assert_null(gmt_top_select(&n.st, GMT_TOP_SORT_NAME, "batch", 1));
}

/* An exited process's buffers stay in the tracer's history; the view
 * shows only those of processes its pod has now, and never those the
 * tracer says are gone. */
static void test_top_exited_process_buffers_are_gone(void **state)
{
  (void)state;
  node_t n;
  three_pods(&n);
  Gmt__TraceSpotsReply r;
  Gmt__TraceAllocation a[3], *ap[3];
  Gmt__TraceSpotsProcess tp[2], *tpp[2];
  gmt__trace_spots_reply__init(&r);
  static const uint32_t pids[3] = {5001, 5002, 5003};
  for (int i = 0; i < 3; i++) {
    gmt__trace_allocation__init(&a[i]);
    a[i].pid = pids[i];
    a[i].size = MIB;
    a[i].active = true;
    ap[i] = &a[i];
  }
  r.n_hot = 3;
  r.hot = ap;
  for (int i = 0; i < 2; i++) {
    gmt__trace_spots_process__init(&tp[i]);
    tpp[i] = &tp[i];
  }
  tp[0].pid = 5001;
  tp[0].active = true;
  tp[1].pid = 5003; /* the tracer saw it exit; the Status is older */
  tp[1].active = false;
  r.n_processes = 2;
  r.processes = tpp;
  /* 5001 lives (its node pid; its pod's own pid differs), 5002 exited
   * (not in the pod), 5003 still listed by the pod. */
  Gmt__ProcessStatus procs[2], *procp[2];
  for (int i = 0; i < 2; i++) {
    gmt__process_status__init(&procs[i]);
    procp[i] = &procs[i];
  }
  procs[0].pid = 7;
  procs[0].node_pid = 5001;
  procs[1].pid = 5003;
  procs[1].node_pid = 5003;
  n.pods[0].n_processes = 2;
  n.pods[0].processes = procp;
  const Gmt__TraceSpotsReply *spots[3] = {&r, NULL, NULL};
  gmt_top_view_t v = view_of(&n);
  v.spots = spots;
  gmt_top_screen_t s;
  render(&v, &s, 40, 160);
  assert_true(row_containing(&s, " 5001  device") > row_starting(&s, "HOTTEST BUFFERS"));
  assert_int_equal(row_containing(&s, " 5002  device"), -1);
  assert_int_equal(row_containing(&s, " 5003  device"), -1);
  gmt_top_screen_close(&s);
  /* All of them gone: no table, and the view says why none shows. */
  n.pods[0].n_processes = 0;
  render(&v, &s, 40, 160);
  assert_int_equal(row_starting(&s, "HOTTEST BUFFERS"), -1);
  assert_true(row_starting(&s, "hottest buffers: none of the live processes' traced yet") >= 0);
  gmt_top_screen_close(&s);
}

/* gmt top -n: every row, as many as there are, and no keys row. */
static void test_top_batch_has_every_row_and_no_keys(void **state)
{
  (void)state;
  node_t n;
  three_pods(&n);
  gmt_top_view_t v = view_of(&n);
  v.batch = true;
  gmt_top_screen_t s;
  assert_int_equal(gmt_top_screen_init(&s, 1000, 80), 0);
  assert_int_equal(gmt_top_render(&v, &s), 0);
  assert_true(s.used > 8 && s.used < 20);
  assert_int_equal(row_starting(&s, "q quit"), -1);
  assert_int_equal(row_containing(&s, "more rows"), -1);
  assert_true(pod_row(&s, "batch") > 0);
  assert_string_equal(gmt_top_row(&s, 2), "");
  assert_string_equal(gmt_top_row(&s, s.used), "");
  gmt_top_screen_close(&s);
}

/* A message wider than the screen goes on below, broken at a space: its
 * end (the reason) is not cut. */
static void test_top_long_messages_wrap(void **state)
{
  (void)state;
  gmt_top_view_t v = {.url = "ipc:///run/gmt/schd.sock", .interval_s = 1, .clock = "12:00:01"};
  v.error = "ipc:///run/gmt/schd.sock: no gmt-schd listens there (Connection refused); name "
            "another with --schd URL or GMT_SCHD";
  gmt_top_screen_t s;
  render(&v, &s, 10, 60);
  assert_string_equal(gmt_top_row(&s, 1),
                      "gmt-schd unreachable: ipc:///run/gmt/schd.sock: no gmt-schd");
  assert_int_equal(s.style[2], GMT_TOP_ALERT);
  assert_string_equal(gmt_top_row(&s, 2),
                      "  listens there (Connection refused); name another with");
  assert_string_equal(gmt_top_row(&s, 3), "  --schd URL or GMT_SCHD; retrying");
  for (int r = 0; r < s.used; r++)
    assert_true(strlen(gmt_top_row(&s, r)) <= 60);
  gmt_top_screen_close(&s);
}

/* GPU processes outside gmt: one line under the GPUs that names each
 * (exe by base name) and their sum, cut to the width, red and yellow;
 * none, no line. */
static void test_top_unmanaged_processes_under_the_gpus(void **state)
{
  (void)state;
  node_t n;
  three_pods(&n);
  Gmt__UnmanagedProcess un[2], *unp[2] = {&un[0], &un[1]};
  for (int i = 0; i < 2; i++)
    gmt__unmanaged_process__init(&un[i]);
  un[0].pid = 4242;
  un[0].exe = "/opt/conda/bin/python";
  un[0].memory_used = GIB;
  un[1].pid = 4243;
  un[1].exe = "/usr/bin/ff\x1bmpeg";
  un[1].memory_used = 512 * MIB;
  n.st.n_unmanaged = 2;
  n.st.unmanaged = unp;

  gmt_top_cells_t c;
  gmt_top_unmanaged_line(&c, &n.st, 80);
  assert_string_equal(c.text, "UNMANAGED 2 processes, 1.5 GiB: 4242 python (1.0 GiB), 4243 ff?mpeg "
                              "(512.0 MiB)");
  assert_int_equal(c.n, (int)strlen(c.text));
  assert_int_equal(c.color[0], GMT_TOP_C_BAD);
  assert_int_equal(c.color[8], GMT_TOP_C_BAD);
  assert_int_equal(c.color[9], GMT_TOP_C_WARN);
  assert_int_equal(c.color[c.n - 1], GMT_TOP_C_WARN);
  /* Narrower: cut to the width, and says so. */
  gmt_top_unmanaged_line(&c, &n.st, 40);
  assert_int_equal(c.n, 40);
  assert_string_equal(c.text, "UNMANAGED 2 processes, 1.5 GiB: 4242 py~");

  gmt_top_view_t v = view_of(&n);
  gmt_top_screen_t s;
  render(&v, &s, 40, 80);
  int gpu = row_starting(&s, "0  ");
  assert_true(gpu > 0);
  assert_int_equal(row_starting(&s, "UNMANAGED 2 processes"), gpu + 1);
  assert_int_equal(s.style[gpu + 1], GMT_TOP_ALERT);
  assert_int_equal(gmt_top_row_colors(&s, gpu + 1)[0], GMT_TOP_C_BAD);
  for (int r = 0; r < s.used; r++)
    assert_true(cells_of(gmt_top_row(&s, r)) <= 80);
  gmt_top_screen_close(&s);

  n.st.n_unmanaged = 0;
  gmt_top_unmanaged_line(&c, &n.st, 80);
  assert_int_equal(c.n, 0);
  assert_string_equal(c.text, "");
  render(&v, &s, 40, 80);
  assert_int_equal(row_containing(&s, "UNMANAGED"), -1);
  assert_string_equal(gmt_top_row(&s, row_starting(&s, "0  ") + 1), "");
  gmt_top_screen_close(&s);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_top_sorts_by_share_memory_and_name),
      cmocka_unit_test(test_top_sort_ties_go_by_name),
      cmocka_unit_test(test_top_rows_follow_the_sort_key),
      cmocka_unit_test(test_top_pod_row_shows_share_token_memory_quota_and_context),
      cmocka_unit_test(test_top_processes_under_their_pod),
      cmocka_unit_test(test_top_tiers_only_for_a_pod_whose_memory_moves),
      cmocka_unit_test(test_top_unreachable_keeps_the_last_answer),
      cmocka_unit_test(test_top_hot_buffers_or_why_not),
      cmocka_unit_test(test_top_small_terminal_cuts_rows_and_keeps_keys),
      cmocka_unit_test(test_top_control_characters_never_reach_the_terminal),
      cmocka_unit_test(test_top_help_replaces_the_tables),
      cmocka_unit_test(test_top_pod_row_has_share_and_memory_bars),
      cmocka_unit_test(test_top_history_shows_in_the_pod_row),
      cmocka_unit_test(test_top_fits_80_columns),
      cmocka_unit_test(test_top_picked_and_folded_pods),
      cmocka_unit_test(test_top_select_moves_in_the_order_shown),
      cmocka_unit_test(test_top_exited_process_buffers_are_gone),
      cmocka_unit_test(test_top_batch_has_every_row_and_no_keys),
      cmocka_unit_test(test_top_long_messages_wrap),
      cmocka_unit_test(test_top_unmanaged_processes_under_the_gpus),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
