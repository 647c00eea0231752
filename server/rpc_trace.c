/* The node's eBPF tracer inside gmt-schd: one TracerAgent (bpf/agent.h)
 * with no process of its own, polled on the loop through a uv_poll on its
 * ring buffer, to which every process the pod managers report is added.
 * This file owns which processes are traced for which pod, when a
 * libcuda.so.1 gets its probes, how long the histories of processes that
 * are gone are kept, and the TraceSpots RPC.
 *
 * - A reported pid joins at once (the kernel side follows its forks from
 *   then on); its libcuda, found through /proc/PID/maps, is probed once per
 *   file, for every process that maps it. A process that has not mapped
 *   one yet is looked at again on the next heartbeat or sweep.
 * - Children the kernel followed through fork belong to their parent's
 *   pod: the sweep copies them from the history's process table.
 * - A process is gone when its exit was traced, or /proc no longer shows
 *   it (or shows another process under its pid). Its histories stay,
 *   inactive, for KEEP_GONE_MS (GMT_TRACE_KEEP_GONE_MS in the environment
 *   overrides it, for tests), and at most MAX_GONE such processes are
 *   kept (oldest dropped first); a reported pid that turns out to be a new
 *   process drops the old one's at once.
 *
 * Pids are those of the node (the host's pid namespace): a pod manager
 * in a PID namespace of its own reports its processes by that namespace's
 * pids, which rpc.c looks up on the node first (nspid.h); a process not
 * found there is not traced.
 */
#include "rpc_trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_procstat.h"
#include "reply.h"

#ifdef GMT_HAVE_TRACE
#include "agent.h"
#endif

#define DEFAULT_K 10
#define MAX_K 1000
#define SWEEP_MS 1000
#define KEEP_GONE_MS (10 * 60 * 1000)
#define MAX_GONE 256
/* Events kept per allocation: an always-on tracer keeps the counters
 * exact and only the recent story of each buffer. */
#define MAX_EVENTS 1000
/* Ended histories kept: a process that allocates and frees for hours
 * would otherwise grow the daemon by about 1 KiB per allocation it ever
 * made (605k alloc/free pairs took it to 587 MB). 32768 is about 32 MiB
 * for buffers with few copies; the oldest-ended go first, their copies
 * still counted. */
#define MAX_ENDED 32768

typedef struct tproc {
  uint32_t pid;
  uint32_t parent;    /* 0: the pod reported it; else the traced parent */
  uint64_t starttime; /* /proc/PID/stat: tells a reused pid apart */
  char pod[GMT_POD_NAME_MAX + 1];
  bool probed; /* its libcuda is probed */
  bool failed; /* probing its libcuda failed: said once, not retried */
  bool gone;
  uint64_t gone_ms; /* uv_now() when seen gone */
} tproc_t;

struct gmt_trace {
  gmt_schd_t *s;
  char why_off[576]; /* set when tracing is off: the error and a hint */
#ifdef GMT_HAVE_TRACE
  gmt_tracer_t *tracer;
  uv_poll_t poll;
  uv_timer_t sweep;
  int open_handles; /* freed when the last one has closed */
  uint64_t keep_gone_ms;
  bool poll_failed;
  tproc_t *procs;
  size_t nprocs, capprocs;
#endif
};

static void reply_off(gmt_call_t *call, const struct gmt_trace *tr)
{
  gmt_call_reply_error(call, -ENOTSUP, "tracing is off: %s",
                       tr && tr->why_off[0] ? tr->why_off : "gmt-schd did not start it");
}

#ifndef GMT_HAVE_TRACE

int gmt__trace_init(gmt_schd_t *s, bool enabled)
{
  struct gmt_trace *tr = calloc(1, sizeof *tr);
  if (!tr)
    return -ENOMEM;
  tr->s = s;
  snprintf(tr->why_off, sizeof tr->why_off, "%s",
           enabled ? "gmt-schd was built without the eBPF tracer (no kernel BTF at build time)"
                   : "turned off (--no-trace)");
  gmt_warn("tracing is off: %s", tr->why_off);
  s->trace = tr;
  return 0;
}

void gmt__trace_close(gmt_schd_t *s)
{
  free(s->trace);
  s->trace = NULL;
}

void gmt__trace_pod_changed(gmt_schd_t *s, const gmt_pod_t *pod)
{
  (void)s;
  (void)pod;
}

bool gmt__trace_drops(gmt_schd_t *s, uint64_t *events, uint64_t *histories)
{
  (void)s;
  *events = *histories = 0;
  return false;
}

void gmt__rpc_trace_spots(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req)
{
  (void)req;
  reply_off(call, s->trace);
}

#else /* GMT_HAVE_TRACE */

/* ---- processes ---- */

/* Field 22 of /proc/PID/stat (start time in clock ticks since boot), or
 * -ESRCH when no live process has this pid (gone, or a zombie). */
static int proc_starttime(uint32_t pid, uint64_t *out)
{
  char buf[1024];
  const char *p = gmt_procstat_fields(pid, buf, sizeof buf); /* field 3, the state */
  if (!p || p[0] == 'Z' || p[0] == 'X')
    return -ESRCH;
  for (int field = 3; field < 22; field++) {
    p = strchr(p, ' ');
    if (!p)
      return -ESRCH;
    p++;
  }
  *out = strtoull(p, NULL, 10);
  return 0;
}

static tproc_t *find(struct gmt_trace *tr, uint32_t pid)
{
  for (size_t i = 0; i < tr->nprocs; i++)
    if (tr->procs[i].pid == pid)
      return &tr->procs[i];
  return NULL;
}

static tproc_t *add(struct gmt_trace *tr, uint32_t pid, uint32_t parent, const char *pod,
                    uint64_t starttime)
{
  if (tr->nprocs == tr->capprocs) {
    size_t ncap = tr->capprocs ? tr->capprocs * 2 : 16;
    tproc_t *n = realloc(tr->procs, ncap * sizeof *n);
    if (!n)
      return NULL;
    tr->procs = n;
    tr->capprocs = ncap;
  }
  tproc_t *p = &tr->procs[tr->nprocs++];
  memset(p, 0, sizeof *p);
  p->pid = pid;
  p->parent = parent;
  p->starttime = starttime;
  snprintf(p->pod, sizeof p->pod, "%s", pod);
  return p;
}

/* Drops p and its histories (p is invalid afterwards). */
static void forget(struct gmt_trace *tr, tproc_t *p)
{
  gmt_debug("trace: forgetting pid %u of pod '%s'", p->pid, p->pod);
  gmt_tracer_forget_pid(tr->tracer, p->pid);
  *p = tr->procs[--tr->nprocs];
}

/* Probes the libcuda p mapped, unless it has not mapped one yet. */
static void try_probe(struct gmt_trace *tr, tproc_t *p)
{
  if (p->probed || p->failed || p->gone)
    return;
  char path[4096], err[512];
  int rc = gmt_probes_find_libcuda((int)p->pid, path, sizeof path);
  if (rc == -ENOENT || rc == -ESRCH)
    return; /* not yet, or gone: the sweep sees which */
  if (rc == 0)
    rc = gmt_tracer_attach_libcuda(tr->tracer, path, err, sizeof err);
  else
    snprintf(err, sizeof err, "reading /proc/%u/maps: %s", p->pid, strerror(-rc));
  if (rc != 0) {
    p->failed = true;
    gmt_warn("trace: pid %u of pod '%s' is not traced: %s", p->pid, p->pod, err);
    return;
  }
  p->probed = true;
  gmt_debug("trace: pid %u of pod '%s' uses %s", p->pid, p->pod, path);
}

/* A process the pod reports. */
static void track(struct gmt_trace *tr, const char *pod, uint32_t pid)
{
  tproc_t *p = find(tr, pid);
  if (p && !p->gone) {
    if (strcmp(p->pod, pod) != 0) { /* it moved (a reload, or a second report) */
      gmt_debug("trace: pid %u now belongs to pod '%s' (was '%s')", pid, pod, p->pod);
      snprintf(p->pod, sizeof p->pod, "%s", pod);
    }
    try_probe(tr, p);
    return;
  }
  uint64_t st;
  if (proc_starttime(pid, &st) != 0)
    return; /* gone already: nothing to trace */
  if (p) {
    if (p->starttime == st)
      return;
    forget(tr, p); /* a new process under a pid we kept histories for */
  }
  if (!(p = add(tr, pid, 0, pod, st))) {
    gmt_warn("trace: pid %u of pod '%s' is not traced: out of memory", pid, pod);
    return;
  }
  int rc = gmt_tracer_add_pid(tr->tracer, pid);
  if (rc != 0) {
    p->failed = true;
    gmt_warn("trace: pid %u of pod '%s' is not traced: %s", pid, pod, gmt_strerror(rc));
    return;
  }
  gmt_debug("trace: tracing pid %u of pod '%s'", pid, pod);
  try_probe(tr, p);
}

static void mark_gone(struct gmt_trace *tr, tproc_t *p, bool exit_traced)
{
  p->gone = true;
  p->gone_ms = uv_now(tr->s->loop);
  if (!exit_traced)
    gmt_tracer_pid_gone(tr->tracer, p->pid);
  gmt_debug("trace: pid %u of pod '%s' is gone", p->pid, p->pod);
}

/* Children the kernel followed through fork join their parent's pod. */
static void adopt_children(struct gmt_trace *tr)
{
  gmt_trace_process_t *all;
  size_t np;
  if (gmt_tracer_processes(tr->tracer, &all, &np) != 0)
    return;
  /* In the order they were forked: a grandchild finds its parent. */
  for (size_t i = 0; i < np; i++) {
    const gmt_trace_process_t *kid = &all[i];
    const tproc_t *parent = kid->parent ? find(tr, kid->parent) : NULL;
    uint64_t st = 0;
    if (!parent || find(tr, kid->pid)) /* ours already, or a pid the history holds twice */
      continue;
    bool alive = !kid->exited && proc_starttime(kid->pid, &st) == 0;
    char pod[GMT_POD_NAME_MAX + 1];
    snprintf(pod, sizeof pod, "%s", parent->pod); /* add() may move the table */
    tproc_t *p = add(tr, kid->pid, kid->parent, pod, st);
    if (!p)
      break;
    gmt_debug("trace: pid %u, forked by %u, joins pod '%s'", p->pid, p->parent, p->pod);
    if (!alive)
      mark_gone(tr, p, kid->exited);
  }
  free(all);
}

static int by_gone_ms(const void *a, const void *b)
{
  const tproc_t *x = *(tproc_t *const *)a, *y = *(tproc_t *const *)b;
  return x->gone_ms < y->gone_ms ? -1 : x->gone_ms > y->gone_ms;
}

/* Who is gone, probes for processes that mapped libcuda since, and the
 * bound on what gone processes leave. */
static void sweep(struct gmt_trace *tr)
{
  uint64_t now = uv_now(tr->s->loop);
  gmt_tracer_sync(tr->tracer); /* exits still in the ring buffer first */
  adopt_children(tr);

  size_t ngone = 0;
  for (size_t i = 0; i < tr->nprocs;) {
    tproc_t *p = &tr->procs[i];
    if (!p->gone) {
      gmt_trace_process_t tp;
      uint64_t st;
      if (gmt_tracer_process_info(tr->tracer, p->pid, &tp) == 0 && tp.exited)
        mark_gone(tr, p, true);
      else if (proc_starttime(p->pid, &st) != 0 || st != p->starttime)
        mark_gone(tr, p, false);
      else
        try_probe(tr, p);
    }
    if (p->gone && now - p->gone_ms > tr->keep_gone_ms) {
      forget(tr, p); /* the last entry moves into i: look at i again */
      continue;
    }
    ngone += p->gone;
    i++;
  }
  if (ngone <= MAX_GONE)
    return;
  tproc_t **gone = malloc(ngone * sizeof *gone);
  uint32_t *pids = malloc((ngone - MAX_GONE) * sizeof *pids);
  if (gone && pids) {
    size_t n = 0;
    for (size_t i = 0; i < tr->nprocs; i++)
      if (tr->procs[i].gone)
        gone[n++] = &tr->procs[i];
    qsort(gone, n, sizeof *gone, by_gone_ms);
    for (size_t i = 0; i < ngone - MAX_GONE; i++)
      pids[i] = gone[i]->pid;
    for (size_t i = 0; i < ngone - MAX_GONE; i++) /* forget() moves entries: by pid */
      forget(tr, find(tr, pids[i]));
  }
  free(gone);
  free(pids);
}

/* ---- the loop's handles ---- */

static void on_poll(uv_poll_t *h, int status, int events)
{
  struct gmt_trace *tr = h->data;
  (void)events;
  int rc = status < 0 ? status : gmt_tracer_poll(tr->tracer, 0);
  if (rc < 0 && !tr->poll_failed) {
    tr->poll_failed = true; /* once: this would repeat on every wakeup */
    gmt_error("trace: reading the ring buffer: %s",
              status < 0 ? uv_strerror(status) : gmt_strerror(rc));
  }
}

static void on_sweep(uv_timer_t *h)
{
  sweep(h->data);
}

static void trace_free(struct gmt_trace *tr)
{
  gmt_tracer_free(tr->tracer);
  free(tr->procs);
  free(tr);
}

static void on_closed(uv_handle_t *h)
{
  struct gmt_trace *tr = h->data;
  if (--tr->open_handles == 0)
    trace_free(tr);
}

/* Why this process cannot trace, before trying: the common cases get a
 * plain reason instead of libbpf's. */
static bool cannot_trace(char *why, size_t len)
{
  if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
    snprintf(why, len, "this kernel has no BTF (/sys/kernel/btf/vmlinux: %s)", strerror(errno));
    return true;
  }
  return false;
}

int gmt__trace_init(gmt_schd_t *s, bool enabled)
{
  struct gmt_trace *tr = calloc(1, sizeof *tr);
  if (!tr)
    return -ENOMEM;
  tr->s = s;
  s->trace = tr;
  if (!enabled) {
    snprintf(tr->why_off, sizeof tr->why_off, "turned off (--no-trace)");
    gmt_warn("tracing is off: %s", tr->why_off);
    return 0;
  }
  if (cannot_trace(tr->why_off, sizeof tr->why_off)) {
    gmt_warn("tracing is off: %s", tr->why_off);
    return 0;
  }

  tr->keep_gone_ms = KEEP_GONE_MS;
  const char *keep = getenv("GMT_TRACE_KEEP_GONE_MS");
  if (keep && *keep) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(keep, &end, 10);
    if (errno || *end || keep[0] < '0' || keep[0] > '9')
      gmt_warn("GMT_TRACE_KEEP_GONE_MS='%s' is not a number of milliseconds; using %d", keep,
               KEEP_GONE_MS);
    else
      tr->keep_gone_ms = v;
  }

  gmt_tracer_opts_t o = {.pid = 0,
                         .follow_forks = true,
                         .fault_sample_ns = -1,
                         .own_thread = false,
                         .max_events = MAX_EVENTS,
                         .max_ended = MAX_ENDED};
  char err[512] = "";
  int rc = gmt_tracer_new(&tr->tracer, &o);
  if (rc != 0) {
    free(tr);
    s->trace = NULL;
    return rc;
  }
  if ((rc = gmt_tracer_start(tr->tracer, err, sizeof err)) != 0) {
    snprintf(tr->why_off, sizeof tr->why_off, "%s%s", err,
             rc == -EPERM || rc == -EACCES ? " (needs root, or CAP_BPF and CAP_PERFMON)" : "");
    gmt_warn("tracing is off: %s", tr->why_off);
    gmt_tracer_free(tr->tracer);
    tr->tracer = NULL;
    return 0;
  }
  int fd = gmt_tracer_fd(tr->tracer);
  if ((rc = uv_poll_init(s->loop, &tr->poll, fd)) < 0) {
    snprintf(tr->why_off, sizeof tr->why_off, "polling the ring buffer: %s", uv_strerror(rc));
    gmt_warn("tracing is off: %s", tr->why_off);
    gmt_tracer_free(tr->tracer);
    tr->tracer = NULL;
    return 0;
  }
  uv_timer_init(s->loop, &tr->sweep);
  tr->poll.data = tr->sweep.data = tr;
  tr->open_handles = 2;
  uv_poll_start(&tr->poll, UV_READABLE, on_poll);
  uv_timer_start(&tr->sweep, on_sweep, SWEEP_MS, SWEEP_MS);

  const gmt_probes_info_t *pi = gmt_tracer_probes_info(tr->tracer);
  gmt_info("tracing: %d kernel tracepoints attached%s%s; each pod's processes join as it "
           "reports them",
           pi->kernel_attached, pi->kernel_skipped[0] ? ", left out: " : "", pi->kernel_skipped);
  return 0;
}

void gmt__trace_close(gmt_schd_t *s)
{
  struct gmt_trace *tr = s->trace;
  s->trace = NULL;
  if (!tr)
    return;
  if (!tr->tracer) {
    free(tr);
    return;
  }
  /* Detach now: the probes cost every CUDA process on the node. */
  gmt_tracer_stop(tr->tracer);
  uv_close((uv_handle_t *)&tr->poll, on_closed);
  uv_close((uv_handle_t *)&tr->sweep, on_closed);
}

void gmt__trace_pod_changed(gmt_schd_t *s, const gmt_pod_t *pod)
{
  struct gmt_trace *tr = s->trace;
  if (!tr || !tr->tracer)
    return;
  for (size_t i = 0; i < pod->nprocs; i++) {
    uint32_t node = gmt_proc_node_pid(&pod->procs[i]);
    if (node)
      track(tr, pod->cfg.name, node);
  }
}

bool gmt__trace_drops(gmt_schd_t *s, uint64_t *events, uint64_t *histories)
{
  struct gmt_trace *tr = s->trace;
  *events = *histories = 0;
  if (!tr || !tr->tracer)
    return false;
  gmt_memhistory_totals_t tot;
  gmt_tracer_totals(tr->tracer, &tot);
  *events = gmt_tracer_dropped(tr->tracer);
  *histories = tot.dropped_histories;
  return true;
}

/* ---- TraceSpots ---- */

static int cmp_u32(const void *a, const void *b)
{
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

void gmt__rpc_trace_spots(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req)
{
  const Gmt__TraceSpotsRequest *r = req->trace_spots_req;
  struct gmt_trace *tr = s->trace;
  if (!tr || !tr->tracer) {
    reply_off(call, tr);
    return;
  }
  gmt_pod_t *pod = gmt_pods_find(s->pods, r->pod);
  if (!pod) {
    gmt__reply_nopod(call, s->cfg, r->pod);
    return;
  }
  size_t k = r->k ? r->k : DEFAULT_K;
  if (k > MAX_K)
    k = MAX_K;
  gmt_debug("TraceSpots pod '%s' k %zu", pod->cfg.name, k);
  /* What the pod reported last, and everything the kernel has sent. */
  gmt__trace_pod_changed(s, pod);
  sweep(tr);

  size_t npids = 0, nhot = 0, ncold = 0;
  uint32_t *pids = malloc((tr->nprocs + 1) * sizeof *pids);
  gmt_alloc_info_t *hot = calloc(k ? k : 1, sizeof *hot), *cold = calloc(k ? k : 1, sizeof *cold);
  Gmt__TraceAllocation *allocs = calloc(2 * k + 1, sizeof *allocs);
  Gmt__TraceAllocation **allocp = calloc(2 * k + 1, sizeof *allocp);
  Gmt__TraceSite *sites = calloc(2 * k + 1, sizeof *sites);
  Gmt__TraceSpotsProcess *procs = calloc(tr->nprocs + 1, sizeof *procs);
  Gmt__TraceSpotsProcess **procp = calloc(tr->nprocs + 1, sizeof *procp);
  if (!pids || !hot || !cold || !allocs || !allocp || !sites || !procs || !procp) {
    gmt_call_reply_error(call, -ENOMEM, "out of memory building the trace spots");
    goto out;
  }

  Gmt__TraceSpotsReply body = GMT__TRACE_SPOTS_REPLY__INIT;
  Gmt__TraceCopyTotals copies = GMT__TRACE_COPY_TOTALS__INIT;
  for (size_t i = 0; i < tr->nprocs; i++)
    if (!strcmp(tr->procs[i].pod, pod->cfg.name))
      pids[npids++] = tr->procs[i].pid;
  qsort(pids, npids, sizeof *pids, cmp_u32);
  for (size_t i = 0; i < npids; i++) {
    const tproc_t *p = find(tr, pids[i]);
    gmt_trace_process_t tp = {0};
    gmt_tracer_process_info(tr->tracer, p->pid, &tp);
    gmt__trace_spots_process__init(&procs[i]);
    procs[i].pid = p->pid;
    procs[i].parent = p->parent;
    procs[i].active = !p->gone;
    procs[i].probed = p->probed;
    procs[i].allocations = tp.allocations;
    procs[i].pagecache_faults = tp.kernel.pagecache_faults;
    procs[i].reclaim_stalls = tp.kernel.reclaim_stalls;
    procs[i].reclaim_ns = tp.kernel.reclaim_ns;
    procs[i].compact_stalls = tp.kernel.compact_stalls;
    procs[i].compact_ns = tp.kernel.compact_ns;
    procp[i] = &procs[i];
    copies.h2d_count += tp.h2d_count;
    copies.h2d_bytes += tp.h2d_bytes;
    copies.d2h_count += tp.d2h_count;
    copies.d2h_bytes += tp.d2h_bytes;
    copies.d2d_count += tp.d2d_count;
    copies.d2d_bytes += tp.d2d_bytes;
    body.faults += tp.faults;
    body.allocations += tp.allocations;
  }
  if (npids)
    gmt_tracer_spots(tr->tracer, pids, npids, k, hot, &nhot, cold, &ncold);
  for (size_t i = 0; i < nhot + ncold; i++) {
    const gmt_alloc_info_t *in = i < nhot ? &hot[i] : &cold[i - nhot];
    gmt_trace_alloc_to_pb(in, &allocs[i], &sites[i]);
    allocp[i] = &allocs[i];
  }
  body.n_hot = nhot;
  body.hot = allocp;
  body.n_cold = ncold;
  body.cold = allocp + nhot;
  body.dropped_events = gmt_tracer_dropped(tr->tracer);
  gmt_memhistory_totals_t tot;
  gmt_tracer_totals(tr->tracer, &tot);
  body.dropped_histories = tot.dropped_histories;
  body.copies = &copies;
  body.n_processes = npids;
  body.processes = procp;

  gmt_call_reply_body(call, GMT__ENVELOPE__BODY_TRACE_SPOTS_REP, &body);

out:
  free(pids);
  free(hot);
  free(cold);
  free(allocs);
  free(allocp);
  free(sites);
  free(procs);
  free(procp);
}

#endif /* GMT_HAVE_TRACE */
