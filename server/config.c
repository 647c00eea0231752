/* resource-config.txt: reading and checking it.
 *
 * The file is read whole and every line is checked, so that an operator
 * fixing a file sees all of its problems at once rather than one per
 * attempt. Nothing here touches the daemon's state: a reload builds a new
 * gmt_config_t and the caller decides whether to swap it in. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gmt_bytes.h"
#include "gmt_errlist.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_podconfig.h"
#include "gmt_wire.h"

/* Enough to show every problem of any sane file without letting a binary
 * file passed by mistake produce megabytes of messages. */
#define MAX_ERRORS 100
#define MAX_PODS GMT_CONFIG_MAX_PODS
#define MAX_FILE_BYTES GMT_CONFIG_MAX_BYTES
#define POSITIONAL 4  /* ID REQUEST LIMIT GPU_MEM */
#define MAX_FIELDS 16 /* and key=value fields after them */

static bool name_char_ok(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

/* Decimal numbers only: no exponent, hex, inf or nan, which strtod would
 * take but which no one means in a share. */
static bool parse_decimal(const char *s, double *out)
{
  const char *p = s;
  int digits = 0;
  if (*p == '+' || *p == '-')
    p++;
  while (isdigit((unsigned char)*p))
    p++, digits++;
  if (*p == '.') {
    p++;
    while (isdigit((unsigned char)*p))
      p++, digits++;
  }
  if (*p || digits == 0)
    return false;
  *out = strtod(s, NULL);
  return true;
}

/* Splits line (modified in place) on blanks; returns how many fields there
 * were, storing at most max of them. */
static int split(char *line, char **fields, int max)
{
  int n = 0;
  char *p = line;
  for (;;) {
    while (*p && isspace((unsigned char)*p))
      p++;
    if (!*p)
      break;
    if (n < max)
      fields[n] = p;
    n++;
    while (*p && !isspace((unsigned char)*p))
      p++;
    if (*p)
      *p++ = '\0';
  }
  return n;
}

static bool parse_count(gmt_errlist_t *e, int lineno, char *line, long *count)
{
  char *f[2];
  char sb[96];
  int n = split(line, f, 2);
  if (n != 1) {
    gmt_errlist_add(e, lineno, "the first line must be the number of pods alone, got %d fields", n);
    return false;
  }
  const char *p = f[0];
  long v = 0;
  for (; isdigit((unsigned char)*p); p++)
    if (v <= MAX_PODS) /* saturates: any longer number is too many */
      v = v * 10 + (*p - '0');
  if (p == f[0] || *p) {
    gmt_errlist_add(e, lineno, "the first line must be the number of pods, got '%s'",
                    gmt_shown(f[0], sb, sizeof sb));
    return false;
  }
  if (v > MAX_PODS) {
    gmt_errlist_add(e, lineno, "%s pods is too many (at most %d)", gmt_shown(f[0], sb, sizeof sb),
                    MAX_PODS);
    return false;
  }
  *count = v;
  return true;
}

/* Checks a share field; reports and returns false when it is bad. */
static bool parse_share(gmt_errlist_t *e, int lineno, const char *what, const char *s, double *out)
{
  char sb[96];
  if (!parse_decimal(s, out)) {
    gmt_errlist_add(e, lineno, "%s '%s' is not a decimal number", what,
                    gmt_shown(s, sb, sizeof sb));
    return false;
  }
  if (*out < 0) {
    gmt_errlist_add(e, lineno, "%s %s is below 0", what, gmt_shown(s, sb, sizeof sb));
    return false;
  }
  if (*out > 1) {
    gmt_errlist_add(e, lineno, "%s %s is above 1", what, gmt_shown(s, sb, sizeof sb));
    return false;
  }
  return true;
}

typedef struct {
  gmt_pod_config_t *pods;
  size_t n, cap;
} podvec_t;

static const gmt_pod_config_t *podvec_find(const podvec_t *v, const char *name)
{
  for (size_t i = 0; i < v->n; i++)
    if (strcmp(v->pods[i].name, name) == 0)
      return &v->pods[i];
  return NULL;
}

/* A key whose value is one of an enum's names (parse: the enum's name to
 * value, negative when unknown; names: the names, for the message). */
static bool parse_named(gmt_errlist_t *e, int lineno, const char *key, const char *v,
                        int (*parse)(const char *), const char *names, int *out)
{
  char sb[96];
  int m = parse(v);
  if (m < 0) {
    gmt_errlist_add(e, lineno, "%s '%s' is not one of %s", key, gmt_shown(v, sb, sizeof sb), names);
    return false;
  }
  *out = m;
  return true;
}

static bool parse_pin(gmt_errlist_t *e, int lineno, const char *v, gmt_pod_config_t *pod)
{
  return parse_named(e, lineno, "pin", v, gmt_pin_mode_parse, "off, profile, use, adaptive",
                     &pod->pin);
}

static bool parse_mode(gmt_errlist_t *e, int lineno, const char *v, gmt_pod_config_t *pod)
{
  return parse_named(e, lineno, "mode", v, gmt_mem_mode_parse, "strict, swap, um", &pod->mode);
}

static bool parse_class(gmt_errlist_t *e, int lineno, const char *v, gmt_pod_config_t *pod)
{
  return parse_named(e, lineno, "class", v, gmt_pod_class_parse, "batch, latency", &pod->klass);
}

/* idle-out=SECONDS (a decimal, 0 to a day) or off. */
static bool parse_idle_out(gmt_errlist_t *e, int lineno, const char *v, gmt_pod_config_t *pod)
{
  char sb[96];
  double sec;
  if (strcmp(v, "off") == 0) {
    pod->idle_out_ms = -1;
    return true;
  }
  if (!parse_decimal(v, &sec) || sec < 0 || sec * 1000 > GMT_IDLE_OUT_MAX_MS) {
    gmt_errlist_add(e, lineno, "idle-out '%s' is not seconds from 0 to %d, or off",
                    gmt_shown(v, sb, sizeof sb), GMT_IDLE_OUT_MAX_MS / 1000);
    return false;
  }
  pod->idle_out_ms = (int64_t)(sec * 1000 + 0.5);
  return true;
}

/* devices=0,1: the node's GPUs, ascending and each once, so that a list
 * reads the same wherever it is shown and a typo ("0,0", "1,0") is not
 * taken for something else. Empty: every GPU, as without the key. */
static bool parse_devices(gmt_errlist_t *e, int lineno, const char *v, gmt_pod_config_t *pod)
{
  char sb[96];
  size_t n = 0;
  pod->ndevices = 0;
  if (!*v)
    return true;
  for (const char *p = v;; p++) {
    const char *start = p;
    unsigned long d = 0;
    while (isdigit((unsigned char)*p) && d <= GMT_CONFIG_DEVICE_MAX)
      d = d * 10 + (unsigned long)(*p++ - '0');
    if (p == start || (*p != ',' && *p != '\0' && !isdigit((unsigned char)*p))) {
      gmt_errlist_add(e, lineno,
                      "devices '%s' is not a list of GPU indices like 0,1 (digits and commas)",
                      gmt_shown(v, sb, sizeof sb));
      return false;
    }
    if (d > GMT_CONFIG_DEVICE_MAX) {
      gmt_errlist_add(e, lineno, "devices '%s': GPU index too large (at most %d)",
                      gmt_shown(v, sb, sizeof sb), GMT_CONFIG_DEVICE_MAX);
      return false;
    }
    if (n == GMT_CONFIG_MAX_DEVICES) {
      gmt_errlist_add(e, lineno, "devices '%s' lists more than %d GPUs",
                      gmt_shown(v, sb, sizeof sb), GMT_CONFIG_MAX_DEVICES);
      return false;
    }
    if (n > 0 && (int32_t)d == pod->devices[n - 1]) {
      gmt_errlist_add(e, lineno, "devices '%s' lists GPU %lu twice", gmt_shown(v, sb, sizeof sb),
                      d);
      return false;
    }
    if (n > 0 && (int32_t)d < pod->devices[n - 1]) {
      gmt_errlist_add(e, lineno,
                      "devices '%s': GPU %lu comes after GPU %d (list them in ascending order)",
                      gmt_shown(v, sb, sizeof sb), d, (int)pod->devices[n - 1]);
      return false;
    }
    pod->devices[n++] = (int32_t)d;
    if (*p == '\0')
      break;
  }
  pod->ndevices = n;
  return true;
}

/* The key=value fields a pod line may carry after GPU_MEM. */
static const struct {
  const char *key;
  bool (*parse)(gmt_errlist_t *e, int lineno, const char *value, gmt_pod_config_t *pod);
} pod_keys[] = {
    {"pin", parse_pin},     {"mode", parse_mode},         {"devices", parse_devices},
    {"class", parse_class}, {"idle-out", parse_idle_out},
};
#define NKEYS (sizeof pod_keys / sizeof pod_keys[0])

/* Checks the key=value fields f[0..n). */
static void parse_keys(gmt_errlist_t *e, int lineno, char **f, int n, gmt_pod_config_t *pod)
{
  char sb[96];
  bool seen[NKEYS] = {false};
  for (int i = 0; i < n; i++) {
    if (f[i][0] == '#') {
      gmt_errlist_add(e, lineno, "a comment goes on a line of its own, not after GPU_MEM");
      return;
    }
    char *eq = strchr(f[i], '=');
    if (!eq || eq == f[i]) {
      gmt_errlist_add(e, lineno, "field '%s' after GPU_MEM is not key=value",
                      gmt_shown(f[i], sb, sizeof sb));
      continue;
    }
    *eq = '\0';
    size_t k = 0;
    while (k < NKEYS && strcmp(pod_keys[k].key, f[i]) != 0)
      k++;
    if (k == NKEYS) {
      char known[128] = "";
      for (size_t j = 0, n = 0; j < NKEYS && n < sizeof known; j++)
        n += (size_t)snprintf(known + n, sizeof known - n, "%s%s", j ? ", " : "", pod_keys[j].key);
      gmt_errlist_add(e, lineno, "unknown key '%s' (known: %s)", gmt_shown(f[i], sb, sizeof sb),
                      known);
      continue;
    }
    if (seen[k]) {
      gmt_errlist_add(e, lineno, "key '%s' given twice", pod_keys[k].key);
      continue;
    }
    seen[k] = true;
    pod_keys[k].parse(e, lineno, eq + 1, pod);
  }
}

/* Checks one pod line; a good one is appended to v (also when an earlier
 * line was bad, so that duplicates are still found). */
static void parse_pod(gmt_errlist_t *e, int lineno, char *line, podvec_t *v)
{
  char *f[MAX_FIELDS];
  char sb[96], sb2[96];
  int n = split(line, f, MAX_FIELDS);
  if (n < POSITIONAL || n > MAX_FIELDS) {
    gmt_errlist_add(e, lineno,
                    "want 4 fields (ID REQUEST LIMIT GPU_MEM) and at most %d key=value, got %d",
                    MAX_FIELDS - POSITIONAL, n);
    return;
  }
  gmt_pod_config_t pod = {.line = lineno, .idle_out_ms = GMT_IDLE_OUT_DEFAULT_MS};
  bool name_ok = true;

  size_t len = strlen(f[0]);
  if (len > GMT_POD_NAME_MAX) {
    gmt_errlist_add(e, lineno, "pod name '%s' is %zu characters long (at most %d)",
                    gmt_shown(f[0], sb, sizeof sb), len, GMT_POD_NAME_MAX);
    name_ok = false;
  } else {
    for (const char *p = f[0]; *p; p++) {
      if (name_char_ok(*p))
        continue;
      if (isprint((unsigned char)*p))
        gmt_errlist_add(e, lineno,
                        "pod name '%s' has a bad character '%c' (allowed: A-Z a-z 0-9 . _ -)",
                        gmt_shown(f[0], sb, sizeof sb), *p);
      else
        gmt_errlist_add(e, lineno,
                        "pod name '%s' has a bad byte 0x%02x (allowed: A-Z a-z 0-9 . _ -)",
                        gmt_shown(f[0], sb, sizeof sb), (unsigned char)*p);
      name_ok = false;
      break;
    }
  }
  if (name_ok) {
    const gmt_pod_config_t *dup = podvec_find(v, f[0]);
    if (dup)
      gmt_errlist_add(e, lineno, "pod '%s' is already listed on line %d", f[0], dup->line);
    else
      memcpy(pod.name, f[0], len + 1);
  }

  bool req_ok = parse_share(e, lineno, "request", f[1], &pod.request);
  bool lim_ok = parse_share(e, lineno, "limit", f[2], &pod.limit);
  if (req_ok && lim_ok && pod.request > pod.limit)
    gmt_errlist_add(e, lineno, "request %s is above limit %s", gmt_shown(f[1], sb, sizeof sb),
                    gmt_shown(f[2], sb2, sizeof sb2));

  int rc = gmt_parse_bytes(f[3], &pod.memory_limit);
  if (rc == -ERANGE)
    gmt_errlist_add(e, lineno, "memory '%s' does not fit in 64 bits",
                    gmt_shown(f[3], sb, sizeof sb));
  else if (rc < 0)
    gmt_errlist_add(
        e, lineno,
        "memory '%s' is not a byte count (want digits and an optional suffix K, M, G, T, "
        "Ki, Mi, Gi or Ti)",
        gmt_shown(f[3], sb, sizeof sb));
  parse_keys(e, lineno, f + POSITIONAL, n - POSITIONAL, &pod);

  /* A line with a good name but a bad share still claims the name, so that
   * a second line with it is reported as a duplicate too. Any error refuses
   * the whole config, so such an entry is never used. */
  if (pod.name[0] == '\0')
    return;
  if (v->n == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 16;
    gmt_pod_config_t *np = realloc(v->pods, cap * sizeof *np);
    if (!np) {
      e->oom = true;
      return;
    }
    v->pods = np;
    v->cap = cap;
  }
  v->pods[v->n++] = pod;
}

static int cmp_pod(const void *a, const void *b)
{
  return strcmp(((const gmt_pod_config_t *)a)->name, ((const gmt_pod_config_t *)b)->name);
}

/* Requests are guarantees: together they cannot be more than the whole
 * GPU. Gemini accepts such a file, and so does gmt, but says so. */
static void warn_overcommit(const gmt_config_t *cfg)
{
  double sum = 0;
  for (size_t i = 0; i < cfg->npods; i++)
    sum += cfg->pods[i].request;
  if (sum > 1.0 + 1e-9)
    gmt_warn("%s: the pods' requests add up to %g, more than 1: not every pod can get its "
             "guaranteed share when all are busy",
             cfg->path, sum);
}

int gmt_config_parse(const char *path, const char *text, size_t len, gmt_config_t **out,
                     char **errors)
{
  gmt_errlist_t e = {.path = path, .max = MAX_ERRORS};
  podvec_t v = {0};
  long count = -1;
  int count_line = 0;
  bool count_seen = false;
  size_t listed = 0;
  char *line = NULL;
  int rc;

  *out = NULL;
  if (errors)
    *errors = NULL;

  int lineno = 0;
  for (size_t pos = 0; pos < len;) {
    const char *start = text + pos;
    const char *nl = memchr(start, '\n', len - pos);
    size_t llen = nl ? (size_t)(nl - start) : len - pos;
    pos += llen + (nl ? 1 : 0);
    lineno++;

    if (memchr(start, '\0', llen)) {
      gmt_errlist_add(&e, lineno, "has a NUL byte (is this a text file?)");
      if (!count_seen)
        count_seen = true;
      else
        listed++;
      continue;
    }
    char *nline = realloc(line, llen + 1);
    if (!nline) {
      e.oom = true;
      break;
    }
    line = nline;
    memcpy(line, start, llen);
    line[llen] = '\0';

    const char *p = line;
    while (*p && isspace((unsigned char)*p))
      p++;
    if (*p == '\0' || *p == '#')
      continue;

    if (!count_seen) {
      count_seen = true;
      count_line = lineno;
      if (!parse_count(&e, lineno, line, &count))
        count = -1;
      continue;
    }
    listed++;
    if (listed > MAX_PODS) {
      /* Checking names for duplicates grows with the square of the count:
       * stop here, so that a huge file is refused at once. */
      gmt_errlist_add(&e, lineno, "more than %d pods listed; gmt-schd serves at most %d", MAX_PODS,
                      MAX_PODS);
      count = -1;
      break;
    }
    parse_pod(&e, lineno, line, &v);
  }
  free(line);

  if (!count_seen)
    gmt_errlist_add(&e, 0,
                    "no pod count: the first line that is not blank or a comment must be the "
                    "number of pods");
  else if (count >= 0 && (size_t)count != listed)
    gmt_errlist_add(&e, count_line, "the first line says %ld pod%s but %zu %s listed", count,
                    count == 1 ? "" : "s", listed, listed == 1 ? "is" : "are");

  if (e.dropped)
    gmt_errlist_add_summary(&e, 0, "... and %d more error%s", e.dropped, e.dropped == 1 ? "" : "s");
  if (e.oom) {
    rc = -ENOMEM;
    goto fail;
  }
  if (e.len > 0) {
    rc = GMT_ECONFIG;
    goto fail;
  }

  gmt_config_t *cfg = calloc(1, sizeof *cfg);
  if (!cfg || !(cfg->path = strdup(path))) {
    free(cfg);
    rc = -ENOMEM;
    goto fail;
  }
  cfg->npods = v.n;
  cfg->pods = v.pods;
  if (cfg->npods)
    qsort(cfg->pods, cfg->npods, sizeof *cfg->pods, cmp_pod);
  warn_overcommit(cfg);
  *out = cfg;
  return 0;

fail:
  free(v.pods);
  if (rc == -ENOMEM) {
    free(e.buf);
    e.buf = NULL;
    if (errors && asprintf(&e.buf, "%s: out of memory while reading\n", path) < 0)
      e.buf = NULL;
  }
  if (errors)
    *errors = e.buf;
  else
    free(e.buf);
  return rc;
}

static int fail_io(const char *path, const char *what, int err, char **errors)
{
  if (errors && asprintf(errors, "%s: %s: %s\n", path, what, strerror(err)) < 0)
    *errors = NULL;
  return -err;
}

static const char *file_kind(mode_t m)
{
  return S_ISFIFO(m)   ? "not a regular file (a FIFO)"
         : S_ISCHR(m)  ? "not a regular file (a character device)"
         : S_ISBLK(m)  ? "not a regular file (a block device)"
         : S_ISSOCK(m) ? "not a regular file (a socket)"
                       : "not a regular file";
}

int gmt_config_open(const char *path, const char **why)
{
  /* Non-blocking, so that opening a FIFO with no writer returns at once;
   * then anything but a regular file is refused before it is read. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    int err = errno;
    *why = "cannot open";
    return -err;
  }
  struct stat st;
  if (fstat(fd, &st) < 0) {
    int err = errno;
    close(fd);
    *why = "cannot read";
    return -err;
  }
  if (S_ISDIR(st.st_mode)) {
    close(fd);
    *why = "cannot read";
    return -EISDIR;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    *why = file_kind(st.st_mode);
    return -EINVAL;
  }
  if ((uint64_t)st.st_size > MAX_FILE_BYTES) {
    close(fd);
    *why = "larger than 16 MiB";
    return -EFBIG;
  }
  return fd;
}

int gmt_config_load(const char *path, gmt_config_t **out, char **errors)
{
  *out = NULL;
  if (errors)
    *errors = NULL;

  const char *why = NULL;
  int fd = gmt_config_open(path, &why);
  if (fd < 0) {
    if (errors &&
        asprintf(errors, "%s: %s%s%s\n", path, why, fd == -EINVAL || fd == -EFBIG ? "" : ": ",
                 fd == -EINVAL || fd == -EFBIG ? "" : strerror(-fd)) < 0)
      *errors = NULL;
    return fd;
  }

  size_t len = 0, cap = 4096;
  char *buf = malloc(cap);
  if (!buf) {
    close(fd);
    return fail_io(path, "cannot read", ENOMEM, errors);
  }
  for (;;) {
    if (len == cap) {
      if (cap >= MAX_FILE_BYTES) {
        /* It grew while being read. */
        free(buf);
        close(fd);
        return fail_io(path, "cannot read", EFBIG, errors);
      }
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        close(fd);
        return fail_io(path, "cannot read", ENOMEM, errors);
      }
      buf = nb;
      cap *= 2;
    }
    ssize_t n = read(fd, buf + len, cap - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int err = errno;
      free(buf);
      close(fd);
      return fail_io(path, "cannot read", err, errors);
    }
    if (n == 0)
      break;
    len += (size_t)n;
  }
  close(fd);

  int rc = gmt_config_parse(path, buf, len, out, errors);
  free(buf);
  return rc;
}

void gmt_config_free(gmt_config_t *cfg)
{
  if (!cfg)
    return;
  free(cfg->pods);
  free(cfg->path);
  free(cfg);
}

static int cmp_name(const void *key, const void *elem)
{
  return strcmp(key, ((const gmt_pod_config_t *)elem)->name);
}

const gmt_pod_config_t *gmt_config_find(const gmt_config_t *cfg, const char *name)
{
  if (!cfg || !name || cfg->npods == 0)
    return NULL;
  return bsearch(name, cfg->pods, cfg->npods, sizeof *cfg->pods, cmp_name);
}

bool gmt_pod_config_allows(const gmt_pod_config_t *pod, int device)
{
  return gmt_podcfg_devices_allow(pod->devices, pod->ndevices, device);
}

uint64_t gmt_config_quotas_on(const gmt_config_t *cfg, int device, bool moves, size_t *pods,
                              size_t *npods)
{
  uint64_t sum = 0;
  size_t n = 0;
  for (size_t i = 0; cfg && i < cfg->npods; i++) {
    const gmt_pod_config_t *pod = &cfg->pods[i];
    if (gmt_mem_mode_moves(pod->mode) != moves || !gmt_pod_config_allows(pod, device))
      continue;
    sum = gmt_bytes_add(sum, pod->memory_limit);
    if (pods)
      pods[n] = i;
    n++;
  }
  if (npods)
    *npods = n;
  return sum;
}

const char *gmt_pod_config_devices_str(const gmt_pod_config_t *pod, char *buf, size_t len)
{
  return gmt_podcfg_devices_str(pod->devices, pod->ndevices, buf, len);
}

void gmt_pod_config_wire(const gmt_pod_config_t *pod, Gmt__PodConfig *pc)
{
  gmt__pod_config__init(pc);
  pc->name = (char *)pod->name;
  pc->request = pod->request;
  pc->limit = pod->limit;
  pc->memory_limit = pod->memory_limit;
  pc->pin = (Gmt__PinMode)pod->pin;
  pc->mode = (Gmt__MemMode)pod->mode;
  pc->class_ = (Gmt__PodClass)pod->klass;
  pc->idle_out_ms = pod->idle_out_ms;
  pc->n_devices = pod->ndevices;
  pc->devices = (int32_t *)pod->devices;
}
