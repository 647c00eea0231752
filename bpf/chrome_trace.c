/* Chrome trace-event JSON (the "JSON Array/Object Format" that Perfetto
 * and chrome://tracing read). Times are microseconds from the start of
 * the trace. */
#include "chrome_trace.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* A JSON string body: quotes, backslashes and control characters escaped. */
static void put_escaped(FILE *f, const char *s)
{
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
}

static double us(uint64_t ts, uint64_t t0)
{
  return ts >= t0 ? (double)(ts - t0) / 1e3 : 0.0;
}

static void human(uint64_t b, char *buf, size_t len)
{
  if (b >= (1ull << 30) && b % (1ull << 30) == 0)
    snprintf(buf, len, "%llu GiB", (unsigned long long)(b >> 30));
  else if (b >= (1ull << 20))
    snprintf(buf, len, "%.1f MiB", (double)b / (1 << 20));
  else if (b >= 1024)
    snprintf(buf, len, "%.1f KiB", (double)b / 1024);
  else
    snprintf(buf, len, "%llu B", (unsigned long long)b);
}

int gmt_chrome_trace_write(gmt_memhistory_t *mh, const gmt_trace_meta_t *meta, const char *path)
{
  FILE *f = fopen(path, "we");
  if (!f)
    return -errno;
  gmt_memhistory_rdlock(mh);
  uint64_t t0 = meta->start_ns, tend = meta->end_ns;
  size_t n = gmt_memhistory_size(mh);
  for (size_t i = 0; i < n; i++) { /* a loaded dump may predate its start */
    const gmt_alloc_history_t *h = gmt_memhistory_at(mh, i);
    if (!t0 || h->info.alloc_ns < t0)
      t0 = h->info.alloc_ns;
    if (h->nevents && h->events[h->nevents - 1].ts_ns > tend)
      tend = h->events[h->nevents - 1].ts_ns;
  }
  const char *sep = "";
  fprintf(f,
          "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"dropped_events\":%llu},\"traceEvents\":[",
          (unsigned long long)meta->dropped_events);
  for (size_t i = 0; i < gmt_memhistory_nprocesses(mh); i++) {
    const gmt_trace_process_t *p = gmt_memhistory_process(mh, i);
    fprintf(
        f,
        "%s\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"args\":{\"name\":\"pid %u%s\"}}",
        sep, p->pid, p->pid, p->parent ? " (forked)" : "");
    sep = ",";
  }
  for (size_t i = 0; i < n; i++) {
    const gmt_alloc_history_t *h = gmt_memhistory_at(mh, i);
    const gmt_alloc_info_t *in = &h->info;
    char size[32], site[GMT_SITE_MODULE_LEN + GMT_SITE_FUNC_LEN + 32];
    human(in->size, size, sizeof size);
    gmt_alloc_site_format(&in->site, site, sizeof site);
    uint64_t end = in->active ? tend : in->free_ns;
    /* Allocations as async slices: they overlap freely on one track. */
    fprintf(f,
            "%s\n{\"ph\":\"b\",\"cat\":\"%s\",\"name\":\"%s %s #%llu\",\"id\":\"0x%llx\","
            "\"pid\":%u,\"tid\":%u,\"ts\":%.3f,\"args\":{\"address\":\"0x%llx\",\"size\":%llu,"
            "\"origin\":\"%s\",\"site\":\"",
            sep, gmt_alloc_kind_name(in->kind), gmt_alloc_kind_name(in->kind), size,
            (unsigned long long)in->id, (unsigned long long)in->id, in->pid, in->pid,
            us(in->alloc_ns, t0), (unsigned long long)in->address, (unsigned long long)in->size,
            gmt_alloc_origin_name(in->origin));
    sep = ",";
    put_escaped(f, site);
    fprintf(f, "\",\"h2d_count\":%llu,\"d2h_count\":%llu,\"faults\":%llu%s}}",
            (unsigned long long)in->h2d_count, (unsigned long long)in->d2h_count,
            (unsigned long long)in->faults, in->pinned_by_gmt ? ",\"pinned_by_gmt\":true" : "");
    fprintf(f,
            ",\n{\"ph\":\"e\",\"cat\":\"%s\",\"name\":\"%s %s #%llu\",\"id\":\"0x%llx\","
            "\"pid\":%u,\"tid\":%u,\"ts\":%.3f}",
            gmt_alloc_kind_name(in->kind), gmt_alloc_kind_name(in->kind), size,
            (unsigned long long)in->id, (unsigned long long)in->id, in->pid, in->pid, us(end, t0));
    bool device = in->kind == GMT_ALLOC_DEVICE || in->kind == GMT_ALLOC_MANAGED;
    for (size_t j = 0; j < h->nevents; j++) {
      const gmt_alloc_event_t *e = &h->events[j];
      char b[32];
      human(e->bytes, b, sizeof b);
      switch (e->type) {
      case GMT_AEV_H2D:
      case GMT_AEV_D2H:
      case GMT_AEV_D2D:
        /* A copy between two tracked buffers is in both histories: drawn
         * once, from the device end. The tracer sees a copy at its entry
         * only (no return probe: cheaper), so dur_ns is 0 and the slice
         * has zero width at the call's start; dumps from before that
         * still carry a measured duration, drawn as it was. */
        if (!device)
          break;
        fprintf(f,
                ",\n{\"ph\":\"X\",\"cat\":\"copy\",\"name\":\"%s %s\",\"pid\":%u,\"tid\":%u,"
                "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"alloc\":%llu,\"bytes\":%llu,\"stream\":\"0x%"
                "llx\"}}",
                gmt_aev_name((int)e->type), b, in->pid, e->tid, us(e->ts_ns - e->dur_ns, t0),
                (double)e->dur_ns / 1e3, (unsigned long long)in->id, (unsigned long long)e->bytes,
                (unsigned long long)e->stream);
        break;
      case GMT_AEV_MOVE_OUT:
      case GMT_AEV_MOVE_IN:
        /* gmt's move of the whole allocation, timed by the hook: a slice
         * ending when the marker fired, with its bandwidth. */
        fprintf(f,
                ",\n{\"ph\":\"X\",\"cat\":\"move\",\"name\":\"%s %s\",\"pid\":%u,\"tid\":%u,"
                "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"alloc\":%llu,\"bytes\":%llu,\"gbps\":%.3f}}",
                gmt_aev_name((int)e->type), b, in->pid, e->tid, us(e->ts_ns - e->dur_ns, t0),
                (double)e->dur_ns / 1e3, (unsigned long long)in->id, (unsigned long long)e->bytes,
                e->dur_ns ? (double)e->bytes / (double)e->dur_ns : 0.0);
        break;
      case GMT_AEV_FAULT:
        fprintf(
            f,
            ",\n{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"fault\",\"name\":\"%llu faults\",\"pid\":%u,"
            "\"tid\":%u,\"ts\":%.3f,\"args\":{\"alloc\":%llu,\"address\":\"0x%llx\"}}",
            (unsigned long long)e->bytes, in->pid, e->tid, us(e->ts_ns, t0),
            (unsigned long long)in->id, (unsigned long long)e->addr);
        break;
      case GMT_AEV_PREFETCH:
      case GMT_AEV_PIN:
      case GMT_AEV_UNPIN:
        fprintf(f,
                ",\n{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"%s\",\"name\":\"%s %s\",\"pid\":%u,"
                "\"tid\":%u,\"ts\":%.3f,\"args\":{\"alloc\":%llu}}",
                gmt_aev_name((int)e->type), gmt_aev_name((int)e->type), b, in->pid, e->tid,
                us(e->ts_ns, t0), (unsigned long long)in->id);
        break;
      default: break;
      }
    }
  }
  gmt_memhistory_unlock(mh);
  fprintf(f, "\n]}\n");
  int rc = ferror(f) ? -EIO : 0;
  if (fclose(f) != 0 && rc == 0)
    rc = -errno;
  return rc;
}
