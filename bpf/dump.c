/* Dumps of a MemHistory to JSON and to .gmtz, and loading either back.
 * Both carry every field of every history, so a dump loads into the same
 * history it came from (ids, sites, counters, events, processes). */
#include "dump.h"

#include <errno.h>
#include <limits.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "chrome_trace.h"
#include "gmt.pb-c.h"
#include "gmt_error.h"

static const char GMTZ_MAGIC[4] = {'G', 'M', 'T', 'Z'};
/* The most a .gmtz may unpack to. */
#define GMTZ_MAX_PACKED (1ull << 34)

static bool ends_with(const char *s, const char *suffix)
{
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

int gmt_trace_format_of(const char *path)
{
  if (ends_with(path, ".trace.json"))
    return GMT_DUMP_CHROME;
  if (ends_with(path, ".json"))
    return GMT_DUMP_JSON;
  if (ends_with(path, ".gmtz"))
    return GMT_DUMP_GMTZ;
  return -EINVAL;
}

int gmt_trace_dump(gmt_memhistory_t *mh, const gmt_trace_meta_t *meta, const char *path)
{
  switch (gmt_trace_format_of(path)) {
  case GMT_DUMP_CHROME: return gmt_chrome_trace_write(mh, meta, path);
  case GMT_DUMP_JSON: return gmt_trace_dump_json(mh, meta, path);
  case GMT_DUMP_GMTZ: return gmt_trace_dump_gmtz(mh, meta, path);
  default: return -EINVAL;
  }
}

/* ---- JSON ---- */

static void put_u64(json_object *o, const char *k, uint64_t v)
{
  json_object_object_add(o, k, json_object_new_uint64(v));
}
static void put_str(json_object *o, const char *k, const char *v)
{
  json_object_object_add(o, k, json_object_new_string(v));
}
static void put_bool(json_object *o, const char *k, bool v)
{
  json_object_object_add(o, k, json_object_new_boolean(v));
}

json_object *gmt_trace_alloc_json(const gmt_alloc_info_t *in)
{
  json_object *o = json_object_new_object();
  char buf[GMT_SITE_MODULE_LEN + GMT_SITE_FUNC_LEN + 32];
  if (!o)
    return NULL;
  put_u64(o, "id", in->id);
  put_u64(o, "pid", in->pid);
  put_str(o, "kind", gmt_alloc_kind_name(in->kind));
  put_str(o, "origin", gmt_alloc_origin_name(in->origin));
  put_bool(o, "registered", in->registered);
  put_bool(o, "pinned_by_gmt", in->pinned_by_gmt);
  put_u64(o, "address", in->address);
  snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)in->address);
  put_str(o, "address_hex", buf);
  put_u64(o, "size", in->size);
  gmt_alloc_site_format(&in->site, buf, sizeof buf);
  put_str(o, "site", buf);
  put_u64(o, "site_pc", in->site.pc);
  put_str(o, "site_module", in->site.module);
  put_u64(o, "site_offset", in->site.offset);
  put_str(o, "site_function", in->site.function);
  put_u64(o, "site_nth", in->site_nth);
  put_bool(o, "active", in->active);
  put_u64(o, "alloc_ns", in->alloc_ns);
  put_u64(o, "free_ns", in->free_ns);
  put_u64(o, "h2d_count", in->h2d_count);
  put_u64(o, "h2d_bytes", in->h2d_bytes);
  put_u64(o, "d2h_count", in->d2h_count);
  put_u64(o, "d2h_bytes", in->d2h_bytes);
  put_u64(o, "d2d_count", in->d2d_count);
  put_u64(o, "d2d_bytes", in->d2d_bytes);
  put_u64(o, "faults", in->faults);
  put_u64(o, "prefetches", in->prefetches);
  put_u64(o, "events_dropped", in->events_dropped);
  put_u64(o, "moves_out", in->moves_out);
  put_u64(o, "moves_out_bytes", in->moves_out_bytes);
  put_u64(o, "moves_out_ns", in->moves_out_ns);
  put_u64(o, "moves_in", in->moves_in);
  put_u64(o, "moves_in_bytes", in->moves_in_bytes);
  put_u64(o, "moves_in_ns", in->moves_in_ns);
  return o;
}

static json_object *alloc_to_json(const gmt_alloc_history_t *h)
{
  json_object *o = gmt_trace_alloc_json(&h->info);
  json_object *evs = json_object_new_array_ext((int)h->nevents);
  for (size_t i = 0; i < h->nevents; i++) {
    const gmt_alloc_event_t *e = &h->events[i];
    json_object *je = json_object_new_object();
    put_u64(je, "ts_ns", e->ts_ns);
    put_str(je, "type", gmt_aev_name((int)e->type));
    put_u64(je, "tid", e->tid);
    put_u64(je, "address", e->addr);
    put_u64(je, "bytes", e->bytes);
    if (e->dur_ns)
      put_u64(je, "dur_ns", e->dur_ns);
    if (e->stream)
      put_u64(je, "stream", e->stream);
    json_object_array_add(evs, je);
  }
  json_object_object_add(o, "events", evs);
  return o;
}

int gmt_trace_dump_json(gmt_memhistory_t *mh, const gmt_trace_meta_t *meta, const char *path)
{
  json_object *root = json_object_new_object();
  if (!root)
    return -ENOMEM;
  gmt_memhistory_counters_t c;
  gmt_memhistory_rdlock(mh);
  gmt_memhistory_counters(mh, &c);
  put_str(root, "format", "gmt-trace");
  put_u64(root, "version", GMT_TRACE_DUMP_VERSION);
  put_u64(root, "root_pid", meta->root_pid);
  put_u64(root, "start_ns", meta->start_ns);
  put_u64(root, "end_ns", meta->end_ns);
  put_u64(root, "dropped_events", meta->dropped_events);
  put_u64(root, "unmatched_faults", c.unmatched_faults);
  put_u64(root, "unmatched_copies", c.unmatched_copies);
  put_u64(root, "xid_errors", meta->xid_errors);
  json_object *copies = json_object_new_object();
  put_u64(copies, "h2d_count", c.h2d_count);
  put_u64(copies, "h2d_bytes", c.h2d_bytes);
  put_u64(copies, "d2h_count", c.d2h_count);
  put_u64(copies, "d2h_bytes", c.d2h_bytes);
  put_u64(copies, "d2d_count", c.d2d_count);
  put_u64(copies, "d2d_bytes", c.d2d_bytes);
  json_object_object_add(root, "copies", copies);
  json_object *procs = json_object_new_array();
  for (size_t i = 0; i < gmt_memhistory_nprocesses(mh); i++) {
    const gmt_trace_process_t *p = gmt_memhistory_process(mh, i);
    json_object *jp = json_object_new_object();
    put_u64(jp, "pid", p->pid);
    put_u64(jp, "parent", p->parent);
    put_u64(jp, "start_ns", p->start_ns);
    put_u64(jp, "exit_ns", p->exit_ns);
    put_bool(jp, "exited", p->exited);
    json_object_object_add(jp, "exit_code", json_object_new_int(p->exit_code));
    put_u64(jp, "reclaim_stalls", p->kernel.reclaim_stalls);
    put_u64(jp, "reclaim_ns", p->kernel.reclaim_ns);
    put_u64(jp, "compact_stalls", p->kernel.compact_stalls);
    put_u64(jp, "compact_ns", p->kernel.compact_ns);
    put_u64(jp, "pagecache_faults", p->kernel.pagecache_faults);
    json_object_array_add(procs, jp);
  }
  json_object_object_add(root, "processes", procs);
  json_object *allocs = json_object_new_array_ext((int)gmt_memhistory_size(mh));
  for (size_t i = 0; i < gmt_memhistory_size(mh); i++)
    json_object_array_add(allocs, alloc_to_json(gmt_memhistory_at(mh, i)));
  json_object_object_add(root, "allocations", allocs);
  gmt_memhistory_unlock(mh);

  int rc =
      json_object_to_file_ext(path, root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
  json_object_put(root);
  return rc == 0 ? 0 : (errno ? -errno : -EIO);
}

static uint64_t get_u64(json_object *o, const char *k)
{
  json_object *v;
  return json_object_object_get_ex(o, k, &v) ? json_object_get_uint64(v) : 0;
}
static bool get_bool(json_object *o, const char *k)
{
  json_object *v;
  return json_object_object_get_ex(o, k, &v) && json_object_get_boolean(v);
}
static const char *get_str(json_object *o, const char *k)
{
  json_object *v;
  const char *s = json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : NULL;
  return s ? s : "";
}

/* o's array under k (NULL and n 0 when absent). GMT_EDECODE when k holds
 * something else: json-c's array calls assert that they get an array. */
static int get_array(json_object *o, const char *k, json_object **arr, size_t *n)
{
  *arr = NULL;
  *n = 0;
  if (!json_object_object_get_ex(o, k, arr) || !*arr)
    return 0;
  if (!json_object_is_type(*arr, json_type_array))
    return GMT_EDECODE;
  *n = json_object_array_length(*arr);
  return 0;
}

static int alloc_from_json(gmt_memhistory_t *mh, json_object *o)
{
  gmt_alloc_info_t in = {0};
  int kind = gmt_alloc_kind_parse(get_str(o, "kind"));
  if (kind < 0)
    return GMT_EDECODE;
  in.id = get_u64(o, "id");
  in.pid = (uint32_t)get_u64(o, "pid");
  in.kind = (uint8_t)kind;
  int origin = gmt_alloc_origin_parse(get_str(o, "origin"));
  in.origin = origin >= 0 ? (uint8_t)origin : GMT_ORIGIN_CALL; /* as in dumps without it */
  in.registered = get_bool(o, "registered");
  in.pinned_by_gmt = get_bool(o, "pinned_by_gmt");
  in.address = get_u64(o, "address");
  in.size = get_u64(o, "size");
  in.site.pc = get_u64(o, "site_pc");
  snprintf(in.site.module, sizeof in.site.module, "%s", get_str(o, "site_module"));
  in.site.offset = get_u64(o, "site_offset");
  snprintf(in.site.function, sizeof in.site.function, "%s", get_str(o, "site_function"));
  in.site_nth = (uint32_t)get_u64(o, "site_nth");
  in.active = get_bool(o, "active");
  in.alloc_ns = get_u64(o, "alloc_ns");
  in.free_ns = get_u64(o, "free_ns");
  in.h2d_count = get_u64(o, "h2d_count");
  in.h2d_bytes = get_u64(o, "h2d_bytes");
  in.d2h_count = get_u64(o, "d2h_count");
  in.d2h_bytes = get_u64(o, "d2h_bytes");
  in.d2d_count = get_u64(o, "d2d_count");
  in.d2d_bytes = get_u64(o, "d2d_bytes");
  in.faults = get_u64(o, "faults");
  in.prefetches = get_u64(o, "prefetches");
  in.events_dropped = get_u64(o, "events_dropped");
  in.moves_out = get_u64(o, "moves_out"); /* 0 in dumps from before moves */
  in.moves_out_bytes = get_u64(o, "moves_out_bytes");
  in.moves_out_ns = get_u64(o, "moves_out_ns");
  in.moves_in = get_u64(o, "moves_in");
  in.moves_in_bytes = get_u64(o, "moves_in_bytes");
  in.moves_in_ns = get_u64(o, "moves_in_ns");

  json_object *evs;
  size_t n;
  if (get_array(o, "events", &evs, &n) != 0)
    return GMT_EDECODE;
  gmt_alloc_event_t *ev = n ? calloc(n, sizeof *ev) : NULL;
  if (n && !ev)
    return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    json_object *je = json_object_array_get_idx(evs, i);
    int type = gmt_aev_parse(get_str(je, "type"));
    if (type < 0) {
      free(ev);
      return GMT_EDECODE;
    }
    ev[i] = (gmt_alloc_event_t){.ts_ns = get_u64(je, "ts_ns"),
                                .dur_ns = get_u64(je, "dur_ns"),
                                .addr = get_u64(je, "address"),
                                .bytes = get_u64(je, "bytes"),
                                .stream = get_u64(je, "stream"),
                                .tid = (uint32_t)get_u64(je, "tid"),
                                .type = (uint32_t)type};
  }
  int rc = gmt_memhistory_restore(mh, &in, ev, n);
  free(ev);
  return rc;
}

/* The JSON text in buf, as json_object_from_file reads a file: one value,
 * anything after it ignored. NULL when it does not parse. */
static json_object *parse_json(const uint8_t *buf, size_t len)
{
  if (len > INT_MAX)
    return NULL;
  json_tokener *tok = json_tokener_new();
  if (!tok)
    return NULL;
  json_object *root = json_tokener_parse_ex(tok, (const char *)buf, (int)len);
  json_tokener_free(tok);
  return root;
}

static int load_json(const uint8_t *buf, size_t len, gmt_memhistory_t *mh, gmt_trace_meta_t *meta)
{
  json_object *root = parse_json(buf, len);
  json_object *allocs, *procs;
  size_t nallocs, nprocs;
  if (!root)
    return GMT_EDECODE;
  int rc = 0;
  if (get_array(root, "allocations", &allocs, &nallocs) != 0 || !allocs ||
      get_array(root, "processes", &procs, &nprocs) != 0) {
    rc = GMT_EDECODE;
    goto cleanup;
  }
  meta->root_pid = (uint32_t)get_u64(root, "root_pid");
  meta->start_ns = get_u64(root, "start_ns");
  meta->end_ns = get_u64(root, "end_ns");
  meta->dropped_events = get_u64(root, "dropped_events");
  meta->xid_errors = get_u64(root, "xid_errors");
  json_object *copies = NULL;
  json_object_object_get_ex(root, "copies", &copies);
  gmt_memhistory_counters_t c = {.unmatched_faults = get_u64(root, "unmatched_faults"),
                                 .unmatched_copies = get_u64(root, "unmatched_copies"),
                                 .h2d_count = get_u64(copies, "h2d_count"),
                                 .h2d_bytes = get_u64(copies, "h2d_bytes"),
                                 .d2h_count = get_u64(copies, "d2h_count"),
                                 .d2h_bytes = get_u64(copies, "d2h_bytes"),
                                 .d2d_count = get_u64(copies, "d2d_count"),
                                 .d2d_bytes = get_u64(copies, "d2d_bytes")};
  gmt_memhistory_set_counters(mh, &c);
  for (size_t i = 0; i < nprocs && rc == 0; i++) {
    json_object *jp = json_object_array_get_idx(procs, i);
    json_object *code = NULL;
    json_object_object_get_ex(jp, "exit_code", &code);
    gmt_trace_process_t p = {.pid = (uint32_t)get_u64(jp, "pid"),
                             .parent = (uint32_t)get_u64(jp, "parent"),
                             .start_ns = get_u64(jp, "start_ns"),
                             .exit_ns = get_u64(jp, "exit_ns"),
                             .exited = get_bool(jp, "exited"),
                             .exit_code = code ? json_object_get_int(code) : 0,
                             .kernel = {.reclaim_stalls = get_u64(jp, "reclaim_stalls"),
                                        .reclaim_ns = get_u64(jp, "reclaim_ns"),
                                        .compact_stalls = get_u64(jp, "compact_stalls"),
                                        .compact_ns = get_u64(jp, "compact_ns"),
                                        .pagecache_faults = get_u64(jp, "pagecache_faults")}};
    rc = gmt_memhistory_restore_process(mh, &p);
  }
  for (size_t i = 0; i < nallocs && rc == 0; i++)
    rc = alloc_from_json(mh, json_object_array_get_idx(allocs, i));
cleanup:
  json_object_put(root);
  return rc;
}

/* ---- .gmtz ---- */

void gmt_trace_alloc_from_pb(const Gmt__TraceAllocation *a, gmt_alloc_info_t *in)
{
  *in = (gmt_alloc_info_t){.id = a->id,
                           .pid = a->pid,
                           .kind = (uint8_t)a->kind,
                           .origin = a->origin < GMT_ORIGIN_MAX ? (uint8_t)a->origin
                                                                : (uint8_t)GMT_ORIGIN_CALL,
                           .registered = a->registered,
                           .pinned_by_gmt = a->pinned_by_gmt,
                           .active = a->active,
                           .address = a->address,
                           .size = a->size,
                           .site_nth = a->site_nth,
                           .alloc_ns = a->alloc_ns,
                           .free_ns = a->free_ns,
                           .h2d_count = a->h2d_count,
                           .h2d_bytes = a->h2d_bytes,
                           .d2h_count = a->d2h_count,
                           .d2h_bytes = a->d2h_bytes,
                           .d2d_count = a->d2d_count,
                           .d2d_bytes = a->d2d_bytes,
                           .faults = a->faults,
                           .prefetches = a->prefetches,
                           .events_dropped = a->events_dropped,
                           .moves_out = a->moves_out,
                           .moves_out_bytes = a->moves_out_bytes,
                           .moves_out_ns = a->moves_out_ns,
                           .moves_in = a->moves_in,
                           .moves_in_bytes = a->moves_in_bytes,
                           .moves_in_ns = a->moves_in_ns};
  if (a->site) {
    in->site.pc = a->site->pc;
    in->site.offset = a->site->offset;
    snprintf(in->site.module, sizeof in->site.module, "%s", a->site->module ? a->site->module : "");
    snprintf(in->site.function, sizeof in->site.function, "%s",
             a->site->function ? a->site->function : "");
  }
}

void gmt_trace_alloc_to_pb(const gmt_alloc_info_t *in, Gmt__TraceAllocation *a,
                           Gmt__TraceSite *site)
{
  gmt__trace_allocation__init(a);
  gmt__trace_site__init(site);
  site->pc = in->site.pc;
  site->module = (char *)in->site.module;
  site->offset = in->site.offset;
  site->function = (char *)in->site.function;
  a->id = in->id;
  a->pid = in->pid;
  a->kind = (Gmt__TraceAllocKind)in->kind;
  a->address = in->address;
  a->size = in->size;
  a->site = site;
  a->site_nth = in->site_nth;
  a->alloc_ns = in->alloc_ns;
  a->free_ns = in->free_ns;
  a->active = in->active;
  a->h2d_count = in->h2d_count;
  a->h2d_bytes = in->h2d_bytes;
  a->d2h_count = in->d2h_count;
  a->d2h_bytes = in->d2h_bytes;
  a->d2d_count = in->d2d_count;
  a->d2d_bytes = in->d2d_bytes;
  a->faults = in->faults;
  a->prefetches = in->prefetches;
  a->events_dropped = in->events_dropped;
  a->origin = in->origin;
  a->registered = in->registered;
  a->pinned_by_gmt = in->pinned_by_gmt;
  a->moves_out = in->moves_out;
  a->moves_out_bytes = in->moves_out_bytes;
  a->moves_out_ns = in->moves_out_ns;
  a->moves_in = in->moves_in;
  a->moves_in_bytes = in->moves_in_bytes;
  a->moves_in_ns = in->moves_in_ns;
}

static int alloc_to_pb(const gmt_alloc_history_t *h, Gmt__TraceAllocation *a, Gmt__TraceSite *site,
                       Gmt__TraceEvent **evp, Gmt__TraceEvent *evs)
{
  gmt_trace_alloc_to_pb(&h->info, a, site);
  for (size_t i = 0; i < h->nevents; i++) {
    const gmt_alloc_event_t *e = &h->events[i];
    gmt__trace_event__init(&evs[i]);
    evs[i].ts_ns = e->ts_ns;
    evs[i].dur_ns = e->dur_ns;
    evs[i].type = e->type;
    evs[i].tid = e->tid;
    evs[i].address = e->addr;
    evs[i].bytes = e->bytes;
    evs[i].stream = e->stream;
    evp[i] = &evs[i];
  }
  a->n_events = h->nevents;
  a->events = evp;
  return 0;
}

int gmt_trace_dump_gmtz(gmt_memhistory_t *mh, const gmt_trace_meta_t *meta, const char *path)
{
  int rc = 0;
  Gmt__TraceDump d = GMT__TRACE_DUMP__INIT;
  Gmt__TraceCopyTotals totals = GMT__TRACE_COPY_TOTALS__INIT;
  gmt_memhistory_counters_t c;
  Gmt__TraceAllocation *allocs = NULL, **allocp = NULL;
  Gmt__TraceSite *sites = NULL;
  Gmt__TraceProcess *procs = NULL, **procp = NULL;
  Gmt__TraceEvent *evs = NULL, **evp = NULL;
  uint8_t *packed = NULL, *out = NULL;
  FILE *f = NULL;

  gmt_memhistory_rdlock(mh);
  size_t n = gmt_memhistory_size(mh), np = gmt_memhistory_nprocesses(mh), ne = 0;
  for (size_t i = 0; i < n; i++)
    ne += gmt_memhistory_at(mh, i)->nevents;
  allocs = calloc(n ? n : 1, sizeof *allocs);
  allocp = calloc(n ? n : 1, sizeof *allocp);
  sites = calloc(n ? n : 1, sizeof *sites);
  procs = calloc(np ? np : 1, sizeof *procs);
  procp = calloc(np ? np : 1, sizeof *procp);
  evs = calloc(ne ? ne : 1, sizeof *evs);
  evp = calloc(ne ? ne : 1, sizeof *evp);
  if (!allocs || !allocp || !sites || !procs || !procp || !evs || !evp) {
    gmt_memhistory_unlock(mh);
    rc = -ENOMEM;
    goto cleanup;
  }
  d.version = GMT_TRACE_DUMP_VERSION;
  d.root_pid = meta->root_pid;
  d.start_ns = meta->start_ns;
  d.end_ns = meta->end_ns;
  d.dropped_events = meta->dropped_events;
  d.xid_errors = meta->xid_errors;
  gmt_memhistory_counters(mh, &c);
  d.unmatched_faults = c.unmatched_faults;
  d.unmatched_copies = c.unmatched_copies;
  totals.h2d_count = c.h2d_count;
  totals.h2d_bytes = c.h2d_bytes;
  totals.d2h_count = c.d2h_count;
  totals.d2h_bytes = c.d2h_bytes;
  totals.d2d_count = c.d2d_count;
  totals.d2d_bytes = c.d2d_bytes;
  d.copies = &totals;
  for (size_t i = 0; i < np; i++) {
    const gmt_trace_process_t *p = gmt_memhistory_process(mh, i);
    gmt__trace_process__init(&procs[i]);
    procs[i].pid = p->pid;
    procs[i].parent = p->parent;
    procs[i].start_ns = p->start_ns;
    procs[i].exit_ns = p->exit_ns;
    procs[i].exited = p->exited;
    procs[i].exit_code = p->exit_code;
    procs[i].reclaim_stalls = p->kernel.reclaim_stalls;
    procs[i].reclaim_ns = p->kernel.reclaim_ns;
    procs[i].compact_stalls = p->kernel.compact_stalls;
    procs[i].compact_ns = p->kernel.compact_ns;
    procs[i].pagecache_faults = p->kernel.pagecache_faults;
    procp[i] = &procs[i];
  }
  d.n_processes = np;
  d.processes = procp;
  for (size_t i = 0, e = 0; i < n; i++) {
    const gmt_alloc_history_t *h = gmt_memhistory_at(mh, i);
    alloc_to_pb(h, &allocs[i], &sites[i], evp + e, evs + e);
    e += h->nevents;
    allocp[i] = &allocs[i];
  }
  d.n_allocations = n;
  d.allocations = allocp;
  size_t plen = gmt__trace_dump__get_packed_size(&d);
  packed = malloc(plen ? plen : 1);
  if (packed)
    gmt__trace_dump__pack(&d, packed);
  gmt_memhistory_unlock(mh); /* the message points into the histories until packed */
  if (!packed) {
    rc = -ENOMEM;
    goto cleanup;
  }

  size_t bound = ZSTD_compressBound(plen);
  out = malloc(bound);
  if (!out) {
    rc = -ENOMEM;
    goto cleanup;
  }
  size_t clen = ZSTD_compress(out, bound, packed, plen, 3);
  if (ZSTD_isError(clen)) {
    rc = -EIO;
    goto cleanup;
  }
  uint8_t hdr[8];
  memcpy(hdr, GMTZ_MAGIC, 4);
  uint32_t v = GMT_TRACE_DUMP_VERSION;
  for (int i = 0; i < 4; i++)
    hdr[4 + i] = (uint8_t)(v >> (8 * i));
  f = fopen(path, "we");
  if (!f) {
    rc = -errno;
    goto cleanup;
  }
  if (fwrite(hdr, 1, sizeof hdr, f) != sizeof hdr || fwrite(out, 1, clen, f) != clen)
    rc = -EIO;
  if (fclose(f) != 0 && rc == 0)
    rc = -errno;
cleanup:
  free(allocs);
  free(allocp);
  free(sites);
  free(procs);
  free(procp);
  free(evs);
  free(evp);
  free(packed);
  free(out);
  return rc;
}

/* The one zstd frame at z, whole, into a new buffer of the size it
 * declares, once that size is one the frame could hold: no zstd block
 * gives more than 128 KiB from less than 4 bytes (a 3-byte header and an
 * RLE byte). Without that bound a few bytes claiming gigabytes were
 * allocated gigabytes (found by test/fuzz). Trailing bytes or a frame cut
 * short do not decompress to the declared size. */
#define ZSTD_MAX_RATIO 32768u
static int unzstd(const uint8_t *z, size_t zlen, uint8_t **out, size_t *outlen)
{
  unsigned long long declared = ZSTD_getFrameContentSize(z, zlen);
  if (declared == ZSTD_CONTENTSIZE_ERROR || declared == ZSTD_CONTENTSIZE_UNKNOWN ||
      declared > GMTZ_MAX_PACKED || declared > (unsigned long long)zlen * ZSTD_MAX_RATIO)
    return GMT_EDECODE;
  uint8_t *p = malloc(declared ? (size_t)declared : 1);
  if (!p)
    return -ENOMEM;
  size_t got = ZSTD_decompress(p, (size_t)declared, z, zlen);
  if (ZSTD_isError(got) || got != declared) {
    free(p);
    return GMT_EDECODE;
  }
  *out = p;
  *outlen = got;
  return 0;
}

static int load_gmtz(const uint8_t *buf, size_t len, gmt_memhistory_t *mh, gmt_trace_meta_t *meta)
{
  uint32_t v = 0;
  for (int i = 0; i < 4; i++)
    v |= (uint32_t)buf[4 + i] << (8 * i);
  if (v > GMT_TRACE_DUMP_VERSION)
    return GMT_EVERSION;
  uint8_t *packed;
  size_t plen;
  int rc = unzstd(buf + 8, len - 8, &packed, &plen);
  if (rc != 0)
    return rc;
  Gmt__TraceDump *d = gmt__trace_dump__unpack(NULL, plen, packed);
  free(packed);
  if (!d)
    return GMT_EDECODE;

  meta->root_pid = d->root_pid;
  meta->start_ns = d->start_ns;
  meta->end_ns = d->end_ns;
  meta->dropped_events = d->dropped_events;
  meta->xid_errors = d->xid_errors;
  gmt_memhistory_counters_t c = {.unmatched_faults = d->unmatched_faults,
                                 .unmatched_copies = d->unmatched_copies};
  if (d->copies) {
    c.h2d_count = d->copies->h2d_count;
    c.h2d_bytes = d->copies->h2d_bytes;
    c.d2h_count = d->copies->d2h_count;
    c.d2h_bytes = d->copies->d2h_bytes;
    c.d2d_count = d->copies->d2d_count;
    c.d2d_bytes = d->copies->d2d_bytes;
  }
  gmt_memhistory_set_counters(mh, &c);
  for (size_t i = 0; i < d->n_processes && rc == 0; i++) {
    const Gmt__TraceProcess *p = d->processes[i];
    gmt_trace_process_t tp = {.pid = p->pid,
                              .parent = p->parent,
                              .start_ns = p->start_ns,
                              .exit_ns = p->exit_ns,
                              .exited = p->exited,
                              .exit_code = p->exit_code,
                              .kernel = {.reclaim_stalls = p->reclaim_stalls,
                                         .reclaim_ns = p->reclaim_ns,
                                         .compact_stalls = p->compact_stalls,
                                         .compact_ns = p->compact_ns,
                                         .pagecache_faults = p->pagecache_faults}};
    rc = gmt_memhistory_restore_process(mh, &tp);
  }
  for (size_t i = 0; i < d->n_allocations && rc == 0; i++) {
    const Gmt__TraceAllocation *a = d->allocations[i];
    if ((unsigned)a->kind >= GMT_ALLOC_KIND_MAX) {
      rc = GMT_EDECODE;
      break;
    }
    gmt_alloc_info_t in;
    gmt_trace_alloc_from_pb(a, &in);
    gmt_alloc_event_t *ev = a->n_events ? calloc(a->n_events, sizeof *ev) : NULL;
    if (a->n_events && !ev) {
      rc = -ENOMEM;
      break;
    }
    for (size_t j = 0; j < a->n_events; j++) {
      const Gmt__TraceEvent *e = a->events[j];
      ev[j] = (gmt_alloc_event_t){.ts_ns = e->ts_ns,
                                  .dur_ns = e->dur_ns,
                                  .addr = e->address,
                                  .bytes = e->bytes,
                                  .stream = e->stream,
                                  .tid = e->tid,
                                  .type = e->type};
    }
    rc = gmt_memhistory_restore(mh, &in, ev, a->n_events);
    free(ev);
  }
  gmt__trace_dump__free_unpacked(d, NULL);
  return rc;
}

int gmt_trace_load(const char *path, gmt_memhistory_t **out, gmt_trace_meta_t *meta)
{
  FILE *f = fopen(path, "re");
  if (!f)
    return -errno;
  size_t cap = 1 << 16, len = 0;
  uint8_t *buf = malloc(cap);
  int rc = 0;
  while (buf) {
    len += fread(buf + len, 1, cap - len, f);
    if (len < cap)
      break;
    uint8_t *nb = realloc(buf, cap * 2);
    if (!nb) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = nb;
    cap *= 2;
  }
  bool err = ferror(f);
  fclose(f);
  if (!buf)
    return -ENOMEM;
  if (err) {
    free(buf);
    return -EIO;
  }
  rc = gmt_trace_load_buf(buf, len, out, meta);
  free(buf);
  return rc;
}

int gmt_trace_load_buf(const void *data, size_t len, gmt_memhistory_t **out, gmt_trace_meta_t *meta)
{
  const uint8_t *buf = data;
  gmt_memhistory_t *mh = NULL;
  int rc;
  memset(meta, 0, sizeof *meta);
  if ((rc = gmt_memhistory_new(&mh)) != 0)
    return rc;
  if (len >= 8 && !memcmp(buf, GMTZ_MAGIC, 4))
    rc = load_gmtz(buf, len, mh, meta);
  else
    rc = load_json(buf, len, mh, meta);
  if (rc == 0) {
    *out = mh;
    mh = NULL;
  }
  gmt_memhistory_free(mh);
  return rc;
}
