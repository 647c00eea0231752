/* The JSONPatch (RFC 6902) that gives a Pod gmt: a pure function of the
 * Pod's JSON and the webhook's options, apart from the HTTP server so that
 * unit tests cover every decision (test/unit/test_webhook.c).
 *
 * A Pod whose metadata.annotations carries GMT_WEBHOOK_ANNOTATION ("gmt.io/pod")
 * naming a gmt pod (1..62 of A-Z a-z 0-9 . _ -, as resource-config.txt's IDs)
 * gets, in this order:
 *   - the annotation "gmt.io/injected" (the pod's name): a second pass
 *     (reinvocation, a replayed request) adds nothing;
 *   - shareProcessNamespace: true (the pod manager must see its pod's
 *     processes: docs/status.md), unless the pod has hostPID;
 *   - volumes "gmt-hook" (an emptyDir) and "gmt-run" (hostPath /run/gmt,
 *     where gmt-schd's socket is), appended, or /spec/volumes created;
 *   - init containers: "gmt-hook-copy" (the hook image's hook folder copied
 *     into gmt-hook) and "gmt-pmgr", a native sidecar (restartPolicy
 *     Always, Kubernetes >= 1.29) that the app containers start after, once
 *     it listens (a startup probe on its port): a hooked process that finds
 *     no pod manager at its first cuInit would run unhooked;
 *   - in each container: gmt-hook mounted read-only at the hook path, and
 *     env LD_PRELOAD=<hook path>/libgmthook.so (put before an LD_PRELOAD
 *     the container already sets), GMT_PMGR=tcp://127.0.0.1:<port>
 *     (replacing one it sets) and GMT_AUTO_DEVICE=pod (unless it sets
 *     GMT_AUTO_DEVICE: the hook confines its processes to the gmt pod's
 *     devices=, docs/devices.md).
 * Anything else (no annotation, already injected) gets no patch. */
#ifndef GMT_WEBHOOK_PATCH_H
#define GMT_WEBHOOK_PATCH_H

#include <json-c/json.h>
#include <stddef.h>

#define GMT_WEBHOOK_ANNOTATION "gmt.io/pod"
#define GMT_WEBHOOK_INJECTED "gmt.io/injected"
#define GMT_WEBHOOK_POD_NAME_MAX 62 /* server/config.h's GMT_POD_NAME_MAX */

typedef struct gmt_webhook_opts {
  const char *hook_image; /* holds libgmthook.so (and what it needs) in hook_path */
  const char *hook_path;  /* that folder in the image, and where containers see it */
  const char *pmgr_image; /* holds gmt-pmgr on its PATH */
  const char *schd_url;   /* gmt-schd as the sidecar reaches it */
  int pmgr_port;          /* the sidecar's loopback port, GMT_PMGR's */
} gmt_webhook_opts_t;

/* gmt:latest for both images, /usr/local/lib/gmt, ipc:///run/gmt/schd.sock, 50052. */
void gmt_webhook_opts_default(gmt_webhook_opts_t *o);

/* 0 when the options can be put in a patch; else -EINVAL and why (a hook
 * path that is not absolute or holds a space or ':', LD_PRELOAD's separators). */
int gmt_webhook_opts_check(const gmt_webhook_opts_t *o, char *why, size_t size);

/* 0 and *patch = NULL: the pod is not ours (or already has gmt). 0 and
 * *patch = a new JSON array of operations. -EINVAL: the pod asks for gmt but
 * cannot have it (a bad pod name, a volume or container name taken, an
 * LD_PRELOAD from valueFrom), why says so. -ENOMEM. */
int gmt_webhook_patch(json_object *pod, const gmt_webhook_opts_t *o, json_object **patch, char *why,
                      size_t size);

/* A JSON Pointer (RFC 6901) reference token for key: '~' as "~0", '/' as
 * "~1". -ENOSPC when out (size bytes) is too small. */
int gmt_json_pointer_escape(const char *key, char *out, size_t size);

/* 0 when name is a gmt pod name (resource-config.txt's ID rule); else
 * -EINVAL and why. */
int gmt_webhook_pod_name_check(const char *name, char *why, size_t size);

#endif
