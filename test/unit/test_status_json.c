/* gmt status --json (client/cli/status_json.c): a StatusReply built in memory
 * is rendered and read back with json-c; every field must come back as
 * docs/protocol.md documents it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "status_json.h"
#include "status_waits.h"

#define TRICKY_EXE "/opt/\"odd\" dir\\bin\n\ttab\x01/π"

/* The JSON text (free() it). */
static char *render_text(const Gmt__StatusReply *st)
{
  char *text = NULL;
  assert_int_equal(gmt_status_json(st, &text), 0);
  assert_non_null(text);
  assert_null(strchr(text, '\n')); /* one line */
  return text;
}

/* The JSON text of a reply of no pods and this host (free() it). */
static char *render_host(Gmt__HostStatus *host)
{
  Gmt__StatusReply st = GMT__STATUS_REPLY__INIT;
  st.host = host;
  return render_text(&st);
}

static json_object *render(const Gmt__StatusReply *st)
{
  char *text = render_text(st);
  json_object *root = json_tokener_parse(text);
  free(text);
  assert_non_null(root);
  return root;
}

static json_object *field(json_object *obj, const char *key, json_type type)
{
  json_object *v = NULL;
  assert_true(json_object_object_get_ex(obj, key, &v));
  assert_int_equal(json_object_get_type(v), type);
  return v;
}

static int64_t int_field(json_object *obj, const char *key)
{
  return json_object_get_int64(field(obj, key, json_type_int));
}

static void test_status_json_renders_every_field(void **state)
{
  (void)state;
  Gmt__PodConfig cfg_a = GMT__POD_CONFIG__INIT, cfg_b = GMT__POD_CONFIG__INIT;
  cfg_a.name = "alpha";
  cfg_a.request = 0.3;
  cfg_a.limit = 1.0;
  cfg_a.memory_limit = 1073741824ull;
  cfg_a.pin = GMT__PIN_MODE__PIN_ADAPTIVE;
  cfg_a.mode = GMT__MEM_MODE__MEM_SWAP;
  cfg_a.class_ = GMT__POD_CLASS__CLASS_LATENCY;
  cfg_a.idle_out_ms = -1; /* idle-out=off */
  cfg_b.idle_out_ms = 30000;
  cfg_b.name = "beta \"quoted\"";
  cfg_b.request = 0.25;
  cfg_b.limit = 0.5;
  cfg_b.memory_limit = 40ull << 30; /* past 32 bits */

  Gmt__ProcessStatus p1 = GMT__PROCESS_STATUS__INIT, p2 = GMT__PROCESS_STATUS__INIT;
  Gmt__ProcessCounters c1 = GMT__PROCESS_COUNTERS__INIT, c2 = GMT__PROCESS_COUNTERS__INIT;
  p1.counters = &c1;
  p2.counters = &c2;
  p1.pid = 1234;
  p1.node_pid = 1234;
  p1.exe = "/usr/bin/python3";
  c1.memory_used = 512ull << 20;
  c1.launches = 1000000;
  c1.allocs = 17;
  c1.frees = 5;
  p2.pid = 7; /* in a pod's PID namespace */
  p2.node_pid = 4000000;
  p2.exe = TRICKY_EXE;
  c2.memory_used = 6ull << 30;
  c2.launches = 0;
  c2.allocs = 1;
  c2.frees = 0;
  c2.memory_reserved = (6ull << 30) + (32ull << 20);
  c2.pinned_bytes = 5ull << 30; /* past 32 bits */
  c2.pinned_advised = 4ull << 30;
  c2.pinned_cached = 256ull << 20;
  c2.pinned_reused = 99;
  c2.swap_gpu = 300ull << 20;
  c2.swap_host = 5ull << 30; /* past 32 bits */
  c2.swap_disk = 7;
  c2.swap_outs = 12;
  c2.swap_kept = 6ull << 30;
  c2.swap_ins = 9;
  c2.token_wait_us = 3500000;
  c2.token_waiting_us = 250000;
  c2.bell_wait_us = 1200;
  c2.swap_out_bytes = 6ull << 30;
  c2.swap_in_bytes = 5ull << 30;
  c2.swap_move_us = 290000;
  c2.swap_out_us = 210000;
  c2.swap_wait_us = 620000;
  Gmt__ProcessStatus *procs_a[] = {&p1, &p2};

  Gmt__PodStatus a = GMT__POD_STATUS__INIT, b = GMT__POD_STATUS__INIT;
  Gmt__ProcessCounters ta = GMT__PROCESS_COUNTERS__INIT, tb = GMT__PROCESS_COUNTERS__INIT;
  a.totals = &ta;
  b.totals = &tb;
  a.config = &cfg_a;
  a.connected = 1;
  ta.memory_used = (512ull << 20) + (6ull << 30);
  a.n_processes = 2;
  a.processes = procs_a;
  ta.memory_reserved = (6ull << 30) + (32ull << 20);
  a.gpu_time_share = 0.25;
  a.holds_token = 1;
  ta.pinned_bytes = 5ull << 30;
  ta.pinned_advised = 4ull << 30;
  ta.pinned_cached = 256ull << 20;
  ta.swap_gpu = 300ull << 20;
  ta.swap_host = 5ull << 30;
  ta.swap_disk = 7;
  ta.token_wait_us = 3500000;
  ta.token_waiting_us = 250000;
  ta.bell_wait_us = 1200;
  ta.swap_out_bytes = 6ull << 30;
  ta.swap_in_bytes = 5ull << 30;
  ta.swap_move_us = 290000;
  ta.swap_out_us = 210000;
  ta.swap_wait_us = 620000;
  a.limit_wait_us = 7000000;
  a.refused_quota = 3;
  a.refused_space = 1;
  a.refused_devices = 5;
  a.refused_limit = 7;
  a.last_refusal = "device 0 has 0 bytes (0.0 MiB) left of its declared capacity";
  a.last_refusal_unix = 1795883300.5;
  b.config = &cfg_b;
  b.connected = 0;
  tb.memory_used = 0;
  Gmt__PodStatus *pods[] = {&a, &b};

  Gmt__StatusReply st = GMT__STATUS_REPLY__INIT;
  st.n_pods = 2;
  st.pods = pods;
  Gmt__HostStatus host = GMT__HOST_STATUS__INIT;
  Gmt__ProcessCounters th = GMT__PROCESS_COUNTERS__INIT;
  host.totals = &th;
  th.pinned_bytes = 5ull << 30;
  host.pinned_limit = 24ull << 30;
  th.pinned_advised = 4ull << 30;
  th.pinned_cached = 256ull << 20;
  Gmt__TierSpace gpu = GMT__TIER_SPACE__INIT, disk = GMT__TIER_SPACE__INIT;
  gpu.tier = "gpu";
  gpu.index = 1;
  gpu.capacity = 80ull << 30; /* past 32 bits */
  gpu.limit = 72ull << 30;
  gpu.reserved = 70ull << 30;
  gpu.used = 69ull << 30;
  gpu.trigger = 0.85;
  gpu.stop = 0.65;
  gpu.pressure = 18ull << 30;
  gpu.strict_quotas = 100ull << 30;
  gpu.overcommitted = 1;
  char *strict[] = {"beta \"quoted\"", "gamma"};
  gpu.n_strict_pods = 2;
  gpu.strict_pods = strict;
  gpu.move_rate = 21.5e9;
  gpu.switches = 7;
  gpu.last_switch_ms = 640.5;
  gpu.last_switch_bytes = 12ull << 30;
  disk.tier = "disk";
  disk.index = 0;
  disk.path = "/var/spill \"gmt\"";
  disk.capacity = 1ull << 40;
  disk.limit = 1ull << 40;
  disk.trigger = 0.9;
  disk.stop = 0.5;
  Gmt__TierSpace *tiers[] = {&gpu, &disk};
  host.n_tiers = 2;
  host.tiers = tiers;
  Gmt__ConfigStatus conf = GMT__CONFIG_STATUS__INIT;
  conf.path = "/etc/gmt/resource-config.txt";
  conf.pods = 2;
  conf.last_reload_ok = 0;
  conf.last_reload_unix = 1795883354.25;
  conf.last_success_unix = 1795880000.5;
  conf.last_error = "/etc/gmt/resource-config.txt:3: limit 2.0 is above 1\n";
  host.config = &conf;
  st.host = &host;
  Gmt__UnmanagedProcess un = GMT__UNMANAGED_PROCESS__INIT, *uns[] = {&un};
  un.pid = 31337;
  un.memory_used = 3ull << 30;
  un.exe = "/opt/conda/bin/python3.11";
  st.n_unmanaged = 1;
  st.unmanaged = uns;

  json_object *root = render(&st);
  json_object *jpods = field(root, "pods", json_type_array);
  assert_int_equal(json_object_array_length(jpods), 2);

  json_object *ja = json_object_array_get_idx(jpods, 0);
  assert_string_equal(json_object_get_string(field(ja, "name", json_type_string)), "alpha");
  assert_true(json_object_get_double(field(ja, "request", json_type_double)) == 0.3);
  assert_true(json_object_get_double(field(ja, "limit", json_type_double)) == 1.0);
  assert_int_equal(int_field(ja, "memory_used"), (int64_t)((512ull << 20) + (6ull << 30)));
  assert_int_equal(int_field(ja, "memory_limit"), 1073741824);
  assert_string_equal(json_object_get_string(field(ja, "pin", json_type_string)), "adaptive");
  assert_string_equal(json_object_get_string(field(ja, "mode", json_type_string)), "swap");
  assert_string_equal(json_object_get_string(field(ja, "class", json_type_string)), "latency");
  assert_true(json_object_get_boolean(field(ja, "connected", json_type_boolean)));
  assert_int_equal(int_field(ja, "memory_reserved"), (int64_t)((6ull << 30) + (32ull << 20)));
  assert_true(json_object_get_double(field(ja, "gpu_time_share", json_type_double)) == 0.25);
  assert_true(json_object_get_boolean(field(ja, "holds_token", json_type_boolean)));
  json_object *jprocs = field(ja, "processes", json_type_array);
  assert_int_equal(json_object_array_length(jprocs), 2);

  json_object *j1 = json_object_array_get_idx(jprocs, 0);
  assert_int_equal(int_field(j1, "pid"), 1234);
  assert_int_equal(int_field(j1, "node_pid"), 1234);
  assert_string_equal(json_object_get_string(field(j1, "exe", json_type_string)),
                      "/usr/bin/python3");
  assert_int_equal(int_field(j1, "memory_used"), 512ll << 20);
  assert_int_equal(int_field(j1, "launches"), 1000000);
  assert_int_equal(int_field(j1, "allocs"), 17);
  assert_int_equal(int_field(j1, "frees"), 5);

  json_object *j2 = json_object_array_get_idx(jprocs, 1);
  assert_int_equal(int_field(j2, "pid"), 7);
  assert_int_equal(int_field(j2, "node_pid"), 4000000);
  assert_string_equal(json_object_get_string(field(j2, "exe", json_type_string)), TRICKY_EXE);
  assert_int_equal(int_field(j2, "memory_used"), 6ll << 30);
  assert_int_equal(int_field(j2, "launches"), 0);
  assert_int_equal(int_field(j2, "allocs"), 1);
  assert_int_equal(int_field(j2, "frees"), 0);
  assert_int_equal(int_field(j2, "memory_reserved"), (int64_t)((6ull << 30) + (32ull << 20)));
  assert_int_equal(int_field(j2, "pinned_bytes"), 5ll << 30);
  assert_int_equal(int_field(j2, "pinned_advised"), 4ll << 30);
  assert_int_equal(int_field(j1, "pinned_advised"), 0);
  assert_int_equal(int_field(j2, "pinned_cached"), 256ll << 20);
  assert_int_equal(int_field(j2, "pinned_reused"), 99);
  assert_int_equal(int_field(j1, "pinned_reused"), 0);
  /* mode=swap: bytes per tier, and moves. */
  json_object *jt2 = field(j2, "tiers", json_type_object);
  assert_int_equal(int_field(jt2, "gpu"), 300ll << 20);
  assert_int_equal(int_field(jt2, "host"), 5ll << 30);
  assert_int_equal(int_field(jt2, "disk"), 7);
  assert_int_equal(json_object_object_length(jt2), 3);
  assert_int_equal(int_field(j2, "swap_outs"), 12);
  assert_true(int_field(j2, "swap_kept") == (int64_t)(6ull << 30));
  assert_int_equal(int_field(j2, "swap_ins"), 9);
  json_object *jt1 = field(j1, "tiers", json_type_object);
  assert_int_equal(int_field(jt1, "gpu"), 0);
  assert_int_equal(int_field(j1, "swap_outs"), 0);
  json_object *jta = field(ja, "tiers", json_type_object);
  assert_int_equal(int_field(jta, "gpu"), 300ll << 20);
  assert_int_equal(int_field(jta, "host"), 5ll << 30);
  assert_int_equal(int_field(jta, "disk"), 7);
  assert_int_equal(int_field(j2, "token_wait_us"), 3500000);
  assert_int_equal(int_field(j2, "token_waiting_us"), 250000);
  assert_int_equal(int_field(j1, "token_wait_us"), 0);
  assert_int_equal(int_field(ja, "token_wait_us"), 3500000);
  assert_int_equal(int_field(ja, "token_waiting_us"), 250000);
  assert_int_equal(int_field(j2, "bell_wait_us"), 1200);
  assert_int_equal(int_field(j1, "bell_wait_us"), 0);
  assert_int_equal(int_field(ja, "bell_wait_us"), 1200);
  assert_int_equal(int_field(j2, "swap_out_bytes"), 6ll << 30);
  assert_int_equal(int_field(j2, "swap_in_bytes"), 5ll << 30);
  assert_int_equal(int_field(j2, "swap_move_us"), 290000);
  assert_int_equal(int_field(j2, "swap_out_us"), 210000);
  assert_int_equal(int_field(j2, "swap_wait_us"), 620000);
  assert_int_equal(int_field(ja, "swap_out_bytes"), 6ll << 30);
  assert_int_equal(int_field(ja, "swap_wait_us"), 620000);
  assert_int_equal(int_field(ja, "swap_out_us"), 210000);
  assert_int_equal(int_field(ja, "limit_wait_us"), 7000000);
  assert_int_equal(int_field(ja, "refused_quota"), 3);
  assert_int_equal(int_field(ja, "refused_space"), 1);
  assert_int_equal(int_field(ja, "refused_devices"), 5);
  assert_int_equal(int_field(ja, "refused_limit"), 7);
  assert_string_equal(json_object_get_string(field(ja, "last_refusal", json_type_string)),
                      "device 0 has 0 bytes (0.0 MiB) left of its declared capacity");
  assert_true(json_object_get_double(field(ja, "last_refusal_unix", json_type_double)) ==
              1795883300.5);
  assert_int_equal(json_object_object_length(j2), 25); /* nothing undocumented */

  json_object *jb = json_object_array_get_idx(jpods, 1);
  assert_string_equal(json_object_get_string(field(jb, "name", json_type_string)),
                      "beta \"quoted\"");
  assert_true(json_object_get_double(field(jb, "request", json_type_double)) == 0.25);
  assert_true(json_object_get_double(field(jb, "limit", json_type_double)) == 0.5);
  assert_int_equal(int_field(jb, "memory_used"), 0);
  assert_int_equal(int_field(jb, "memory_limit"), 40ll << 30);
  assert_string_equal(json_object_get_string(field(jb, "pin", json_type_string)), "off");
  assert_string_equal(json_object_get_string(field(jb, "mode", json_type_string)), "strict");
  assert_string_equal(json_object_get_string(field(jb, "class", json_type_string)), "batch");
  assert_int_equal(int_field(ja, "idle_out_ms"), -1);
  assert_int_equal(int_field(jb, "idle_out_ms"), 30000);
  assert_false(json_object_get_boolean(field(jb, "connected", json_type_boolean)));
  assert_int_equal(json_object_array_length(field(jb, "processes", json_type_array)), 0);
  assert_false(json_object_get_boolean(field(jb, "holds_token", json_type_boolean)));
  assert_int_equal(int_field(ja, "pinned_bytes"), 5ll << 30);
  assert_int_equal(int_field(jb, "pinned_bytes"), 0);
  assert_int_equal(int_field(ja, "pinned_advised"), 4ll << 30);
  assert_int_equal(int_field(jb, "pinned_advised"), 0);
  assert_int_equal(int_field(ja, "pinned_cached"), 256ll << 20);
  assert_int_equal(int_field(jb, "pinned_cached"), 0);
  assert_int_equal(int_field(field(jb, "tiers", json_type_object), "host"), 0);
  assert_int_equal(int_field(jb, "refused_quota"), 0);
  assert_int_equal(int_field(jb, "refused_limit"), 0);
  assert_string_equal(json_object_get_string(field(jb, "last_refusal", json_type_string)), "");
  assert_int_equal(json_object_object_length(jb), 37);
  json_object *jh = field(root, "host", json_type_object);
  assert_int_equal(int_field(jh, "pinned_bytes"), 5ll << 30);
  assert_int_equal(int_field(jh, "pinned_limit"), 24ll << 30);
  assert_int_equal(int_field(jh, "pinned_advised"), 4ll << 30);
  assert_int_equal(int_field(jh, "pinned_cached"), 256ll << 20);
  json_object *jtiers = field(jh, "tiers", json_type_array);
  assert_int_equal(json_object_array_length(jtiers), 2);
  json_object *jg = json_object_array_get_idx(jtiers, 0);
  assert_string_equal(json_object_get_string(field(jg, "tier", json_type_string)), "gpu");
  assert_int_equal(int_field(jg, "index"), 1);
  assert_int_equal(int_field(jg, "capacity"), 80ll << 30);
  assert_int_equal(int_field(jg, "limit"), 72ll << 30);
  assert_int_equal(int_field(jg, "reserved"), 70ll << 30);
  assert_int_equal(int_field(jg, "used"), 69ll << 30);
  assert_true(json_object_get_double(field(jg, "trigger", json_type_double)) == 0.85);
  assert_true(json_object_get_double(field(jg, "stop", json_type_double)) == 0.65);
  assert_int_equal(int_field(jg, "pressure"), 18ll << 30);
  assert_false(json_object_object_get_ex(jg, "path", NULL)); /* a disk's only */
  /* A GPU's only: its strict pods' quotas, past its limit, and which. */
  assert_int_equal(int_field(jg, "strict_quotas"), 100ll << 30);
  assert_true(json_object_get_boolean(field(jg, "overcommitted", json_type_boolean)));
  json_object *jsp = field(jg, "strict_pods", json_type_array);
  assert_int_equal(json_object_array_length(jsp), 2);
  assert_string_equal(json_object_get_string(json_object_array_get_idx(jsp, 0)), "beta \"quoted\"");
  assert_string_equal(json_object_get_string(json_object_array_get_idx(jsp, 1)), "gamma");
  /* And its swap turns' switches. */
  assert_true(json_object_get_double(field(jg, "move_rate", json_type_double)) == 21.5e9);
  assert_int_equal(int_field(jg, "switches"), 7);
  assert_true(json_object_get_double(field(jg, "last_switch_ms", json_type_double)) == 640.5);
  assert_int_equal(int_field(jg, "last_switch_bytes"), 12ll << 30);
  assert_int_equal(json_object_object_length(jg), 16);
  json_object *jd = json_object_array_get_idx(jtiers, 1);
  assert_string_equal(json_object_get_string(field(jd, "tier", json_type_string)), "disk");
  assert_int_equal(int_field(jd, "index"), 0);
  assert_string_equal(json_object_get_string(field(jd, "path", json_type_string)),
                      "/var/spill \"gmt\"");
  assert_int_equal(int_field(jd, "capacity"), 1ll << 40);
  assert_int_equal(int_field(jd, "reserved"), 0);
  assert_int_equal(int_field(jd, "used"), 0);
  assert_true(json_object_get_double(field(jd, "trigger", json_type_double)) == 0.9);
  assert_true(json_object_get_double(field(jd, "stop", json_type_double)) == 0.5);
  assert_int_equal(int_field(jd, "pressure"), 0);
  assert_false(json_object_object_get_ex(jd, "overcommitted", NULL));
  assert_int_equal(json_object_object_length(jd), 10);
  json_object *jc = field(jh, "config", json_type_object);
  assert_string_equal(json_object_get_string(field(jc, "path", json_type_string)),
                      "/etc/gmt/resource-config.txt");
  assert_int_equal(int_field(jc, "pods"), 2);
  assert_false(json_object_get_boolean(field(jc, "last_reload_ok", json_type_boolean)));
  assert_true(json_object_get_double(field(jc, "last_reload_unix", json_type_double)) ==
              1795883354.25);
  assert_true(json_object_get_double(field(jc, "last_success_unix", json_type_double)) ==
              1795880000.5);
  assert_string_equal(json_object_get_string(field(jc, "last_error", json_type_string)),
                      "/etc/gmt/resource-config.txt:3: limit 2.0 is above 1\n");
  assert_int_equal(json_object_object_length(jc), 6);
  assert_int_equal(json_object_object_length(jh), 6);
  json_object *junm = field(root, "unmanaged", json_type_array);
  assert_int_equal(json_object_array_length(junm), 1);
  json_object *ju = json_object_array_get_idx(junm, 0);
  assert_int_equal(int_field(ju, "pid"), 31337);
  assert_int_equal(int_field(ju, "memory_used"), 3ll << 30);
  assert_string_equal(json_object_get_string(field(ju, "exe", json_type_string)),
                      "/opt/conda/bin/python3.11");
  assert_int_equal(json_object_object_length(ju), 3);
  assert_int_equal(json_object_object_length(root), 4); /* pods, host, devices, unmanaged */
  json_object_put(root);
}

/* devices=: the GPUs a pod may use (allowed_devices), the pod on each GPU
 * it uses (devices), and context memory beside the allocations; empty
 * lists and zeros for a pod without them. */
static void test_status_json_shows_each_pods_devices_and_context(void **state)
{
  (void)state;
  Gmt__PodConfig cfg_a = GMT__POD_CONFIG__INIT, cfg_b = GMT__POD_CONFIG__INIT;
  int32_t allowed[] = {1, 3};
  cfg_a.name = "a";
  cfg_a.n_devices = 2;
  cfg_a.devices = allowed;
  cfg_b.name = "b";
  Gmt__ProcessStatus p1 = GMT__PROCESS_STATUS__INIT, p2 = GMT__PROCESS_STATUS__INIT;
  p1.pid = 10;
  p1.context_bytes = 300ull << 20;
  p2.pid = 11;
  p2.context_bytes = 5ull << 30; /* past 32 bits */
  Gmt__ProcessStatus *procs[] = {&p1, &p2};
  Gmt__PodDeviceStatus d1 = GMT__POD_DEVICE_STATUS__INIT, d3 = GMT__POD_DEVICE_STATUS__INIT;
  d1.device = 1;
  d1.memory_used = 10000001;
  d1.holds_token = 1;
  d1.gpu_time_share = 0.3;
  d1.swap_turns = 5;
  d1.turn_moves_bytes = 14ull << 30;
  d1.turn_cost_ms = 700;
  d1.out_rate = 6.5e9;
  d1.turn_ms = 6300;
  d3.device = 3;
  d3.memory_used = 6ull << 30;
  Gmt__PodDeviceStatus *devs[] = {&d1, &d3};
  Gmt__PodStatus a = GMT__POD_STATUS__INIT, b = GMT__POD_STATUS__INIT;
  a.config = &cfg_a;
  a.n_processes = 2;
  a.processes = procs;
  a.n_devices = 2;
  a.devices = devs;
  a.context_bytes = (300ull << 20) + (5ull << 30);
  b.config = &cfg_b;
  Gmt__PodStatus *pods[] = {&a, &b};
  Gmt__StatusReply st = GMT__STATUS_REPLY__INIT;
  st.n_pods = 2;
  st.pods = pods;

  json_object *root = render(&st);
  json_object *jpods = field(root, "pods", json_type_array);
  json_object *ja = json_object_array_get_idx(jpods, 0), *jb = json_object_array_get_idx(jpods, 1);
  json_object *jallowed = field(ja, "allowed_devices", json_type_array);
  assert_int_equal(json_object_array_length(jallowed), 2);
  assert_int_equal(json_object_get_int64(json_object_array_get_idx(jallowed, 0)), 1);
  assert_int_equal(json_object_get_int64(json_object_array_get_idx(jallowed, 1)), 3);
  json_object *jdevs = field(ja, "devices", json_type_array);
  assert_int_equal(json_object_array_length(jdevs), 2);
  json_object *j1 = json_object_array_get_idx(jdevs, 0), *j3 = json_object_array_get_idx(jdevs, 1);
  assert_int_equal(int_field(j1, "device"), 1);
  assert_int_equal(int_field(j1, "memory_used"), 10000001);
  assert_true(json_object_get_boolean(field(j1, "holds_token", json_type_boolean)));
  assert_true(json_object_get_double(field(j1, "gpu_time_share", json_type_double)) == 0.3);
  assert_int_equal(int_field(j1, "swap_turns"), 5);
  assert_int_equal(int_field(j1, "turn_moves_bytes"), 14ll << 30);
  assert_true(json_object_get_double(field(j1, "turn_cost_ms", json_type_double)) == 700);
  assert_true(json_object_get_double(field(j1, "turn_ms", json_type_double)) == 6300);
  assert_true(json_object_get_double(field(j1, "out_rate", json_type_double)) == 6.5e9);
  assert_int_equal(json_object_object_length(j1), 9);
  assert_int_equal(int_field(j3, "swap_turns"), 0);
  assert_int_equal(int_field(j3, "device"), 3);
  assert_int_equal(int_field(j3, "memory_used"), 6ll << 30);
  assert_false(json_object_get_boolean(field(j3, "holds_token", json_type_boolean)));
  assert_true(json_object_get_double(field(j3, "gpu_time_share", json_type_double)) == 0);
  assert_true(int_field(ja, "context_bytes") == (int64_t)((300ull << 20) + (5ull << 30)));
  json_object *jprocs = field(ja, "processes", json_type_array);
  assert_int_equal(int_field(json_object_array_get_idx(jprocs, 0), "context_bytes"), 300ll << 20);
  assert_int_equal(int_field(json_object_array_get_idx(jprocs, 1), "context_bytes"), 5ll << 30);
  assert_int_equal(json_object_array_length(field(jb, "allowed_devices", json_type_array)), 0);
  assert_int_equal(json_object_array_length(field(jb, "devices", json_type_array)), 0);
  assert_int_equal(int_field(jb, "context_bytes"), 0);
  json_object_put(root);
}

static void test_status_json_writes_shares_as_configured(void **state)
{
  (void)state;
  Gmt__PodConfig cfg = GMT__POD_CONFIG__INIT;
  cfg.name = "a";
  cfg.request = 0.3;
  cfg.limit = 1.0;
  Gmt__PodStatus pod = GMT__POD_STATUS__INIT;
  pod.config = &cfg;
  Gmt__PodStatus *pods[] = {&pod};
  Gmt__StatusReply st = GMT__STATUS_REPLY__INIT;
  st.n_pods = 1;
  st.pods = pods;

  char *text = NULL;
  assert_int_equal(gmt_status_json(&st, &text), 0);
  /* Not 0.29999999999999999, and a whole share stays a double. */
  assert_non_null(strstr(text, "\"request\":0.3,"));
  assert_non_null(strstr(text, "\"limit\":1.0,"));
  assert_non_null(strstr(text, "\"processes\":[]"));
  free(text);
}

static void test_status_json_of_no_pods_is_an_empty_list(void **state)
{
  (void)state;
  Gmt__StatusReply st = GMT__STATUS_REPLY__INIT;
  char *text = NULL;
  assert_int_equal(gmt_status_json(&st, &text), 0);
  assert_string_equal(text, "{\"pods\":[],\"devices\":[],\"unmanaged\":[]}");
  free(text);
}

/* A scheduler older than the tiers sends a host without them: the list is
 * there, empty, so that a reader need not test for the key. */
static void test_status_json_host_without_tiers_has_an_empty_list(void **state)
{
  (void)state;
  Gmt__HostStatus host = GMT__HOST_STATUS__INIT;
  char *text = render_host(&host);
  assert_non_null(strstr(text, "\"tiers\":[]"));
  free(text);
}

/* In the order documented, and not 0.84999999999999998. */
static void test_status_json_writes_tier_thresholds_as_declared(void **state)
{
  (void)state;
  Gmt__TierSpace sp = GMT__TIER_SPACE__INIT;
  sp.tier = "host";
  sp.capacity = 512ull << 20;
  sp.limit = 512ull << 20;
  sp.trigger = 0.85;
  sp.stop = 0.65;
  Gmt__TierSpace *tiers[] = {&sp};
  Gmt__HostStatus host = GMT__HOST_STATUS__INIT;
  host.n_tiers = 1;
  host.tiers = tiers;
  char *text = render_host(&host);
  assert_non_null(
      strstr(text, "\"tiers\":[{\"tier\":\"host\",\"index\":0,\"capacity\":536870912,"));
  assert_non_null(strstr(text, "\"trigger\":0.85,\"stop\":0.65,\"pressure\":0}]"));
  free(text);
}

/* gmt status and gmt top say a pod's waits in the same words: the token
 * wait of its processes added up, the longest going on now (not their
 * sum), the part held back at its LIMIT; nothing for a pod never held. */
static void test_status_waits_say_a_pods_token_limit_and_current_wait(void **state)
{
  (void)state;
  Gmt__ProcessCounters tot = GMT__PROCESS_COUNTERS__INIT, c1 = GMT__PROCESS_COUNTERS__INIT,
                       c2 = GMT__PROCESS_COUNTERS__INIT;
  Gmt__ProcessStatus p1 = GMT__PROCESS_STATUS__INIT, p2 = GMT__PROCESS_STATUS__INIT;
  Gmt__ProcessStatus *procs[] = {&p1, &p2};
  Gmt__PodStatus pod = GMT__POD_STATUS__INIT;
  char buf[160];
  pod.totals = &tot;
  assert_int_equal(gmt_status_pod_waits(buf, sizeof buf, &pod), 0);
  assert_string_equal(buf, "");
  c1.token_waiting_us = 400000;
  c2.token_waiting_us = 1500000;
  p1.counters = &c1;
  p2.counters = &c2;
  pod.processes = procs;
  pod.n_processes = 2;
  tot.token_wait_us = 12300000;
  tot.token_waiting_us = 1900000;
  pod.limit_wait_us = 2100000;
  size_t n = gmt_status_pod_waits(buf, sizeof buf, &pod);
  assert_int_equal(n, strlen(buf));
  assert_string_equal(buf, "for tokens 12.3 s, now 1.5 s; held back at its LIMIT 2.1 s");
  c2.token_waiting_us = c1.token_waiting_us = 0;
  pod.limit_wait_us = 0;
  gmt_status_pod_waits(buf, sizeof buf, &pod);
  assert_string_equal(buf, "for tokens 12.3 s");
  /* Cut to the buffer, never past it. */
  assert_true(gmt_status_pod_waits(buf, 8, &pod) < 8);
  gmt_status_proc_wait(buf, sizeof buf, &c1);
  assert_string_equal(buf, "0.0 s");
  c1.token_wait_us = 3500000;
  c1.token_waiting_us = 250000;
  gmt_status_proc_wait(buf, sizeof buf, &c1);
  assert_string_equal(buf, "3.5 s, now 0.2");
}

static void test_status_json_clamps_memory_past_int64(void **state)
{
  (void)state;
  Gmt__PodConfig cfg = GMT__POD_CONFIG__INIT;
  cfg.name = "huge";
  cfg.memory_limit = UINT64_MAX;
  Gmt__PodStatus pod = GMT__POD_STATUS__INIT; /* and a pod without processes */
  Gmt__ProcessCounters totals = GMT__PROCESS_COUNTERS__INIT;
  pod.config = &cfg;
  pod.totals = &totals;
  totals.memory_used = (uint64_t)INT64_MAX + 1;
  Gmt__PodStatus *pods[] = {&pod};
  Gmt__StatusReply st = GMT__STATUS_REPLY__INIT;
  st.n_pods = 1;
  st.pods = pods;

  json_object *root = render(&st);
  json_object *jp = json_object_array_get_idx(field(root, "pods", json_type_array), 0);
  assert_int_equal(int_field(jp, "memory_limit"), INT64_MAX);
  assert_int_equal(int_field(jp, "memory_used"), INT64_MAX);
  json_object_put(root);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_json_renders_every_field),
      cmocka_unit_test(test_status_waits_say_a_pods_token_limit_and_current_wait),
      cmocka_unit_test(test_status_json_shows_each_pods_devices_and_context),
      cmocka_unit_test(test_status_json_writes_shares_as_configured),
      cmocka_unit_test(test_status_json_of_no_pods_is_an_empty_list),
      cmocka_unit_test(test_status_json_host_without_tiers_has_an_empty_list),
      cmocka_unit_test(test_status_json_writes_tier_thresholds_as_declared),
      cmocka_unit_test(test_status_json_clamps_memory_past_int64),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
