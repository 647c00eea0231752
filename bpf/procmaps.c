/* /proc/PID/maps, read and cached per process (see procmaps.h). */
#include "procmaps.h"

#include <errno.h>
#include <stdint.h>
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

/* One line, "start-end perms offset dev inode   path", into m; its path
 * (a file's only: the symbolizer and the libcuda search need no other) is
 * left in line, at *path. */
static int parse_line(char *line, gmt_procmap_t *m, char **path)
{
  unsigned long long start, end, off;
  char perms[8];
  int pathpos = 0;
  if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &off, &pathpos) < 4 ||
      strlen(perms) < 4)
    return -EINVAL;
  char *p = line + pathpos;
  p[strcspn(p, "\n")] = 0;
  size_t len = strlen(p), dl = sizeof DELETED - 1;
  bool deleted = len >= dl && !strcmp(p + len - dl, DELETED);
  if (deleted)
    p[len - dl] = 0;
  *m = (gmt_procmap_t){.start = start,
                       .end = end,
                       .offset = off,
                       .read = perms[0] == 'r',
                       .write = perms[1] == 'w',
                       .exec = perms[2] == 'x',
                       .shared = perms[3] == 's',
                       .type = type_of(p),
                       .deleted = deleted};
  *path = m->type == GMT_PMAP_FILE ? p : NULL;
  return 0;
}

/* Paths go into one pool, a library's segments sharing one copy: a
 * process of a big framework maps thousands of segments, and a daemon
 * keeps every traced process's. Offsets while the pool may move. */
static int pool_add(gmt_procmap_list_t *l, size_t *cap, size_t *len, const char *path, size_t *off)
{
  size_t n = strlen(path) + 1;
  if (*len + n > *cap) {
    size_t ncap = *cap ? *cap * 2 : 4096;
    while (ncap < *len + n)
      ncap *= 2;
    char *np = realloc(l->names, ncap);
    if (!np)
      return -ENOMEM;
    l->names = np;
    *cap = ncap;
  }
  memcpy(l->names + *len, path, n);
  *off = *len;
  *len += n;
  return 0;
}

int gmt_procmaps_read(uint32_t pid, gmt_procmap_list_t *out)
{
  char fn[64];
  snprintf(fn, sizeof fn, "/proc/%u/maps", pid);
  FILE *f = fopen(fn, "re");
  if (!f)
    return errno == ENOENT ? -ESRCH : -errno;
  gmt_procmap_list_t l = {0};
  size_t cap = 0, linecap = 0, namecap = 0, namelen = 0;
  size_t *offs = NULL; /* where each path is in the pool; SIZE_MAX: none */
  char *line = NULL;
  int rc = 0;
  while (rc == 0 && getline(&line, &linecap, f) > 0) {
    if (l.n == cap) {
      size_t ncap = cap ? cap * 2 : 64;
      gmt_procmap_t *nm = realloc(l.maps, ncap * sizeof *nm);
      size_t *no = nm ? realloc(offs, ncap * sizeof *no) : NULL;
      if (nm)
        l.maps = nm;
      if (!no) {
        rc = -ENOMEM;
        break;
      }
      offs = no;
      cap = ncap;
    }
    char *path;
    if (parse_line(line, &l.maps[l.n], &path) != 0)
      continue;
    offs[l.n] = SIZE_MAX;
    if (path && l.n > 0 && offs[l.n - 1] != SIZE_MAX && !strcmp(l.names + offs[l.n - 1], path))
      offs[l.n] = offs[l.n - 1];
    else if (path)
      rc = pool_add(&l, &namecap, &namelen, path, &offs[l.n]);
    l.n++;
  }
  free(line);
  fclose(f);
  l.nameslen = namelen;
  for (size_t i = 0; rc == 0 && i < l.n; i++)
    l.maps[i].path = offs[i] == SIZE_MAX ? "" : l.names + offs[i];
  free(offs);
  if (rc != 0) {
    gmt_procmaps_list_free(&l);
    return rc;
  }
  *out = l;
  return 0;
}

void gmt_procmaps_list_free(gmt_procmap_list_t *l)
{
  free(l->maps);
  free(l->names);
  *l = (gmt_procmap_list_t){0};
}

/* A copy of l (a forked child's, until it reads its own). */
static int list_copy(const gmt_procmap_list_t *l, gmt_procmap_list_t *out)
{
  gmt_procmap_list_t c = {.n = l->n, .nameslen = l->nameslen};
  c.maps = l->n ? malloc(l->n * sizeof *c.maps) : NULL;
  c.names = l->nameslen ? malloc(l->nameslen) : NULL;
  if ((l->n && !c.maps) || (l->nameslen && !c.names)) {
    gmt_procmaps_list_free(&c);
    return -ENOMEM;
  }
  if (l->nameslen)
    memcpy(c.names, l->names, l->nameslen);
  for (size_t i = 0; i < l->n; i++) {
    c.maps[i] = l->maps[i];
    if (l->maps[i].path[0])
      c.maps[i].path = c.names + (l->maps[i].path - l->names);
  }
  *out = c;
  return 0;
}

/* ---- the cache ---- */

typedef struct proc_entry {
  uint32_t pid;
  uint64_t read_ns; /* the last read, or the last try to read */
  gmt_procmap_list_t list;
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
  gmt_procmaps_list_free(&p->list);
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
  gmt_procmap_list_t l;
  proc_entry_t *p = entry_of(pm, pid);
  if (!p)
    return -ENOMEM;
  p->read_ns = gmt_now_ns();
  int rc = gmt_procmaps_read(pid, &l);
  if (rc != 0)
    return rc; /* what was read before stays: a process that exited still resolves */
  gmt_procmaps_list_free(&p->list);
  p->list = l;
  return 0;
}

void gmt_procmaps_fork(gmt_procmaps_t *pm, uint32_t parent, uint32_t child)
{
  proc_entry_t *p = *slot_of(pm, parent), *c;
  if (!p || parent == child || !(c = entry_of(pm, child)))
    return;
  gmt_procmap_list_t l;
  if (list_copy(&p->list, &l) != 0)
    return;
  gmt_procmaps_list_free(&c->list);
  c->list = l;
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

static const gmt_procmap_t *bisect(const gmt_procmap_list_t *l, uint64_t addr)
{
  size_t lo = 0, hi = l->n;
  while (lo < hi) { /* the first mapping that ends above addr */
    size_t mid = lo + (hi - lo) / 2;
    if (l->maps[mid].end <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < l->n && l->maps[lo].start <= addr ? &l->maps[lo] : NULL;
}

const gmt_procmap_t *gmt_procmaps_find(gmt_procmaps_t *pm, uint32_t pid, uint64_t addr)
{
  proc_entry_t *p = *slot_of(pm, pid);
  const gmt_procmap_t *m = p ? bisect(&p->list, addr) : NULL;
  if (m)
    return m;
  /* A miss: something mapped since, or an address no read would place
   * (garbage in a stack without frame pointers, a pointer the process
   * never mapped). Bounded either way. */
  if (p && gmt_now_ns() - p->read_ns < (uint64_t)GMT_PROCMAPS_REREAD_MS * 1000000ull)
    return NULL;
  if (gmt_procmaps_load(pm, pid) != 0)
    return NULL;
  return bisect(&(*slot_of(pm, pid))->list, addr);
}

int gmt_procmaps_host_region(void *pm, uint32_t pid, uint64_t addr, gmt_host_region_t *out)
{
  const gmt_procmap_t *m = gmt_procmaps_find(pm, pid, addr);
  if (!m || (!m->read && !m->write))
    return -ENOENT;
  *out = (gmt_host_region_t){.start = m->start, .end = m->end, .whole = m->type == GMT_PMAP_FILE};
  return 0;
}
