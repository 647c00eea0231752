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

/* A line of fmt: a name and two numbers, the second nanoseconds written in
 * whole microseconds (rounded down, as Alnair's). */
static size_t line(char *buf, size_t len, const char *fmt, const char *name, uint64_t n,
                   uint64_t ns)
{
  return fitted(
      snprintf(buf, len, fmt, name, (unsigned long long)n, (unsigned long long)(ns / 1000)), len);
}

size_t gmt__callfmt_metric(char *buf, size_t len, const char *name, uint64_t count,
                           uint64_t burst_ns)
{
  return line(buf, len, "name:%s,count:%llu,burst:%llu\n", name, count, burst_ns);
}

size_t gmt__callfmt_timeline(char *buf, size_t len, const char *name, uint64_t start_ns,
                             uint64_t dur_ns)
{
  return line(buf, len, "name:%s, start:%llu, burst:%llu\n", name, start_ns, dur_ns);
}

size_t gmt__callfmt_dropped(char *buf, size_t len, uint64_t lines)
{
  return fitted(snprintf(buf, len, "name:timeline_dropped,count:%llu\n", (unsigned long long)lines),
                len);
}

const char *const gmt__callfmt_seed_names[GMT_CALLFMT_SEED_NAMES] = {
    "cuInit",      "cuMemAlloc",  "cuMemFree",        "cuLaunchKernel",
    "cuMemcpyH2D", "cuMemcpyD2H", "cuGetProcAddress",
};

/* An entry point's base name and the seed's name for it. */
static const struct {
  const char *base;
  int seed;
} seed_of[] = {
    {"cuInit", 0},         {"cuMemAlloc", 1},        {"cuMemFree", 2},
    {"cuLaunchKernel", 3}, {"cuMemcpyHtoD", 4},      {"cuMemcpyHtoDAsync", 4},
    {"cuMemcpyDtoH", 5},   {"cuMemcpyDtoHAsync", 5}, {"cuGetProcAddress", 6},
};

/* Whether name is base with nothing or a version / per-thread-stream
 * suffix after it (cuMemAlloc_v2, cuLaunchKernel_ptsz, ..._v2_ptds). */
static int variant_of(const char *name, const char *base)
{
  size_t n = strlen(base);
  if (strncmp(name, base, n))
    return 0;
  const char *s = name + n;
  while (*s) {
    if (!strncmp(s, "_v", 2) && s[2] >= '0' && s[2] <= '9')
      s += 3;
    else if (!strncmp(s, "_ptsz", 5) || !strncmp(s, "_ptds", 5))
      s += 5;
    else
      return 0;
  }
  return 1;
}

int gmt__callfmt_seed_name(const char *name)
{
  for (size_t i = 0; i < sizeof seed_of / sizeof seed_of[0]; i++)
    if (variant_of(name, seed_of[i].base))
      return seed_of[i].seed;
  return -1;
}

size_t gmt__callfmt_seed_metric(char *buf, size_t len, const char *name, uint64_t count,
                                uint64_t burst_ns)
{
  return line(buf, len, "name:%s\ncount:%llu\nburst:%llu\n", name, count, burst_ns);
}

size_t gmt__callfmt_seed_timeline(char *buf, size_t len, const char *name, uint64_t start_ns,
                                  uint64_t dur_ns)
{
  return line(buf, len, "name:%s start:%llu burst:%llu\n", name, start_ns, dur_ns);
}

size_t gmt__callfmt_seed_dropped(char *buf, size_t len, uint64_t lines)
{
  return gmt__callfmt_seed_metric(buf, len, "timeline_dropped", lines, 0);
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
