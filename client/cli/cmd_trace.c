/* `gmt trace`: traces one unmodified CUDA process with the eBPF tracer
 * (bpf/) until it exits, a duration passes or Ctrl-C, then writes
 * a dump by the file's extension or prints the hot and cold buffers.
 * `--load FILE` reads a dump back (to print it, or to convert it with -o).
 * `--pod NAME` asks gmt-schd, which traces every pod's processes, for the
 * same table of one pod, live (the TraceSpots RPC). */
#include "cmd_trace.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "agent.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_procstat.h"
#include "gmt_wire.h"

#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define SPOTS_TIMEOUT_MS 5000

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
  (void)sig;
  stop_requested = 1;
}

static void usage(FILE *f)
{
  fprintf(f, "usage: gmt trace -p PID [--duration S] [-o FILE] [options]\n"
             "       gmt trace --load FILE [-o FILE] [--top K]\n"
             "       gmt [--schd URL] trace --pod NAME [--top K] [--json]\n"
             "\n"
             "Traces the CUDA allocations, copies and host memory of a running process\n"
             "(and the children it forks) until it exits, S seconds pass, or Ctrl-C.\n"
             "Needs root, or CAP_BPF and CAP_PERFMON. With --pod, asks gmt-schd, which\n"
             "traces every pod's processes, for the hottest and coldest buffers of one\n"
             "pod so far.\n"
             "\n"
             "options:\n"
             "  -p, --pid PID          the process to trace\n"
             "      --pod NAME         the pod to show, from gmt-schd's tracer\n"
             "      --json             with --pod: one line of JSON (\"hot\", \"cold\": the\n"
             "                         allocations as in a .json dump, without events)\n"
             "      --schd URL         with --pod: the scheduler (default: gmt's --schd)\n"
             "  -d, --duration S       stop after S seconds\n"
             "  -o, --output FILE      write FILE by its extension: .json, .gmtz (compressed),\n"
             "                         .trace.json (Chrome trace events for Perfetto);\n"
             "                         without it a summary is printed\n"
             "      --wait-libcuda S   wait up to S seconds for PID to load libcuda.so.1\n"
             "                         (default 10)\n"
             "      --no-follow        do not trace the children PID forks\n"
             "      --min-mmap BYTES   anonymous mmaps tracked as host buffers, and the least\n"
             "                         host memory never seen allocated that copies make a\n"
             "                         buffer of (default 1Mi)\n"
             "      --fault-sample-us N  at most one fault event per 2 MiB per N us\n"
             "                         (default 1000; 0: every fault; counts stay exact)\n"
             "  -k, --top K            rows in the hottest/coldest tables (default 5;\n"
             "                         10 with --pod)\n"
             "      --load FILE        read a .json or .gmtz dump instead of tracing\n"
             "      --bpf-stats        at the end, say how often each BPF program ran and\n"
             "                         how long it took (kernel statistics, on while\n"
             "                         tracing: a clock read more per run)\n"
             "  -v, --verbose          say what was probed and skipped\n"
             "  -h, --help             show this help\n");
}

static int parse_seconds(const char *s, double *out)
{
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || v < 0)
    return -EINVAL;
  *out = v;
  return 0;
}

/* "1048576", "64Ki", "1Mi", "2Gi". */
static int parse_bytes(const char *s, uint64_t *out)
{
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s)
    return -EINVAL;
  if (!strcmp(end, "Ki") || !strcmp(end, "K"))
    v <<= 10;
  else if (!strcmp(end, "Mi") || !strcmp(end, "M"))
    v <<= 20;
  else if (!strcmp(end, "Gi") || !strcmp(end, "G"))
    v <<= 30;
  else if (*end)
    return -EINVAL;
  *out = v;
  return 0;
}

static double now_s(void)
{
  return (double)gmt_now_ns() / 1e9;
}

/* The state letter of /proc/PID/stat ('R', 'S', 'Z', ...), 0 when gone. */
static char proc_state(int pid)
{
  char buf[512];
  const char *f = pid > 0 ? gmt_procstat_fields((uint32_t)pid, buf, sizeof buf) : NULL;
  return f ? f[0] : 0;
}

static bool proc_gone(int pid)
{
  char s = proc_state(pid);
  return s == 0 || s == 'Z' || s == 'X';
}

static void human(uint64_t b, char *buf, size_t len)
{
  if (b >= (1ull << 30))
    snprintf(buf, len, "%.2f GiB", (double)b / (1ull << 30));
  else if (b >= (1ull << 20))
    snprintf(buf, len, "%.2f MiB", (double)b / (1ull << 20));
  else if (b >= 1024)
    snprintf(buf, len, "%.1f KiB", (double)b / 1024);
  else
    snprintf(buf, len, "%llu B", (unsigned long long)b);
}

/* n moves of bytes in ns: "3 (1.50 GiB, 12.34 GB/s)"; bytes / ns is GB/s. */
static void moves_text(uint64_t n, uint64_t bytes, uint64_t ns, char *buf, size_t len)
{
  char b[32];
  human(bytes, b, sizeof b);
  if (ns)
    snprintf(buf, len, "%llu (%s, %.2f GB/s)", (unsigned long long)n, b,
             (double)bytes / (double)ns);
  else
    snprintf(buf, len, "%llu (%s)", (unsigned long long)n, b);
}

static void print_rows(FILE *f, const gmt_alloc_info_t *rows, size_t n)
{
  fprintf(f, "  %5s %7s %-13s %-18s %10s %6s %6s %11s %11s %7s  %s\n", "ID", "PID", "KIND",
          "ADDRESS", "SIZE", "H2D", "D2H", "H2D BYTES", "D2H BYTES", "FAULTS", "SITE");
  for (size_t i = 0; i < n; i++) {
    const gmt_alloc_info_t *a = &rows[i];
    char size[32], hb[32], db[32], site[GMT_SITE_MODULE_LEN + GMT_SITE_FUNC_LEN + 32];
    human(a->size, size, sizeof size);
    human(a->h2d_bytes, hb, sizeof hb);
    human(a->d2h_bytes, db, sizeof db);
    if (a->origin == GMT_ORIGIN_ATTACH) /* no call site: found by its copies */
      snprintf(site, sizeof site, "(not seen allocated)");
    else
      gmt_alloc_site_format(&a->site, site, sizeof site);
    fprintf(f, "  %5llu %7u %-13s 0x%-16llx %10s %6llu %6llu %11s %11s %7llu  %s",
            (unsigned long long)a->id, a->pid, gmt_alloc_kind_name(a->kind),
            (unsigned long long)a->address, size, (unsigned long long)a->h2d_count,
            (unsigned long long)a->d2h_count, hb, db, (unsigned long long)a->faults, site);
    if (a->origin != GMT_ORIGIN_ATTACH)
      fprintf(f, " #%u", a->site_nth);
    fprintf(f, "%s%s", a->pinned_by_gmt ? " (pinned by gmt)" : "", a->active ? "" : " (freed)");
    if (a->moves_out || a->moves_in) {
      char mo[96], mi[96];
      moves_text(a->moves_out, a->moves_out_bytes, a->moves_out_ns, mo, sizeof mo);
      moves_text(a->moves_in, a->moves_in_bytes, a->moves_in_ns, mi, sizeof mi);
      fprintf(f, " (moved by gmt: off the GPU %s, back %s)", mo, mi);
    }
    fputc('\n', f);
  }
}

/* The kernel's side of the traced processes (their counters summed). */
static void print_kernel_line(FILE *f, const gmt_trace_kernel_t *k)
{
  fprintf(f,
          "kernel: page-cache faults %llu; stalls: direct reclaim %llu (%.1f ms), compaction "
          "%llu (%.1f ms)\n",
          (unsigned long long)k->pagecache_faults, (unsigned long long)k->reclaim_stalls,
          (double)k->reclaim_ns / 1e6, (unsigned long long)k->compact_stalls,
          (double)k->compact_ns / 1e6);
}

static void print_summary(FILE *f, gmt_tracer_t *tr, size_t k)
{
  gmt_trace_meta_t meta;
  gmt_memhistory_totals_t t;
  gmt_tracer_meta(tr, &meta);
  gmt_tracer_totals(tr, &t);
  char hb[32], db[32];
  human(t.h2d_bytes, hb, sizeof hb);
  human(t.d2h_bytes, db, sizeof db);
  double secs = meta.end_ns > meta.start_ns ? (double)(meta.end_ns - meta.start_ns) / 1e9 : 0;
  fprintf(f, "trace of pid %u: %zu process%s, %.2f s, %llu dropped events\n", meta.root_pid,
          t.processes, t.processes == 1 ? "" : "es", secs, (unsigned long long)meta.dropped_events);
  fprintf(f,
          "allocations: %zu (device %zu, host_pinned %zu (%zu pinned by gmt), host_pageable %zu, "
          "managed %zu), %zu still active, %zu not seen allocated (found by their copies)\n",
          t.allocations, t.by_kind[GMT_ALLOC_DEVICE], t.by_kind[GMT_ALLOC_HOST_PINNED],
          t.pinned_by_gmt, t.by_kind[GMT_ALLOC_HOST_PAGEABLE], t.by_kind[GMT_ALLOC_MANAGED],
          t.active, t.by_origin[GMT_ORIGIN_ATTACH]);
  fprintf(f,
          "copies: H2D %llu (%s), D2H %llu (%s), D2D %llu, unmatched %llu; faults in host "
          "buffers %llu\n",
          (unsigned long long)t.h2d_count, hb, (unsigned long long)t.d2h_count, db,
          (unsigned long long)t.d2d_count, (unsigned long long)t.unmatched_copies,
          (unsigned long long)t.faults);
  if (t.moves_out || t.moves_in) {
    char mo[96], mi[96];
    moves_text(t.moves_out, t.moves_out_bytes, t.moves_out_ns, mo, sizeof mo);
    moves_text(t.moves_in, t.moves_in_bytes, t.moves_in_ns, mi, sizeof mi);
    fprintf(f, "moves by gmt (mode=swap, mode=um): off the GPU %s, back %s\n", mo, mi);
  }
  print_kernel_line(f, &t.kernel);
  if (meta.xid_errors)
    fprintf(f, "GPU Xid errors: %llu\n", (unsigned long long)meta.xid_errors);
  if (!t.allocations || !k)
    return;
  gmt_alloc_info_t *hot = calloc(k, sizeof *hot), *cold = calloc(k, sizeof *cold);
  size_t nhot, ncold;
  if (hot && cold) {
    gmt_tracer_spots(tr, NULL, 0, k, hot, &nhot, cold, &ncold);
    fprintf(f, "\nhottest (most H2D + D2H copies):\n");
    print_rows(f, hot, nhot);
    fprintf(f, "\ncoldest (fewest copies; bigger first):\n");
    print_rows(f, cold, ncold);
    size_t nmoved = t.moves_out || t.moves_in ? gmt_tracer_most_moved(tr, k, hot) : 0;
    if (nmoved) {
      fprintf(f, "\nmoved most by gmt (bytes off the GPU and back):\n");
      print_rows(f, hot, nmoved);
    }
  }
  free(hot);
  free(cold);
}

/* The tracer's kernel side: time its programs took, in the traced
 * processes (probes, faults, syscalls) and elsewhere (tracepoints run for
 * every process before they filter). */
static void print_prog_stats(gmt_tracer_t *t)
{
  gmt_probes_prog_stat_t st[32];
  int n = gmt_tracer_prog_stats(t, st, sizeof st / sizeof st[0]);
  if (n < 0) {
    fprintf(stderr, "gmt trace: no BPF statistics: %s\n", gmt_strerror(n));
    return;
  }
  if ((size_t)n > sizeof st / sizeof st[0])
    n = (int)(sizeof st / sizeof st[0]);
  uint64_t total = 0;
  for (int i = 0; i < n; i++) {
    if (!st[i].runs)
      continue;
    total += st[i].run_ns;
    fprintf(stderr, "gmt trace: BPF %-16s %10llu runs %10.3f ms %7.0f ns each\n", st[i].name,
            (unsigned long long)st[i].runs, (double)st[i].run_ns / 1e6,
            (double)st[i].run_ns / (double)st[i].runs);
  }
  fprintf(stderr, "gmt trace: BPF total %.3f ms\n", (double)total / 1e6);
}

static int write_or_print(gmt_tracer_t *tr, const char *out, size_t k)
{
  if (!out) {
    print_summary(stdout, tr, k);
    return 0;
  }
  int rc = gmt_tracer_dump(tr, out);
  if (rc != 0) {
    fprintf(stderr, "gmt trace: writing %s: %s\n", out, gmt_strerror(rc));
    return EXIT_FAILED;
  }
  gmt_trace_meta_t meta;
  gmt_memhistory_totals_t t;
  gmt_tracer_meta(tr, &meta);
  gmt_tracer_totals(tr, &t);
  fprintf(stderr, "gmt trace: wrote %s (%zu allocations, %llu dropped events)\n", out,
          t.allocations, (unsigned long long)meta.dropped_events);
  return 0;
}

static int load(const char *in, const char *out, size_t k)
{
  gmt_tracer_t *tr = NULL;
  int rc = gmt_tracer_load(&tr, in);
  if (rc != 0) {
    fprintf(stderr, "gmt trace: reading %s: %s\n", in,
            rc == GMT_EDECODE ? "not a gmt trace dump (.json or .gmtz)" : gmt_strerror(rc));
    return EXIT_FAILED;
  }
  rc = write_or_print(tr, out, k);
  gmt_tracer_free(tr);
  return rc;
}

/* ---- --pod: the scheduler's tracer ---- */

static json_object *spots_json(const char *pod, const Gmt__TraceSpotsReply *r)
{
  json_object *root = json_object_new_object();
  json_object_object_add(root, "pod", json_object_new_string(pod));
  json_object_object_add(root, "dropped_events", json_object_new_uint64(r->dropped_events));
  json_object_object_add(root, "dropped_histories", json_object_new_uint64(r->dropped_histories));
  json_object_object_add(root, "allocations", json_object_new_uint64(r->allocations));
  json_object_object_add(root, "faults", json_object_new_uint64(r->faults));
  json_object *copies = json_object_new_object();
  const Gmt__TraceCopyTotals *c = r->copies;
  json_object_object_add(copies, "h2d_count", json_object_new_uint64(c ? c->h2d_count : 0));
  json_object_object_add(copies, "h2d_bytes", json_object_new_uint64(c ? c->h2d_bytes : 0));
  json_object_object_add(copies, "d2h_count", json_object_new_uint64(c ? c->d2h_count : 0));
  json_object_object_add(copies, "d2h_bytes", json_object_new_uint64(c ? c->d2h_bytes : 0));
  json_object_object_add(copies, "d2d_count", json_object_new_uint64(c ? c->d2d_count : 0));
  json_object_object_add(copies, "d2d_bytes", json_object_new_uint64(c ? c->d2d_bytes : 0));
  json_object_object_add(root, "copies", copies);
  json_object *procs = json_object_new_array();
  for (size_t i = 0; i < r->n_processes; i++) {
    const Gmt__TraceSpotsProcess *p = r->processes[i];
    json_object *jp = json_object_new_object();
    json_object_object_add(jp, "pid", json_object_new_uint64(p->pid));
    json_object_object_add(jp, "parent", json_object_new_uint64(p->parent));
    json_object_object_add(jp, "active", json_object_new_boolean(p->active));
    json_object_object_add(jp, "probed", json_object_new_boolean(p->probed));
    json_object_object_add(jp, "allocations", json_object_new_uint64(p->allocations));
    json_object_object_add(jp, "pagecache_faults", json_object_new_uint64(p->pagecache_faults));
    json_object_object_add(jp, "reclaim_stalls", json_object_new_uint64(p->reclaim_stalls));
    json_object_object_add(jp, "reclaim_ns", json_object_new_uint64(p->reclaim_ns));
    json_object_object_add(jp, "compact_stalls", json_object_new_uint64(p->compact_stalls));
    json_object_object_add(jp, "compact_ns", json_object_new_uint64(p->compact_ns));
    json_object_array_add(procs, jp);
  }
  json_object_object_add(root, "processes", procs);
  for (int cold = 0; cold <= 1; cold++) {
    json_object *arr = json_object_new_array();
    size_t n = cold ? r->n_cold : r->n_hot;
    for (size_t i = 0; i < n; i++) {
      gmt_alloc_info_t in;
      gmt_trace_alloc_from_pb(cold ? r->cold[i] : r->hot[i], &in);
      json_object_array_add(arr, gmt_trace_alloc_json(&in));
    }
    json_object_object_add(root, cold ? "cold" : "hot", arr);
  }
  return root;
}

static void print_spots(FILE *f, const char *pod, const Gmt__TraceSpotsReply *r)
{
  size_t active = 0;
  for (size_t i = 0; i < r->n_processes; i++)
    active += r->processes[i]->active;
  fprintf(f, "pod %s: %zu process%s traced (%zu running), %llu dropped events", pod, r->n_processes,
          r->n_processes == 1 ? "" : "es", active, (unsigned long long)r->dropped_events);
  if (r->dropped_histories)
    fprintf(f,
            ", %llu ended allocations let go (the node tracer's bound; their copies still "
            "counted)",
            (unsigned long long)r->dropped_histories);
  fputc('\n', f);
  if (r->n_processes) {
    fprintf(f, "pids:");
    for (size_t i = 0; i < r->n_processes; i++) {
      const Gmt__TraceSpotsProcess *p = r->processes[i];
      fprintf(f, " %u%s%s", p->pid, p->active ? "" : " (exited)",
              p->active && !p->probed ? " (no libcuda yet)" : "");
    }
    fputc('\n', f);
  }
  const Gmt__TraceCopyTotals *c = r->copies;
  Gmt__TraceCopyTotals none = GMT__TRACE_COPY_TOTALS__INIT;
  if (!c)
    c = &none;
  char hb[32], db[32];
  human(c->h2d_bytes, hb, sizeof hb);
  human(c->d2h_bytes, db, sizeof db);
  fprintf(f,
          "allocations: %llu; copies: H2D %llu (%s), D2H %llu (%s), D2D %llu; "
          "faults in host buffers %llu\n",
          (unsigned long long)r->allocations, (unsigned long long)c->h2d_count, hb,
          (unsigned long long)c->d2h_count, db, (unsigned long long)c->d2d_count,
          (unsigned long long)r->faults);
  gmt_trace_kernel_t k = {0}; /* the kernel's side, summed */
  for (size_t i = 0; i < r->n_processes; i++) {
    const Gmt__TraceSpotsProcess *p = r->processes[i];
    k.pagecache_faults += p->pagecache_faults;
    k.reclaim_stalls += p->reclaim_stalls;
    k.reclaim_ns += p->reclaim_ns;
    k.compact_stalls += p->compact_stalls;
    k.compact_ns += p->compact_ns;
  }
  print_kernel_line(f, &k);
  for (int cold = 0; cold <= 1; cold++) {
    size_t n = cold ? r->n_cold : r->n_hot;
    gmt_alloc_info_t *rows = calloc(n ? n : 1, sizeof *rows);
    if (!rows)
      return;
    for (size_t i = 0; i < n; i++)
      gmt_trace_alloc_from_pb(cold ? r->cold[i] : r->hot[i], &rows[i]);
    fprintf(f, "\n%s\n",
            cold ? "coldest (fewest copies; bigger first):" : "hottest (most H2D + D2H copies):");
    if (n)
      print_rows(f, rows, n);
    else
      fprintf(f, "  (no allocations)\n");
    free(rows);
  }
}

/* Asks the scheduler at url; returns the exit code. */
static int pod_spots(const char *url, const char *pod, size_t k, bool json)
{
  gmt_client_t *c = NULL;
  Gmt__Envelope *rep = NULL;
  int rc = gmt_client_open(&c, url, GMT_CLIENT_DIAL_NOW);
  if (rc < 0) {
    char why[1024];
    gmt__cmd_no_schd(why, sizeof why, url, rc);
    fprintf(stderr, "gmt trace: %s\n", why);
    return EXIT_FAILED;
  }
  Gmt__TraceSpotsRequest body = GMT__TRACE_SPOTS_REQUEST__INIT;
  Gmt__Envelope req = GMT__ENVELOPE__INIT;
  body.pod = (char *)pod;
  body.k = (uint32_t)k;
  req.body_case = GMT__ENVELOPE__BODY_TRACE_SPOTS_REQ;
  req.trace_spots_req = &body;
  char err[512] = "";
  if ((rc = gmt_client_call(c, &req, &rep, SPOTS_TIMEOUT_MS)) < 0 ||
      (rc = gmt_wire_expect(rep, GMT__ENVELOPE__BODY_TRACE_SPOTS_REP, err, sizeof err)) < 0) {
    fprintf(stderr, "gmt trace: scheduler at %s: %s\n", url, err[0] ? err : gmt_strerror(rc));
    gmt_wire_free(rep);
    gmt_client_close(c);
    return EXIT_FAILED;
  }
  int status = 0;
  if (json) {
    json_object *root = spots_json(pod, rep->trace_spots_rep);
    printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN |
                                                            JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(root);
  } else {
    print_spots(stdout, pod, rep->trace_spots_rep);
  }
  if (fflush(stdout) != 0)
    status = EXIT_FAILED;
  gmt_wire_free(rep);
  gmt_client_close(c);
  return status;
}

/* Waits for pid to map libcuda.so.1. Returns 0, or an exit code after
 * saying why not. */
static int wait_libcuda(int pid, double wait_s, char *path, size_t len)
{
  double deadline = now_s() + wait_s;
  for (;;) {
    int rc = gmt_probes_find_libcuda(pid, path, len);
    if (rc == 0)
      return 0;
    if (rc == -ESRCH || proc_gone(pid)) {
      fprintf(stderr, "gmt trace: pid %d exited before it loaded libcuda.so.1\n", pid);
      return EXIT_USAGE;
    }
    if (rc == -EACCES || rc == -EPERM) {
      fprintf(stderr,
              "gmt trace: cannot read /proc/%d/maps: %s (tracing needs root, or "
              "CAP_BPF, CAP_PERFMON and the right to ptrace pid %d)\n",
              pid, strerror(-rc), pid);
      return EXIT_USAGE;
    }
    if (now_s() >= deadline || stop_requested) {
      fprintf(stderr,
              "gmt trace: pid %d has not loaded libcuda.so.1 after %g s "
              "(--wait-libcuda)\n",
              pid, wait_s);
      return EXIT_USAGE;
    }
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

static int trace_main(const char *schd_url, int argc, char **argv)
{
  enum {
    OPT_WAIT = 256,
    OPT_NOFOLLOW,
    OPT_MINMMAP,
    OPT_FAULTUS,
    OPT_LOAD,
    OPT_POD,
    OPT_JSON,
    OPT_SCHD,
    OPT_BPFSTATS
  };
  static const struct option longopts[] = {
      {"pid", required_argument, NULL, 'p'},
      {"duration", required_argument, NULL, 'd'},
      {"output", required_argument, NULL, 'o'},
      {"top", required_argument, NULL, 'k'},
      {"wait-libcuda", required_argument, NULL, OPT_WAIT},
      {"no-follow", no_argument, NULL, OPT_NOFOLLOW},
      {"min-mmap", required_argument, NULL, OPT_MINMMAP},
      {"fault-sample-us", required_argument, NULL, OPT_FAULTUS},
      {"load", required_argument, NULL, OPT_LOAD},
      {"pod", required_argument, NULL, OPT_POD},
      {"json", no_argument, NULL, OPT_JSON},
      {"schd", required_argument, NULL, OPT_SCHD},
      {"bpf-stats", no_argument, NULL, OPT_BPFSTATS},
      {"verbose", no_argument, NULL, 'v'},
      {"help", no_argument, NULL, 'h'},
      {0, 0, 0, 0},
  };
  int pid = 0, verbose = 0;
  double duration = 0, wait_s = 10;
  const char *out = NULL, *in = NULL, *pod = NULL;
  size_t k = 5;
  bool k_set = false, json = false;
  gmt_tracer_opts_t to = {.follow_forks = true, .fault_sample_ns = -1, .own_thread = true};

  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":p:d:o:k:vh", longopts, NULL)) != -1) {
    char *end;
    switch (c) {
    case 'p': {
      errno = 0;
      long v = strtol(optarg, &end, 10);
      if (errno || *end || v <= 0 || v > 0x7fffffff) {
        fprintf(stderr, "gmt trace: -p needs a process id, not '%s'\n", optarg);
        return EXIT_USAGE;
      }
      pid = (int)v;
      break;
    }
    case 'd':
      if (parse_seconds(optarg, &duration) != 0) {
        fprintf(stderr, "gmt trace: --duration needs seconds, not '%s'\n", optarg);
        return EXIT_USAGE;
      }
      break;
    case 'o': out = optarg; break;
    case 'k': {
      long v = strtol(optarg, &end, 10);
      if (*end || v < 0 || v > 100000) {
        fprintf(stderr, "gmt trace: --top needs a count, not '%s'\n", optarg);
        return EXIT_USAGE;
      }
      k = (size_t)v;
      k_set = true;
      break;
    }
    case OPT_WAIT:
      if (parse_seconds(optarg, &wait_s) != 0) {
        fprintf(stderr, "gmt trace: --wait-libcuda needs seconds, not '%s'\n", optarg);
        return EXIT_USAGE;
      }
      break;
    case OPT_NOFOLLOW: to.follow_forks = false; break;
    case OPT_MINMMAP:
      if (parse_bytes(optarg, &to.min_mmap_bytes) != 0 || !to.min_mmap_bytes) {
        fprintf(stderr, "gmt trace: --min-mmap needs a size (4096, 64Ki, 1Mi), not '%s'\n", optarg);
        return EXIT_USAGE;
      }
      break;
    case OPT_FAULTUS: {
      long v = strtol(optarg, &end, 10);
      if (*end || v < 0) {
        fprintf(stderr, "gmt trace: --fault-sample-us needs microseconds, not '%s'\n", optarg);
        return EXIT_USAGE;
      }
      to.fault_sample_ns = (int64_t)v * 1000;
      break;
    }
    case OPT_LOAD: in = optarg; break;
    case OPT_POD: pod = optarg; break;
    case OPT_JSON: json = true; break;
    case OPT_SCHD: schd_url = optarg; break;
    case OPT_BPFSTATS: to.bpf_stats = true; break;
    case 'v': verbose = 1; break;
    case 'h': usage(stdout); return 0;
    case ':': fprintf(stderr, "gmt trace: %s needs a value\n", argv[optind - 1]); return EXIT_USAGE;
    default:
      fprintf(stderr, "gmt trace: unknown option '%s'\n", argv[optind - 1]);
      usage(stderr);
      return EXIT_USAGE;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "gmt trace: unexpected argument '%s'\n", argv[optind]);
    return EXIT_USAGE;
  }
  if (verbose)
    gmt_log_init("gmt", GMT_LOG_DEBUG);
  if (out && gmt_trace_format_of(out) < 0) {
    fprintf(stderr, "gmt trace: -o %s: the name must end in .json, .gmtz or .trace.json\n", out);
    return EXIT_USAGE;
  }
  if (pod) {
    if (pid || in || out || duration > 0) {
      fprintf(stderr, "gmt trace: --pod goes with --top, --json and --schd only\n");
      return EXIT_USAGE;
    }
    if (!k_set)
      k = 10;
    return pod_spots(schd_url, pod, k, json);
  }
  if (json) {
    fprintf(stderr, "gmt trace: --json goes with --pod (-o FILE.json writes a dump)\n");
    return EXIT_USAGE;
  }
  if (in) {
    if (pid) {
      fprintf(stderr, "gmt trace: --load and -p do not go together\n");
      return EXIT_USAGE;
    }
    return load(in, out, k);
  }
  if (!pid) {
    fprintf(stderr, "gmt trace: which process? (-p PID, or --pod NAME; gmt trace --help says "
                    "more)\n");
    return EXIT_USAGE;
  }
  if (kill(pid, 0) != 0 && errno == ESRCH) {
    fprintf(stderr, "gmt trace: no process with pid %d\n", pid);
    return EXIT_USAGE;
  }

  struct sigaction sa = {.sa_handler = on_signal};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  char libcuda[4096];
  int rc = wait_libcuda(pid, wait_s, libcuda, sizeof libcuda);
  if (rc != 0)
    return rc;

  to.pid = pid;
  to.libcuda = libcuda;
  gmt_tracer_t *t = NULL;
  char err[512] = "";
  if ((rc = gmt_tracer_new(&t, &to)) != 0) {
    fprintf(stderr, "gmt trace: %s\n", gmt_strerror(rc));
    return EXIT_FAILED;
  }
  if ((rc = gmt_tracer_start(t, err, sizeof err)) != 0) {
    if (rc == -EPERM || rc == -EACCES)
      fprintf(stderr,
              "gmt trace: no rights to load BPF programs (run as root, or with CAP_BPF "
              "and CAP_PERFMON): %s\n",
              err);
    else
      fprintf(stderr, "gmt trace: %s\n", err);
    gmt_tracer_free(t);
    return rc == -EPERM || rc == -EACCES || rc == -ESRCH ? EXIT_USAGE : EXIT_FAILED;
  }
  const gmt_probes_info_t *pi = gmt_tracer_probes_info(t);
  fprintf(stderr, "gmt trace: tracing pid %d (%s: %d entry points probed, %d absent)%s\n", pid,
          libcuda, pi->uprobes, pi->missing, duration > 0 ? "" : ", Ctrl-C to stop");
  if (verbose) {
    fprintf(stderr, "gmt trace: gmt's hook: %d file%s probed%s\n", pi->hooks,
            pi->hooks == 1 ? "" : "s",
            pi->hooks ? " (gmt's own pins are told from the program's)" : "");
    if (pi->missing)
      fprintf(stderr, "gmt trace: not in this driver: %s\n", pi->missing_names);
    fprintf(stderr, "gmt trace: %d kernel tracepoints attached%s%s\n", pi->kernel_attached,
            pi->kernel_skipped[0] ? "; left out: " : "", pi->kernel_skipped);
  }

  double deadline = duration > 0 ? now_s() + duration : 0;
  const char *why = "interrupted";
  while (!stop_requested) {
    if (gmt_tracer_root_exited(t) || proc_gone(pid)) {
      why = "process exited";
      break;
    }
    if (deadline && now_s() >= deadline) {
      why = "duration passed";
      break;
    }
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  if (to.bpf_stats)
    print_prog_stats(t);
  gmt_tracer_stop(t);

  gmt_trace_meta_t meta;
  gmt_tracer_meta(t, &meta);
  gmt_debug("trace: stopped: %s", why);
  if (meta.dropped_events)
    fprintf(stderr, "gmt trace: warning: %llu events were dropped (ring buffer full)\n",
            (unsigned long long)meta.dropped_events);
  rc = write_or_print(t, out, k);
  gmt_tracer_free(t);
  return rc;
}

int gmt_cmd_trace_run(const gmt_cmd_ctx_t *ctx, int argc, char **argv)
{
  return trace_main(ctx && ctx->schd_url ? ctx->schd_url : GMT_DEFAULT_SCHD_IPC, argc, argv);
}
