/* /proc/PID/maps, read and cached per process (see procmaps.h). */
#include "procmaps.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_log.h"

static const char DELETED[] = " (deleted)";

static uint8_t type_of(const char *path)
{
  if (!path[0])
    return GMT_PMAP_ANON;
  if (path[0] != '[')
    return GMT_PMAP_FILE;
  if (!strcmp(path, "[heap]"))
    return GMT_PMAP_HEAP;
  if (!strcmp(path, "[stack]"))
    return GMT_PMAP_STACK;
  return GMT_PMAP_SPECIAL;
}

/* One line: "start-end perms offset dev inode   path". */
static int parse_line(char *line, gmt_procmap_t *m)
{
  unsigned long long start, end, off;
  char perms[8];
  int pathpos = 0;
  if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &off, &pathpos) < 4 ||
      strlen(perms) < 4)
    return -EINVAL;
  char *path = line + pathpos;
  path[strcspn(path, "\n")] = 0;
  size_t len = strlen(path), dl = sizeof DELETED - 1;
  bool deleted = len >= dl && !strcmp(path + len - dl, DELETED);
  if (deleted)
    path[len - dl] = 0;
  *m = (gmt_procmap_t){.start = start,
                       .end = end,
                       .offset = off,
                       .read = perms[0] == 'r',
                       .write = perms[1] == 'w',
                       .exec = perms[2] == 'x',
                       .shared = perms[3] == 's',
                       .type = type_of(path),
                       .deleted = deleted,
                       .path = strdup(path)};
  return m->path ? 0 : -ENOMEM;
}

int gmt_procmaps_read(uint32_t pid, gmt_procmap_t **out, size_t *n)
{
  char fn[64];
  snprintf(fn, sizeof fn, "/proc/%u/maps", pid);
  FILE *f = fopen(fn, "re");
  if (!f)
    return errno == ENOENT ? -ESRCH : -errno;
  gmt_procmap_t *maps = NULL;
  size_t nmaps = 0, cap = 0, linecap = 0;
  char *line = NULL;
  int rc = 0;
  while (rc == 0 && getline(&line, &linecap, f) > 0) {
    if (nmaps == cap) {
      size_t ncap = cap ? cap * 2 : 64;
      gmt_procmap_t *nm = realloc(maps, ncap * sizeof *nm);
      if (!nm) {
        rc = -ENOMEM;
        break;
      }
      maps = nm;
      cap = ncap;
    }
    int prc = parse_line(line, &maps[nmaps]);
    if (prc == 0)
      nmaps++;
    else if (prc == -ENOMEM)
      rc = prc;
  }
  free(line);
  fclose(f);
  if (rc != 0) {
    gmt_procmaps_list_free(maps, nmaps);
    return rc;
  }
  *out = maps;
  *n = nmaps;
  return 0;
}

void gmt_procmaps_list_free(gmt_procmap_t *maps, size_t n)
{
  for (size_t i = 0; i < n; i++)
    free(maps[i].path);
  free(maps);
}

/* ---- the cache ---- */

typedef struct proc_entry {
  uint32_t pid;
  uint64_t read_ns; /* the last read, or the last try to read */
  gmt_procmap_t *maps;
  size_t n;
  struct proc_entry *next;
} proc_entry_t;

struct gmt_procmaps {
  proc_entry_t *procs;
};

int gmt_procmaps_new(gmt_procmaps_t **out)
{
  *out = calloc(1, sizeof **out);
  return *out ? 0 : -ENOMEM;
}

static void entry_free(proc_entry_t *p)
{
  gmt_procmaps_list_free(p->maps, p->n);
  free(p);
}

void gmt_procmaps_free(gmt_procmaps_t *pm)
{
  if (!pm)
    return;
  for (proc_entry_t *p = pm->procs, *n; p; p = n) {
    n = p->next;
    entry_free(p);
  }
  free(pm);
}

static proc_entry_t **slot_of(gmt_procmaps_t *pm, uint32_t pid)
{
  proc_entry_t **p = &pm->procs;
  while (*p && (*p)->pid != pid)
    p = &(*p)->next;
  return p;
}

/* The entry of pid, made empty when there is none. */
static proc_entry_t *entry_of(gmt_procmaps_t *pm, uint32_t pid)
{
  proc_entry_t **slot = slot_of(pm, pid);
  if (!*slot && (*slot = calloc(1, sizeof **slot)))
    (*slot)->pid = pid;
  return *slot;
}

int gmt_procmaps_load(gmt_procmaps_t *pm, uint32_t pid)
{
  gmt_procmap_t *maps;
  size_t n;
  proc_entry_t *p = entry_of(pm, pid);
  if (!p)
    return -ENOMEM;
  p->read_ns = gmt_now_ns();
  int rc = gmt_procmaps_read(pid, &maps, &n);
  if (rc != 0)
    return rc; /* what was read before stays: a process that exited still resolves */
  gmt_procmaps_list_free(p->maps, p->n);
  p->maps = maps;
  p->n = n;
  return 0;
}

void gmt_procmaps_fork(gmt_procmaps_t *pm, uint32_t parent, uint32_t child)
{
  proc_entry_t *p = *slot_of(pm, parent), *c;
  if (!p || parent == child || !(c = entry_of(pm, child)))
    return;
  gmt_procmap_t *maps = p->n ? calloc(p->n, sizeof *maps) : NULL;
  size_t n = 0;
  for (; maps && n < p->n; n++) {
    maps[n] = p->maps[n];
    if (!(maps[n].path = strdup(p->maps[n].path)))
      break;
  }
  gmt_procmaps_list_free(c->maps, c->n);
  c->maps = maps;
  c->n = n;
  c->read_ns = p->read_ns;
}

void gmt_procmaps_forget(gmt_procmaps_t *pm, uint32_t pid)
{
  proc_entry_t **slot = slot_of(pm, pid), *p = *slot;
  if (!p)
    return;
  *slot = p->next;
  entry_free(p);
}

static const gmt_procmap_t *bisect(const proc_entry_t *p, uint64_t addr)
{
  size_t lo = 0, hi = p->n;
  while (lo < hi) { /* the first mapping that ends above addr */
    size_t mid = lo + (hi - lo) / 2;
    if (p->maps[mid].end <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < p->n && p->maps[lo].start <= addr ? &p->maps[lo] : NULL;
}

const gmt_procmap_t *gmt_procmaps_find(gmt_procmaps_t *pm, uint32_t pid, uint64_t addr)
{
  proc_entry_t *p = *slot_of(pm, pid);
  const gmt_procmap_t *m = p ? bisect(p, addr) : NULL;
  if (m)
    return m;
  /* A miss: something mapped since, or an address no read would place
   * (garbage in a stack without frame pointers, a pointer the process
   * never mapped). Bounded either way. */
  if (p && gmt_now_ns() - p->read_ns < (uint64_t)GMT_PROCMAPS_REREAD_MS * 1000000ull)
    return NULL;
  if (gmt_procmaps_load(pm, pid) != 0)
    return NULL;
  return bisect(*slot_of(pm, pid), addr);
}

int gmt_procmaps_host_region(void *pm, uint32_t pid, uint64_t addr, gmt_host_region_t *out)
{
  const gmt_procmap_t *m = gmt_procmaps_find(pm, pid, addr);
  if (!m || (!m->read && !m->write))
    return -ENOENT;
  *out = (gmt_host_region_t){.start = m->start, .end = m->end, .whole = m->type == GMT_PMAP_FILE};
  return 0;
}
