/* gmt top's screen (client/cli/top_view.c), rendered from replies built in
 * memory: the pods' order for each key, what each pod's row says, the
 * tiers only where memory moves, the scheduler unreachable with its last
 * answer kept, the hottest buffers or why there are none, and cutting to
 * a small terminal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmt.pb-c.h"
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

static int row_containing(const gmt_top_screen_t *s, const char *text)
{
  for (int r = 0; r < s->used; r++)
    if (strstr(gmt_top_row(s, r), text))
      return r;
  return -1;
}

static void render(const gmt_top_view_t *v, gmt_top_screen_t *s, int rows, int cols)
{
  assert_int_equal(gmt_top_screen_init(s, rows, cols), 0);
  assert_int_equal(gmt_top_render(v, s), 0);
  assert_int_equal(s->used, rows);
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
  assert_true(row_starting(&s, "batch ") < row_starting(&s, "infer "));
  assert_true(row_starting(&s, "infer ") < row_starting(&s, "train "));
  assert_non_null(strstr(gmt_top_row(&s, 0), "sort: name"));
  gmt_top_screen_close(&s);
  v.sort = GMT_TOP_SORT_MEMORY;
  render(&v, &s, 40, 160);
  assert_true(row_starting(&s, "train ") < row_starting(&s, "batch "));
  assert_true(row_starting(&s, "batch ") < row_starting(&s, "infer "));
  gmt_top_screen_close(&s);
}

static void test_top_pod_row_shows_share_token_memory_quota_and_context(void **state)
{
  (void)state;
  node_t n;
  three_pods(&n);
  gmt_top_view_t v = view_of(&n);
  gmt_top_screen_t s;
  render(&v, &s, 40, 160);
  const char *infer = gmt_top_row(&s, row_starting(&s, "infer "));
  assert_non_null(strstr(infer, " yes "));
  assert_non_null(strstr(infer, "0.30/1.00"));
  assert_non_null(strstr(infer, "0.70"));
  assert_non_null(strstr(infer, "gpu 0"));
  assert_non_null(strstr(infer, "64.0 MiB / 2.0 GiB"));
  const char *train = gmt_top_row(&s, row_starting(&s, "train "));
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
 * token wait; past eight, how many more. */
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
  int infer = row_starting(&s, "infer "), p0 = row_containing(&s, "pid 4200 ");
  assert_int_equal(p0, infer + 1);
  const char *r = gmt_top_row(&s, p0);
  assert_non_null(strstr(r, "python3.11"));
  assert_null(strstr(r, "/usr/bin"));
  assert_non_null(strstr(r, "48.0 MiB"));
  assert_non_null(strstr(r, "launches 1000 "));
  assert_non_null(strstr(r, "token wait 1.5 s, now 0.2"));
  int train = row_starting(&s, "train ");
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
  const char *batch = gmt_top_row(&s, row_starting(&s, "batch "));
  assert_non_null(strstr(batch, " swap "));
  assert_non_null(strstr(batch, "256.0 MiB   192.0 MiB   64.0 MiB"));
  const char *train = gmt_top_row(&s, row_starting(&s, "train "));
  assert_non_null(strstr(train, " strict "));
  assert_non_null(strstr(train, "  -           -           -  "));
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
  assert_true(row_starting(&s, "infer ") > 0);
  gmt_top_screen_close(&s);
  /* Before any answer: the reason alone. */
  v.st = NULL;
  render(&v, &s, 40, 160);
  assert_string_equal(gmt_top_row(&s, 1),
                      "gmt-schd unreachable: tcp://127.0.0.1:50051: Connection refused; retrying");
  assert_int_equal(row_starting(&s, "POD"), -1);
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
  const Gmt__TraceSpotsReply *spots[3] = {&r, NULL, NULL};
  gmt_top_view_t v = view_of(&n);
  v.spots = spots;
  gmt_top_screen_t s;
  render(&v, &s, 40, 160);
  assert_true(row_starting(&s, "HOTTEST BUFFERS") >= 0);
  int hot = row_containing(&s, "4242");
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
  assert_string_equal(gmt_top_row(&s, 5), "q quit  s/m/n sort by share/me");
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
  assert_true(row_starting(&s, "ev?[2Jil ") >= 0);
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
  assert_true(row_starting(&s, "  q        quit") >= 0);
  assert_int_equal(row_starting(&s, "infer "), -1);
  assert_non_null(strstr(gmt_top_row(&s, 0), "PAUSED"));
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
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
