/* Pids across PID namespaces (see nspid.h). */
#include "nspid.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The ns/pid link of /proc entry `who` ("self" or a pid): "pid:[N]". */
static int ns_of(const char *proc, const char *who, char *ns, size_t len)
{
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s/ns/pid", proc, who);
  ssize_t n = readlink(path, ns, len - 1);
  if (n < 0)
    return -errno;
  ns[n] = '\0';
  return 0;
}

/* The last pid of /proc/who/status's NSpid line (the pid in the process's
 * own namespace), or 0 when it cannot be read. */
static uint32_t innermost_pid(const char *proc, const char *who)
{
  char path[PATH_MAX], line[512];
  snprintf(path, sizeof path, "%s/%s/status", proc, who);
  FILE *f = fopen(path, "re");
  if (!f)
    return 0;
  uint32_t last = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "NSpid:", 6) != 0)
      continue;
    for (char *p = line + 6, *end;; p = end) {
      errno = 0;
      unsigned long v = strtoul(p, &end, 10);
      if (end == p || errno || v > UINT32_MAX)
        break;
      last = (uint32_t)v;
    }
    break;
  }
  fclose(f);
  return last;
}

int gmt_nspid_nodes(const char *proc, int64_t owner, const uint32_t *pids, uint32_t *nodes,
                    size_t n)
{
  for (size_t i = 0; i < n; i++)
    nodes[i] = pids[i];
  if (owner <= 0 || n == 0)
    return 0;
  char mine[64], theirs[64], who[32];
  snprintf(who, sizeof who, "%" PRId64, owner);
  int rc = ns_of(proc, who, theirs, sizeof theirs);
  if (rc == 0 && ns_of(proc, "self", mine, sizeof mine) == 0 && strcmp(mine, theirs) == 0)
    return 0;
  memset(nodes, 0, n * sizeof *nodes); /* from here a pid may name another process */
  if (rc < 0)
    return rc;
  DIR *d = opendir(proc);
  if (!d)
    return -errno;
  /* One pass over the node's processes for every pid asked about. */
  size_t left = n;
  for (struct dirent *e; left && (e = readdir(d));) {
    if (!isdigit((unsigned char)e->d_name[0]))
      continue;
    char ns[64];
    if (ns_of(proc, e->d_name, ns, sizeof ns) < 0 || strcmp(ns, theirs) != 0)
      continue;
    uint32_t inner = innermost_pid(proc, e->d_name);
    unsigned long v = strtoul(e->d_name, NULL, 10);
    if (!inner || v == 0 || v > UINT32_MAX)
      continue;
    for (size_t i = 0; i < n; i++)
      if (pids[i] == inner && !nodes[i]) {
        nodes[i] = (uint32_t)v;
        left--;
      }
  }
  closedir(d);
  return 0;
}
