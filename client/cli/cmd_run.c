/* gmt run: runs a command on the GPUs gmt-schd picks for it
 * (--auto-device: Pick, CUDA_VISIBLE_DEVICES), under the hook in a pod
 * (--pod: LD_PRELOAD and GMT_PMGR), or both (docs/devices.md, "gmt run
 * and GMT_AUTO_DEVICE"). It execs the command: the command keeps gmt's
 * pid, and its signals and exit code are its own. Every wait on the
 * scheduler is bounded (--timeout). */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_settings.h"
#include "gmt_visible.h"
#include "gmt_wire.h"
#include "run_env.h"

static void usage(FILE *f)
{
  fprintf(f,
          "usage: gmt [--schd URL] run [--auto-device [--count N] [--bytes SIZE]]\n"
          "               [--pod NAME [--pmgr URL]] [--config INI] [--timeout MS] [-q]\n"
          "               [--] CMD [ARGS...]\n"
          "\n"
          "Runs CMD (exec: CMD keeps this pid, its signals and its exit code).\n"
          "\n"
          "  --auto-device  ask gmt-schd for the best GPU(s) now (free memory, a probe's\n"
          "                 delay, utilization, waiting tokens) and run CMD with\n"
          "                 CUDA_VISIBLE_DEVICES set to their UUIDs; one line on stderr\n"
          "                 says which and why. An already set CUDA_VISIBLE_DEVICES is\n"
          "                 left as it is (nothing is picked).\n"
          "  --count N      how many GPUs to pick (default 1, at most %d)\n"
          "  --bytes SIZE   memory CMD needs free on each (512Mi, 8G; default any)\n"
          "  --pod NAME     run CMD under the hook (LD_PRELOAD=libgmthook.so) in pod\n"
          "                 NAME; with --auto-device, pick among the pod's devices=;\n"
          "                 without, a pod with devices= gets CUDA_VISIBLE_DEVICES set\n"
          "                 to its GPUs (when unset)\n"
          "  --pmgr URL     the pod's manager (default $GMT_PMGR; gmt-schd does not\n"
          "                 know where pod managers listen, so one of them is needed)\n"
          "  --config INI   gmt's settings file (default %s when it exists):\n"
          "                 gmt-schd's address is its server.addr unless --schd is given\n"
          "  --timeout MS   bound on reaching gmt-schd and its answer (default %d)\n"
          "  -q, --quiet    no line about the pick\n"
          "  -h, --help     show this help\n"
          "\n"
          "The hook is $GMT_HOOK_LIB, else $GMT_BUILD_DIR/hook/, else beside this gmt\n"
          "(../hook/ in a build folder, ../lib/ installed). Exit: CMD's; 1 when gmt-schd\n"
          "cannot be reached or picks nothing (its reason on stderr); 2 bad usage;\n"
          "126/127 CMD cannot be run / not found.\n",
          GMT_RUN_MAX_COUNT, GMT_SETTINGS_PATH, GMT_RUN_TIMEOUT_MS);
}

/* gmt-schd's address: --schd, else the settings file's server.addr
 * (--config, else /etc/gmt/gmt.ini when it exists), else the default.
 * 0, or -1 after saying why on stderr. */
static int schd_address(const gmt_cmd_ctx_t *ctx, const gmt_run_opts_t *o, gmt_settings_t *s,
                        const char **url)
{
  *url = ctx->schd_url;
  if (ctx->schd_given)
    return 0;
  char *errors = NULL;
  int rc = gmt_settings_load(o->config, s, &errors);
  if (rc < 0) {
    fprintf(stderr, "gmt run: %s", errors ? errors : gmt_strerror(rc));
    if (!errors || !errors[0] || errors[strlen(errors) - 1] != '\n')
      fputc('\n', stderr);
    free(errors);
    return -1;
  }
  *url = s->server_addr;
  return 0;
}

static double gib(uint64_t b)
{
  return (double)b / (1024.0 * 1024 * 1024);
}

static const Gmt__DeviceStatus *scored(const Gmt__PickReply *r, int index)
{
  for (size_t i = 0; i < r->n_scored; i++)
    if (r->scored[i] && r->scored[i]->index == index)
      return r->scored[i];
  return NULL;
}

static int was_picked(const Gmt__PickReply *r, int index)
{
  for (size_t i = 0; i < r->n_devices; i++)
    if (r->devices[i] == index)
      return 1;
  return 0;
}

/* Appends to buf (at o), keeping it terminated when full. */
static void add(char *buf, size_t len, size_t *o, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add(char *buf, size_t len, size_t *o, const char *fmt, ...)
{
  if (*o >= len)
    return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + *o, len - *o, fmt, ap);
  va_end(ap);
  if (n > 0)
    *o += (size_t)n < len - *o ? (size_t)n : len - *o - 1;
}

/* One line: which GPU(s), and why: each one's score and what made it. */
static void say_pick(const Gmt__PickReply *r, const char *visible)
{
  char line[2048];
  size_t o = 0;
  add(line, sizeof line, &o, "gmt run: picked GPU%s", r->n_devices > 1 ? "s" : "");
  for (size_t i = 0; i < r->n_devices; i++) {
    const Gmt__DeviceStatus *d = scored(r, r->devices[i]);
    const char *sep = !i ? "" : i + 1 == r->n_devices ? " and" : ",";
    add(line, sizeof line, &o, "%s %d", sep, r->devices[i]);
    if (!d) {
      add(line, sizeof line, &o, " (not scored)");
      continue;
    }
    add(line, sizeof line, &o, " (score %.3f: ", d->score);
    if (d->memory_total)
      add(line, sizeof line, &o, "%.1f of %.1f GiB free", gib(d->memory_free),
          gib(d->memory_total));
    else
      add(line, sizeof line, &o, "%.1f GiB free", gib(d->memory_free));
    if (d->utilization >= 0)
      add(line, sizeof line, &o, ", utilization %.0f%%", d->utilization * 100);
    if (d->probe_delay_ms >= 0)
      add(line, sizeof line, &o, ", probe %.2f ms", d->probe_delay_ms);
    add(line, sizeof line, &o, ", %u token request%s waiting)", d->tokens_waiting,
        d->tokens_waiting == 1 ? "" : "s");
  }
  size_t others = 0;
  for (size_t i = 0; i < r->n_scored; i++)
    if (r->scored[i] && !was_picked(r, r->scored[i]->index))
      add(line, sizeof line, &o, "%s GPU %d %.3f",
          others++ ? "," : "; others:", r->scored[i]->index, r->scored[i]->score);
  if (r->cached)
    add(line, sizeof line, &o, "; from numbers sampled before");
  add(line, sizeof line, &o, "; CUDA_VISIBLE_DEVICES=%s", visible);
  fprintf(stderr, "%s\n", line);
}

/* Sends preq to gmt-schd at url within timeout_ms: 0 with *rep its
 * PickReply, or a negative code with why in words. */
static int ask_schd(const char *url, const Gmt__PickRequest *preq, int timeout_ms,
                    Gmt__Envelope **rep, char *why, size_t whylen)
{
  gmt_client_t *c = NULL;
  uint64_t start = gmt_now_ms();
  int rc = gmt_client_open(&c, url, GMT_CLIENT_DIAL_NOW);
  if (rc < 0) {
    gmt__cmd_no_schd(why, whylen, url, rc);
    return rc;
  }
  Gmt__Envelope req = GMT__ENVELOPE__INIT;
  gmt_wire_set_body(&req, GMT__ENVELOPE__BODY_PICK_REQ, (void *)preq);
  uint64_t spent = gmt_now_ms() - start;
  rc = gmt_client_call(c, &req, rep, spent >= (uint64_t)timeout_ms ? 1 : timeout_ms - (int)spent);
  gmt_client_close(c); /* before exec: nng's threads do not survive it */
  if (rc < 0) {
    snprintf(why, whylen, "scheduler at %s did not answer (%s)", url, gmt_strerror(rc));
    return rc;
  }
  char err[512] = "", shown[512];
  rc = gmt_wire_expect(*rep, GMT__ENVELOPE__BODY_PICK_REP, err, sizeof err);
  if (rc < 0) {
    /* The scheduler's own words: they say why (no GPU fits, an unknown pod). */
    snprintf(why, whylen, "scheduler at %s: %s", url,
             err[0] ? gmt_shown(err, shown, sizeof shown) : gmt_strerror(rc));
    gmt_wire_free(*rep);
    *rep = NULL;
  }
  return rc;
}

/* Asks gmt-schd at url for Pick and sets CUDA_VISIBLE_DEVICES to its
 * answer. 0, or 1 after saying on stderr why not. */
static int pick(const char *url, const gmt_run_opts_t *o)
{
  Gmt__PickRequest preq = GMT__PICK_REQUEST__INIT;
  preq.pod = (char *)(o->pod ? o->pod : "");
  preq.count = o->count;
  preq.bytes = o->bytes;
  Gmt__Envelope *rep = NULL;
  char why[1024];
  int rc = ask_schd(url, &preq, o->timeout_ms, &rep, why, sizeof why);
  if (rc < 0) {
    fprintf(stderr, "gmt run: %s; nothing was run\n", why);
    return 1;
  }
  char visible[4096];
  rc = gmt_visible_from_pick(rep->pick_rep, visible, sizeof visible);
  if (rc < 0) {
    fprintf(stderr, "gmt run: scheduler at %s answered %s; nothing was run\n", url,
            rc == -ENODEV ? "with no GPU" : "a Pick that cannot be used");
    gmt_wire_free(rep);
    return 1;
  }
  if (rep->pick_rep->n_devices < o->count)
    fprintf(stderr, "gmt run: asked for %u GPUs, the scheduler gave %zu\n", o->count,
            rep->pick_rep->n_devices);
  if (!o->quiet)
    say_pick(rep->pick_rep, visible);
  gmt_wire_free(rep);
  if (setenv("CUDA_VISIBLE_DEVICES", visible, 1) < 0) {
    fprintf(stderr, "gmt run: cannot set CUDA_VISIBLE_DEVICES: %s\n", strerror(errno));
    return 1;
  }
  return 0;
}

/* --pod without --auto-device: a pod with devices= gets CUDA_VISIBLE_DEVICES
 * set to its GPUs (the node's order), so that the job's device 0 is one it
 * may use rather than one the scheduler refuses (docs/devices.md). Only
 * when the variable is unset; when the scheduler cannot say, the job runs
 * as it would have, and this says so. */
static void confine(const char *url, const gmt_run_opts_t *o)
{
  if (getenv("CUDA_VISIBLE_DEVICES"))
    return; /* whoever set it chose */
  Gmt__PickRequest preq = GMT__PICK_REQUEST__INIT;
  preq.pod = (char *)o->pod;
  preq.allowed = true;
  Gmt__Envelope *rep = NULL;
  char why[1024], visible[4096];
  if (ask_schd(url, &preq, o->timeout_ms, &rep, why, sizeof why) < 0) {
    fprintf(stderr,
            "gmt run: which GPUs pod %s may use is not known (%s); CUDA_VISIBLE_DEVICES left "
            "unset\n",
            o->pod, why);
    return;
  }
  const Gmt__PickReply *r = rep->pick_rep;
  int rc = gmt_visible_from_allowed(r, visible, sizeof visible);
  if (rc == 0) {
    if (setenv("CUDA_VISIBLE_DEVICES", visible, 1) < 0)
      fprintf(stderr, "gmt run: cannot set CUDA_VISIBLE_DEVICES: %s\n", strerror(errno));
    else if (!o->quiet)
      fprintf(stderr, "gmt run: pod %s may use %zu GPU%s: CUDA_VISIBLE_DEVICES=%s\n", o->pod,
              r->n_devices, r->n_devices == 1 ? "" : "s", visible);
  } else if (rc < 0) {
    fprintf(stderr, "gmt run: pod %s: %s; CUDA_VISIBLE_DEVICES left unset\n", o->pod,
            gmt_visible_allowed_strerror(rc));
  }
  gmt_wire_free(rep);
}

/* LD_PRELOAD and GMT_PMGR for the pod. 0, or the exit code after saying
 * why not. */
static int into_pod(const gmt_run_opts_t *o)
{
  const char *pmgr = o->pmgr ? o->pmgr : getenv("GMT_PMGR");
  if (!pmgr || !pmgr[0]) {
    fprintf(stderr,
            "gmt run: --pod %s: the pod manager's address is not known: give --pmgr URL or set "
            "GMT_PMGR (gmt-schd does not say where pod managers listen)\n",
            o->pod);
    return 2;
  }
  char exe[PATH_MAX], hook[2 * PATH_MAX + 2], err[PATH_MAX + 256];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  if (gmt__run_find_hook(getenv("GMT_HOOK_LIB"), getenv("GMT_BUILD_DIR"), n > 0 ? exe : NULL, hook,
                         sizeof hook, err, sizeof err) < 0) {
    fprintf(stderr, "gmt run: --pod %s: %s\n", o->pod, err);
    return 1;
  }
  char preload[8192];
  if (gmt__run_preload(hook, getenv("LD_PRELOAD"), preload, sizeof preload) < 0) {
    fprintf(stderr, "gmt run: LD_PRELOAD would be too long\n");
    return 1;
  }
  if (setenv("LD_PRELOAD", preload, 1) < 0 || setenv("GMT_PMGR", pmgr, 1) < 0) {
    fprintf(stderr, "gmt run: cannot set the environment: %s\n", strerror(errno));
    return 1;
  }
  return 0;
}

int gmt_cmd_run(const gmt_cmd_ctx_t *ctx, int argc, char **argv)
{
  gmt_run_opts_t o;
  char err[256];
  int rc = gmt__run_parse(argc, argv, &o, err, sizeof err);
  if (rc == 1) {
    usage(stdout);
    return 0;
  }
  if (rc < 0) {
    fprintf(stderr, "gmt run: %s\n", err);
    usage(stderr);
    return 2;
  }
  const char *url = ctx->schd_url;
  gmt_settings_t settings;
  if ((o.auto_device || o.pod) && schd_address(ctx, &o, &settings, &url) < 0)
    return 2;
  /* What needs no daemon first: a pod without a pod manager's address
   * or a hook is said before anything is asked. */
  if (o.pod && (rc = into_pod(&o)) != 0)
    return rc;
  if (o.auto_device) {
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (cvd) {
      char shown[256];
      if (!o.quiet)
        fprintf(stderr,
                "gmt run: CUDA_VISIBLE_DEVICES is already set (\"%s\"): left as it is, no GPU "
                "picked\n",
                gmt_shown(cvd, shown, sizeof shown));
    } else if (pick(url, &o) != 0) {
      return 1;
    }
  } else if (o.pod) {
    confine(url, &o);
  }
  fflush(stdout);
  fflush(stderr);
  execvp(o.cmd[0], o.cmd);
  int e = errno;
  fprintf(stderr, "gmt run: cannot run '%s': %s\n", o.cmd[0], strerror(e));
  return e == ENOENT ? 127 : 126;
}
