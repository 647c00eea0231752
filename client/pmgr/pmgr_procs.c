/* gmt-pmgr: the table of the pod's processes. A process joins by Register
 * (or by its first Report), its totals come with each Report, and it
 * leaves the moment it exits: its pidfd turns readable, however it died.
 * Where pidfd_open is missing (kernels before 5.3) a 200 ms timer asks
 * kill(pid, 0) instead. Every change is told to the owner's callback. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gmt_counters.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "pmgr_procs.h"
#include "slack_policy.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define PMGR_PROC_POLL_MS 200

/* The spill folder the scheduler's targets name (its first --disk-tier),
 * passed on to the processes with their targets. */
static char g_spill_dir[4096];

struct pmgr_proc {
  pmgr_proc_t *next;
  gmt_pmgr_t *pm;
  uint32_t pid;
  char *exe;
  /* What it last reported measuring, passed on whole to the scheduler. */
  Gmt__ProcessCounters counters;
  bool evict;          /* a target the scheduler set, not yet told to the process */
  uint64_t keep_bytes; /* that target: how much may stay on the GPU */
  bool bounded;        /* and where its bytes may go (Evict's rooms) */
  uint64_t host_room, disk_room;
  int pidfd; /* -1: watched by the timer */
  union {
    uv_handle_t handle;
    uv_poll_t poll;
    uv_timer_t timer;
  } watch;
};

static const char *kind_name(int kind)
{
  switch (kind) {
  case GMT__ALLOC_KIND__ALLOC_KIND_DEVICE: return "device";
  case GMT__ALLOC_KIND__ALLOC_KIND_MANAGED: return "managed";
  case GMT__ALLOC_KIND__ALLOC_KIND_ASYNC: return "async";
  case GMT__ALLOC_KIND__ALLOC_KIND_PHYSICAL: return "physical";
  case GMT__ALLOC_KIND__ALLOC_KIND_ARRAY: return "array";
  default: return "unknown";
  }
}

void gmt__pmgr_procs_init(gmt_pmgr_t *pm, pmgr_procs_cb cb)
{
  pm->procs_cb = cb;
}

static pmgr_proc_t *find(gmt_pmgr_t *pm, uint32_t pid)
{
  for (pmgr_proc_t *p = pm->procs; p; p = p->next)
    if (p->pid == pid)
      return p;
  return NULL;
}

static void on_closed(uv_handle_t *h)
{
  pmgr_proc_t *p = h->data;
  if (p->pidfd >= 0)
    close(p->pidfd);
  free(p->exe);
  free(p);
}

static void unlink_proc(gmt_pmgr_t *pm, pmgr_proc_t *gone)
{
  for (pmgr_proc_t **pp = &pm->procs; *pp; pp = &(*pp)->next) {
    if (*pp == gone) {
      *pp = gone->next;
      pm->nprocs--;
      return;
    }
  }
}

static void drop(pmgr_proc_t *p)
{
  gmt_pmgr_t *pm = p->pm;
  uint32_t pid = p->pid;
  gmt_info("pid %u (%s) exited", pid, p->exe ? p->exe : "?");
  unlink_proc(pm, p);
  uv_close(&p->watch.handle, on_closed);
  pm->procs_cb(pm, pid, true);
}

static void on_pidfd(uv_poll_t *h, int status, int events)
{
  (void)status;
  (void)events;
  /* A pidfd is readable once the process has exited; an error on it
   * means the same for our purpose. */
  drop(h->data);
}

static void on_poll_timer(uv_timer_t *h)
{
  pmgr_proc_t *p = h->data;
  if (kill((pid_t)p->pid, 0) < 0 && errno == ESRCH)
    drop(p);
}

static int set_exe(pmgr_proc_t *p, const char *exe)
{
  if (!exe || !exe[0] || (p->exe && !strcmp(p->exe, exe)))
    return 0;
  char *copy = strdup(exe);
  if (!copy)
    return -ENOMEM;
  free(p->exe);
  p->exe = copy;
  return 1;
}

/* A pod holds at most GMT_POD_MAX_PROCESSES (gmt-schd refuses a heartbeat
 * with more); true when call was answered with that refusal. */
static bool refuse_full(gmt_pmgr_t *pm, gmt_call_t *call, uint32_t pid)
{
  if (pm->nprocs < GMT_POD_MAX_PROCESSES)
    return false;
  gmt_warn("pid %u refused: the pod already has %zu processes (at most %d)", pid, pm->nprocs,
           GMT_POD_MAX_PROCESSES);
  gmt_call_reply_error(call, -E2BIG, "pid %u refused: the pod already has %d processes, the most",
                       pid, GMT_POD_MAX_PROCESSES);
  return true;
}

/* Adds pid and starts watching it. -ESRCH: no such process is visible
 * from here (it has exited, or lives in a pid namespace we cannot see). */
static int add(gmt_pmgr_t *pm, uint32_t pid, const char *exe, pmgr_proc_t **out)
{
  *out = NULL;
  if (pid == 0 || pid > INT32_MAX)
    return -EINVAL;
  pmgr_proc_t *p = calloc(1, sizeof *p);
  if (!p)
    return -ENOMEM;
  p->pm = pm;
  p->pid = pid;
  gmt__process_counters__init(&p->counters);
  if (set_exe(p, exe) < 0) {
    free(p);
    return -ENOMEM;
  }
  p->pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
  if (p->pidfd < 0 && (errno == ESRCH || (kill((pid_t)pid, 0) < 0 && errno == ESRCH))) {
    free(p->exe);
    free(p);
    return -ESRCH;
  }
  bool inited = false;
  int rc;
  if (p->pidfd >= 0) {
    rc = uv_poll_init(pm->loop, &p->watch.poll, p->pidfd);
    inited = rc == 0;
    if (rc == 0)
      rc = uv_poll_start(&p->watch.poll, UV_READABLE, on_pidfd);
  } else {
    rc = uv_timer_init(pm->loop, &p->watch.timer);
    inited = rc == 0;
    if (rc == 0)
      rc = uv_timer_start(&p->watch.timer, on_poll_timer, PMGR_PROC_POLL_MS, PMGR_PROC_POLL_MS);
  }
  p->watch.handle.data = p;
  if (rc < 0) {
    if (inited) {
      uv_close(&p->watch.handle, on_closed);
    } else {
      if (p->pidfd >= 0)
        close(p->pidfd);
      free(p->exe);
      free(p);
    }
    return rc;
  }

  p->next = pm->procs;
  pm->procs = p;
  pm->nprocs++;
  gmt_info("pid %u (%s) joined the pod", pid, p->exe ? p->exe : "?");
  pm->procs_cb(pm, pid, false);
  *out = p;
  return 0;
}

void gmt__pmgr_handle_register(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__RegisterRequest *r)
{
  if (r->pid == 0) {
    gmt_call_reply_error(call, -EINVAL, "a process registers with its pid (pid 0 is the pod's)");
    return;
  }
  pmgr_proc_t *p = find(pm, r->pid);
  if (p) {
    if (set_exe(p, r->exe) > 0)
      pm->procs_cb(pm, p->pid, false);
  } else {
    if (refuse_full(pm, call, r->pid))
      return;
    int rc = add(pm, r->pid, r->exe, &p);
    if (rc == -ESRCH) {
      gmt_warn("pid %u (%s) registered but is not visible from this pod manager "
               "(exited, or in another pid namespace); not tracking it",
               r->pid, r->exe ? r->exe : "?");
    } else if (rc < 0) {
      gmt_call_reply_error(call, rc, "cannot watch pid %u: %s", r->pid, gmt_strerror(rc));
      return;
    }
  }

  /* The config as the scheduler said it, named for the pod when it gave
   * no name: a view into pm->config. */
  Gmt__PodConfig config = pm->config;
  if (!config.name || !config.name[0])
    config.name = (char *)pm->name;
  Gmt__RegisterReply reply = GMT__REGISTER_REPLY__INIT;
  reply.config = &config;
  gmt_call_reply_body(call, GMT__ENVELOPE__BODY_REGISTER_REP, &reply);
}

static void log_events(const Gmt__ProcessReport *r)
{
  if (gmt_log_level() < GMT_LOG_DEBUG)
    return;
  for (size_t i = 0; i < r->n_events; i++) {
    const Gmt__MemEvent *e = r->events[i];
    gmt_debug("pid %u %s device %d 0x%llx %llu kind %s", r->pid, e->free ? "free" : "alloc",
              e->device, (unsigned long long)e->address, (unsigned long long)e->size,
              kind_name(e->kind));
  }
}

void gmt__pmgr_handle_report(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__ReportRequest *r)
{
  const Gmt__ProcessReport *rep = r->process;
  if (!rep || rep->pid == 0) {
    gmt_call_reply_error(call, -EINVAL, "a report names its process's pid");
    return;
  }
  pmgr_proc_t *p = find(pm, rep->pid);
  if (!p) {
    if (refuse_full(pm, call, rep->pid))
      return;
    int rc = add(pm, rep->pid, rep->exe, &p);
    if (rc < 0 && rc != -ESRCH) {
      gmt_call_reply_error(call, rc, "cannot watch pid %u: %s", rep->pid, gmt_strerror(rc));
      return;
    }
    if (rc == -ESRCH)
      gmt_debug("report from pid %u, which is not visible from here; ignored", rep->pid);
  }
  log_events(rep);
  if (p) {
    bool changed = set_exe(p, rep->exe) > 0;
    Gmt__ProcessCounters now;
    gmt_report_counters(rep, &now);
    changed |= !gmt_counters_same(&p->counters, &now);
    p->counters = now;
    if (changed)
      pm->procs_cb(pm, p->pid, false);
  }

  Gmt__ReportReply reply = GMT__REPORT_REPLY__INIT;
  /* Also a state: asked again with each report while a Reserve waits
   * and this process still reports slack. */
  reply.give_back_slack =
      p && gmt_slack_ask(pm->nheld > 0, p->counters.memory_used, p->counters.memory_reserved);
  if (p && pm->prepare) {
    /* A state, not a request: said with every reply while it stands. */
    reply.prepare = true;
    reply.bounded = pm->prepare_bounded;
    reply.host_room = pm->prepare_host_room;
  }
  if (p && p->evict) {
    /* Told once; the scheduler sends it again while it stands. */
    reply.evict = true;
    reply.keep_bytes = p->keep_bytes;
    reply.bounded = p->bounded;
    reply.host_room = p->host_room;
    reply.disk_room = p->disk_room;
    reply.spill_dir = g_spill_dir;
    p->evict = false;
    gmt_debug("pid %u: asked to keep at most %llu bytes on the GPU", p->pid,
              (unsigned long long)p->keep_bytes);
  }
  gmt_call_reply_body(call, GMT__ENVELOPE__BODY_REPORT_REP, &reply);
}

void gmt__pmgr_proc_reports(gmt_pmgr_t *pm, Gmt__ProcessReport *out, Gmt__ProcessReport **ptrs)
{
  size_t i = 0;
  for (pmgr_proc_t *p = pm->procs; p; p = p->next, i++) {
    gmt__process_report__init(&out[i]);
    out[i].pid = p->pid;
    out[i].exe = p->exe ? p->exe : (char *)"";
    out[i].counters = &p->counters;
    ptrs[i] = &out[i];
  }
}

size_t gmt__pmgr_procs_evict(gmt_pmgr_t *pm, Gmt__Evict **evict, size_t n)
{
  size_t known = 0;
  for (pmgr_proc_t *p = pm->procs; p; p = p->next) {
    p->evict = false;
    for (size_t i = 0; i < n; i++) {
      if (evict[i] && evict[i]->pid == p->pid) {
        p->evict = true;
        p->keep_bytes = evict[i]->keep_bytes;
        p->bounded = evict[i]->bounded;
        p->host_room = evict[i]->host_room;
        p->disk_room = evict[i]->disk_room;
        /* One disk tier folder for the node: the latest said. */
        snprintf(g_spill_dir, sizeof g_spill_dir, "%s",
                 evict[i]->spill_dir ? evict[i]->spill_dir : "");
      }
    }
    known += p->evict;
  }
  return known;
}

void gmt__pmgr_proc_reserved(gmt_pmgr_t *pm, uint32_t pid, uint64_t *bytes)
{
  pmgr_proc_t *p = find(pm, pid);
  if (p)
    *bytes = p->counters.memory_reserved;
}

void gmt__pmgr_procs_slack(gmt_pmgr_t *pm, uint32_t pid, uint64_t *used, uint64_t *others_slack)
{
  *used = *others_slack = 0;
  for (pmgr_proc_t *p = pm->procs; p; p = p->next) {
    const Gmt__ProcessCounters *c = &p->counters;
    *used += c->memory_used;
    if (p->pid != pid && c->memory_reserved > c->memory_used)
      *others_slack += c->memory_reserved - c->memory_used;
  }
}

uint64_t gmt__pmgr_procs_reserved(gmt_pmgr_t *pm)
{
  uint64_t sum = 0;
  for (pmgr_proc_t *p = pm->procs; p; p = p->next)
    sum += p->counters.memory_reserved;
  return sum;
}

void gmt__pmgr_procs_close(gmt_pmgr_t *pm)
{
  while (pm->procs) {
    pmgr_proc_t *p = pm->procs;
    pm->procs = p->next;
    uv_close(&p->watch.handle, on_closed);
  }
  pm->nprocs = 0;
}
