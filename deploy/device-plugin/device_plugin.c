/* gmt-device-plugin: tells Kubernetes how much GPU memory and GPU time
 * each node has for gmt pods, through the kubelet's device-plugin API
 * (v1beta1), so that the scheduler places a pod only where its quota fits.
 * This file is the flags, the signals and the loop: one thread drains the
 * one gRPC completion queue every server and call of the plugin reports
 * on, and between events looks at gmt-schd's last answer (schd_watch.h)
 * and at the kubelet's folder (resource.h). docs/kubernetes.md. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc.h>

#include "cq_tag.h"
#include "devices.h"
#include "gmt_bytes.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_wire.h"
#include "grpc_msg.h"
#include "resource.h"
#include "schd_watch.h"

#define DEFAULT_DIR "/var/lib/kubelet/device-plugins"
#define KUBELET_SOCKET "kubelet.sock"
#define DEFAULT_UNIT (1ull << 30)
#define MIN_UNIT (1ull << 20)
#define DEFAULT_POLL_MS 5000
/* How often the loop looks at gmt-schd's answer and the kubelet's folder. */
#define TICK_MS 200
/* How long stopping may wait for gRPC to hand back every tag (the servers'
 * shutdowns, the calls and a Register it cancelled): with the gmt-schd
 * thread's GMT_DP_WATCH_STOP_MS, well within the DaemonSet's 10 s grace. */
#define DRAIN_MS 3000

typedef struct flags {
  const char *schd, *dir, *kubelet;
  uint64_t unit;
  int poll_ms;
  bool kinds[GMT_DP_KINDS];
} flags_t;

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
  (void)sig;
  stopping = 1;
}

static void usage(FILE *f)
{
  fprintf(f,
          "usage: gmt-device-plugin [--schd URL] [--dir DIR] [--kubelet-socket PATH]\n"
          "                         [--memory-unit BYTES] [--poll-ms MS]\n"
          "                         [--resources memory,share] [-v]\n"
          "\n"
          "Kubernetes' device plugin for gmt: advertises this node's GPU memory and\n"
          "GPU time as the kubelet's extended resources, so that the scheduler sends\n"
          "a pod only where its quota fits (docs/kubernetes.md):\n"
          "  %-19s one device per --memory-unit of each GPU's space in gmt-schd\n"
          "  %-19s %u devices per GPU: percent of its time\n"
          "Every device is Unhealthy while gmt-schd does not answer.\n"
          "\n"
          "  --schd URL            gmt-schd (default $" GMT_SCHD_ENV ", else %s)\n"
          "  --dir DIR             the kubelet's device-plugin folder, where the plugin's\n"
          "                        sockets go (default %s)\n"
          "  --kubelet-socket PATH the kubelet's Registration socket (default DIR/%s)\n"
          "  --memory-unit BYTES   the memory of one gmt.io/gpu-memory device (default\n"
          "                        1Gi, at least 1Mi): a pod asks for GPU_MEM / this\n"
          "  --poll-ms MS          how often gmt-schd is asked (default %d; 100 to 600000)\n"
          "  --resources LIST      which to advertise: memory, share or both (default)\n"
          "  -v                    log every call\n"
          "\n"
          "Exit codes: 0 stopped by SIGTERM/SIGINT, 1 could not start, 2 bad flags.\n",
          gmt_dp_resource(GMT_DP_MEMORY)->name, gmt_dp_resource(GMT_DP_SHARE)->name,
          GMT_DP_SHARE_UNITS, GMT_DEFAULT_SCHD_IPC, DEFAULT_DIR, KUBELET_SOCKET, DEFAULT_POLL_MS);
}

static int bad_flag(const char *what)
{
  fprintf(stderr, "gmt-device-plugin: %s\nRun 'gmt-device-plugin --help' for usage.\n", what);
  return 2;
}

static int parse_resources(const char *v, bool kinds[GMT_DP_KINDS])
{
  char buf[64];
  if (snprintf(buf, sizeof buf, "%s", v) >= (int)sizeof buf)
    return -EINVAL;
  memset(kinds, 0, GMT_DP_KINDS * sizeof kinds[0]);
  char *save = NULL;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (!strcmp(t, "memory"))
      kinds[GMT_DP_MEMORY] = true;
    else if (!strcmp(t, "share"))
      kinds[GMT_DP_SHARE] = true;
    else
      return -EINVAL;
  }
  return kinds[GMT_DP_MEMORY] || kinds[GMT_DP_SHARE] ? 0 : -EINVAL;
}

/* -1 to go on, or an exit code. */
static int parse_flags(int argc, char **argv, flags_t *f, int *verbose)
{
  static char kubelet[4096];
  const char *env = gmt_schd_from_env();
  f->schd = env ? env : GMT_DEFAULT_SCHD_IPC;
  f->dir = DEFAULT_DIR;
  f->unit = DEFAULT_UNIT;
  f->poll_ms = DEFAULT_POLL_MS;
  f->kinds[GMT_DP_MEMORY] = f->kinds[GMT_DP_SHARE] = true;
  char msg[600];
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(a, "-v")) {
      *verbose = 1;
      continue;
    }
    static const char *const with_value[] = {"--schd",        "--dir",     "--kubelet-socket",
                                             "--memory-unit", "--poll-ms", "--resources"};
    size_t k = 0, nk = sizeof with_value / sizeof *with_value;
    while (k < nk && strcmp(a, with_value[k]) != 0)
      k++;
    if (k == nk) {
      snprintf(msg, sizeof msg, "unknown flag '%.100s'", a);
      return bad_flag(msg);
    }
    if (i + 1 >= argc || !argv[i + 1][0]) {
      snprintf(msg, sizeof msg, "%s wants a value", a);
      return bad_flag(msg);
    }
    const char *v = argv[++i];
    if (!strcmp(a, "--schd")) {
      f->schd = v;
    } else if (!strcmp(a, "--dir")) {
      f->dir = v;
    } else if (!strcmp(a, "--kubelet-socket")) {
      f->kubelet = v;
    } else if (!strcmp(a, "--memory-unit")) {
      if (gmt_parse_bytes(v, &f->unit) < 0 || f->unit < MIN_UNIT) {
        snprintf(msg, sizeof msg, "--memory-unit wants a byte count of at least 1Mi, not '%.100s'",
                 v);
        return bad_flag(msg);
      }
    } else if (!strcmp(a, "--poll-ms")) {
      char *end;
      errno = 0;
      long n = strtol(v, &end, 10);
      if (errno || end == v || *end || n < 100 || n > 600000) {
        snprintf(msg, sizeof msg, "--poll-ms wants milliseconds 100..600000, not '%.100s'", v);
        return bad_flag(msg);
      }
      f->poll_ms = (int)n;
    } else if (parse_resources(v, f->kinds) < 0) {
      snprintf(msg, sizeof msg, "--resources wants memory, share or memory,share, not '%.100s'", v);
      return bad_flag(msg);
    }
  }
  if (!f->kubelet) {
    snprintf(kubelet, sizeof kubelet, "%s/%s", f->dir, KUBELET_SOCKET);
    f->kubelet = kubelet;
  }
  /* A Unix socket's path: sun_path holds 107 bytes and a NUL. */
  size_t longest = strlen(gmt_dp_resource(GMT_DP_MEMORY)->endpoint);
  if (strlen(f->dir) + 1 + longest > 107 || strlen(f->kubelet) > 107) {
    snprintf(msg, sizeof msg,
             "--dir and --kubelet-socket must name Unix socket paths of at most "
             "107 bytes");
    return bad_flag(msg);
  }
  return -1;
}

/* Hands each event to its tag; false when the queue has shut down. */
static bool drain_one(grpc_completion_queue *cq, int ms)
{
  grpc_event ev = grpc_completion_queue_next(cq, gmt_dp_deadline(ms), NULL);
  if (ev.type == GRPC_OP_COMPLETE) {
    gmt_dp_tag_t *t = ev.tag;
    t->done(t, ev.success != 0);
  }
  return ev.type != GRPC_QUEUE_SHUTDOWN;
}

int main(int argc, char **argv)
{
  flags_t f = {0};
  int verbose = 0;
  int done = parse_flags(argc, argv, &f, &verbose);
  if (done >= 0)
    return done;
  gmt_log_init("gmt-device-plugin", verbose ? GMT_LOG_DEBUG : GMT_LOG_INFO);

  struct sigaction sa = {.sa_handler = on_signal};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  grpc_init();
  grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
  gmt_dp_node_t node = {0};
  gmt_dp_res_t *res[GMT_DP_KINDS] = {0};
  gmt_dp_watch_t *watch = NULL;
  int rc = gmt_dp_watch_start(&watch, f.schd, f.poll_ms);
  for (int k = 0; rc == 0 && k < GMT_DP_KINDS; k++)
    if (f.kinds[k])
      rc = gmt_dp_res_new(&res[k], (gmt_dp_kind_t)k, f.dir, f.kubelet, f.unit, &node, cq);
  if (rc < 0) {
    gmt_error("cannot start: %s", gmt_strerror(rc));
    return 1;
  }
  gmt_info("gmt-schd at %s, asked every %d ms; the kubelet at %s", f.schd, f.poll_ms, f.kubelet);

  uint64_t seen = 0, last_tick = 0;
  while (!stopping) {
    drain_one(cq, TICK_MS);
    uint64_t now = gmt_now_ms();
    if (now - last_tick < TICK_MS)
      continue;
    last_tick = now;
    uint64_t gen = gmt_dp_watch_get(watch, &node);
    for (int k = 0; k < GMT_DP_KINDS; k++) {
      if (!res[k])
        continue;
      if (gen != seen)
        gmt_dp_res_changed(res[k]);
      gmt_dp_res_tick(res[k], now);
    }
    seen = gen;
  }

  gmt_info("stopping");
  for (int k = 0; k < GMT_DP_KINDS; k++)
    if (res[k])
      gmt_dp_res_close(res[k]);
  if (gmt_dp_watch_stop(watch) < 0)
    gmt_warn("the thread asking gmt-schd did not end within %d ms: left to the exit",
             GMT_DP_WATCH_STOP_MS);
  grpc_completion_queue_shutdown(cq);
  uint64_t until = gmt_now_ms() + DRAIN_MS;
  bool drained = false;
  while (!drained && gmt_now_ms() < until)
    drained = !drain_one(cq, TICK_MS);
  if (!drained) {
    /* Something of gRPC's never came back: leave it, and the process. */
    gmt_error("gRPC did not hand back every call within %d ms", DRAIN_MS);
    return 1;
  }
  grpc_completion_queue_destroy(cq);
  for (int k = 0; k < GMT_DP_KINDS; k++)
    if (res[k])
      gmt_dp_res_free(res[k]);
  grpc_shutdown();
  return 0;
}
