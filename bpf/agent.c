/* TracerAgent: from probe events to MemHistory (see agent.h). This file
 * owns what each event means for the history: which kind an allocation
 * is, which site it was made at, which way a copy went. */
#include "agent.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_log.h"
#include "procmaps.h"
#include "symbols.h"

struct gmt_tracer {
  gmt_tracer_opts_t opts;
  char libcuda[4096];
  gmt_probes_t *probes;
  gmt_memhistory_t *mh;
  gmt_procmaps_t *maps;  /* used by the event handler only, */
  gmt_symbolizer_t *sym; /* as is this */
  pthread_t thread;
  bool thread_running;
  atomic_bool stop;
  atomic_bool root_exited;
  bool stopped;
  bool loaded;             /* gmt_tracer_load(): a dump's, never started */
  gmt_trace_meta_t dumped; /* what the dump said, when loaded */
  uint64_t start_ns, end_ns;
  uint64_t dropped_at_stop;
  atomic_uint_fast64_t xid_errors;
  uint64_t failed_calls;
};

_Static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "stack frames are u64");

static int alloc_kind_of(uint32_t fn)
{
  switch (fn) {
  case GMT_TFN_MEM_ALLOC_MANAGED: return GMT_ALLOC_MANAGED;
  case GMT_TFN_HOST_ALLOC:
  case GMT_TFN_HOST_ALLOC_FLAGS:
  case GMT_TFN_HOST_REGISTER: return GMT_ALLOC_HOST_PINNED;
  default: return GMT_ALLOC_DEVICE;
  }
}

static void on_call(gmt_tracer_t *t, const struct gmt_trace_event *e)
{
  gmt_alloc_site_t site;
  /* A failed call changed nothing. Copies and prefetches are sent from
   * their entry (GMT_TCOOKIE_ENTRY_ONLY) with rc 0: a failed one counts. */
  if (e->rc != 0) {
    t->failed_calls++;
    return;
  }
  switch (e->fn) {
  case GMT_TFN_MEM_ALLOC:
  case GMT_TFN_MEM_ALLOC_PITCH:
  case GMT_TFN_MEM_ALLOC_MANAGED:
  case GMT_TFN_MEM_ALLOC_ASYNC:
  case GMT_TFN_MEM_ALLOC_POOL_ASYNC:
  case GMT_TFN_HOST_ALLOC:
  case GMT_TFN_HOST_ALLOC_FLAGS:
    gmt_symbolizer_site(t->sym, e->pid, (const uint64_t *)e->stack, e->nstack, &site);
    gmt_memhistory_alloc(t->mh, e->pid, alloc_kind_of(e->fn), GMT_ORIGIN_CALL, e->addr, e->size,
                         &site, e->ts_ns, e->tid);
    break;
  case GMT_TFN_MEM_MAP:
    gmt_symbolizer_site(t->sym, e->pid, (const uint64_t *)e->stack, e->nstack, &site);
    gmt_memhistory_alloc(t->mh, e->pid, GMT_ALLOC_DEVICE, GMT_ORIGIN_MAP, e->addr, e->size, &site,
                         e->ts_ns, e->tid);
    break;
  case GMT_TFN_MEM_UNMAP: /* the range may hold several mappings, end to end */
    for (uint64_t at = e->addr; at < e->addr + e->size;) {
      gmt_alloc_info_t a;
      if (gmt_memhistory_lookup(t->mh, e->pid, at, &a) != 0 || a.size == 0)
        break;
      gmt_memhistory_free_at(t->mh, e->pid, a.address, e->ts_ns, e->tid);
      at = a.address + a.size;
    }
    break;
  case GMT_TFN_HOST_REGISTER:
    gmt_symbolizer_site(t->sym, e->pid, (const uint64_t *)e->stack, e->nstack, &site);
    gmt_memhistory_pin(t->mh, e->pid, e->addr, e->size, &site, e->ts_ns, e->tid);
    break;
  case GMT_TFN_MEM_FREE:
  case GMT_TFN_MEM_FREE_ASYNC:
  case GMT_TFN_HOST_FREE:
    if (gmt_memhistory_free_at(t->mh, e->pid, e->addr, e->ts_ns, e->tid) != 0)
      gmt_debug("trace: pid %u freed 0x%llx that was not traced", e->pid,
                (unsigned long long)e->addr);
    break;
  case GMT_TFN_HOST_UNREGISTER:
    gmt_memhistory_unpin(t->mh, e->pid, e->addr, e->ts_ns, e->tid);
    break;
  case GMT_TFN_GMT_PINNED: /* the (un)registration just before was gmt's */
    if (gmt_memhistory_pinned_by_gmt(t->mh, e->pid, e->addr, e->size, e->flags != 0, e->ts_ns,
                                     e->tid) != 0)
      gmt_debug("trace: gmt %spinned 0x%llx in pid %u, which was not traced", e->flags ? "" : "un",
                (unsigned long long)e->addr, e->pid);
    break;
  case GMT_TFN_GMT_MOVED: /* gmt moved a whole allocation off the GPU or back */
    if (gmt_memhistory_moved(t->mh, e->pid, e->addr, e->size, e->flags != 0, e->ts_ns, e->dur_ns,
                             e->tid) != 0)
      gmt_debug("trace: gmt moved 0x%llx %s the GPU in pid %u, which was not traced",
                (unsigned long long)e->addr, e->flags ? "off" : "back to", e->pid);
    break;
  case GMT_TFN_MEMCPY_HTOD:
  case GMT_TFN_MEMCPY_DTOH:
  case GMT_TFN_MEMCPY:
  case GMT_TFN_MEMCPY_2D: /* still 2D/3D: the BPF side could not read the */
  case GMT_TFN_MEMCPY_3D: /* descriptor, so no addresses: an unmatched copy */
  {
    int dir = e->fn == GMT_TFN_MEMCPY_HTOD   ? GMT_COPY_H2D
              : e->fn == GMT_TFN_MEMCPY_DTOH ? GMT_COPY_D2H
                                             : GMT_COPY_UNKNOWN;
    gmt_memhistory_copy(t->mh, e->pid, dir, e->addr, e->addr2, e->size, e->ts_ns, e->dur_ns, e->tid,
                        e->stream);
    break;
  }
  case GMT_TFN_PREFETCH:
  case GMT_TFN_PREFETCH_V2:
    gmt_memhistory_prefetch(t->mh, e->pid, e->addr, e->size, e->ts_ns, e->tid, e->stream);
    break;
  default: break;
  }
}

static void on_event(void *arg, const struct gmt_trace_event *e)
{
  gmt_tracer_t *t = arg;
  gmt_alloc_site_t site;
  switch (e->type) {
  case GMT_TEV_CALL: on_call(t, e); break;
  case GMT_TEV_MMAP: {
    /* Frame 0 is in libc's mmap; its caller's return address (addr2) goes
     * next, before what the frame-pointer walk found. */
    uint64_t st[GMT_TRACE_STACK_DEPTH + 1];
    size_t n = 0;
    for (size_t i = 0; i < e->nstack && i < GMT_TRACE_STACK_DEPTH; i++) {
      st[n++] = e->stack[i];
      if (i == 0 && e->addr2)
        st[n++] = e->addr2;
    }
    gmt_symbolizer_site(t->sym, e->pid, st, n, &site);
    gmt_memhistory_alloc(t->mh, e->pid, GMT_ALLOC_HOST_PAGEABLE, GMT_ORIGIN_MMAP, e->addr, e->size,
                         &site, e->ts_ns, e->tid);
    break;
  }
  case GMT_TEV_MUNMAP:
    gmt_memhistory_unmap(t->mh, e->pid, e->addr, e->size, e->ts_ns, e->tid);
    break;
  case GMT_TEV_FAULT:
    gmt_memhistory_fault(t->mh, e->pid, e->addr, e->size, e->ts_ns, e->tid);
    break;
  case GMT_TEV_FORK:
    gmt_procmaps_fork(t->maps, (uint32_t)e->addr, e->pid);
    gmt_procmaps_load(t->maps, e->pid); /* if it is still there, its own */
    gmt_memhistory_process_start(t->mh, e->pid, (uint32_t)e->addr, e->ts_ns);
    gmt_debug("trace: pid %u forked %u", (unsigned)e->addr, e->pid);
    break;
  case GMT_TEV_EXIT:
    /* Faults the kernel counted but had not sent yet still belong to its
     * buffers; then the kernel forgets them. */
    if (t->probes)
      gmt_probes_flush_faults(t->probes, e->pid, true);
    gmt_memhistory_process_exit(t->mh, e->pid, e->rc, e->ts_ns);
    gmt_procmaps_forget(t->maps, e->pid);
    gmt_debug("trace: pid %u exited (%d)", e->pid, e->rc);
    if (t->opts.pid > 0 && e->pid == (uint32_t)t->opts.pid)
      atomic_store(&t->root_exited, true);
    break;
  case GMT_TEV_XID:
    atomic_fetch_add(&t->xid_errors, 1);
    gmt_warn("trace: GPU error Xid %u: %.*s", e->flags, GMT_TRACE_TEXT_LEN, e->text);
    break;
  case GMT_TEV_RECLAIM:
    gmt_memhistory_process_event(t->mh, e->pid, GMT_PROC_RECLAIM, 1, e->dur_ns);
    break;
  case GMT_TEV_COMPACT:
    gmt_memhistory_process_event(t->mh, e->pid, GMT_PROC_COMPACT, 1, e->dur_ns);
    break;
  case GMT_TEV_PCFAULT:
    gmt_memhistory_process_event(t->mh, e->pid, GMT_PROC_PCFAULTS, e->size, 0);
    break;
  default: break;
  }
}

int gmt_tracer_new(gmt_tracer_t **out, const gmt_tracer_opts_t *o)
{
  gmt_tracer_t *t = calloc(1, sizeof *t);
  if (!t)
    return -ENOMEM;
  t->opts = *o;
  t->opts.libcuda = NULL;
  if (o->libcuda)
    snprintf(t->libcuda, sizeof t->libcuda, "%s", o->libcuda);
  int rc = gmt_memhistory_new(&t->mh);
  if (rc == 0) {
    gmt_memhistory_set_max_events(t->mh, o->max_events);
    gmt_memhistory_set_max_ended(t->mh, o->max_ended);
    rc = gmt_procmaps_new(&t->maps);
  }
  if (rc == 0)
    rc = gmt_symbolizer_new(&t->sym, t->maps);
  if (rc == 0) {
    /* A job traced after it made its buffers copies to and from memory we
     * never saw allocated: its copies find those buffers. */
    gmt_attach_opts_t ao = {.host_region = gmt_procmaps_host_region,
                            .arg = t->maps,
                            .min_host_bytes =
                                o->min_mmap_bytes ? o->min_mmap_bytes : GMT_TRACE_MIN_MMAP_BYTES};
    gmt_memhistory_set_attach(t->mh, &ao);
  }
  if (rc != 0) {
    gmt_tracer_free(t);
    return rc;
  }
  *out = t;
  return 0;
}

/* pid runs under gmt's hook (preloaded: mapped from its start): its marker
 * is probed, so that gmt's own pins are told from the program's. Without
 * the hook there is nothing to probe; a failure costs only that. */
static void probe_hook(gmt_tracer_t *t, uint32_t pid)
{
  char path[4096], err[512];
  int rc = gmt_probes_find_hook((int)pid, path, sizeof path);
  if (rc != 0) {
    if (rc != -ENOENT)
      gmt_debug("trace: looking for gmt's hook in pid %u: %s", pid, strerror(-rc));
    return;
  }
  if ((rc = gmt_probes_attach_hook(t->probes, path, err, sizeof err)) != 0)
    gmt_warn("trace: %s; gmt's pins in pid %u look like the program's own", err, pid);
}

static void *poll_thread(void *arg)
{
  gmt_tracer_t *t = arg;
  while (!atomic_load(&t->stop)) {
    int rc = gmt_probes_poll(t->probes, GMT_TRACE_POLL_MS);
    if (rc < 0) {
      gmt_error("trace: polling the ring buffer: %s", strerror(-rc));
      break;
    }
  }
  return NULL;
}

int gmt_tracer_start(gmt_tracer_t *t, char *err, size_t errlen)
{
  int rc;
  if (t->loaded) {
    snprintf(err, errlen, "a trace read from a dump cannot be started");
    return -EINVAL;
  }
  if (t->opts.pid > 0 && !t->libcuda[0]) {
    rc = gmt_probes_find_libcuda(t->opts.pid, t->libcuda, sizeof t->libcuda);
    if (rc != 0) {
      snprintf(err, errlen,
               rc == -ESRCH ? "no process with pid %d" : "pid %d has not mapped libcuda.so.1",
               t->opts.pid);
      return rc;
    }
  }
  gmt_probes_opts_t po = {.pid = t->opts.pid,
                          .follow_forks = t->opts.follow_forks,
                          .min_mmap_bytes = t->opts.min_mmap_bytes,
                          .fault_sample_ns = t->opts.fault_sample_ns,
                          .bpf_stats = t->opts.bpf_stats,
                          .cb = on_event,
                          .arg = t};
  t->start_ns = gmt_now_ns();
  if (t->opts.pid > 0) {
    /* Its maps now, while it is surely there: sites still resolve if it
     * exits before its last events are read. */
    gmt_procmaps_load(t->maps, (uint32_t)t->opts.pid);
    gmt_memhistory_process_start(t->mh, (uint32_t)t->opts.pid, 0, t->start_ns);
  }
  if ((rc = gmt_probes_open(&t->probes, &po, err, errlen)) != 0)
    return rc;
  if (t->libcuda[0] && (rc = gmt_probes_attach_libcuda(t->probes, t->libcuda, err, errlen)) != 0)
    goto fail;
  if (t->opts.pid > 0)
    probe_hook(t, (uint32_t)t->opts.pid);
  if (t->opts.own_thread) {
    atomic_store(&t->stop, false);
    if ((rc = -pthread_create(&t->thread, NULL, poll_thread, t)) != 0) {
      snprintf(err, errlen, "starting the tracer's thread: %s", strerror(-rc));
      goto fail;
    }
    t->thread_running = true;
  }
  return 0;
fail:
  gmt_probes_free(t->probes);
  t->probes = NULL;
  return rc;
}

int gmt_tracer_poll(gmt_tracer_t *t, int timeout_ms)
{
  return t->probes ? gmt_probes_poll(t->probes, timeout_ms) : -EINVAL;
}

int gmt_tracer_fd(gmt_tracer_t *t)
{
  return t->probes ? gmt_probes_fd(t->probes) : -EINVAL;
}

void gmt_tracer_stop(gmt_tracer_t *t)
{
  if (!t->probes || t->stopped)
    return;
  if (t->thread_running) {
    atomic_store(&t->stop, true);
    pthread_join(t->thread, NULL);
    t->thread_running = false;
  }
  /* What the kernel sent before we stopped listening, then what it only
   * counted. */
  while (gmt_probes_poll(t->probes, 0) > 0) {
  }
  gmt_probes_flush_faults(t->probes, 0, false);
  t->dropped_at_stop = gmt_probes_dropped(t->probes);
  t->end_ns = gmt_now_ns();
  t->stopped = true;
  gmt_probes_free(t->probes);
  t->probes = NULL;
}

void gmt_tracer_free(gmt_tracer_t *t)
{
  if (!t)
    return;
  gmt_tracer_stop(t);
  gmt_memhistory_free(t->mh);
  gmt_symbolizer_free(t->sym);
  gmt_procmaps_free(t->maps);
  free(t);
}

int gmt_tracer_attach_libcuda(gmt_tracer_t *t, const char *path, char *err, size_t errlen)
{
  if (!t->probes) {
    snprintf(err, errlen, "attaching to %s: the tracer is not running", path);
    return -EINVAL;
  }
  return gmt_probes_attach_libcuda(t->probes, path, err, errlen);
}

int gmt_tracer_add_pid(gmt_tracer_t *t, uint32_t pid)
{
  if (!t->probes)
    return -EINVAL;
  /* As at start: its maps while it is surely there. */
  gmt_procmaps_load(t->maps, pid);
  gmt_trace_process_t p;
  if (gmt_memhistory_process_info(t->mh, pid, &p) != 0 || p.exited)
    gmt_memhistory_process_start(t->mh, pid, 0, gmt_now_ns());
  int rc = gmt_probes_add_pid(t->probes, pid);
  if (rc == 0)
    probe_hook(t, pid);
  return rc;
}

void gmt_tracer_pid_gone(gmt_tracer_t *t, uint32_t pid)
{
  if (t->probes) {
    gmt_probes_remove_pid(t->probes, pid);
    gmt_probes_flush_faults(t->probes, pid, true);
  }
  gmt_trace_process_t p;
  if (gmt_memhistory_process_info(t->mh, pid, &p) == 0 && !p.exited)
    gmt_memhistory_process_exit(t->mh, pid, 0, gmt_now_ns());
  gmt_procmaps_forget(t->maps, pid);
}

void gmt_tracer_sync(gmt_tracer_t *t)
{
  if (!t->probes || t->thread_running)
    return; /* the thread takes events in; two readers of one ring would race */
  while (gmt_probes_poll(t->probes, 0) > 0) {
  }
  gmt_probes_flush_faults(t->probes, 0, false);
}

void gmt_tracer_forget_pid(gmt_tracer_t *t, uint32_t pid)
{
  if (t->probes) {
    gmt_probes_remove_pid(t->probes, pid);
    gmt_probes_flush_faults(t->probes, pid, true);
  }
  gmt_procmaps_forget(t->maps, pid);
  gmt_memhistory_forget_process(t->mh, pid);
}

bool gmt_tracer_root_exited(gmt_tracer_t *t)
{
  return atomic_load(&t->root_exited);
}

uint64_t gmt_tracer_dropped(gmt_tracer_t *t)
{
  return t->probes ? gmt_probes_dropped(t->probes) : t->dropped_at_stop;
}

int gmt_tracer_prog_stats(gmt_tracer_t *t, gmt_probes_prog_stat_t *out, size_t max)
{
  return t->probes ? gmt_probes_prog_stats(t->probes, out, max) : -ENOTSUP;
}

static const gmt_probes_info_t no_info;
const gmt_probes_info_t *gmt_tracer_probes_info(gmt_tracer_t *t)
{
  return t->probes ? gmt_probes_info(t->probes) : &no_info;
}

/* ---- the history ---- */

int gmt_tracer_processes(gmt_tracer_t *t, gmt_trace_process_t **out, size_t *n)
{
  gmt_memhistory_rdlock(t->mh);
  size_t np = gmt_memhistory_nprocesses(t->mh);
  gmt_trace_process_t *all = np ? malloc(np * sizeof *all) : NULL;
  for (size_t i = 0; all && i < np; i++)
    all[i] = *gmt_memhistory_process(t->mh, i);
  gmt_memhistory_unlock(t->mh);
  if (np && !all)
    return -ENOMEM;
  *out = all;
  *n = np;
  return 0;
}

int gmt_tracer_process_info(gmt_tracer_t *t, uint32_t pid, gmt_trace_process_t *out)
{
  return gmt_memhistory_process_info(t->mh, pid, out);
}

void gmt_tracer_spots(gmt_tracer_t *t, const uint32_t *pids, size_t npids, size_t k,
                      gmt_alloc_info_t *hot, size_t *nhot, gmt_alloc_info_t *cold, size_t *ncold)
{
  if (pids) {
    *nhot = gmt_memhistory_hotspots_of(t->mh, pids, npids, k, hot);
    *ncold = gmt_memhistory_coldspots_of(t->mh, pids, npids, k, cold);
  } else {
    *nhot = gmt_memhistory_hotspots(t->mh, k, hot);
    *ncold = gmt_memhistory_coldspots(t->mh, k, cold);
  }
}

size_t gmt_tracer_most_moved(gmt_tracer_t *t, size_t k, gmt_alloc_info_t *out)
{
  return gmt_memhistory_most_moved(t->mh, k, out);
}

void gmt_tracer_totals(gmt_tracer_t *t, gmt_memhistory_totals_t *tot)
{
  gmt_memhistory_totals(t->mh, tot);
}

void gmt_tracer_meta(gmt_tracer_t *t, gmt_trace_meta_t *meta)
{
  if (t->loaded) {
    *meta = t->dumped;
    return;
  }
  memset(meta, 0, sizeof *meta);
  meta->root_pid = t->opts.pid > 0 ? (uint32_t)t->opts.pid : 0;
  meta->start_ns = t->start_ns;
  meta->end_ns = t->end_ns ? t->end_ns : gmt_now_ns();
  meta->dropped_events = gmt_tracer_dropped(t);
  meta->xid_errors = atomic_load(&t->xid_errors);
}

int gmt_tracer_dump(gmt_tracer_t *t, const char *path)
{
  gmt_trace_meta_t meta;
  gmt_tracer_meta(t, &meta);
  return gmt_trace_dump(t->mh, &meta, path);
}

int gmt_tracer_load(gmt_tracer_t **out, const char *path)
{
  gmt_tracer_t *t = calloc(1, sizeof *t);
  if (!t)
    return -ENOMEM;
  int rc = gmt_trace_load(path, &t->mh, &t->dumped);
  if (rc != 0) {
    free(t);
    return rc;
  }
  t->loaded = true;
  *out = t;
  return 0;
}
