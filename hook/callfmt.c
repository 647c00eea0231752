/* The text of Alnair's per-call logs and the names of their files (see
 * callfmt.h). */
#include "callfmt.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static size_t fitted(int n, size_t len)
{
  return n > 0 && (size_t)n < len ? (size_t)n : 0;
}

size_t gmt__callfmt_metric(char *buf, size_t len, const char *name, uint64_t count,
                           uint64_t burst_ns)
{
  return fitted(snprintf(buf, len, "name:%s,count:%llu,burst:%llu\n", name,
                         (unsigned long long)count, (unsigned long long)(burst_ns / 1000)),
                len);
}

size_t gmt__callfmt_timeline(char *buf, size_t len, const char *name, uint64_t start_ns,
                             uint64_t dur_ns)
{
  return fitted(snprintf(buf, len, "name:%s, start:%llu, burst:%llu\n", name,
                         (unsigned long long)start_ns, (unsigned long long)(dur_ns / 1000)),
                len);
}

size_t gmt__callfmt_dropped(char *buf, size_t len, uint64_t lines)
{
  return fitted(snprintf(buf, len, "name:timeline_dropped,count:%llu\n", (unsigned long long)lines),
                len);
}

/* out = dir/leaf. */
static int join(char *out, const char *dir, const char *leaf)
{
  int n = snprintf(out, 4096, "%s/%s", dir, leaf);
  return n > 0 && n < 4096 ? 0 : -ENAMETOOLONG;
}

int gmt__callfmt_paths(gmt_callpaths_t *p, const char *dir, int pid, int plain)
{
  char m[64], t[64], r[64], tmp[64];
  if (!plain) {
    snprintf(m, sizeof m, "metrics.%d.log", pid);
    snprintf(t, sizeof t, "timeline.%d.log", pid);
    snprintf(r, sizeof r, "timeline.%d.log.1", pid);
  } else {
    snprintf(m, sizeof m, "metrics.log");
    snprintf(t, sizeof t, "timeline.log");
    snprintf(r, sizeof r, "timeline.log.1");
  }
  snprintf(tmp, sizeof tmp, ".metrics.%d.log.tmp", pid);
  int rc = join(p->lock, dir, ".gmt-calllog.lock");
  rc = rc ? rc : join(p->metrics, dir, m);
  rc = rc ? rc : join(p->tmp, dir, tmp);
  rc = rc ? rc : join(p->timeline, dir, t);
  rc = rc ? rc : join(p->rotated, dir, r);
  return rc;
}
