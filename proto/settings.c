/* gmt's settings file: a small INI reader that knows every key it accepts
 * (gmt_settings.h). Every problem of a file is reported, one line each,
 * before any of it is used. */
#include "gmt_settings.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gmt_errlist.h"
#include "gmt_error.h"
#include "gmt_wire.h"

/* A binary file given by mistake must not produce pages of messages. */
#define MAX_ERRORS 50

void gmt_settings_default(gmt_settings_t *s)
{
  memset(s, 0, sizeof *s);
  snprintf(s->server_addr, sizeof s->server_addr, "%s", GMT_DEFAULT_SCHD_IPC);
  s->max_queued_requests = GMT_SETTINGS_MAX_QUEUED_DEFAULT;
  s->cache_max_age_ms = GMT_SETTINGS_CACHE_MS_DEFAULT;
  s->cache_max_requests = GMT_SETTINGS_CACHE_REQUESTS_DEFAULT;
  s->probe = true;
  s->probe_timeout_ms = GMT_SETTINGS_PROBE_TIMEOUT_MS_DEFAULT;
  s->pick_hold_ms = GMT_SETTINGS_PICK_HOLD_MS_DEFAULT;
}

/* ---- values ---- */

/* A whole number in [lo, hi], decimal digits only. */
static bool parse_count(const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
  if (*v < '0' || *v > '9')
    return false;
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (*end || errno || x < lo || x > hi)
    return false;
  *out = x;
  return true;
}

/* A duration: a decimal number and a unit ms, s or min (none: seconds),
 * in [0, max_ms] once in milliseconds. */
static bool parse_duration(const char *v, uint64_t max_ms, uint64_t *out)
{
  const char *p = v;
  while ((*p >= '0' && *p <= '9') || *p == '.')
    p++;
  if (p == v || (p - v == 1 && *v == '.'))
    return false;
  char num[64];
  if ((size_t)(p - v) >= sizeof num)
    return false;
  memcpy(num, v, (size_t)(p - v));
  num[p - v] = '\0';
  if (strchr(num, '.') != strrchr(num, '.')) /* "1.2.3" */
    return false;
  char *end;
  errno = 0;
  double x = strtod(num, &end);
  if (*end || errno || !(x >= 0))
    return false;
  while (*p == ' ' || *p == '\t')
    p++;
  double scale;
  if (*p == '\0' || strcmp(p, "s") == 0)
    scale = 1000;
  else if (strcmp(p, "ms") == 0)
    scale = 1;
  else if (strcmp(p, "min") == 0)
    scale = 60000;
  else
    return false;
  double ms = x * scale;
  if (ms > (double)max_ms || (ms > 0 && ms < 1))
    return false;
  *out = (uint64_t)(ms + 0.5);
  return true;
}

static bool parse_bool(const char *v, bool *out)
{
  static const char *yes[] = {"on", "true", "yes", "1"}, *no[] = {"off", "false", "no", "0"};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
    if (strcasecmp(v, yes[i]) == 0) {
      *out = true;
      return true;
    }
    if (strcasecmp(v, no[i]) == 0) {
      *out = false;
      return true;
    }
  }
  return false;
}

static bool parse_addr(const char *v, char *out, size_t outlen)
{
  bool ipc = strncmp(v, "ipc://", 6) == 0, tcp = strncmp(v, "tcp://", 6) == 0;
  if ((!ipc && !tcp) || v[6] == '\0' || strlen(v) >= outlen)
    return false;
  for (const char *p = v; *p; p++)
    if (*p == ' ' || *p == '\t')
      return false;
  memcpy(out, v, strlen(v) + 1);
  return true;
}

/* ---- keys ---- */

enum { K_ADDR, K_QUEUED, K_CACHE_MS, K_CACHE_REQ, K_PROBE, K_PROBE_TIMEOUT, K_PICK_HOLD, K_COUNT };

static const char *const key_names[K_COUNT] = {
    [K_ADDR] = "server.addr",
    [K_QUEUED] = "server.max-queued-requests",
    [K_CACHE_MS] = "daemon.max-cache-time-interval",
    [K_CACHE_REQ] = "daemon.max-cache-request",
    [K_PROBE] = "daemon.probe",
    [K_PROBE_TIMEOUT] = "daemon.probe-timeout",
    [K_PICK_HOLD] = "daemon.pick-hold",
};

static int key_find(const char *name)
{
  for (int k = 0; k < K_COUNT; k++)
    if (strcmp(key_names[k], name) == 0)
      return k;
  return -1;
}

static bool section_known(const char *name)
{
  size_t n = strlen(name);
  for (int k = 0; k < K_COUNT; k++)
    if (strncmp(key_names[k], name, n) == 0 && key_names[k][n] == '.')
      return true;
  return false;
}

static void set_value(gmt_errlist_t *e, int line, int k, const char *v, gmt_settings_t *s)
{
  uint64_t n;
  switch (k) {
  case K_ADDR:
    if (!parse_addr(v, s->server_addr, sizeof s->server_addr))
      gmt_errlist_add(e, line,
                      "server.addr '%s': want an ipc:// or tcp:// URL (at most %zu characters)", v,
                      sizeof s->server_addr - 1);
    else
      s->server_addr_set = true;
    return;
  case K_QUEUED:
    if (!parse_count(v, 1, GMT_SETTINGS_MAX_QUEUED_MAX, &n))
      gmt_errlist_add(e, line, "server.max-queued-requests '%s': want a whole number, 1 to %u", v,
                      GMT_SETTINGS_MAX_QUEUED_MAX);
    else
      s->max_queued_requests = (uint32_t)n;
    return;
  case K_CACHE_MS:
    if (!parse_duration(v, GMT_SETTINGS_CACHE_MS_MAX, &s->cache_max_age_ms))
      gmt_errlist_add(
          e, line,
          "daemon.max-cache-time-interval '%s': want a duration, 0 to 1 h (e.g. 1s, 500ms, "
          "2min; no unit: seconds)",
          v);
    return;
  case K_CACHE_REQ:
    if (!parse_count(v, 1, GMT_SETTINGS_CACHE_REQUESTS_MAX, &s->cache_max_requests))
      gmt_errlist_add(e, line, "daemon.max-cache-request '%s': want a whole number, 1 to %u", v,
                      GMT_SETTINGS_CACHE_REQUESTS_MAX);
    return;
  case K_PROBE:
    if (!parse_bool(v, &s->probe))
      gmt_errlist_add(e, line, "daemon.probe '%s': want on or off (true/false, yes/no, 1/0)", v);
    return;
  case K_PROBE_TIMEOUT:
    if (!parse_duration(v, GMT_SETTINGS_PROBE_TIMEOUT_MS_MAX, &n) || n == 0)
      gmt_errlist_add(
          e, line,
          "daemon.probe-timeout '%s': want a duration, 1 ms to 60 s (e.g. 3s, 500ms; no "
          "unit: seconds)",
          v);
    else
      s->probe_timeout_ms = n;
    return;
  case K_PICK_HOLD:
    if (!parse_duration(v, GMT_SETTINGS_PICK_HOLD_MS_MAX, &s->pick_hold_ms))
      gmt_errlist_add(e, line,
                      "daemon.pick-hold '%s': want a duration, 0 to 1 h (e.g. 10s, 500ms; no "
                      "unit: seconds)",
                      v);
    return;
  }
}

/* ---- lines ---- */

static char *trim(char *s)
{
  while (*s == ' ' || *s == '\t' || *s == '\r')
    s++;
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
    s[--n] = '\0';
  return s;
}

/* Cuts a comment that a '#' or ';' after white space starts. */
static void cut_comment(char *v)
{
  for (char *p = v; *p; p++)
    if ((*p == '#' || *p == ';') && p > v && (p[-1] == ' ' || p[-1] == '\t')) {
      *p = '\0';
      return;
    }
}

static bool name_ok(const char *s)
{
  if (!*s)
    return false;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '-' || *s == '_' || *s == '.'))
      return false;
  return true;
}

static void parse_line(gmt_errlist_t *e, int lineno, char *line, char *section, size_t seclen,
                       int seen[K_COUNT], gmt_settings_t *s)
{
  char *p = trim(line);
  if (*p == '\0' || *p == '#' || *p == ';')
    return;
  if (*p == '[') {
    char *close = strchr(p, ']');
    if (!close || *trim(close + 1) != '\0') {
      gmt_errlist_add(e, lineno, "a section header is '[name]' alone on its line");
      section[0] = '\0';
      return;
    }
    *close = '\0';
    char *name = trim(p + 1);
    if (!name_ok(name) || strchr(name, '.') || strlen(name) >= seclen) {
      gmt_errlist_add(e, lineno, "bad section name '%.64s'", name);
      section[0] = '\0';
      return;
    }
    if (!section_known(name)) {
      gmt_errlist_add(e, lineno, "unknown section [%s] (known: [server], [daemon])", name);
      snprintf(section, seclen, "%s", name); /* its keys are not reported one by one */
      return;
    }
    snprintf(section, seclen, "%s", name);
    return;
  }
  char *eq = strchr(p, '=');
  if (!eq) {
    gmt_errlist_add(e, lineno, "want 'key = value', '[section]' or a comment");
    return;
  }
  *eq = '\0';
  char *key = trim(p), *value = eq + 1;
  cut_comment(value);
  value = trim(value);
  if (!name_ok(key)) {
    gmt_errlist_add(e, lineno, "bad key name '%.64s'", key);
    return;
  }
  char full[64 + 1026];
  if (section[0] && strchr(key, '.')) {
    gmt_errlist_add(e, lineno, "key '%s' under [%s]: write it without a section part", key,
                    section);
    return;
  }
  if (section[0] && !section_known(section))
    return; /* its header was reported */
  snprintf(full, sizeof full, "%s%s%s", section, section[0] ? "." : "", key);
  int k = key_find(full);
  if (k < 0) {
    gmt_errlist_add(e, lineno,
                    "unknown key '%s' (known: server.addr, server.max-queued-requests, "
                    "daemon.max-cache-time-interval, daemon.max-cache-request, daemon.probe, "
                    "daemon.probe-timeout, daemon.pick-hold)",
                    full);
    return;
  }
  if (seen[k]) {
    gmt_errlist_add(e, lineno, "%s given twice (first on line %d)", full, seen[k]);
    return;
  }
  seen[k] = lineno;
  if (*value == '\0') {
    gmt_errlist_add(e, lineno, "%s has no value", full);
    return;
  }
  set_value(e, lineno, k, value, s);
}

int gmt_settings_parse(const char *path, const char *text, size_t len, gmt_settings_t *out,
                       char **errors)
{
  if (errors)
    *errors = NULL;
  gmt_settings_default(out);
  gmt_errlist_t e = {.path = path ? path : "(settings)", .max = MAX_ERRORS};
  gmt_settings_t s;
  gmt_settings_default(&s);
  int seen[K_COUNT] = {0};
  char section[64] = "";
  int lineno = 0;
  for (size_t at = 0; at < len;) {
    const char *nl = memchr(text + at, '\n', len - at);
    size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
    lineno++;
    if (memchr(text + at, '\0', n)) {
      gmt_errlist_add(&e, lineno, "a NUL byte: not a text file");
    } else if (n > 1024) {
      gmt_errlist_add(&e, lineno, "line longer than 1024 bytes");
    } else {
      char line[1025];
      memcpy(line, text + at, n);
      line[n] = '\0';
      parse_line(&e, lineno, line, section, sizeof section, seen, &s);
    }
    at += n + 1;
  }
  if (e.dropped)
    gmt_errlist_add_summary(&e, 0, "%d more problem%s not shown", e.dropped,
                            e.dropped == 1 ? "" : "s");
  if (e.oom) {
    free(e.buf);
    return -ENOMEM;
  }
  if (e.count > 0) {
    if (errors)
      *errors = e.buf;
    else
      free(e.buf);
    return GMT_ECONFIG;
  }
  snprintf(s.path, sizeof s.path, "%s", path ? path : "");
  *out = s;
  return 0;
}

static int fail(char **errors, int rc, const char *path, const char *why)
{
  if (errors && asprintf(errors, "%s: %s\n", path, why) < 0)
    *errors = NULL;
  return rc;
}

int gmt_settings_load(const char *path, gmt_settings_t *out, char **errors)
{
  if (errors)
    *errors = NULL;
  gmt_settings_default(out);
  bool named = path != NULL;
  if (!named)
    path = GMT_SETTINGS_PATH;
  /* Non-blocking: a FIFO with no writer must not hang a daemon's start. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    int err = errno;
    if (!named && err == ENOENT)
      return 0;
    char why[320];
    snprintf(why, sizeof why, "cannot open: %s", strerror(err));
    return fail(errors, -err, path, why);
  }
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return fail(errors, -EINVAL, path, "not a regular file");
  }
  if ((uint64_t)st.st_size > GMT_SETTINGS_MAX_BYTES) {
    close(fd);
    return fail(errors, -EFBIG, path, "larger than 64 KiB: not a settings file");
  }
  char *buf = malloc(GMT_SETTINGS_MAX_BYTES + 1);
  if (!buf) {
    close(fd);
    return fail(errors, -ENOMEM, path, "out of memory");
  }
  size_t len = 0;
  for (;;) {
    ssize_t n = read(fd, buf + len, GMT_SETTINGS_MAX_BYTES + 1 - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int err = errno;
      free(buf);
      close(fd);
      char why[320];
      snprintf(why, sizeof why, "cannot read: %s", strerror(err));
      return fail(errors, -err, path, why);
    }
    if (n == 0)
      break;
    len += (size_t)n;
    if (len > GMT_SETTINGS_MAX_BYTES) {
      free(buf);
      close(fd);
      return fail(errors, -EFBIG, path, "larger than 64 KiB: not a settings file");
    }
  }
  close(fd);
  int rc = gmt_settings_parse(path, buf, len, out, errors);
  free(buf);
  return rc;
}
