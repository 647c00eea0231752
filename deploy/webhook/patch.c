/* The JSONPatch that gives a Pod the hook, its env and a gmt-pmgr sidecar
 * (patch.h says what and why). Pure: JSON in, JSON out, no I/O. */
#include "patch.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOOK_VOLUME "gmt-hook"
#define RUN_VOLUME "gmt-run"   /* the pod's /run/gmt */
#define NODE_VOLUME "gmt-node" /* the node's /run/gmt */
#define HOOK_COPY "gmt-hook-copy"
#define PMGR "gmt-pmgr"
#define HOOK_STAGING "/mnt/gmt-hook" /* gmt-hook in the copying init container */

void gmt_webhook_opts_default(gmt_webhook_opts_t *o)
{
  o->hook_image = "gmt:latest";
  o->hook_path = "/usr/local/lib/gmt";
  o->pmgr_image = "gmt:latest";
  o->schd_url = "ipc://" GMT_WEBHOOK_NODE_RUN "/schd.sock";
  o->pmgr_port = 50052;
}

static int fail(char *why, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t size, const char *fmt, ...)
{
  if (why && size) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
  }
  return -EINVAL;
}

int gmt_webhook_opts_check(const gmt_webhook_opts_t *o, char *why, size_t size)
{
  if (!o->hook_image || !*o->hook_image || !o->pmgr_image || !*o->pmgr_image)
    return fail(why, size, "an image name is empty");
  if (!o->hook_path || o->hook_path[0] != '/')
    return fail(why, size, "the hook path '%s' is not absolute", o->hook_path ? o->hook_path : "");
  if (strlen(o->hook_path) > 256)
    return fail(why, size, "the hook path is longer than 256 bytes");
  if (strpbrk(o->hook_path, " :\t\n"))
    return fail(why, size, "the hook path '%s' holds a space or ':' (LD_PRELOAD's separators)",
                o->hook_path);
  if (!strcmp(o->hook_path, HOOK_STAGING))
    return fail(why, size, "the hook path may not be %s (the copying container's)", HOOK_STAGING);
  if (o->pmgr_port < 1 || o->pmgr_port > 65535)
    return fail(why, size, "the pod manager's port %d is not 1..65535", o->pmgr_port);
  if (!o->schd_url || !*o->schd_url)
    return fail(why, size, "the scheduler's URL is empty");
  if (!strncmp(o->schd_url, "ipc://" GMT_WEBHOOK_POD_RUN "/", 6 + strlen(GMT_WEBHOOK_POD_RUN) + 1))
    return fail(
        why, size,
        "the scheduler's URL %s is in %s, which is the pod's own folder in the sidecar (its "
        "pod manager's socket); the node's %s is at %s there",
        o->schd_url, GMT_WEBHOOK_POD_RUN, GMT_WEBHOOK_POD_RUN, GMT_WEBHOOK_NODE_RUN);
  return 0;
}

int gmt_json_pointer_escape(const char *key, char *out, size_t size)
{
  size_t n = 0;
  for (const char *p = key; *p; p++) {
    const char *put = *p == '~' ? "~0" : *p == '/' ? "~1" : NULL;
    size_t len = put ? 2 : 1;
    if (n + len >= size)
      return -ENOSPC;
    if (put)
      memcpy(out + n, put, 2);
    else
      out[n] = *p;
    n += len;
  }
  if (n >= size)
    return -ENOSPC;
  out[n] = '\0';
  return 0;
}

int gmt_webhook_pod_name_check(const char *name, char *why, size_t size)
{
  size_t len = strlen(name);
  if (len == 0 || len > GMT_WEBHOOK_POD_NAME_MAX)
    return fail(why, size, "annotation %s: a gmt pod name is 1 to %d characters, not %zu",
                GMT_WEBHOOK_ANNOTATION, GMT_WEBHOOK_POD_NAME_MAX, len);
  for (const char *p = name; *p; p++) {
    char c = *p;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
        c == '_' || c == '-')
      continue;
    if (c >= 0x20 && c < 0x7f)
      return fail(why, size,
                  "annotation %s: pod name has a bad character '%c' (allowed: A-Z a-z 0-9 . _ -)",
                  GMT_WEBHOOK_ANNOTATION, c);
    return fail(why, size,
                "annotation %s: pod name has a bad byte 0x%02x (allowed: A-Z a-z 0-9 . _ -)",
                GMT_WEBHOOK_ANNOTATION, (unsigned char)c);
  }
  return 0;
}

/* The patch under construction: any allocation that fails marks it, and
 * the caller gets -ENOMEM once at the end rather than a check per call. */
typedef struct builder {
  json_object *ops;
  bool oom;
} builder_t;

static json_object *str(builder_t *b, const char *s)
{
  json_object *o = json_object_new_string(s);
  if (!o)
    b->oom = true;
  return o;
}

static json_object *obj(builder_t *b)
{
  json_object *o = json_object_new_object();
  if (!o)
    b->oom = true;
  return o;
}

static json_object *arr(builder_t *b)
{
  json_object *o = json_object_new_array();
  if (!o)
    b->oom = true;
  return o;
}

/* Takes value (which may be NULL after a failed allocation: then it is the oom case). */
static void put(builder_t *b, json_object *o, const char *key, json_object *value)
{
  if (!o || !value || json_object_object_add(o, key, value) != 0) {
    b->oom = true;
    json_object_put(value);
  }
}

static void push(builder_t *b, json_object *a, json_object *value)
{
  if (!a || !value || json_object_array_add(a, value) != 0) {
    b->oom = true;
    json_object_put(value);
  }
}

static void op(builder_t *b, const char *verb, const char *path, json_object *value)
{
  json_object *o = obj(b);
  put(b, o, "op", str(b, verb));
  put(b, o, "path", str(b, path));
  put(b, o, "value", value);
  push(b, b->ops, o);
}

/* Appends value to the array at path in the pod: "path/-" when the array
 * exists, else the array created with value in it. */
static void append(builder_t *b, const char *path, bool exists, json_object *value)
{
  char p[256];
  if (exists) {
    snprintf(p, sizeof p, "%s/-", path);
    op(b, "add", p, value);
  } else {
    json_object *a = arr(b);
    push(b, a, value);
    op(b, "add", path, a);
  }
}

static json_object *get(json_object *o, const char *key, json_type type)
{
  json_object *v = NULL;
  if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, type))
    return NULL;
  return v;
}

/* Whether an array of objects (volumes, containers) has one named name. */
static bool named(json_object *list, const char *name)
{
  size_t n = list ? json_object_array_length(list) : 0;
  for (size_t i = 0; i < n; i++) {
    json_object *s = get(json_object_array_get_idx(list, i), "name", json_type_string);
    if (s && !strcmp(json_object_get_string(s), name))
      return true;
  }
  return false;
}

static json_object *mount(builder_t *b, const char *volume, const char *path, bool ro)
{
  json_object *m = obj(b);
  put(b, m, "name", str(b, volume));
  put(b, m, "mountPath", str(b, path));
  if (ro)
    put(b, m, "readOnly", json_object_new_boolean(1));
  return m;
}

static json_object *env_var(builder_t *b, const char *name, const char *value)
{
  json_object *e = obj(b);
  put(b, e, "name", str(b, name));
  put(b, e, "value", str(b, value));
  return e;
}

static json_object *strings(builder_t *b, const char *const *v, size_t n)
{
  json_object *a = arr(b);
  for (size_t i = 0; i < n; i++)
    push(b, a, str(b, v[i]));
  return a;
}

static json_object *hook_copy_container(builder_t *b, const gmt_webhook_opts_t *o)
{
  char from[512];
  snprintf(from, sizeof from, "%s/.", o->hook_path);
  const char *cmd[] = {"cp", "-a", from, HOOK_STAGING "/"};
  json_object *c = obj(b);
  put(b, c, "name", str(b, HOOK_COPY));
  put(b, c, "image", str(b, o->hook_image));
  put(b, c, "command", strings(b, cmd, 4));
  json_object *mounts = arr(b);
  push(b, mounts, mount(b, HOOK_VOLUME, HOOK_STAGING, false));
  put(b, c, "volumeMounts", mounts);
  return c;
}

static json_object *pmgr_container(builder_t *b, const gmt_webhook_opts_t *o, const char *pod)
{
  char port[16], sock[64];
  snprintf(port, sizeof port, "%d", o->pmgr_port);
  /* Its own default too; named here so that it and GMT_PMGR cannot part. */
  snprintf(sock, sizeof sock, GMT_WEBHOOK_POD_RUN "/pmgr-%d.sock", o->pmgr_port);
  const char *cmd[] = {"gmt-pmgr", "--port",    port,    "--name", pod,
                       "--schd",   o->schd_url, "--ipc", sock};
  json_object *c = obj(b);
  put(b, c, "name", str(b, PMGR));
  put(b, c, "image", str(b, o->pmgr_image));
  put(b, c, "command", strings(b, cmd, sizeof cmd / sizeof *cmd));
  put(b, c, "restartPolicy", str(b, "Always"));
  json_object *mounts = arr(b);
  push(b, mounts, mount(b, RUN_VOLUME, GMT_WEBHOOK_POD_RUN, false));
  push(b, mounts, mount(b, NODE_VOLUME, GMT_WEBHOOK_NODE_RUN, false));
  put(b, c, "volumeMounts", mounts);
  json_object *tcp = obj(b), *probe = obj(b);
  put(b, tcp, "port", json_object_new_int(o->pmgr_port));
  put(b, probe, "tcpSocket", tcp);
  put(b, probe, "periodSeconds", json_object_new_int(1));
  put(b, probe, "failureThreshold", json_object_new_int(60));
  put(b, c, "startupProbe", probe);
  return c;
}

/* Whether a mount path is path, a trailing '/' aside. */
static bool same_path(const char *a, const char *path)
{
  size_t n = strlen(path);
  return !strncmp(a, path, n) && (a[n] == '\0' || (a[n] == '/' && a[n + 1] == '\0'));
}

/* The ops of container i: its mounts, then its env: LD_PRELOAD before the
 * container's own, GMT_PMGR and GMT_FAIL_CLOSED replaced or added (the
 * operator's, not the pod's), GMT_AUTO_DEVICE=pod added unless the
 * container sets GMT_AUTO_DEVICE (its own choice: =N picks, =0 is off). */
static int container_ops(builder_t *b, json_object *c, size_t i, const gmt_webhook_opts_t *o,
                         const char *closed, char *why, size_t size)
{
  char base[64], path[128], hook[600], pmgr[96];
  snprintf(base, sizeof base, "/spec/containers/%zu", i);
  snprintf(hook, sizeof hook, "%s/libgmthook.so", o->hook_path);
  snprintf(pmgr, sizeof pmgr, "ipc://" GMT_WEBHOOK_POD_RUN "/pmgr-%d.sock", o->pmgr_port);

  json_object *mounts = get(c, "volumeMounts", json_type_array);
  size_t nm = mounts ? json_object_array_length(mounts) : 0;
  for (size_t j = 0; j < nm; j++) {
    json_object *mp = get(json_object_array_get_idx(mounts, j), "mountPath", json_type_string);
    if (mp && same_path(json_object_get_string(mp), GMT_WEBHOOK_POD_RUN))
      return fail(why, size,
                  "container %zu mounts a volume at %s, where gmt puts its pod manager's socket", i,
                  GMT_WEBHOOK_POD_RUN);
  }
  snprintf(path, sizeof path, "%s/volumeMounts", base);
  append(b, path, mounts != NULL, mount(b, HOOK_VOLUME, o->hook_path, true));
  append(b, path, true, mount(b, RUN_VOLUME, GMT_WEBHOOK_POD_RUN, true));

  json_object *env = get(c, "env", json_type_array);
  bool have_preload = false, have_pmgr = false, have_autodev = false, have_closed = false;
  size_t n = env ? json_object_array_length(env) : 0;
  for (size_t j = 0; j < n; j++) {
    json_object *e = json_object_array_get_idx(env, j);
    json_object *name = get(e, "name", json_type_string);
    if (!name)
      continue;
    const char *nm = json_object_get_string(name);
    if (!strcmp(nm, "LD_PRELOAD") && !have_preload) {
      have_preload = true;
      if (get(e, "valueFrom", json_type_object))
        return fail(
            why, size,
            "container %zu sets LD_PRELOAD from valueFrom; gmt cannot put its hook before it", i);
      json_object *v = get(e, "value", json_type_string);
      const char *old = v ? json_object_get_string(v) : "";
      char *both = NULL;
      if (asprintf(&both, "%s%s%s", hook, *old ? " " : "", old) < 0) {
        b->oom = true;
        return -ENOMEM;
      }
      snprintf(path, sizeof path, "%s/env/%zu/value", base, j);
      op(b, "add", path, str(b, both));
      free(both);
    } else if (!strcmp(nm, "GMT_PMGR") && !have_pmgr) {
      have_pmgr = true;
      snprintf(path, sizeof path, "%s/env/%zu", base, j);
      op(b, "replace", path, env_var(b, "GMT_PMGR", pmgr));
    } else if (!strcmp(nm, "GMT_FAIL_CLOSED") && !have_closed) {
      have_closed = true;
      snprintf(path, sizeof path, "%s/env/%zu", base, j);
      op(b, "replace", path, env_var(b, "GMT_FAIL_CLOSED", closed));
    } else if (!strcmp(nm, "GMT_AUTO_DEVICE")) {
      have_autodev = true;
    }
  }
  snprintf(path, sizeof path, "%s/env", base);
  bool exists = env != NULL;
  if (!have_preload) {
    append(b, path, exists, env_var(b, "LD_PRELOAD", hook));
    exists = true;
  }
  if (!have_pmgr) {
    append(b, path, exists, env_var(b, "GMT_PMGR", pmgr));
    exists = true;
  }
  /* Before main, the hook asks the pod manager for the pod's GPUs and, when
   * the gmt pod has devices=, shows the process only those (hook/memory/autodev.c):
   * its device 0 is then one gmt-schd lets it use. */
  if (!have_autodev) {
    append(b, path, exists, env_var(b, "GMT_AUTO_DEVICE", "pod"));
    exists = true;
  }
  /* A process that never heard its pod's quota waits for its pod manager,
   * bounded, and then fails its allocations and launches rather than run
   * unlimited, unless the pod's annotation says otherwise. */
  if (!have_closed)
    append(b, path, exists, env_var(b, "GMT_FAIL_CLOSED", closed));
  return 0;
}

int gmt_webhook_patch(json_object *pod, const gmt_webhook_opts_t *o, json_object **patch, char *why,
                      size_t size)
{
  *patch = NULL;
  json_object *meta = get(pod, "metadata", json_type_object);
  json_object *ann = get(meta, "annotations", json_type_object);
  json_object *value = NULL;
  if (!ann || !json_object_object_get_ex(ann, GMT_WEBHOOK_ANNOTATION, &value))
    return 0; /* not a gmt pod */
  if (!json_object_is_type(value, json_type_string))
    return fail(why, size, "annotation %s is not a string", GMT_WEBHOOK_ANNOTATION);
  const char *name = json_object_get_string(value);
  int rc = gmt_webhook_pod_name_check(name, why, size);
  if (rc < 0)
    return rc;
  const char *closed = "1";
  json_object *fc = NULL;
  if (json_object_object_get_ex(ann, GMT_WEBHOOK_FAIL_CLOSED, &fc)) {
    const char *v = json_object_is_type(fc, json_type_string) ? json_object_get_string(fc) : "";
    if (strcmp(v, "true") && strcmp(v, "false"))
      return fail(why, size, "annotation %s is \"true\" or \"false\"", GMT_WEBHOOK_FAIL_CLOSED);
    closed = strcmp(v, "false") ? "1" : "0";
  }

  json_object *spec = get(pod, "spec", json_type_object);
  json_object *containers = get(spec, "containers", json_type_array);
  if (!containers || json_object_array_length(containers) == 0)
    return fail(why, size, "the pod has no spec.containers");
  json_object *inits = get(spec, "initContainers", json_type_array);
  json_object *volumes = get(spec, "volumes", json_type_array);
  if (json_object_object_get_ex(ann, GMT_WEBHOOK_INJECTED, NULL) || named(inits, PMGR) ||
      named(containers, PMGR))
    return 0; /* it has gmt already: a second pass adds nothing */
  size_t n = json_object_array_length(containers), ni = inits ? json_object_array_length(inits) : 0;
  if (n > GMT_WEBHOOK_MAX_CONTAINERS || ni > GMT_WEBHOOK_MAX_CONTAINERS)
    return fail(why, size, "the pod has %zu %s; gmt hooks pods of at most %d of each",
                n > GMT_WEBHOOK_MAX_CONTAINERS ? n : ni,
                n > GMT_WEBHOOK_MAX_CONTAINERS ? "containers" : "init containers",
                GMT_WEBHOOK_MAX_CONTAINERS);
  const char *taken = named(volumes, HOOK_VOLUME)                               ? HOOK_VOLUME
                      : named(volumes, RUN_VOLUME)                              ? RUN_VOLUME
                      : named(volumes, NODE_VOLUME)                             ? NODE_VOLUME
                      : named(inits, HOOK_COPY) || named(containers, HOOK_COPY) ? HOOK_COPY
                                                                                : NULL;
  if (taken)
    return fail(why, size, "the pod already has a volume or container named '%s', which gmt adds",
                taken);

  builder_t b = {.ops = json_object_new_array()};
  if (!b.ops)
    return -ENOMEM;
  char key[128], path[160];
  if (gmt_json_pointer_escape(GMT_WEBHOOK_INJECTED, key, sizeof key) == 0) {
    snprintf(path, sizeof path, "/metadata/annotations/%s", key);
    op(&b, "add", path, str(&b, name));
  }
  json_object *host_pid = get(spec, "hostPID", json_type_boolean);
  if (!host_pid || !json_object_get_boolean(host_pid)) /* the API refuses both */
    op(&b, "add", "/spec/shareProcessNamespace", json_object_new_boolean(1));

  json_object *hook = obj(&b), *run = obj(&b), *node = obj(&b), *hp = obj(&b);
  put(&b, hook, "name", str(&b, HOOK_VOLUME));
  put(&b, hook, "emptyDir", obj(&b));
  put(&b, run, "name", str(&b, RUN_VOLUME));
  put(&b, run, "emptyDir", obj(&b));
  put(&b, hp, "path", str(&b, "/run/gmt"));
  put(&b, hp, "type", str(&b, "Directory"));
  put(&b, node, "name", str(&b, NODE_VOLUME));
  put(&b, node, "hostPath", hp);
  append(&b, "/spec/volumes", volumes != NULL, hook);
  append(&b, "/spec/volumes", true, run);
  append(&b, "/spec/volumes", true, node);

  append(&b, "/spec/initContainers", inits != NULL, hook_copy_container(&b, o));
  append(&b, "/spec/initContainers", true, pmgr_container(&b, o, name));

  for (size_t i = 0; i < n && rc == 0; i++) {
    json_object *c = json_object_array_get_idx(containers, i);
    if (!json_object_is_type(c, json_type_object))
      rc = fail(why, size, "spec.containers[%zu] is not an object", i);
    else
      rc = container_ops(&b, c, i, o, closed, why, size);
  }
  if (rc == 0 && b.oom)
    rc = -ENOMEM;
  if (rc == 0) {
    /* Measured as review.c will send it. */
    const char *text = json_object_to_json_string_ext(b.ops, JSON_C_TO_STRING_PLAIN |
                                                                 JSON_C_TO_STRING_NOSLASHESCAPE);
    size_t len = text ? strlen(text) : 0;
    if (!text)
      rc = -ENOMEM;
    else if (len > GMT_WEBHOOK_PATCH_MAX)
      rc = fail(why, size, "the patch would be %zu bytes, over gmt-webhook's %u", len,
                GMT_WEBHOOK_PATCH_MAX);
  }
  if (rc < 0) {
    json_object_put(b.ops);
    return rc;
  }
  *patch = b.ops;
  return 0;
}
