/* gmt run's options and the environment it execs CMD with (run_env.h). */
#include "run_env.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gmt_bytes.h" /* the sizes resource-config.txt takes */

static int bad(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int bad(char *err, size_t errlen, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return -EINVAL;
}

/* "--name VALUE" or "--name=VALUE": the value, advancing *i past it; NULL
 * when a is not this option. *missing is set when it is but has no value. */
static const char *opt_value(int argc, char **argv, int *i, const char *name, int *missing)
{
  const char *a = argv[*i];
  size_t n = strlen(name);
  if (strncmp(a, name, n) != 0)
    return NULL;
  if (a[n] == '=')
    return a + n + 1;
  if (a[n] != '\0')
    return NULL;
  if (*i + 1 >= argc) {
    *missing = 1;
    return a + n; /* "" */
  }
  return argv[++*i];
}

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
  char *end;
  if (!s[0] || s[0] == '-' || s[0] == '+')
    return -EINVAL;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (*end || errno || v > max)
    return -EINVAL;
  *out = v;
  return 0;
}

int gmt__run_parse(int argc, char **argv, gmt_run_opts_t *o, char *err, size_t errlen)
{
  memset(o, 0, sizeof *o);
  o->count = 1;
  o->timeout_ms = GMT_RUN_TIMEOUT_MS;
  int count_given = 0, bytes_given = 0, i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i], *v;
    int missing = 0;
    unsigned long n;
    if (!strcmp(a, "--")) {
      i++;
      break;
    }
    if (a[0] != '-' || !a[1])
      break; /* CMD */
    if (!strcmp(a, "-h") || !strcmp(a, "--help"))
      return 1;
    if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
      o->quiet = 1;
    } else if (!strcmp(a, "--auto-device")) {
      o->auto_device = 1;
    } else if ((v = opt_value(argc, argv, &i, "--pod", &missing))) {
      if (missing || !v[0])
        return bad(err, errlen, "--pod needs a pod name");
      o->pod = v;
    } else if ((v = opt_value(argc, argv, &i, "--pmgr", &missing))) {
      if (missing || !v[0])
        return bad(err, errlen, "--pmgr needs the pod manager's URL (tcp://... or ipc://...)");
      o->pmgr = v;
    } else if ((v = opt_value(argc, argv, &i, "--config", &missing))) {
      if (missing || !v[0])
        return bad(err, errlen, "--config needs a settings file");
      o->config = v;
    } else if ((v = opt_value(argc, argv, &i, "--count", &missing))) {
      if (missing || parse_uint(v, GMT_RUN_MAX_COUNT, &n) < 0 || n == 0)
        return bad(err, errlen, "--count '%s' is not a number of GPUs from 1 to %d", v,
                   GMT_RUN_MAX_COUNT);
      o->count = (uint32_t)n;
      count_given = 1;
    } else if ((v = opt_value(argc, argv, &i, "--bytes", &missing))) {
      if (missing || gmt_parse_bytes(v, &o->bytes) < 0)
        return bad(err, errlen,
                   "--bytes '%s' is not a size (digits and an optional K, M, G, T, Ki, Mi, Gi "
                   "or Ti)",
                   v);
      bytes_given = 1;
    } else if ((v = opt_value(argc, argv, &i, "--timeout", &missing))) {
      if (missing || parse_uint(v, 600000, &n) < 0 || n == 0)
        return bad(err, errlen, "--timeout '%s' is not a time in ms from 1 to 600000", v);
      o->timeout_ms = (int)n;
    } else {
      return bad(err, errlen, "unknown option '%s'", a);
    }
  }
  if (i >= argc)
    return bad(err, errlen, "no command given (gmt run [OPTIONS] -- CMD [ARGS...])");
  o->cmd = argv + i;
  if ((count_given || bytes_given || o->config) && !o->auto_device)
    return bad(err, errlen, "%s only means something with --auto-device",
               count_given   ? "--count"
               : bytes_given ? "--bytes"
                             : "--config");
  if (o->pmgr && !o->pod)
    return bad(err, errlen, "--pmgr needs --pod (the pod CMD runs in)");
  return 0;
}

/* Whether the LD_PRELOAD list names a libgmthook.so (blanks or colons
 * separate its entries, as ld.so reads it). */
static int names_hook(const char *list)
{
  static const char want[] = "libgmthook.so";
  const size_t wl = sizeof want - 1;
  for (const char *p = list; *p;) {
    size_t n = strcspn(p, ": \t");
    const char *slash = p + n;
    while (slash > p && slash[-1] != '/')
      slash--;
    size_t base = (size_t)(p + n - slash);
    if (base == wl && !strncmp(slash, want, wl))
      return 1;
    p += n;
    p += strspn(p, ": \t");
  }
  return 0;
}

int gmt__run_preload(const char *hook, const char *old, char *out, size_t len)
{
  int n;
  if (old && names_hook(old))
    n = snprintf(out, len, "%s", old);
  else if (old && old[strspn(old, ": \t")])
    n = snprintf(out, len, "%s:%s", hook, old);
  else
    n = snprintf(out, len, "%s", hook);
  if (n < 0 || (size_t)n >= len) {
    if (len)
      out[0] = '\0';
    return -ENOSPC;
  }
  return 0;
}

static int readable(const char *path)
{
  return access(path, R_OK) == 0;
}

/* The first line of a build's hook/preload.txt, when every file it names
 * is there; else 0. */
static int read_preload(const char *path, char *out, size_t len)
{
  FILE *f = fopen(path, "re");
  if (!f)
    return 0;
  char line[2 * PATH_MAX + 2];
  int ok = fgets(line, sizeof line, f) != NULL;
  fclose(f);
  if (!ok)
    return 0;
  line[strcspn(line, "\r\n")] = '\0';
  if (!line[0] || strlen(line) >= len)
    return 0;
  char copy[sizeof line];
  memcpy(copy, line, sizeof line);
  char *save = NULL;
  for (char *e = strtok_r(copy, ": \t", &save); e; e = strtok_r(NULL, ": \t", &save))
    if (!readable(e))
      return 0;
  memcpy(out, line, strlen(line) + 1);
  return 1;
}

/* In a build folder: its preload.txt, else its libgmthook.so. */
static int in_build(const char *dir, char *out, size_t len)
{
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/hook/preload.txt", dir) < (int)sizeof path &&
      read_preload(path, out, len))
    return 1;
  if (snprintf(path, sizeof path, "%s/hook/libgmthook.so", dir) < (int)sizeof path &&
      readable(path) && strlen(path) < len) {
    memcpy(out, path, strlen(path) + 1);
    return 1;
  }
  return 0;
}

int gmt__run_find_hook(const char *hook_lib, const char *build_dir, const char *exe, char *out,
                       size_t len, char *err, size_t errlen)
{
  if (len)
    out[0] = '\0';
  if (hook_lib && hook_lib[0]) {
    if (!readable(hook_lib) || strlen(hook_lib) >= len) {
      snprintf(err, errlen, "GMT_HOOK_LIB=%s is not a readable file", hook_lib);
      return -ENOENT;
    }
    memcpy(out, hook_lib, strlen(hook_lib) + 1);
    return 0;
  }
  if (build_dir && build_dir[0]) {
    if (in_build(build_dir, out, len))
      return 0;
    snprintf(err, errlen, "GMT_BUILD_DIR=%s has no hook/libgmthook.so", build_dir);
    return -ENOENT;
  }
  char dir[PATH_MAX];
  const char *slash = exe ? strrchr(exe, '/') : NULL;
  if (slash && (size_t)(slash - exe) < sizeof dir) {
    memcpy(dir, exe, (size_t)(slash - exe));
    dir[slash - exe] = '\0';
    /* The folder above gmt's, without ".." in what LD_PRELOAD will say. */
    char up[PATH_MAX + 4], path[PATH_MAX + 32];
    snprintf(up, sizeof up, "%s/..", dir);
    char real[PATH_MAX];
    if (realpath(up, real))
      snprintf(up, sizeof up, "%s", real);
    if (in_build(up, out, len))
      return 0;
    snprintf(path, sizeof path, "%s/lib/libgmthook.so", up);
    if (readable(path) && strlen(path) < len) {
      memcpy(out, path, strlen(path) + 1);
      return 0;
    }
  }
  snprintf(err, errlen,
           "libgmthook.so not found beside %s (../hook/, ../lib/); set GMT_HOOK_LIB to its path "
           "or GMT_BUILD_DIR to the build folder",
           exe ? exe : "gmt");
  return -ENOENT;
}
