/* GMT_AUTO_DEVICE: the process's GPUs, set by gmt-schd's answer before
 * CUDA starts (docs/devices.md, "gmt run and GMT_AUTO_DEVICE" and
 * "Confining a pod to GPUs").
 *
 * With GMT_PMGR set, and only while CUDA_VISIBLE_DEVICES is unset, the
 * hook asks its pod manager (which names the pod, so the pod's devices=
 * hold) and sets CUDA_VISIBLE_DEVICES to the answer:
 *   GMT_AUTO_DEVICE=N (1 to 64): Pick, the N best GPUs now;
 *   GMT_AUTO_DEVICE=pod: the GPUs the pod may use (a Pick with allowed
 *     set), as `gmt run --pod` does: set only when the pod has devices=.
 *     A pod without devices= leaves the variable unset and sets
 *     GMT_POD_ALL_GPUS to the pod manager's address instead, so that the
 *     processes this one execs (same GMT_PMGR) ask nothing.
 * It is done in a constructor, before main: the driver reads the variable
 * once, at cuInit, and frameworks read it earlier still (PyTorch counts
 * devices through NVML and CUDA_VISIBLE_DEVICES before it initializes
 * CUDA; Python copies the environment at start). The process is still one
 * thread there, so setenv races no getenv. A child it execs inherits the
 * answer and asks nothing; a forked child runs no constructor.
 *
 * The constructor runs in every process the hook is preloaded into, most
 * of which never use CUDA: without GMT_AUTO_DEVICE it reads one variable
 * and returns. With it, one call on a connection of its own (conn.c: no
 * thread, no fd left behind), bounded by GMT_AUTO_DEVICE_TIMEOUT_MS
 * (default 5000) for the dial and the answer together. Any failure leaves
 * the environment as it was and says so in one line on stderr.
 *
 * Its constructor must run after log.c's (GMT_HOOK_DEBUG): the build lists
 * this file after log.c, and constructors of one object run in link
 * order. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_visible.h"
#include "gmt_wire.h"
#include "log.h"

/* Above the pod manager's bound on a forwarded Pick (PMGR_PICK_TIMEOUT_MS,
 * 4 s: the scheduler's probe of every GPU may take 3 s), so that its
 * answer, even "the scheduler is unreachable", reaches the process. */
#define AUTODEV_TIMEOUT_MS 5000
#define AUTODEV_TIMEOUT_MAX_MS 60000
#define AUTODEV_MAX_COUNT 64
/* Set, to GMT_PMGR's value, where that pod manager said its pod has no
 * devices=: every GPU is the pod's, and a child need not ask again. */
#define AUTODEV_ALL_GPUS "GMT_POD_ALL_GPUS"

/* A whole number from 0 to max, or -1. */
static long parse_count(const char *s, long max)
{
  long v = 0;
  if (!*s)
    return -1;
  for (; *s; s++) {
    if (*s < '0' || *s > '9')
      return -1;
    v = v * 10 + (*s - '0');
    if (v > max)
      return -1;
  }
  return v;
}

static int timeout_ms(void)
{
  const char *t = getenv("GMT_AUTO_DEVICE_TIMEOUT_MS");
  if (!t || !*t)
    return AUTODEV_TIMEOUT_MS;
  long v = parse_count(t, AUTODEV_TIMEOUT_MAX_MS);
  if (v <= 0) {
    gmt__say("GMT_AUTO_DEVICE_TIMEOUT_MS='%.32s' is not a time in ms from 1 to %d; %d is used", t,
             AUTODEV_TIMEOUT_MAX_MS, AUTODEV_TIMEOUT_MS);
    return AUTODEV_TIMEOUT_MS;
  }
  return (int)v;
}

static int unreached(const char *url, int rc, int timeout, char *why, size_t whylen)
{
  if (rc == -ETIMEDOUT)
    snprintf(why, whylen, "pod manager at %s did not answer within %d ms", url, timeout);
  else
    snprintf(why, whylen, "no pod manager at %s (%s)", url, gmt_strerror(rc));
  return rc;
}

/* req through the pod manager at url: 0 with *rep the envelope of its
 * PickReply (the caller frees it), or a negative code with the reason in
 * why. */
static int ask(const char *url, const Gmt__PickRequest *req, int timeout, Gmt__Envelope **rep,
               char *why, size_t whylen)
{
  uint64_t start = gmt_now_ms();
  gmt_conn_t *c = NULL;
  int rc = gmt__conn_open(&c, url, timeout);
  if (rc < 0)
    return unreached(url, rc, timeout, why, whylen);
  Gmt__Envelope env = GMT__ENVELOPE__INIT;
  gmt_wire_set_body(&env, GMT__ENVELOPE__BODY_PICK_REQ, (void *)req);
  uint64_t spent = gmt_now_ms() - start;
  rc = gmt__conn_call(c, &env, rep, spent >= (uint64_t)timeout ? 1 : timeout - (int)spent);
  gmt__conn_close(c);
  if (rc < 0)
    return unreached(url, rc, timeout, why, whylen);
  char err[256] = "", shown[256];
  rc = gmt_wire_expect(*rep, GMT__ENVELOPE__BODY_PICK_REP, err, sizeof err);
  if (rc < 0) {
    snprintf(why, whylen, "%s", err[0] ? gmt_shown(err, shown, sizeof shown) : gmt_strerror(rc));
    gmt_wire_free(*rep);
    *rep = NULL;
  }
  return rc;
}

/* CUDA_VISIBLE_DEVICES from the pod manager at url into visible: 0; for
 * pod, GMT_VISIBLE_ALL (the pod has no devices=); or a negative code with
 * the reason in why. */
static int answer(const char *url, bool pod, uint32_t count, char *visible, size_t len, char *why,
                  size_t whylen)
{
  Gmt__PickRequest req = GMT__PICK_REQUEST__INIT;
  req.pod = ""; /* the pod manager sets its own */
  req.count = count;
  req.allowed = pod;
  Gmt__Envelope *rep = NULL;
  int rc = ask(url, &req, timeout_ms(), &rep, why, whylen);
  if (rc < 0)
    return rc;
  if (pod) {
    rc = gmt_visible_from_allowed(rep->pick_rep, visible, len);
    if (rc < 0)
      snprintf(why, whylen, "%s", gmt_visible_allowed_strerror(rc));
  } else if ((rc = gmt_visible_from_pick(rep->pick_rep, visible, len)) < 0) {
    snprintf(why, whylen, "the answer %s",
             rc == -ENODEV ? "named no GPU" : "could not be used (malformed)");
  }
  gmt_wire_free(rep);
  return rc;
}

__attribute__((constructor)) static void autodev_init(void)
{
  const char *on = getenv("GMT_AUTO_DEVICE");
  if (!on || !*on || !strcmp(on, "0"))
    return;
  bool pod = !strcmp(on, "pod");
  long count = pod ? 0 : parse_count(on, AUTODEV_MAX_COUNT);
  if (!pod && count <= 0) {
    gmt__say("GMT_AUTO_DEVICE='%.32s' is neither a number of GPUs from 1 to %d nor 'pod'; "
             "CUDA_VISIBLE_DEVICES left unset",
             on, AUTODEV_MAX_COUNT);
    return;
  }
  /* Each failure is one line: "<what>: <why>; CUDA_VISIBLE_DEVICES left unset". */
  const char *what = pod ? "GMT_AUTO_DEVICE=pod: not confined to the pod's GPUs"
                         : "GMT_AUTO_DEVICE: no GPU picked";
  const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
  if (cvd) {
    GMT_HOOK_DEBUG("GMT_AUTO_DEVICE: CUDA_VISIBLE_DEVICES is already set ('%.64s'): left as it "
                   "is, nothing asked",
                   cvd);
    return;
  }
  const char *url = getenv("GMT_PMGR");
  if (!url || !*url) {
    gmt__say("%s: GMT_PMGR is not set (no pod manager to ask); CUDA_VISIBLE_DEVICES left unset",
             what);
    return;
  }
  const char *all = getenv(AUTODEV_ALL_GPUS);
  if (pod && all && !strcmp(all, url)) {
    GMT_HOOK_DEBUG("GMT_AUTO_DEVICE=pod: %s=%s: the pod has no devices=, nothing asked",
                   AUTODEV_ALL_GPUS, all);
    return;
  }
  char visible[4096], why[384]; /* 64 UUIDs of 40 characters and their commas */
  int rc = answer(url, pod, (uint32_t)count, visible, sizeof visible, why, sizeof why);
  if (rc < 0) {
    gmt__say("%s: %s; CUDA_VISIBLE_DEVICES left unset", what, why);
    return;
  }
  if (rc == GMT_VISIBLE_ALL) {
    if (setenv(AUTODEV_ALL_GPUS, url, 1) < 0)
      gmt__say("GMT_AUTO_DEVICE=pod: cannot set %s (%s)", AUTODEV_ALL_GPUS, strerror(errno));
    GMT_HOOK_DEBUG("GMT_AUTO_DEVICE=pod: the pod has no devices= (every GPU is its own): "
                   "CUDA_VISIBLE_DEVICES left unset");
    return;
  }
  if (setenv("CUDA_VISIBLE_DEVICES", visible, 0) < 0) {
    gmt__say("%s: cannot set CUDA_VISIBLE_DEVICES (%s)", what, strerror(errno));
    return;
  }
  GMT_HOOK_DEBUG("GMT_AUTO_DEVICE%s: CUDA_VISIBLE_DEVICES=%s (%s the pod manager at %s)",
                 pod ? "=pod" : "", visible, pod ? "the pod's GPUs, from" : "picked by", url);
}
