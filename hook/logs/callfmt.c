/* The text of Alnair's per-call logs, the names of their files and the
 * rules for the folder they go in (see callfmt.h). */
#include "callfmt.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

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

void gmt__callfmt_paths(gmt_callpaths_t *p, int pid, int plain)
{
  snprintf(p->lock, sizeof p->lock, ".gmt-calllog.lock");
  if (plain) {
    snprintf(p->metrics, sizeof p->metrics, "metrics.log");
    snprintf(p->timeline, sizeof p->timeline, "timeline.log");
  } else {
    snprintf(p->metrics, sizeof p->metrics, "metrics.%d.log", pid);
    snprintf(p->timeline, sizeof p->timeline, "timeline.%d.log", pid);
  }
  snprintf(p->rotated, sizeof p->rotated, "%s.1", p->timeline);
}

void gmt__callfmt_tmp_name(char *buf, size_t len, int pid, uint64_t rnd)
{
  snprintf(buf, len, ".metrics.%d.%016llx.tmp", pid, (unsigned long long)rnd);
}

int gmt__callfmt_mode(const char *text, unsigned *mode)
{
  unsigned v = 0;
  size_t n = 0;
  for (; text[n]; n++) {
    if (text[n] < '0' || text[n] > '7' || n >= 4)
      return -EINVAL;
    v = v * 8 + (unsigned)(text[n] - '0');
  }
  if (n == 0 || (v & ~0666u) || (v & (S_IRUSR | S_IWUSR)) != (S_IRUSR | S_IWUSR))
    return -EINVAL;
  *mode = v;
  return 0;
}

unsigned gmt__callfmt_dir_mode(unsigned file_mode)
{
  return S_IRWXU | (file_mode & S_IRGRP ? S_IRGRP | S_IXGRP : 0) |
         (file_mode & S_IROTH ? S_IROTH | S_IXOTH : 0);
}

const char *gmt__callfmt_dir_open_to(unsigned dir_mode)
{
  if (dir_mode & S_ISVTX)
    return NULL;
  return dir_mode & S_IWOTH ? "others" : dir_mode & S_IWGRP ? "its group" : NULL;
}

int gmt__callfmt_file_ours(unsigned mode, unsigned uid, unsigned long nlink, unsigned euid,
                           char *why, size_t len)
{
  if (!S_ISREG(mode))
    snprintf(why, len, "is not a regular file");
  else if (uid != euid)
    snprintf(why, len, "belongs to uid %u", uid);
  else if (nlink != 1)
    snprintf(why, len, "has %lu names (hard links)", nlink);
  else
    return 1;
  return 0;
}
