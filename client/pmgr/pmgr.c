/* gmt-pmgr: one per pod. Registers the pod with the scheduler, then serves
 * the pod's hooked processes on tcp://127.0.0.1:PORT and an ipc socket,
 * keeps the table of those processes, heartbeats the pod's view to the
 * scheduler and forwards the processes' token and memory requests with the
 * pod's name fixed. This file owns the flags, the start-up handshake, the
 * loop's life and the wiring between the other files, which do not call
 * each other's way up; docs/protocol.md says what each message means. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gmt_daemon.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "pmgr_calls.h"
#include "pmgr_heartbeat.h"
#include "pmgr_memory.h"
#include "pmgr_procs.h"
#include "pmgr_schd.h"
#include "pmgr_bell.h"
#include "pmgr_state.h"
#include "pmgr_token.h"

/* Requests in progress at once: token calls may wait, and so may Reserves
 * held for the pod's slack (pmgr_memory.h), which leave 64 for the rest
 * (the Reports and Releases that give the slack back among them). */
#define PMGR_CONTEXTS (64 + PMGR_HELD_MAX)
#define PMGR_REGISTER_TRY_MS 1000
#define PMGR_BACKOFF_MIN_MS 100
#define PMGR_BACKOFF_MAX_MS 2000

typedef struct {
  const char *name;
  const char *schd_url;
  const char *schd_from; /* "--schd", "GMT_SCHD" or "the default scheduler": said when bad */
  const char *ipc;
  long port;
  double wait_s;
  int verbose;
  gmt_admit_t admit;
  int64_t socket_gid; /* -1: our own group */
} options_t;

static void usage(FILE *f)
{
  fprintf(
      f,
      "usage: gmt-pmgr --name NAME [--port N] [--schd URL] [--ipc PATH] [--wait S]\n"
      "                [--allow-uid USER]... [--allow-gid GROUP]... [--socket-group GROUP] [-v]\n"
      "\n"
      "The pod manager of one pod: registers the pod with gmt-schd and serves\n"
      "the pod's hooked processes.\n"
      "\n"
      "  --name NAME   the pod, as resource-config.txt names it (required)\n"
      "  --port N      serve processes on tcp://127.0.0.1:N (default %d)\n"
      "  --schd URL    the scheduler (default $GMT_SCHD, else %s)\n"
      "  --ipc PATH    also serve on this ipc socket (default /run/gmt/pmgr-PORT.sock)\n"
      "  --wait S      how long to wait for the scheduler at start (default 30)\n"
      "  --allow-uid USER    also admit this user's processes into the pod\n"
      "                      (repeatable; by default only our own user and root)\n"
      "  --allow-gid GROUP   also admit processes of this group (repeatable)\n"
      "  --socket-group GROUP  the ipc socket's group (mode 0660; default ours)\n"
      "  -v            log every allocation and free (debug)\n"
      "  -h, --help    show this help\n"
      "\n"
      "Exit codes: 0 stopped by SIGTERM/SIGINT, 1 the scheduler could not be\n"
      "reached or the sockets could not be opened, 2 bad flags or a pod the\n"
      "scheduler does not list, 3 a stop that took past %d s, cut short (the\n"
      "log says where).\n",
      GMT_DEFAULT_PMGR_PORT, GMT_DEFAULT_SCHD_IPC, GMT_DAEMON_STOP_MS / 1000);
}

static int bad_flag(const char *fmt, const char *arg)
{
  fprintf(stderr, "gmt-pmgr: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\nRun 'gmt-pmgr --help' for usage.\n");
  return 2;
}

/* Returns -1 to go on, or an exit code. */
static int parse_flags(int argc, char **argv, options_t *o)
{
  o->schd_url = NULL;
  o->port = GMT_DEFAULT_PMGR_PORT;
  o->wait_s = 30;
  o->socket_gid = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
      o->verbose = 1;
      continue;
    }
    static const char *const with_value[] = {"--name",      "--port",        "--schd",
                                             "--ipc",       "--wait",        "--allow-uid",
                                             "--allow-gid", "--socket-group"};
    const char *flag = NULL, *val = NULL;
    for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++) {
      size_t n = strlen(with_value[k]);
      if (!strncmp(a, with_value[k], n) && (a[n] == '\0' || a[n] == '=')) {
        flag = with_value[k];
        if (a[n] == '=')
          val = a + n + 1;
        else if (i + 1 < argc)
          val = argv[++i];
        else
          return bad_flag("%s needs a value", flag);
        break;
      }
    }
    if (!flag)
      return bad_flag("unknown option '%s'", a);
    if (!val[0])
      return bad_flag("%s needs a value", flag);

    char *end, err[160];
    if (!strcmp(flag, "--allow-uid")) {
      if (gmt_admit_add_uid(&o->admit, val, err, sizeof err) < 0)
        return bad_flag("%s", err);
    } else if (!strcmp(flag, "--allow-gid")) {
      if (gmt_admit_add_gid(&o->admit, val, err, sizeof err) < 0)
        return bad_flag("%s", err);
    } else if (!strcmp(flag, "--socket-group")) {
      gmt_admit_t one = {0};
      if (gmt_admit_add_gid(&one, val, err, sizeof err) < 0)
        return bad_flag("--socket-group %s: no such group", val);
      o->socket_gid = one.gids[0];
    } else if (!strcmp(flag, "--name")) {
      o->name = val;
    } else if (!strcmp(flag, "--schd")) {
      o->schd_url = val;
      o->schd_from = "--schd";
    } else if (!strcmp(flag, "--ipc")) {
      o->ipc = val;
    } else if (!strcmp(flag, "--port")) {
      errno = 0;
      o->port = strtol(val, &end, 10);
      if (errno || *end || o->port < 1 || o->port > 65535)
        return bad_flag("--port wants a TCP port 1..65535, not '%s'", val);
    } else if (!strcmp(flag, "--wait")) {
      errno = 0;
      o->wait_s = strtod(val, &end);
      if (errno || *end || !isfinite(o->wait_s) || o->wait_s < 0 || o->wait_s > 86400)
        return bad_flag("--wait wants seconds (0..86400), not '%s'", val);
    }
  }
  if (!o->name)
    return bad_flag("%s", "--name NAME is required (the pod, as the scheduler's config names it)");
  /* As for every gmt command: the flag wins, then GMT_SCHD, so one export
   * names the scheduler for the pod managers a script starts too. */
  const char *env = gmt_schd_from_env();
  if (!o->schd_url && env) {
    o->schd_url = env;
    o->schd_from = GMT_SCHD_ENV;
  }
  if (!o->schd_url) {
    o->schd_url = GMT_DEFAULT_SCHD_IPC;
    o->schd_from = "the default scheduler";
  }
  return -1;
}

/* SIGTERM or SIGINT while registering: the loop that handles them later
 * does not run yet, and registering may wait --wait seconds. */
static volatile sig_atomic_t early_signal;

static void on_early_signal(int signum)
{
  early_signal = signum;
}

static void catch_early_signals(void)
{
  struct sigaction sa = {.sa_handler = on_early_signal}; /* no SA_RESTART: naps end */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
}

static void sleep_ms(uint64_t ms)
{
  struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !early_signal)
    ;
}

/* Register {pod, pid 0}, retrying with backoff while the scheduler cannot
 * be reached. Returns -1 on success (the config is kept), or an exit code:
 * 0 when told to stop meanwhile (within a try, PMGR_REGISTER_TRY_MS). */
static int register_pod(gmt_pmgr_t *pm, double wait_s)
{
  uint64_t deadline = gmt_now_ms() + (uint64_t)(wait_s * 1000);
  uint64_t backoff = PMGR_BACKOFF_MIN_MS;
  bool said_waiting = false;
  char why[512] = "";

  Gmt__RegisterRequest reg = GMT__REGISTER_REQUEST__INIT;
  Gmt__Envelope req = GMT__ENVELOPE__INIT;
  reg.pod = (char *)pm->name;
  gmt_wire_set_body(&req, GMT__ENVELOPE__BODY_REGISTER_REQ, &reg);

  for (;;) {
    if (early_signal) {
      gmt_info("%s while waiting for the scheduler: stopping",
               early_signal == SIGTERM ? "SIGTERM" : "SIGINT");
      return 0;
    }
    uint64_t now = gmt_now_ms();
    uint64_t left = deadline > now ? deadline - now : 0;
    int try_ms = left < PMGR_REGISTER_TRY_MS ? (int)left : PMGR_REGISTER_TRY_MS;
    if (try_ms < PMGR_BACKOFF_MIN_MS)
      try_ms = PMGR_BACKOFF_MIN_MS; /* one real try even with --wait 0 */

    Gmt__Envelope *rep = NULL;
    int rc = gmt_client_call(pm->schd, &req, &rep, try_ms);
    if (rc == 0) {
      char err[512] = "";
      rc = gmt_wire_expect(rep, GMT__ENVELOPE__BODY_REGISTER_REP, err, sizeof err);
      if (rc == 0) {
        rc = gmt__pmgr_set_config(pm, rep->register_rep->config, false);
        gmt_wire_free(rep);
        if (rc < 0) {
          fprintf(stderr, "gmt-pmgr: %s\n", gmt_strerror(rc));
          return 1;
        }
        return -1;
      }
      gmt_wire_free(rep);
      if (rc == GMT_ENOPOD) {
        fprintf(stderr, "gmt-pmgr: %s\n", err[0] ? err : gmt_strerror(rc));
        return 2;
      }
      fprintf(stderr, "gmt-pmgr: the scheduler at %s refused pod '%s': %s\n", pm->schd_url,
              pm->name, err[0] ? err : gmt_strerror(rc));
      return 1;
    }

    snprintf(why, sizeof why, "%s", gmt_strerror(rc));
    now = gmt_now_ms();
    if (now >= deadline)
      break;
    if (!said_waiting) {
      gmt_info("waiting for the scheduler at %s (%s)", pm->schd_url, why);
      said_waiting = true;
    }
    uint64_t nap = backoff < deadline - now ? backoff : deadline - now;
    sleep_ms(nap);
    backoff = backoff * 2 > PMGR_BACKOFF_MAX_MS ? PMGR_BACKOFF_MAX_MS : backoff * 2;
  }
  fprintf(stderr, "gmt-pmgr: scheduler at %s not reachable after %g s (%s)\n", pm->schd_url, wait_s,
          why);
  return 1;
}

static void close_walk(uv_handle_t *h, void *arg)
{
  (void)arg;
  if (!uv_is_closing(h))
    uv_close(h, NULL);
}

/* The process table's news: an exit gives back whatever share of a token
 * the process had, and every change goes to the scheduler with the next
 * heartbeat. */
static void on_procs(gmt_pmgr_t *pm, uint32_t pid, bool gone)
{
  if (gone)
    gmt__pmgr_token_proc_gone(pm, pid);
  gmt__pmgr_memory_proc(pm, pid, gone);
  gmt__pmgr_changed(pm);
}

/* Stops taking work and answers every call it holds: the queued ones, those
 * forwarded to the scheduler (closing the line fails them), and those
 * waiting for a token, so that gmt_server_free() drops nothing that a
 * callback still holds. */
static void quiesce(gmt_pmgr_t *pm)
{
  gmt_inbox_close(&pm->inbox);
  gmt__pmgr_schd_close(pm);
  gmt__pmgr_tokens_close(pm);
  gmt__pmgr_memory_close(pm);
}

static void stop(gmt_pmgr_t *pm, const char *why)
{
  if (uv_is_closing((uv_handle_t *)&pm->sigterm))
    return; /* stopping already */
  gmt_info("%s: stopping", why);
  gmt_daemon_stopping("closing the line to the scheduler and answering held calls");
  quiesce(pm);
  gmt_daemon_stopping("closing the event loop's handles");
  gmt__pmgr_procs_close(pm);
  gmt__pmgr_heartbeat_close(pm);
  uv_close((uv_handle_t *)&pm->sigterm, NULL);
  uv_close((uv_handle_t *)&pm->sigint, NULL);
}

static void on_signal(uv_signal_t *h, int signum)
{
  stop(h->data, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* Lives as long as the process: a late nng callback may still look at
 * its mutex after main has returned from the loop. */
static gmt_pmgr_t pmgr;

int main(int argc, char **argv)
{
  options_t o = {0};
  int code = parse_flags(argc, argv, &o);
  if (code >= 0)
    return code;

  gmt_pmgr_t *pm = &pmgr;
  char tcp_url[64], ipc_url[PATH_MAX + 16];
  snprintf(tcp_url, sizeof tcp_url, "tcp://127.0.0.1:%ld", o.port);
  if (!o.ipc)
    snprintf(ipc_url, sizeof ipc_url, GMT_PMGR_IPC_FMT, o.port);
  else if (!strncmp(o.ipc, "ipc://", 6))
    snprintf(ipc_url, sizeof ipc_url, "%s", o.ipc);
  else
    snprintf(ipc_url, sizeof ipc_url, "ipc://%s", o.ipc);

  gmt_log_init("gmt-pmgr", o.verbose ? GMT_LOG_DEBUG : GMT_LOG_INFO);
  signal(SIGPIPE, SIG_IGN);
  gmt_daemon_raise_nofile();
  pm->name = o.name;
  gmt__pod_config__init(&pm->config);
  pm->schd_url = o.schd_url;
  pm->admit = o.admit;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  pm->epoch = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  pthread_mutex_init(&pm->mu, NULL);
  catch_early_signals();

  int rc = gmt_client_open(&pm->schd, o.schd_url, 0);
  if (rc < 0) {
    fprintf(stderr, "gmt-pmgr: %s %s: %s\n", o.schd_from, o.schd_url, gmt_strerror(rc));
    return 2;
  }
  uv_loop_t loop;
  code = 1;
  if ((rc = uv_loop_init(&loop)) < 0) {
    fprintf(stderr, "gmt-pmgr: event loop: %s\n", uv_strerror(rc));
    gmt_client_close(pm->schd);
    return 1;
  }
  pm->loop = &loop;
  gmt__pmgr_procs_init(pm, on_procs);
  if ((rc = gmt_inbox_init(&pm->inbox, &loop)) < 0 || (rc = gmt__pmgr_memory_init(pm)) < 0) {
    fprintf(stderr, "gmt-pmgr: event loop: %s\n", uv_strerror(rc));
    gmt_client_close(pm->schd);
    return 1;
  }
  uv_signal_init(&loop, &pm->sigterm);
  uv_signal_init(&loop, &pm->sigint);
  pm->sigterm.data = pm->sigint.data = pm;

  /* Listen before registering, so that a pod shown connected can be
   * reached at once. Requests that come meanwhile wait in the inbox until
   * the loop runs, after registration. */
  const char *where = "server";
  rc = gmt_server_new(&pm->server, PMGR_CONTEXTS, gmt__pmgr_on_request, pm);
  if (rc == 0)
    gmt_server_set_ipc_group(pm->server, o.socket_gid);
  if (rc == 0 && (rc = gmt_server_listen(pm->server, tcp_url)) < 0)
    where = tcp_url;
  if (rc == 0 && (rc = gmt_server_listen(pm->server, ipc_url)) < 0)
    where = ipc_url;
  if (rc == 0)
    rc = gmt_server_start(pm->server);
  if (rc < 0)
    fprintf(stderr, "gmt-pmgr: cannot listen on %s: %s\n", where, gmt_strerror(rc));
  else if ((code = register_pod(pm, o.wait_s)) < 0)
    gmt_info("pod '%s' registered with %s: request %g, limit %g, memory limit %llu bytes", pm->name,
             o.schd_url, pm->config.request, pm->config.limit,
             (unsigned long long)pm->config.memory_limit);
  if (rc < 0 || code >= 0) {
    gmt_daemon_stopping("closing after start-up ended");
    quiesce(pm);
    if (!pm->schd_left_calls)
      gmt_server_free(pm->server);
    uv_walk(&loop, close_walk, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return rc < 0 ? 1 : code;
  }
  /* From here the loop handles the signals; one that came before is
   * handled at once. */
  uv_signal_start(&pm->sigterm, on_signal, SIGTERM);
  uv_signal_start(&pm->sigint, on_signal, SIGINT);
  if ((rc = gmt__pmgr_heartbeat_init(pm)) < 0) {
    fprintf(stderr, "gmt-pmgr: heartbeat timer: %s\n", uv_strerror(rc));
    stop(pm, "start-up failed");
  } else {
    code = 0;
    gmt__pmgr_bell_start(o.schd_url, ipc_url, (long)o.socket_gid);
    gmt_info("serving pod '%s' on %s and %s", pm->name, tcp_url, ipc_url);
  }

  if (code == 0 && early_signal)
    stop(pm, early_signal == SIGTERM ? "SIGTERM" : "SIGINT");

  uv_run(&loop, UV_RUN_DEFAULT);

  /* Every call is answered by now (quiesce()), unless a callback of the
   * scheduler's line never came back: then the server stays, for it. */
  gmt__pmgr_bell_stop();
  gmt_daemon_stopping("freeing the server");
  if (!pm->schd_left_calls) {
    gmt_server_free(pm->server);
    pm->server = NULL;
  }
  gmt_daemon_stopping("closing the event loop");
  uv_walk(&loop, close_walk, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&loop) != 0)
    gmt_warn("event loop closed with handles open");
  gmt_podcfg_clear(&pm->config);
  gmt_daemon_stopping("exiting");
  return code;
}
