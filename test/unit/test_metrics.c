/* gmt-schd's Prometheus metrics (server/metrics.c): a StatusReply built in
 * memory is rendered and read back by a strict reader of the text
 * exposition format 0.0.4; every value must be the reply's, label values
 * escaped, and --metrics ADDR parsed as documented. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmt_version.h"
#include "metrics.h"

/* ---- a strict reader ---- */

#define MAX_FAMILIES 256
#define MAX_SERIES 4096

typedef struct {
  char name[128];
  int helps, types;
  char type[16];
  bool sampled, closed; /* closed: another family's samples came after its own */
} fam_t;

typedef struct {
  fam_t fams[MAX_FAMILIES];
  size_t nfams;
  char *series[MAX_SERIES];
  size_t nseries;
} parsed_t;

static fam_t *fam(parsed_t *p, const char *name, size_t len)
{
  for (size_t i = 0; i < p->nfams; i++)
    if (strlen(p->fams[i].name) == len && !strncmp(p->fams[i].name, name, len))
      return &p->fams[i];
  assert_true(p->nfams < MAX_FAMILIES);
  assert_true(len < sizeof p->fams[0].name);
  fam_t *f = &p->fams[p->nfams++];
  memset(f, 0, sizeof *f);
  memcpy(f->name, name, len);
  return f;
}

static bool name_char(char c, bool first)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
         (!first && c >= '0' && c <= '9');
}

/* Checks the labels at *s ("{a=\"x\",b=\"y\"}"), moving past them. */
static void read_labels(const char **s)
{
  const char *c = *s;
  assert_int_equal(*c++, '{');
  while (*c != '}') {
    assert_true(name_char(*c, true));
    while (name_char(*c, false))
      c++;
    assert_int_equal(*c++, '=');
    assert_int_equal(*c++, '"');
    while (*c != '"') {
      assert_true(*c != '\n' && *c != '\0');
      if (*c == '\\') {
        c++;
        assert_true(*c == '\\' || *c == '"' || *c == 'n');
      }
      c++;
    }
    c++;
    if (*c == ',')
      c++;
    else
      assert_int_equal(*c, '}');
  }
  *s = c + 1;
}

/* Reads text line by line; fails the test at the first line that breaks
 * the format: HELP and TYPE once per family, before its samples; a
 * family's samples together; every sample `name{labels} value`; no series
 * twice; counters named _total. */
static void parse(const char *text, parsed_t *p)
{
  memset(p, 0, sizeof *p);
  fam_t *last = NULL;
  const char *line = text;
  assert_true(text[0] == '\0' || text[strlen(text) - 1] == '\n');
  while (*line) {
    const char *nl = strchr(line, '\n');
    assert_non_null(nl);
    if (!strncmp(line, "# HELP ", 7) || !strncmp(line, "# TYPE ", 7)) {
      const char *n = line + 7, *e = n;
      while (name_char(*e, e == n))
        e++;
      assert_true(e > n && *e == ' ');
      fam_t *f = fam(p, n, (size_t)(e - n));
      assert_false(f->sampled); /* before its samples */
      if (line[2] == 'H') {
        f->helps++;
        assert_true(nl > e + 1); /* some text */
      } else {
        f->types++;
        size_t tl = (size_t)(nl - e - 1);
        assert_true(tl < sizeof f->type);
        memcpy(f->type, e + 1, tl);
        f->type[tl] = '\0';
        assert_true(!strcmp(f->type, "gauge") || !strcmp(f->type, "counter"));
        size_t len = strlen(f->name);
        if (!strcmp(f->type, "counter"))
          assert_true(len > 6 && !strcmp(f->name + len - 6, "_total"));
      }
      assert_true(f->helps <= 1 && f->types <= 1);
    } else {
      assert_int_not_equal(line[0], '#');
      const char *n = line, *e = n;
      while (name_char(*e, e == n))
        e++;
      assert_true(e > n);
      fam_t *f = fam(p, n, (size_t)(e - n));
      assert_int_equal(f->helps, 1);
      assert_int_equal(f->types, 1);
      assert_false(f->closed);
      if (last && last != f)
        last->closed = true;
      last = f;
      f->sampled = true;
      if (*e == '{')
        read_labels(&e);
      assert_int_equal(*e, ' ');
      char *end;
      strtod(e + 1, &end);
      assert_true(end == nl && end > e + 1);
      assert_true(p->nseries < MAX_SERIES);
      char *key = strndup(line, (size_t)(e - line));
      for (size_t i = 0; i < p->nseries; i++)
        assert_string_not_equal(p->series[i], key);
      p->series[p->nseries++] = key;
    }
    line = nl + 1;
  }
}

static void parsed_free(parsed_t *p)
{
  for (size_t i = 0; i < p->nseries; i++)
    free(p->series[i]);
}

static char *render(const gmt_metrics_input_t *in)
{
  char *text = NULL;
  size_t len = 0;
  assert_int_equal(gmt_metrics_render(in, &text, &len), 0);
  assert_non_null(text);
  assert_int_equal(strlen(text), len);
  return text;
}

/* The value of the sample whose name and labels are series, as written;
 * NULL when there is none. Points into a static buffer. */
static const char *value_of(const char *text, const char *series)
{
  static char val[64];
  size_t n = strlen(series);
  for (const char *line = text; *line; line = strchr(line, '\n') + 1) {
    if (!strncmp(line, series, n) && line[n] == ' ') {
      const char *v = line + n + 1;
      size_t vl = (size_t)(strchr(v, '\n') - v);
      assert_true(vl < sizeof val);
      memcpy(val, v, vl);
      val[vl] = '\0';
      return val;
    }
  }
  return NULL;
}

/* How many times s occurs in text. */
static int count_of(const char *text, const char *s)
{
  int n = 0;
  for (const char *p = text; (p = strstr(p, s)); p++)
    n++;
  return n;
}

static void assert_sample(const char *text, const char *series, const char *want)
{
  const char *got = value_of(text, series);
  if (!got)
    fail_msg("no sample %s in:\n%s", series, text);
  assert_string_equal(got, want);
}

/* ---- a node ---- */

typedef struct {
  Gmt__PodConfig cfg[2];
  Gmt__PodStatus pod[2], *pods[2];
  Gmt__ProcessStatus proc[3], *procs_a[2], *procs_b[1];
  Gmt__ProcessCounters counters[3], totals[2], host_totals;
  Gmt__PodDeviceStatus pdev[2], *pdevs[2];
  Gmt__TierSpace space[2], *spaces[2];
  Gmt__HostStatus host;
  Gmt__DeviceStatus dev[2], *devs[2];
  Gmt__StatusReply st;
} node_t;

#define TRICKY_EXE "/opt/\"odd\" dir\\bin\nnext/\xcf\x80/\xff"

static void node_init(node_t *n)
{
  memset(n, 0, sizeof *n);
  for (int i = 0; i < 2; i++) {
    gmt__pod_config__init(&n->cfg[i]);
    gmt__pod_status__init(&n->pod[i]);
    gmt__pod_device_status__init(&n->pdev[i]);
    gmt__tier_space__init(&n->space[i]);
    gmt__device_status__init(&n->dev[i]);
    n->pods[i] = &n->pod[i];
    n->pod[i].config = &n->cfg[i];
    gmt__process_counters__init(&n->totals[i]);
    n->pod[i].totals = &n->totals[i];
  }
  for (int i = 0; i < 3; i++) {
    gmt__process_status__init(&n->proc[i]);
    gmt__process_counters__init(&n->counters[i]);
    n->proc[i].counters = &n->counters[i];
  }
  n->cfg[0].name = "a";
  n->cfg[0].request = 0.3;
  n->cfg[0].limit = 1.0;
  n->cfg[0].memory_limit = 1ull << 30;
  n->cfg[1].name = "b";
  n->cfg[1].request = 0.7;
  n->cfg[1].limit = 0.9;
  n->cfg[1].class_ = GMT__POD_CLASS__CLASS_LATENCY;
  n->cfg[1].memory_limit = (1ull << 63) + 1; /* exact past 2^53 */

  n->pod[0].connected = true;
  n->totals[0].memory_used = 10000001;
  n->totals[0].memory_reserved = 10485760;
  n->pod[0].gpu_time_share = 0.25;
  n->pod[0].refused_quota = 3;
  n->pod[0].refused_space = 2;
  n->pod[0].refused_devices = 5;
  n->pod[0].refused_limit = 7;
  n->pod[0].holds_token = true;
  n->totals[0].pinned_bytes = 4096;
  n->totals[0].swap_host = 77;
  n->pod[0].context_bytes = 5 << 20;
  n->procs_a[0] = &n->proc[0];
  n->procs_a[1] = &n->proc[1];
  n->pod[0].processes = n->procs_a;
  n->pod[0].n_processes = 2;
  n->procs_b[0] = &n->proc[2];
  n->pod[1].processes = n->procs_b;
  n->pod[1].n_processes = 1;

  n->proc[0].pid = 100;
  n->proc[0].exe = TRICKY_EXE;
  n->counters[0].launches = 123456789012ull;
  n->counters[0].allocs = 17;
  n->counters[0].frees = 5;
  n->counters[0].memory_used = 10000001;
  n->counters[0].swap_disk = 9;
  n->proc[1].pid = 200;
  n->proc[1].exe = "/bin/two";
  n->proc[2].pid = 300;
  n->proc[2].exe = "/bin/three";
  n->counters[2].swap_outs = 3;

  n->pdev[0].device = 0;
  n->pdev[0].memory_used = 6000000;
  n->pdev[0].holds_token = true;
  n->pdev[0].gpu_time_share = 0.125;
  n->pdev[1].device = 1;
  n->pdev[1].memory_used = 4000001;
  n->pdevs[0] = &n->pdev[0];
  n->pdevs[1] = &n->pdev[1];
  n->pod[0].devices = n->pdevs;
  n->pod[0].n_devices = 2;

  gmt__host_status__init(&n->host);
  gmt__process_counters__init(&n->host_totals);
  n->host.totals = &n->host_totals;
  n->host_totals.pinned_bytes = 4096;
  n->host.pinned_limit = 16ull << 30;
  n->space[0].tier = "gpu";
  n->space[0].index = 0;
  n->space[0].capacity = 1ull << 30;
  n->space[0].reserved = 10485760;
  n->space[0].trigger = 0.85;
  n->space[0].stop = 0.65;
  n->space[0].strict_quotas = 3ull << 30; /* past its limit: overcommitted */
  n->space[0].overcommitted = 1;
  n->space[1].tier = "host";
  n->space[1].index = 0;
  n->space[1].capacity = 512ull << 20;
  n->spaces[0] = &n->space[0];
  n->spaces[1] = &n->space[1];
  n->host.tiers = n->spaces;
  n->host.n_tiers = 2;

  n->dev[0].index = 0;
  n->dev[0].bus_id = "0000:17:00.0";
  n->dev[0].uuid = "GPU-1";
  n->dev[0].name = "NVIDIA \"H100\"";
  n->dev[0].memory_total = 80ull << 30;
  n->dev[0].memory_free = 70ull << 30;
  n->dev[0].utilization = 0.5;
  n->dev[0].probe_delay_ms = 2.5;
  n->dev[0].tokens_waiting = 3;
  n->dev[1].index = 1; /* no NVML: nothing known but gmt's own numbers */
  n->dev[1].bus_id = "";
  n->dev[1].utilization = -1;
  n->dev[1].probe_delay_ms = -1;
  n->devs[0] = &n->dev[0];
  n->devs[1] = &n->dev[1];

  gmt__status_reply__init(&n->st);
  n->st.pods = n->pods;
  n->st.n_pods = 2;
  n->st.host = &n->host;
  n->st.devices = n->devs;
  n->st.n_devices = 2;
}

/* ---- tests ---- */

static void test_metrics_follow_the_exposition_format(void **state)
{
  (void)state;
  node_t n;
  node_init(&n);
  gmt_metrics_input_t in = {.status = &n.st, .tracing = true, .trace_dropped_events = 4};
  char *text = render(&in);
  parsed_t p;
  parse(text, &p);
  /* Every family that has samples is typed once; none is left empty. */
  for (size_t i = 0; i < p.nfams; i++) {
    assert_int_equal(p.fams[i].helps, 1);
    assert_int_equal(p.fams[i].types, 1);
    assert_true(p.fams[i].sampled);
  }
  assert_true(p.nfams > 40);
  parsed_free(&p);
  free(text);
}

static void test_metrics_show_each_pods_numbers(void **state)
{
  (void)state;
  node_t n;
  node_init(&n);
  gmt_metrics_input_t in = {.status = &n.st};
  char *t = render(&in);
  assert_sample(t, "gmt_pod_request{pod=\"a\"}", "0.3");
  assert_sample(t, "gmt_pod_request{pod=\"b\"}", "0.7");
  assert_sample(t, "gmt_pod_limit{pod=\"b\"}", "0.9");
  assert_sample(t, "gmt_pod_memory_limit_bytes{pod=\"a\"}", "1073741824");
  assert_sample(t, "gmt_pod_memory_limit_bytes{pod=\"b\"}", "9223372036854775809");
  assert_sample(t, "gmt_pod_memory_used_bytes{pod=\"a\"}", "10000001");
  assert_sample(t, "gmt_pod_memory_used_bytes{pod=\"b\"}", "0");
  assert_sample(t, "gmt_pod_memory_reserved_bytes{pod=\"a\"}", "10485760");
  assert_sample(t, "gmt_pod_gpu_time_share{pod=\"a\"}", "0.25");
  assert_sample(t, "gmt_pod_holds_token{pod=\"a\"}", "1");
  assert_sample(t, "gmt_pod_latency_class{pod=\"a\"}", "0");
  assert_sample(t, "gmt_pod_latency_class{pod=\"b\"}", "1");
  assert_sample(t, "gmt_pod_connected{pod=\"a\"}", "1");
  assert_sample(t, "gmt_pod_connected{pod=\"b\"}", "0");
  assert_sample(t, "gmt_pod_processes{pod=\"a\"}", "2");
  assert_sample(t, "gmt_pod_pinned_bytes{pod=\"a\"}", "4096");
  assert_sample(t, "gmt_pod_tier_bytes{pod=\"a\",tier=\"gpu\"}", "0");
  assert_sample(t, "gmt_pod_tier_bytes{pod=\"a\",tier=\"host\"}", "77");
  assert_sample(t, "gmt_pod_tier_bytes{pod=\"a\",tier=\"disk\"}", "0");
  assert_sample(t, "gmt_pod_context_bytes{pod=\"a\"}", "5242880");
  /* Every why of a refusal, each under its own reason. */
  assert_sample(t, "gmt_alloc_refused_total{pod=\"a\",reason=\"quota\"}", "3");
  assert_sample(t, "gmt_alloc_refused_total{pod=\"a\",reason=\"gpu_space\"}", "2");
  assert_sample(t, "gmt_alloc_refused_total{pod=\"a\",reason=\"devices\"}", "5");
  assert_sample(t, "gmt_alloc_refused_total{pod=\"a\",reason=\"limit\"}", "7");
  assert_sample(t, "gmt_alloc_refused_total{pod=\"b\",reason=\"limit\"}", "0");
  /* Per GPU: only those Status lists for the pod. */
  assert_sample(t, "gmt_pod_device_memory_used_bytes{pod=\"a\",device=\"0\"}", "6000000");
  assert_sample(t, "gmt_pod_device_memory_used_bytes{pod=\"a\",device=\"1\"}", "4000001");
  assert_sample(t, "gmt_pod_device_holds_token{pod=\"a\",device=\"0\"}", "1");
  assert_sample(t, "gmt_pod_device_holds_token{pod=\"a\",device=\"1\"}", "0");
  assert_sample(t, "gmt_pod_device_gpu_time_share{pod=\"a\",device=\"0\"}", "0.125");
  assert_null(value_of(t, "gmt_pod_device_memory_used_bytes{pod=\"b\",device=\"0\"}"));
  free(t);
}

static void test_metrics_show_each_process_with_counters_named_total(void **state)
{
  (void)state;
  node_t n;
  node_init(&n);
  gmt_metrics_input_t in = {.status = &n.st};
  char *t = render(&in);
  assert_sample(t, "gmt_process_launches_total{pod=\"a\",pid=\"100\"}", "123456789012");
  assert_sample(t, "gmt_process_allocations_total{pod=\"a\",pid=\"100\"}", "17");
  assert_sample(t, "gmt_process_frees_total{pod=\"a\",pid=\"100\"}", "5");
  assert_sample(t, "gmt_process_memory_used_bytes{pod=\"a\",pid=\"100\"}", "10000001");
  assert_sample(t, "gmt_process_memory_used_bytes{pod=\"a\",pid=\"200\"}", "0");
  assert_sample(t, "gmt_process_tier_bytes{pod=\"a\",pid=\"100\",tier=\"disk\"}", "9");
  assert_sample(t, "gmt_process_swap_outs_total{pod=\"b\",pid=\"300\"}", "3");
  assert_non_null(strstr(t, "# TYPE gmt_process_launches_total counter\n"));
  assert_non_null(strstr(t, "# TYPE gmt_process_memory_used_bytes gauge\n"));
  /* A pid appears only under its own pod. */
  assert_null(value_of(t, "gmt_process_launches_total{pod=\"b\",pid=\"100\"}"));
  free(t);
}

static void test_metrics_escape_label_values(void **state)
{
  (void)state;
  node_t n;
  node_init(&n);
  gmt_metrics_input_t in = {.status = &n.st};
  char *t = render(&in);
  /* \ " and newline escaped; UTF-8 kept; a byte that is not UTF-8
   * becomes U+FFFD. */
  assert_sample(t,
                "gmt_process_info{pod=\"a\",pid=\"100\",exe=\"/opt/\\\"odd\\\" "
                "dir\\\\bin\\nnext/\xcf\x80/\xef\xbf\xbd\"}",
                "1");
  assert_sample(t,
                "gmt_device_info{device=\"0\",bus_id=\"0000:17:00.0\",uuid=\"GPU-1\","
                "name=\"NVIDIA \\\"H100\\\"\"}",
                "1");
  /* No raw newline inside any line: each line is a whole sample. */
  parsed_t p;
  parse(t, &p);
  parsed_free(&p);
  free(t);
}

static void test_metrics_leave_out_what_nvml_did_not_say(void **state)
{
  (void)state;
  node_t n;
  node_init(&n);
  gmt_metrics_input_t in = {.status = &n.st};
  char *t = render(&in);
  assert_sample(t, "gmt_device_memory_total_bytes{device=\"0\"}", "85899345920");
  assert_sample(t, "gmt_device_memory_free_bytes{device=\"0\"}", "75161927680");
  assert_sample(t, "gmt_device_utilization{device=\"0\"}", "0.5");
  assert_sample(t, "gmt_device_probe_delay_seconds{device=\"0\"}", "0.0025");
  assert_sample(t, "gmt_device_tokens_waiting{device=\"0\"}", "3");
  assert_null(value_of(t, "gmt_device_memory_total_bytes{device=\"1\"}"));
  assert_null(value_of(t, "gmt_device_memory_free_bytes{device=\"1\"}"));
  assert_null(value_of(t, "gmt_device_utilization{device=\"1\"}"));
  assert_null(value_of(t, "gmt_device_probe_delay_seconds{device=\"1\"}"));
  assert_sample(t, "gmt_device_tokens_waiting{device=\"1\"}", "0");
  assert_sample(t, "gmt_device_info{device=\"1\",bus_id=\"\",uuid=\"\",name=\"\"}", "1");
  free(t);
}

static void test_metrics_show_the_host_and_its_tier_spaces(void **state)
{
  (void)state;
  node_t n;
  node_init(&n);
  gmt_metrics_input_t in = {.status = &n.st};
  char *t = render(&in);
  assert_sample(t, "gmt_node_pinned_bytes", "4096");
  assert_sample(t, "gmt_node_pinned_limit_bytes", "17179869184");
  assert_sample(t, "gmt_tier_capacity_bytes{tier=\"gpu\",index=\"0\"}", "1073741824");
  assert_sample(t, "gmt_tier_capacity_bytes{tier=\"host\",index=\"0\"}", "536870912");
  assert_sample(t, "gmt_tier_reserved_bytes{tier=\"gpu\",index=\"0\"}", "10485760");
  assert_sample(t, "gmt_tier_trigger{tier=\"gpu\",index=\"0\"}", "0.85");
  assert_sample(t, "gmt_tier_stop{tier=\"gpu\",index=\"0\"}", "0.65");
  /* Per GPU space only: the host space has no strict quotas. */
  assert_sample(t, "gmt_gpu_space_strict_quotas_bytes{device=\"0\"}", "3221225472");
  assert_sample(t, "gmt_gpu_space_overcommitted{device=\"0\"}", "1");
  assert_null(strstr(t, "gmt_gpu_space_overcommitted{device=\"0\"} 0"));
  free(t);
  n.space[0].overcommitted = 0;
  t = render(&in);
  assert_sample(t, "gmt_gpu_space_overcommitted{device=\"0\"}", "0");
  assert_int_equal(count_of(t, "gmt_gpu_space_overcommitted{"), 1);
  free(t);
}

static void test_metrics_count_tracer_drops_only_while_it_runs(void **state)
{
  (void)state;
  gmt_metrics_input_t on = {
      .tracing = true, .trace_dropped_events = 12, .trace_dropped_histories = 34};
  char *t = render(&on);
  assert_sample(t, "gmt_trace_enabled", "1");
  assert_sample(t, "gmt_trace_dropped_events_total", "12");
  assert_sample(t, "gmt_trace_dropped_histories_total", "34");
  assert_non_null(strstr(t, "# TYPE gmt_trace_dropped_events_total counter\n"));
  free(t);
  gmt_metrics_input_t off = {.tracing = false};
  t = render(&off);
  assert_sample(t, "gmt_trace_enabled", "0");
  assert_null(strstr(t, "gmt_trace_dropped"));
  free(t);
}

static void test_metrics_of_an_empty_node_type_only_what_has_samples(void **state)
{
  (void)state;
  gmt_metrics_input_t in = {.status = NULL};
  char *t = render(&in);
  assert_string_equal(t, "# HELP gmt_build_info The gmt-schd serving these metrics: its release "
                         "and the git commit it was built from; always 1.\n"
                         "# TYPE gmt_build_info gauge\n"
                         "gmt_build_info{version=\"" GMT_VERSION "\",commit=\"" GMT_COMMIT "\"} 1\n"
                         "# HELP gmt_trace_enabled 1 while the node's eBPF tracer runs.\n"
                         "# TYPE gmt_trace_enabled gauge\n"
                         "gmt_trace_enabled 0\n");
  free(t);
}

static void test_metrics_addr_takes_host_and_port_only(void **state)
{
  (void)state;
  char url[300];
  bool lo = false;
  assert_int_equal(gmt_metrics_addr_parse("127.0.0.1:9400", url, sizeof url, &lo), 0);
  assert_string_equal(url, "http://127.0.0.1:9400");
  assert_true(lo);
  assert_int_equal(gmt_metrics_addr_parse("[::1]:1", url, sizeof url, &lo), 0);
  assert_string_equal(url, "http://[::1]:1");
  assert_true(lo);
  assert_int_equal(gmt_metrics_addr_parse("localhost:65535", url, sizeof url, &lo), 0);
  assert_true(lo);
  assert_int_equal(gmt_metrics_addr_parse("0.0.0.0:9400", url, sizeof url, &lo), 0);
  assert_false(lo);
  assert_int_equal(gmt_metrics_addr_parse("[::]:9400", url, sizeof url, &lo), 0);
  assert_false(lo);
  assert_int_equal(gmt_metrics_addr_parse("node7.example:9400", url, sizeof url, &lo), 0);
  assert_false(lo);
  assert_int_equal(gmt_metrics_addr_parse("127.evil.example:9400", url, sizeof url, &lo), 0);
  assert_false(lo);
  const char *bad[] = {"",
                       "9400",
                       ":9400",
                       "127.0.0.1",
                       "127.0.0.1:",
                       "127.0.0.1:0",
                       "127.0.0.1:65536",
                       "127.0.0.1:94a",
                       "::1:9400",
                       "[::1]9400",
                       "[]:9400",
                       "a/b:9400",
                       "a b:9400",
                       "user@host:9400",
                       "127.0.0.1:-1",
                       "127.0.0.1:+80",
                       "http://127.0.0.1:9400"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (gmt_metrics_addr_parse(bad[i], url, sizeof url, &lo) != -EINVAL)
      fail_msg("'%s' was taken", bad[i]);
  char tiny[8];
  assert_int_equal(gmt_metrics_addr_parse("127.0.0.1:9400", tiny, sizeof tiny, &lo), -EINVAL);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_metrics_follow_the_exposition_format),
      cmocka_unit_test(test_metrics_show_each_pods_numbers),
      cmocka_unit_test(test_metrics_show_each_process_with_counters_named_total),
      cmocka_unit_test(test_metrics_escape_label_values),
      cmocka_unit_test(test_metrics_leave_out_what_nvml_did_not_say),
      cmocka_unit_test(test_metrics_show_the_host_and_its_tier_spaces),
      cmocka_unit_test(test_metrics_count_tracer_drops_only_while_it_runs),
      cmocka_unit_test(test_metrics_of_an_empty_node_type_only_what_has_samples),
      cmocka_unit_test(test_metrics_addr_takes_host_and_port_only),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
