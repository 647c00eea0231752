/* gmt-schd: the node daemon. Flags, signals, and the libuv loop that owns
 * every piece of mutable state.
 *
 * nng calls on_request() on its own threads; the call goes through the
 * inbox and the loop thread answers it, so the scheduler's tables need no
 * locks. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "devices.h"
#include "gmt_daemon.h"
#include "gmt_error.h"
#include "gmt_bell.h"
#include "gmt_bytes.h"
#include "gmt_log.h"
#include "gmt_rpc_kinds.h"
#include "gmt_settings.h"
#include "metrics.h"
#include "rpc_trace.h"
#include "schd.h"
#include "tiers.h"

#define SERVER_CONTEXTS 64
#define EXPIRY_PERIOD_MS 250
#define DEFAULT_POD_TIMEOUT_MS 3000
#define MAX_LISTEN 16
#define MAX_GPU_SPACES 64

enum { EXIT_USAGE = 2 };

static void usage(FILE *f)
{
  fprintf(f,
          "usage: gmt-schd -c resource-config.txt [--listen URL]... [--state-dir DIR]\n"
          "                [--pod-timeout MS] [--window-ms MS] [--base-quota-ms MS]\n"
          "                [--min-quota-ms MS] [--latency-idle-ms MS] [--no-trace]\n"
          "                [--swap-move-share F] [--wake-queue-ms MS|off]\n"
          "                [--allow-uid USER]... [--allow-gid GROUP]... [--socket-group GROUP]\n"
          "                [--pinned-limit BYTES] [--gpu-capacity DEV=BYTES]...\n"
          "                [--host-tier BYTES] [--disk-tier DIR[:BYTES]]...\n"
          "                [--tier-trigger F] [--tier-stop F] [--settings FILE]\n"
          "                [--metrics HOST:PORT|off] [-v]\n"
          "       gmt-schd --check-config FILE\n"
          "\n"
          "The gmt node daemon: shares this node's GPUs between the pods listed in\n"
          "resource-config.txt.\n"
          "\n"
          "  -c, --config FILE     pods and their shares (required); re-read within 1 s\n"
          "                        of a change, or at once on SIGHUP\n"
          "      --check-config FILE\n"
          "                        read FILE as -c would, say what is wrong (file:line)\n"
          "                        or how many pods it lists, and exit: 0 good, 2 not\n"
          "      --listen URL      where to answer (repeatable; any --listen replaces\n"
          "                        the defaults " GMT_DEFAULT_SCHD_IPC "\n"
          "                        and " GMT_DEFAULT_SCHD_TCP ")\n"
          "      --state-dir DIR   where gmt.db is kept (default " GMT_DEFAULT_STATE_DIR ")\n"
          "      --pod-timeout MS  a pod without a heartbeat for this long is\n"
          "                        disconnected (default %d)\n"
          "      --window-ms MS    GPU time shares are measured over this sliding\n"
          "                        window (default %d; %d to %d)\n"
          "      --base-quota-ms MS\n"
          "                        a token grant's length for a pod with no kernel\n"
          "                        burst estimate yet (default %d; min quota to window)\n"
          "      --min-quota-ms MS\n"
          "                        the shortest grant (default %d; 1 to window); the\n"
          "                        longest is the pod's LIMIT x window\n"
          "      --latency-idle-ms MS\n"
          "                        a class=latency pod's grant goes back this long\n"
          "                        after its work is done (default %g; 0.05 to %d):\n"
          "                        longer keeps its requests from sharing the GPU\n"
          "                        with batch pods at high request rates, shorter\n"
          "                        gives batch pods more of its gaps\n"
          "      --swap-move-share F\n"
          "                        a mode=swap pod's turn on a contested GPU is long\n"
          "                        enough that moving its memory is at most F of it,\n"
          "                        at the GPU's measured rate (default %g; %g to %g;\n"
          "                        docs/tiers.md)\n"
          "      --wake-queue-ms MS|off\n"
          "                        while a mode=swap pod moved out idle may wake on\n"
          "                        a GPU, the pod holding it keeps at most this much\n"
          "                        GPU work queued, so that the waking pod does not\n"
          "                        wait for it (default %g; up to %d; off: unbounded)\n"
          "      --no-trace        do not trace the pods' processes (eBPF; on by\n"
          "                        default where this process may load BPF programs)\n"
          "      --allow-uid USER  also admit this user's pod managers (repeatable;\n"
          "                        by default our own user and root; docs/security.md)\n"
          "      --allow-gid GROUP also admit pod managers of this group (repeatable)\n"
          "      --socket-group GROUP\n"
          "                        the ipc sockets' group (mode 0660; default ours)\n"
          "      --pinned-limit BYTES\n"
          "                        the node's budget of page-locked host memory for\n"
          "                        pin advice (suffixes as GPU_MEM; default a quarter\n"
          "                        of this machine's memory)\n"
          "      --gpu-capacity DEV=BYTES\n"
          "                        memory tiers: device DEV's space is BYTES, not the\n"
          "                        card's memory (NVML) less %llu MiB for contexts;\n"
          "                        off: no space for DEV (repeatable; docs/tiers.md)\n"
          "      --host-tier BYTES the host memory tier (default the pinned limit)\n"
          "      --disk-tier DIR[:BYTES]\n"
          "                        a disk tier in DIR, an existing writable folder\n"
          "                        (DIR without ':'; repeatable; default BYTES: the\n"
          "                        free space of its filesystem at start)\n"
          "      --tier-trigger F, --tier-stop F\n"
          "                        move memory down a tier once a space is F full,\n"
          "                        until it is F full (0 < stop < trigger <= 1;\n"
          "                        default %g and %g; docs/tiers.md)\n"
          "      --settings FILE   gmt's settings (INI): best-GPU selection's cache,\n"
          "                        probe and queue (default " GMT_SETTINGS_PATH "\n"
          "                        when it exists, else built-in; docs/devices.md)\n"
          "      --metrics HOST:PORT|off\n"
          "                        serve Prometheus metrics at http://HOST:PORT/metrics\n"
          "                        (default " GMT_METRICS_DEFAULT_ADDR "; HOST a name, an IPv4\n"
          "                        address or [IPv6]; off: none). A port that is taken\n"
          "                        is logged as an error and gmt-schd runs on without\n"
          "                        metrics (docs/operators.md)\n"
          "  -v, --verbose         log every request\n"
          "  -h, --help            this text\n",
          DEFAULT_POD_TIMEOUT_MS, GMT_TOKEN_WINDOW_MS, GMT_TOKEN_WINDOW_MIN_MS,
          GMT_TOKEN_WINDOW_MAX_MS, GMT_TOKEN_BASE_QUOTA_MS, GMT_TOKEN_MIN_QUOTA_MS,
          GMT_TOKEN_LATENCY_IDLE_US / 1000.0, GMT_TOKEN_LATENCY_IDLE_MAX_MS, GMT_SWAP_MOVE_SHARE,
          GMT_SWAP_MOVE_SHARE_MIN, GMT_SWAP_MOVE_SHARE_MAX, GMT_TOKEN_WAKE_QUEUE_US / 1000.0,
          GMT_TOKEN_WAKE_QUEUE_MAX_MS, (unsigned long long)(GMT_TIERS_GPU_CONTEXT_RESERVE >> 20),
          GMT_TIERS_TRIGGER, GMT_TIERS_STOP);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
  va_list ap;
  fprintf(stderr, "gmt-schd: ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nTry 'gmt-schd --help'.\n");
  return EXIT_USAGE;
}

/* ---- requests: nng threads in, loop thread out ---- */

static void on_queued(void *data, gmt_call_t *call, int status)
{
  /* Handed back at stop: the server, gone by then, dropped the call. */
  if (status == 0)
    gmt__rpc_handle(data, call, gmt_call_request(call));
}

static void on_request(void *arg, gmt_call_t *call, const Gmt__Envelope *req)
{
  gmt_schd_t *s = arg;
  /* Who calls is looked up here, on the nng thread (for a tcp peer it
   * may take a scan of /proc), so that the loop finds it known. A view
   * is anyone's (gmt_rpc_kinds.h): nothing to look up. */
  const gmt_rpc_kind_t *k = gmt_rpc_kind(req->body_case);
  if (!k || !k->view) {
    gmt_peer_t peer;
    (void)gmt_call_peer(call, &peer, true);
  }
  gmt_inbox_push_call(&s->inbox, call, on_queued, s, "scheduler");
}

/* ---- timers and signals ---- */

static void on_expiry(uv_timer_t *h)
{
  gmt_schd_t *s = h->data;
  if (gmt_pods_expire(s->pods, uv_now(s->loop), s->pod_timeout_ms) > 0)
    gmt__pods_changed(s, NULL);
}

static void stop(gmt_schd_t *s, const char *why)
{
  if (s->stopping)
    return;
  s->stopping = true;
  gmt_info("stopping (%s)", why);
  gmt_daemon_stopping("freeing the server");
  /* First the server: once it is freed no nng thread pushes to the inbox,
   * so it can close. Calls still queued were dropped by the server and
   * must not be answered. */
  gmt_server_free(s->server);
  s->server = NULL;
  gmt_daemon_stopping("stopping the metrics server");
  gmt__metrics_stop(s); /* before the inbox closes: waiting scrapes get 503 */
  gmt_daemon_stopping("closing tokens, picks, the tracer and devices");
  /* Token requests waiting for the GPU were calls of that server: dropped
   * with it, never answered. */
  gmt__tokens_close(s);
  gmt__pick_close(s);
  gmt__trace_close(s);
  gmt__pod_devices_close(s);
  gmt__devices_close(s);
  gmt_daemon_stopping("closing the event loop's handles");
  gmt_config_watch_close(s->cwatch);
  s->cwatch = NULL;
  gmt_inbox_close(&s->inbox);
  uv_close((uv_handle_t *)&s->expiry, NULL);
  uv_close((uv_handle_t *)&s->sigterm, NULL);
  uv_close((uv_handle_t *)&s->sigint, NULL);
  uv_close((uv_handle_t *)&s->sighup, NULL);
}

/* The last read of the -c file, for Status and /metrics: errors NULL (or
 * a reason when there are no lines) when it went well. */
static void config_read(gmt_schd_t *s, bool ok, const char *errors)
{
  gmt_config_health_t *h = &s->config_health;
  h->ok = ok;
  h->read_unix = gmt_unix_now();
  if (ok) {
    h->ok_unix = h->read_unix;
    h->error[0] = 0;
  } else {
    snprintf(h->error, sizeof h->error, "%s", errors ? errors : "");
  }
}

/* Re-reads resource-config.txt (SIGHUP, or the watcher saw it change; why
 * says which): on success the new config applies at once; a broken file is
 * logged line by line and the old config kept. */
static void config_reload(gmt_schd_t *s, const char *why)
{
  gmt_config_t *cfg;
  char *errors = NULL;
  gmt_info("%s: re-reading %s", why, s->config_path);
  if (s->cwatch)
    gmt_config_watch_note(s->cwatch); /* before the read: a later change is seen */
  int rc = gmt_config_load(s->config_path, &cfg, &errors);
  if (rc < 0) {
    char reason[512];
    snprintf(reason, sizeof reason, "%s: %s\n", s->config_path, gmt_strerror(rc));
    config_read(s, false, errors && errors[0] ? errors : reason);
    gmt_error("config %s not reloaded (%s); keeping the one in use:", s->config_path,
              gmt_strerror(rc));
    for (char *line = errors, *nl; line && *line; line = nl + 1) {
      nl = strchr(line, '\n');
      if (!nl) {
        gmt_error("  %s", line);
        break;
      }
      gmt_error("  %.*s", (int)(nl - line), line);
    }
    free(errors);
    return;
  }
  if ((rc = gmt_pods_reload(s->pods, cfg)) < 0) {
    char reason[512];
    snprintf(reason, sizeof reason, "%s: not applied: %s\n", s->config_path, gmt_strerror(rc));
    config_read(s, false, reason);
    gmt_error("config %s not reloaded: %s; keeping the one in use", s->config_path,
              gmt_strerror(rc));
    gmt_config_free(cfg);
    return;
  }
  config_read(s, true, NULL);
  gmt_config_free(s->cfg);
  s->cfg = cfg;
  gmt__pods_changed(s, NULL); /* new shares and limits apply from now */
  gmt__tiers_check_quotas(s);
}

static void on_config_changed(void *data)
{
  config_reload(data, "changed on disk");
}

static void on_signal(uv_signal_t *h, int signum)
{
  gmt_schd_t *s = h->data;
  if (signum == SIGHUP)
    config_reload(s, "SIGHUP");
  else
    stop(s, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* ---- flags ---- */

/* A quarter of the machine's memory: page-locked memory cannot be swapped
 * or reclaimed, and too much of it starves everything else. */
static uint64_t default_pinned_limit(void)
{
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page / 4 : 1ull << 30;
}

typedef struct {
  const char *config;
  const char *listen[MAX_LISTEN];
  int nlisten;
  const char *state_dir;
  uint64_t pod_timeout_ms;
  gmt_token_params_t token;
  bool no_trace;
  bool verbose;
  gmt_admit_t admit;
  int64_t socket_gid;                      /* -1: ours */
  uint64_t pinned_limit;                   /* 0: a quarter of RAM */
  gmt_gpu_capacity_t gpus[MAX_GPU_SPACES]; /* --gpu-capacity; bytes 0: off */
  int ngpus;
  uint64_t host_tier; /* 0: the pinned limit */
  gmt_disk_tier_t disks[GMT_SCHD_MAX_DISK_TIERS];
  dev_t disk_dev[GMT_SCHD_MAX_DISK_TIERS]; /* the same folder twice is refused */
  ino_t disk_ino[GMT_SCHD_MAX_DISK_TIERS];
  int ndisks;
  double tier_trigger, tier_stop;
  const char *settings;     /* NULL: GMT_SETTINGS_PATH if it exists */
  const char *metrics;      /* --metrics HOST:PORT; NULL: off */
  const char *check_config; /* --check-config FILE: read it, say, exit */
} flags_t;

/* --check-config: path read as -c reads it (and as a reload would), with
 * the same messages; nothing started. 0 good, EXIT_USAGE not. */
static int check_config(const char *path)
{
  gmt_config_t *cfg = NULL;
  char *errors = NULL;
  int rc = gmt_config_load(path, &cfg, &errors);
  if (rc < 0) {
    if (errors)
      fputs(errors, stderr); /* each line names the file (and line) */
    else
      fprintf(stderr, "%s: %s\n", path, gmt_strerror(rc));
    free(errors);
    return EXIT_USAGE;
  }
  printf("%s: good: %zu pod%s\n", path, cfg->npods, cfg->npods == 1 ? "" : "s");
  gmt_config_free(cfg);
  return 0;
}

/* A --*-ms flag of the token policy: a positive number of milliseconds
 * (ranges are checked together, since they depend on each other). */
static int parse_ms(const char *flag, const char *arg, double *out)
{
  char *end;
  errno = 0;
  double v = strtod(arg, &end);
  if (end == arg || *end || errno || !(v > 0) || v > 1e12)
    return usage_error("%s '%s': want a positive number of milliseconds", flag, arg);
  *out = v;
  return -1;
}

/* A byte count above 0 for flag. Returns -1 to go on, or the exit code. */
static int parse_bytes(const char *flag, const char *arg, uint64_t *out)
{
  if (gmt_parse_bytes(arg, out) < 0 || *out == 0)
    return usage_error("%s '%s': want a byte count above 0 (suffixes K, M, G, T, Ki, Mi, Gi, Ti)",
                       flag, arg);
  return -1;
}

/* --tier-trigger, --tier-stop: a fraction (their order is checked once
 * both are known). */
static int parse_fraction(const char *flag, const char *arg, double *out)
{
  char *end;
  errno = 0;
  double v = strtod(arg, &end);
  if (end == arg || *end || errno || !(v > 0 && v <= 1))
    return usage_error("%s '%s': want a fraction above 0, at most 1", flag, arg);
  *out = v;
  return -1;
}

/* --gpu-capacity DEV=BYTES, or DEV=off (bytes 0) */
static int parse_gpu_capacity(const char *arg, flags_t *f)
{
  const char *eq = strchr(arg, '=');
  char *end = NULL;
  errno = 0;
  long dev = eq && arg[0] >= '0' && arg[0] <= '9' ? strtol(arg, &end, 10) : -1;
  uint64_t bytes = 0;
  bool off = eq && !strcmp(eq + 1, "off");
  if (dev < 0 || end != eq || errno || dev >= MAX_GPU_SPACES ||
      (!off && (gmt_parse_bytes(eq + 1, &bytes) < 0 || bytes == 0)))
    return usage_error("--gpu-capacity '%s': want DEV=BYTES or DEV=off, a device 0 to %d and a "
                       "byte count above 0",
                       arg, MAX_GPU_SPACES - 1);
  for (int i = 0; i < f->ngpus; i++)
    if (f->gpus[i].dev == dev)
      return usage_error("--gpu-capacity: device %ld given twice", dev);
  f->gpus[f->ngpus++] =
      (gmt_gpu_capacity_t){.dev = (int)dev, .bytes = bytes, .from = GMT_GPU_FROM_FLAG};
  return -1;
}

/* --disk-tier DIR[:BYTES]: DIR must be a folder this process may write
 * (spill files go there); without BYTES, what its filesystem has free. */
static int parse_disk_tier(const char *arg, flags_t *f)
{
  if (f->ndisks == GMT_SCHD_MAX_DISK_TIERS)
    return usage_error("too many --disk-tier (at most %d)", GMT_SCHD_MAX_DISK_TIERS);
  gmt_disk_tier_t *d = &f->disks[f->ndisks];
  const char *colon = strrchr(arg, ':');
  size_t len = colon ? (size_t)(colon - arg) : strlen(arg);
  if (len == 0 || len >= sizeof d->dir)
    return usage_error("--disk-tier '%s': want DIR[:BYTES], DIR 1 to %zu characters", arg,
                       sizeof d->dir - 1);
  memcpy(d->dir, arg, len);
  d->dir[len] = '\0';
  if (colon && (gmt_parse_bytes(colon + 1, &d->bytes) < 0 || d->bytes == 0))
    return usage_error("--disk-tier '%s': BYTES '%s' is not a byte count above 0 (suffixes K, "
                       "M, G, T, Ki, Mi, Gi, Ti)",
                       arg, colon + 1);
  struct stat st;
  if (stat(d->dir, &st) < 0)
    return usage_error("--disk-tier %s: %s", d->dir, strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return usage_error("--disk-tier %s: not a directory", d->dir);
  if (access(d->dir, W_OK | X_OK) < 0)
    return usage_error("--disk-tier %s: not writable by this process", d->dir);
  for (int i = 0; i < f->ndisks; i++)
    if (f->disk_dev[i] == st.st_dev && f->disk_ino[i] == st.st_ino)
      return usage_error("--disk-tier %s: the same directory as %s", d->dir, f->disks[i].dir);
  f->disk_dev[f->ndisks] = st.st_dev;
  f->disk_ino[f->ndisks] = st.st_ino;
  struct statvfs vfs;
  if (statvfs(d->dir, &vfs) < 0)
    return usage_error("--disk-tier %s: statvfs: %s", d->dir, strerror(errno));
  d->fs_free = (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize;
  if (!colon)
    d->bytes = d->fs_free;
  if (d->bytes == 0)
    return usage_error("--disk-tier %s: its filesystem has no free space; give BYTES", d->dir);
  f->ndisks++;
  return -1;
}

/* Returns -1 to go on, or the exit code. */
static int parse_flags(int argc, char **argv, flags_t *f)
{
  enum {
    OPT_LISTEN = 256,
    OPT_STATE_DIR,
    OPT_POD_TIMEOUT,
    OPT_WINDOW,
    OPT_BASE_QUOTA,
    OPT_MIN_QUOTA,
    OPT_LATENCY_IDLE,
    OPT_WAKE_QUEUE,
    OPT_SWAP_MOVE_SHARE,
    OPT_NO_TRACE,
    OPT_ALLOW_UID,
    OPT_ALLOW_GID,
    OPT_SOCKET_GROUP,
    OPT_PINNED_LIMIT,
    OPT_GPU_CAPACITY,
    OPT_HOST_TIER,
    OPT_DISK_TIER,
    OPT_TIER_TRIGGER,
    OPT_TIER_STOP,
    OPT_SETTINGS,
    OPT_METRICS,
    OPT_CHECK_CONFIG,
  };
  static const struct option longopts[] = {
      {"config", required_argument, NULL, 'c'},
      {"listen", required_argument, NULL, OPT_LISTEN},
      {"state-dir", required_argument, NULL, OPT_STATE_DIR},
      {"pod-timeout", required_argument, NULL, OPT_POD_TIMEOUT},
      {"window-ms", required_argument, NULL, OPT_WINDOW},
      {"base-quota-ms", required_argument, NULL, OPT_BASE_QUOTA},
      {"min-quota-ms", required_argument, NULL, OPT_MIN_QUOTA},
      {"latency-idle-ms", required_argument, NULL, OPT_LATENCY_IDLE},
      {"wake-queue-ms", required_argument, NULL, OPT_WAKE_QUEUE},
      {"swap-move-share", required_argument, NULL, OPT_SWAP_MOVE_SHARE},
      {"no-trace", no_argument, NULL, OPT_NO_TRACE},
      {"allow-uid", required_argument, NULL, OPT_ALLOW_UID},
      {"allow-gid", required_argument, NULL, OPT_ALLOW_GID},
      {"socket-group", required_argument, NULL, OPT_SOCKET_GROUP},
      {"pinned-limit", required_argument, NULL, OPT_PINNED_LIMIT},
      {"gpu-capacity", required_argument, NULL, OPT_GPU_CAPACITY},
      {"host-tier", required_argument, NULL, OPT_HOST_TIER},
      {"disk-tier", required_argument, NULL, OPT_DISK_TIER},
      {"tier-trigger", required_argument, NULL, OPT_TIER_TRIGGER},
      {"tier-stop", required_argument, NULL, OPT_TIER_STOP},
      {"settings", required_argument, NULL, OPT_SETTINGS},
      {"metrics", required_argument, NULL, OPT_METRICS},
      {"check-config", required_argument, NULL, OPT_CHECK_CONFIG},
      {"verbose", no_argument, NULL, 'v'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  *f = (flags_t){.state_dir = GMT_DEFAULT_STATE_DIR,
                 .pod_timeout_ms = DEFAULT_POD_TIMEOUT_MS,
                 .socket_gid = -1,
                 .tier_trigger = GMT_TIERS_TRIGGER,
                 .tier_stop = GMT_TIERS_STOP,
                 .metrics = GMT_METRICS_DEFAULT_ADDR};
  char err[160];
  gmt_token_params_default(&f->token);
  opterr = 0;
  int c, rc;
  while ((c = getopt_long(argc, argv, ":c:vh", longopts, NULL)) != -1) {
    switch (c) {
    case 'c': f->config = optarg; break;
    case 'v': f->verbose = true; break;
    case 'h': usage(stdout); return 0;
    case OPT_LISTEN:
      if (f->nlisten == MAX_LISTEN)
        return usage_error("too many --listen (at most %d)", MAX_LISTEN);
      f->listen[f->nlisten++] = optarg;
      break;
    case OPT_STATE_DIR: f->state_dir = optarg; break;
    case OPT_CHECK_CONFIG: f->check_config = optarg; break;
    case OPT_SETTINGS: f->settings = optarg; break;
    case OPT_METRICS: {
      char url[GMT_METRICS_ADDR_MAX + 16];
      bool loopback;
      if (!strcmp(optarg, "off"))
        f->metrics = NULL;
      else if (gmt_metrics_addr_parse(optarg, url, sizeof url, &loopback) < 0)
        return usage_error("--metrics '%s': want HOST:PORT (HOST a name, an IPv4 address or "
                           "[an IPv6 address], PORT 1 to 65535), or off",
                           optarg);
      else
        f->metrics = optarg;
      break;
    }
    case OPT_NO_TRACE: f->no_trace = true; break;
    case OPT_ALLOW_UID:
      if (gmt_admit_add_uid(&f->admit, optarg, err, sizeof err) < 0)
        return usage_error("%s", err);
      break;
    case OPT_ALLOW_GID:
      if (gmt_admit_add_gid(&f->admit, optarg, err, sizeof err) < 0)
        return usage_error("%s", err);
      break;
    case OPT_PINNED_LIMIT:
      if ((rc = parse_bytes("--pinned-limit", optarg, &f->pinned_limit)) >= 0)
        return rc;
      break;
    case OPT_GPU_CAPACITY:
      if ((rc = parse_gpu_capacity(optarg, f)) >= 0)
        return rc;
      break;
    case OPT_HOST_TIER:
      if ((rc = parse_bytes("--host-tier", optarg, &f->host_tier)) >= 0)
        return rc;
      break;
    case OPT_DISK_TIER:
      if ((rc = parse_disk_tier(optarg, f)) >= 0)
        return rc;
      break;
    case OPT_TIER_TRIGGER:
      if ((rc = parse_fraction("--tier-trigger", optarg, &f->tier_trigger)) >= 0)
        return rc;
      break;
    case OPT_TIER_STOP:
      if ((rc = parse_fraction("--tier-stop", optarg, &f->tier_stop)) >= 0)
        return rc;
      break;
    case OPT_SOCKET_GROUP: {
      gmt_admit_t one = {0};
      if (gmt_admit_add_gid(&one, optarg, err, sizeof err) < 0)
        return usage_error("--socket-group %s: no such group", optarg);
      f->socket_gid = one.gids[0];
      break;
    }
    case OPT_POD_TIMEOUT: {
      char *end;
      errno = 0;
      unsigned long long v = strtoull(optarg, &end, 10);
      if (optarg[0] < '0' || optarg[0] > '9' || *end || errno || v < 1 || v > 86400000)
        return usage_error("--pod-timeout '%s': want milliseconds, 1 to 86400000", optarg);
      f->pod_timeout_ms = v;
      break;
    }
    case OPT_WINDOW:
      if ((rc = parse_ms("--window-ms", optarg, &f->token.window_ms)) >= 0)
        return rc;
      break;
    case OPT_BASE_QUOTA:
      if ((rc = parse_ms("--base-quota-ms", optarg, &f->token.base_quota_ms)) >= 0)
        return rc;
      break;
    case OPT_MIN_QUOTA:
      if ((rc = parse_ms("--min-quota-ms", optarg, &f->token.min_quota_ms)) >= 0)
        return rc;
      break;
    case OPT_LATENCY_IDLE:
      if ((rc = parse_ms("--latency-idle-ms", optarg, &f->token.latency_idle_ms)) >= 0)
        return rc;
      break;
    case OPT_WAKE_QUEUE:
      if (strcmp(optarg, "off") == 0)
        f->token.wake_queue_ms = 0;
      else if ((rc = parse_ms("--wake-queue-ms", optarg, &f->token.wake_queue_ms)) >= 0)
        return rc;
      break;
    case OPT_SWAP_MOVE_SHARE:
      if ((rc = parse_fraction("--swap-move-share", optarg, &f->token.swap_move_share)) >= 0)
        return rc;
      break;
    case ':':
      /* For a long option optopt is its value; argv[optind - 1] names it. */
      return usage_error("option '%s' needs a value", argv[optind - 1]);
    default:
      if (optopt && optopt < 256) {
        char opt[3] = {'-', (char)optopt, '\0'};
        return usage_error("unknown option '%s'", opt);
      }
      return usage_error("unknown option '%s'", argv[optind - 1]);
    }
  }
  if (optind < argc)
    return usage_error("unexpected argument '%s'", argv[optind]);
  if (f->check_config)
    return check_config(f->check_config);
  if (!f->config)
    return usage_error("no config file: use -c resource-config.txt");
  if (gmt_token_params_check(&f->token, err, sizeof err) < 0)
    return usage_error("%s", err);
  if (!(f->tier_stop < f->tier_trigger))
    return usage_error("--tier-stop %g must be below --tier-trigger %g", f->tier_stop,
                       f->tier_trigger);
  if (f->nlisten == 0) {
    f->listen[f->nlisten++] = GMT_DEFAULT_SCHD_IPC;
    f->listen[f->nlisten++] = GMT_DEFAULT_SCHD_TCP;
  }
  /* There is no authentication on the wire: a peer is known only by what
   * the kernel says of a local socket. */
  for (int i = 0; i < f->nlisten; i++)
    if (!gmt_url_is_local(f->listen[i]))
      return usage_error("--listen %s: gmt-schd answers only on ipc:// and loopback tcp:// "
                         "(127.0.0.1, ::1): its callers are identified by the kernel, and "
                         "nothing authenticates a remote one (docs/security.md)",
                         f->listen[i]);
  return -1;
}

/* The GPU spaces' plan (tiers.h): each card NVML read at start (the
 * topology, rpc_devices.c) less the context reserve, and the flags. Without
 * NVML only the flags declare spaces, and that is said once. */
static size_t gpu_plan(const gmt_schd_t *s, const flags_t *f, gmt_gpu_capacity_t *out)
{
  static gmt_gpu_capacity_t cards[GMT_TOPO_MAX_GPUS];
  size_t ncards = 0;
  const gmt_topo_t *topo = s->devices ? s->devices->topo : NULL;
  if (topo && topo->nvml)
    for (int i = 0; i < topo->n_gpus && ncards < GMT_TOPO_MAX_GPUS; i++)
      cards[ncards++] =
          (gmt_gpu_capacity_t){.dev = topo->gpus[i].index, .card = topo->gpus[i].memory_total};
  else
    gmt_info("GPU spaces: none from NVML (%s); only --gpu-capacity declares them",
             s->devices && s->devices->nvml_why[0] ? s->devices->nvml_why : "no topology");
  return gmt_tiers_gpu_plan(cards, ncards, f->gpus, (size_t)f->ngpus, out);
}

/* The GPU spaces as planned, for the start log (tiers_log). */
typedef struct {
  gmt_gpu_capacity_t gpus[GMT_TOPO_MAX_GPUS + MAX_GPU_SPACES];
  size_t n;
} gpu_plan_t;

/* The memory tiers' spaces, from NVML and the flags: a GPU space for each
 * card (tiers.h, gmt_tiers_gpu_plan), the flags overriding it. The host
 * is one space (NUMA node 0) for now; one per NUMA node comes with
 * topology. After gmt__devices_init: the cards are its topology's. */
static int tiers_init(gmt_schd_t *s, const flags_t *f, gpu_plan_t *plan)
{
  plan->n = gpu_plan(s, f, plan->gpus);
  int rc = gmt_tiers_new(&s->tiers);
  for (size_t i = 0; rc == 0 && i < plan->n; i++)
    if (plan->gpus[i].bytes)
      rc = gmt_tiers_add_space(s->tiers, GMT_TIER_GPU, plan->gpus[i].dev, plan->gpus[i].bytes, 0,
                               f->tier_trigger, f->tier_stop);
  if (rc == 0)
    rc = gmt_tiers_add_space(s->tiers, GMT_TIER_HOST, 0,
                             f->host_tier ? f->host_tier : s->pinned_limit, 0, f->tier_trigger,
                             f->tier_stop);
  s->swap_host_bounded = f->host_tier || f->ndisks > 0;
  for (int i = 0; rc == 0 && i < f->ndisks; i++) {
    s->disks[i] = f->disks[i];
    rc = gmt_tiers_add_space(s->tiers, GMT_TIER_DISK, i, f->disks[i].bytes, 0, f->tier_trigger,
                             f->tier_stop);
  }
  s->ndisks = f->ndisks;
  return rc;
}

static int gpu_spaces(const gmt_schd_t *s)
{
  int n = 0;
  for (size_t i = 0; i < gmt_tiers_nspaces(s->tiers); i++)
    n += gmt_tiers_space(s->tiers, i)->tier == GMT_TIER_GPU;
  return n;
}

/* One line per space of the tiers, at start; a GPU's says where its
 * capacity came from, and a GPU without a space why not. */
static void tiers_log(const gmt_schd_t *s, const gpu_plan_t *plan)
{
  for (size_t i = 0; i < plan->n; i++) {
    const gmt_gpu_capacity_t *g = &plan->gpus[i];
    const gmt_tier_space_t *sp = gmt_tiers_find(s->tiers, GMT_TIER_GPU, g->dev);
    unsigned long long card = g->card, reserve = GMT_TIERS_GPU_CONTEXT_RESERVE;
    char from[160];
    if (g->from == GMT_GPU_FROM_FLAG && !g->bytes)
      snprintf(from, sizeof from, "--gpu-capacity %d=off", g->dev);
    else if (g->from == GMT_GPU_FROM_FLAG && card)
      snprintf(from, sizeof from, "--gpu-capacity (NVML: the card has %llu)", card);
    else if (g->from == GMT_GPU_FROM_FLAG)
      snprintf(from, sizeof from, "--gpu-capacity");
    else if (!card)
      snprintf(from, sizeof from, "NVML does not say the card's memory");
    else if (!g->bytes)
      snprintf(from, sizeof from,
               "NVML: the card's %llu bytes are no more than the %llu kept for "
               "contexts",
               card, reserve);
    else
      snprintf(from, sizeof from, "NVML: the card's %llu bytes less %llu for contexts", card,
               reserve);
    if (!sp)
      gmt_info("memory tier gpu %d: no space (%s)", g->dev, from);
    else
      gmt_info("memory tier gpu %d: %llu bytes, downgrade at %g, stop at %g; capacity from %s",
               g->dev, (unsigned long long)sp->capacity, sp->trigger, sp->stop, from);
  }
  for (size_t i = 0; i < gmt_tiers_nspaces(s->tiers); i++) {
    const gmt_tier_space_t *sp = gmt_tiers_space(s->tiers, i);
    if (sp->tier == GMT_TIER_GPU)
      continue; /* above */
    if (sp->tier == GMT_TIER_DISK)
      gmt_info("memory tier %s %d: %llu bytes in %s (%llu free there at start), downgrade at "
               "%g, stop at %g",
               gmt_tier_name(sp->tier), sp->index, (unsigned long long)sp->capacity,
               s->disks[sp->index].dir, (unsigned long long)s->disks[sp->index].fs_free,
               sp->trigger, sp->stop);
    else
      gmt_info("memory tier %s %d: %llu bytes, downgrade at %g, stop at %g",
               gmt_tier_name(sp->tier), sp->index, (unsigned long long)sp->capacity, sp->trigger,
               sp->stop);
  }
}

/* The bell (gmt_bell.h) beside each ipc socket. Without it latency pods
 * still go first, through the daemons: said, not fatal. */
static int bell_dup(void *arg)
{
  int fd = dup(((gmt_schd_t *)arg)->bell_fd);
  return fd < 0 ? -errno : fd;
}

static void bell_start(gmt_schd_t *s, const flags_t *f)
{
  s->bell_fd = gmt_bell_create();
  if (s->bell_fd < 0) {
    gmt_warn("no bell (%s): batch pods hear of a latency pod's work through the daemons",
             gmt_strerror(s->bell_fd));
    return;
  }
  for (int i = 0; i < f->nlisten && s->nbells < GMT_SCHD_MAX_BELLS; i++) {
    char path[256];
    if (gmt_bell_path(f->listen[i], path, sizeof path) < 0)
      continue; /* not an ipc socket */
    int rc = gmt_bell_serve(&s->bells[s->nbells], path, (long)f->socket_gid, bell_dup, s);
    if (rc < 0)
      gmt_warn("bell %s: %s", path, gmt_strerror(rc));
    else
      gmt_info("bell on %s", path);
    s->nbells += rc == 0;
  }
}

static void bell_stop(gmt_schd_t *s)
{
  for (int i = 0; i < s->nbells; i++)
    gmt_bell_serve_stop(s->bells[i]);
  s->nbells = 0;
  if (s->bell_fd >= 0)
    close(s->bell_fd);
  s->bell_fd = -1;
}

int main(int argc, char **argv)
{
  static flags_t f; /* the disk tiers' paths make it large */
  int rc = parse_flags(argc, argv, &f);
  if (rc >= 0)
    return rc;
  gmt_log_init("gmt-schd", f.verbose ? GMT_LOG_DEBUG : GMT_LOG_INFO);
  /* A peer that goes away mid-write must not kill the daemon. */
  signal(SIGPIPE, SIG_IGN);
  gmt_daemon_raise_nofile();

  static gmt_schd_t schd;
  gmt_schd_t *s = &schd;
  s->bell_fd = -1;
  s->config_path = f.config;
  s->pod_timeout_ms = f.pod_timeout_ms;
  s->token_params = f.token;
  s->admit = f.admit;
  s->pinned_limit = f.pinned_limit ? f.pinned_limit : default_pinned_limit();

  char *errors = NULL;
  rc = gmt_config_load(f.config, &s->cfg, &errors);
  config_read(s, rc >= 0, NULL);
  if (rc < 0) {
    /* Each line already names the file (and line): nothing to add. */
    if (errors)
      fputs(errors, stderr);
    else
      fprintf(stderr, "%s: %s\n", f.config, gmt_strerror(rc));
    free(errors);
    return EXIT_USAGE;
  }

  char errbuf[512];
  if ((rc = gmt_store_open(&s->store, f.state_dir, errbuf, sizeof errbuf)) < 0) {
    gmt_error("%s", errbuf);
    gmt_config_free(s->cfg);
    return EXIT_FAILURE;
  }
  if ((rc = gmt_pods_new(&s->pods, s->cfg, s->store)) < 0 ||
      (rc = gmt_server_new(&s->server, SERVER_CONTEXTS, on_request, s)) < 0) {
    gmt_error("cannot start: %s", gmt_strerror(rc));
    goto fail;
  }
  gmt_server_set_ipc_group(s->server, f.socket_gid);
  for (int i = 0; i < f.nlisten; i++) {
    if ((rc = gmt_server_listen(s->server, f.listen[i])) < 0) {
      gmt_error("listen %s: %s", f.listen[i], gmt_strerror(rc));
      goto fail;
    }
  }

  uv_loop_t loop;
  s->loop = &loop;
  if ((rc = uv_loop_init(&loop)) < 0 || (rc = gmt_inbox_init(&s->inbox, &loop)) < 0) {
    gmt_error("cannot start the event loop: %s", uv_strerror(rc));
    goto fail;
  }
  uv_timer_init(&loop, &s->expiry);
  uv_signal_init(&loop, &s->sigterm);
  uv_signal_init(&loop, &s->sigint);
  uv_signal_init(&loop, &s->sighup);
  s->expiry.data = s->sigterm.data = s->sigint.data = s->sighup.data = s;
  uv_timer_start(&s->expiry, on_expiry, EXPIRY_PERIOD_MS, EXPIRY_PERIOD_MS);
  uv_signal_start(&s->sigterm, on_signal, SIGTERM);
  uv_signal_start(&s->sigint, on_signal, SIGINT);
  uv_signal_start(&s->sighup, on_signal, SIGHUP);

  int code = EXIT_SUCCESS;
  static gpu_plan_t plan;
  if ((rc = gmt__tokens_init(s)) < 0 || (rc = gmt__ledger_init(s)) < 0 ||
      (rc = gmt__swap_init(s)) < 0 || (rc = gmt__pin_init(s)) < 0 ||
      (rc = gmt__trace_init(s, !f.no_trace)) < 0 || (rc = gmt__devices_init(s)) < 0 ||
      (rc = tiers_init(s, &f, &plan)) < 0 || (rc = gmt__pick_init(s, f.settings)) < 0 ||
      (rc = gmt_config_watch_init(&s->cwatch, &loop, s->config_path, on_config_changed, s)) < 0) {
    gmt_error("cannot start: %s", gmt_strerror(rc));
    code = EXIT_FAILURE;
    stop(s, "start failed");
  } else if ((rc = gmt_server_start(s->server)) < 0) {
    gmt_error("cannot start the server: %s", gmt_strerror(rc));
    code = EXIT_FAILURE;
    stop(s, "start failed");
  } else {
    for (int i = 0; i < f.nlisten; i++)
      gmt_info("listening on %s", f.listen[i]);
    gmt_info("%zu pod%s from %s, state in %s, pod timeout %llu ms, pinned host memory budget "
             "%llu bytes, memory tiers: %d gpu, 1 host, %d disk",
             s->cfg->npods, s->cfg->npods == 1 ? "" : "s", f.config, f.state_dir,
             (unsigned long long)s->pod_timeout_ms, (unsigned long long)s->pinned_limit,
             gpu_spaces(s), f.ndisks);
    tiers_log(s, &plan);
    gmt__tiers_check_quotas(s);
    bell_start(s, &f);
    /* A port already taken must not keep the node from scheduling:
     * gmt__metrics_start() says so loudly, and the daemon goes on. */
    if (f.metrics)
      (void)gmt__metrics_start(s, f.metrics);
    else
      gmt_info("metrics: off (--metrics off)");
  }

  uv_run(&loop, UV_RUN_DEFAULT);
  bell_stop(s);
  if ((rc = uv_loop_close(&loop)) < 0)
    gmt_warn("event loop close: %s", uv_strerror(rc));
  gmt_daemon_stopping("closing the store");
  gmt__pin_close(s);
  gmt_tiers_free(s->tiers);
  gmt__swap_close(s);
  gmt__ledger_close(s);
  gmt_pods_free(s->pods);
  gmt_store_close(s->store);
  gmt_config_free(s->cfg);
  gmt_info("stopped");
  gmt_daemon_stopping("exiting");
  return code;

fail:
  gmt_server_free(s->server);
  gmt_pods_free(s->pods);
  gmt_store_close(s->store);
  gmt_config_free(s->cfg);
  return EXIT_FAILURE;
}
