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
 *   - volumes "gmt-hook" (an emptyDir), "gmt-run" (an emptyDir: the pod's
 *     own /run/gmt, where its pod manager's ipc socket is) and "gmt-node"
 *     (hostPath /run/gmt, the node's, where gmt-schd's socket is),
 *     appended, or /spec/volumes created;
 *   - init containers: "gmt-hook-copy" (the hook image's hook folder copied
 *     into gmt-hook) and "gmt-pmgr", a native sidecar (restartPolicy
 *     Always, Kubernetes >= 1.29) that the app containers start after, once
 *     it listens (a startup probe on its port): a hooked process that finds
 *     no pod manager at its first cuInit would run unhooked. It serves on
 *     /run/gmt/pmgr-<port>.sock (gmt-run) and reaches gmt-schd through
 *     gmt-node, mounted at GMT_WEBHOOK_NODE_RUN;
 *   - in each container: gmt-hook mounted read-only at the hook path,
 *     gmt-run read-only at /run/gmt (connecting to a socket needs no
 *     write access to its mount; only the sidecar may create one there),
 *     and env LD_PRELOAD=<hook path>/libgmthook.so (put before an
 *     LD_PRELOAD the container already sets),
 *     GMT_PMGR=ipc:///run/gmt/pmgr-<port>.sock (replacing one it sets: the
 *     kernel names a Unix peer's pid, where a loopback TCP peer costs the
 *     pod manager a walk of /proc), GMT_AUTO_DEVICE=pod (unless it sets
 *     GMT_AUTO_DEVICE: the hook confines its processes to the gmt pod's
 *     devices=, docs/devices.md) and GMT_FAIL_CLOSED=1 (replacing one it
 *     sets: a process that never heard its pod's quota fails its
 *     allocations rather than run unlimited, docs/operators.md).
 * A pod with more than GMT_WEBHOOK_MAX_CONTAINERS containers or init
 * containers, a container that mounts something at /run/gmt, or a patch
 * past GMT_WEBHOOK_PATCH_MAX bytes is refused.
 * Anything else (no annotation, already injected) gets no patch. */
#ifndef GMT_WEBHOOK_PATCH_H
#define GMT_WEBHOOK_PATCH_H

#include <json-c/json.h>
#include <stddef.h>

#define GMT_WEBHOOK_ANNOTATION "gmt.io/pod"
#define GMT_WEBHOOK_INJECTED "gmt.io/injected"
/* "false": the pod's processes run ungated while no pod manager has
 * registered them (GMT_FAIL_CLOSED=0); "true" or absent: they fail. */
#define GMT_WEBHOOK_FAIL_CLOSED "gmt.io/fail-closed"
#define GMT_WEBHOOK_POD_NAME_MAX 62 /* server/config.h's GMT_POD_NAME_MAX */
/* A real pod has at most a few dozen of each; the patch's work and size
 * grow with them. */
#define GMT_WEBHOOK_MAX_CONTAINERS 64
/* The patch's JSON, before base64: 64 containers' ops take about 40 KiB;
 * the rest is room for LD_PRELOAD values the containers already set. */
#define GMT_WEBHOOK_PATCH_MAX (256u << 10)
/* The pod's /run/gmt in every container (an emptyDir: its pod manager's
 * socket), and where the sidecar sees the node's /run/gmt (gmt-schd's). */
#define GMT_WEBHOOK_POD_RUN "/run/gmt"
#define GMT_WEBHOOK_NODE_RUN "/run/gmt-node"

typedef struct gmt_webhook_opts {
  const char *hook_image; /* holds libgmthook.so (and what it needs) in hook_path */
  const char *hook_path;  /* that folder in the image, and where containers see it */
  const char *pmgr_image; /* holds gmt-pmgr on its PATH */
  const char *schd_url;   /* gmt-schd as the sidecar reaches it (the node's
                             /run/gmt is at GMT_WEBHOOK_NODE_RUN there) */
  int pmgr_port;          /* the sidecar's loopback port and its socket's name */
} gmt_webhook_opts_t;

/* gmt:latest for both images, /usr/local/lib/gmt, ipc:///run/gmt-node/schd.sock, 50052. */
void gmt_webhook_opts_default(gmt_webhook_opts_t *o);

/* 0 when the options can be put in a patch; else -EINVAL and why (a hook
 * path that is not absolute or holds a space or ':', LD_PRELOAD's
 * separators; a --schd ipc socket in /run/gmt, which is the pod's own in
 * the sidecar). */
int gmt_webhook_opts_check(const gmt_webhook_opts_t *o, char *why, size_t size);

/* 0 and *patch = NULL: the pod is not ours (or already has gmt). 0 and
 * *patch = a new JSON array of operations. -EINVAL: the pod asks for gmt but
 * cannot have it (a bad pod name, a volume or container name taken, a
 * mount at /run/gmt, an LD_PRELOAD from valueFrom, too many containers, a
 * patch too large), why says so. -ENOMEM. */
int gmt_webhook_patch(json_object *pod, const gmt_webhook_opts_t *o, json_object **patch, char *why,
                      size_t size);

/* A JSON Pointer (RFC 6901) reference token for key: '~' as "~0", '/' as
 * "~1". -ENOSPC when out (size bytes) is too small. */
int gmt_json_pointer_escape(const char *key, char *out, size_t size);

/* 0 when name is a gmt pod name (resource-config.txt's ID rule); else
 * -EINVAL and why. */
int gmt_webhook_pod_name_check(const char *name, char *why, size_t size);

#endif
