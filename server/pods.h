/* The pod and process table: for each configured pod, whether its pod
 * manager is connected and which processes it last reported. Owned by the
 * loop thread. */
#ifndef GMT_SERVER_PODS_H
#define GMT_SERVER_PODS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "gmt.pb-c.h"
#include "store.h"

typedef struct gmt_proc {
  uint32_t pid; /* as its pod manager reported it: in the pod manager's PID namespace */
  /* Its pid on the node (nspid.h), for NVML and the tracer: 0 until looked
   * up (rpc.c, once), and 0 when it could not be found. */
  uint32_t node_pid;
  bool node_pid_tried;
  char *exe;
  /* What its last report said it measures, held whole (gmt_counters.h);
   * the pinned and swap bytes are held to its grants by rpc_memory.c
   * (reports.h), and the ledgers rebuild from memory_reserved and
   * pinned_advised, rpc_swap.c resident bytes from swap_gpu. */
  Gmt__ProcessCounters c;
} gmt_proc_t;

/* p's pid on the node, 0 when not known (nspid.h); its reported pid
 * until looked up. */
static inline uint32_t gmt_proc_node_pid(const gmt_proc_t *p)
{
  return p->node_pid_tried ? p->node_pid : p->pid;
}

/* Why gmt-schd refused a pod something (PodStatus.refused_*): a Reserve
 * past its GPU_MEM, past the card's declared space, on a GPU its devices=
 * does not name (memory, resident memory or a token), a token at LIMIT 0. */
enum {
  GMT_REFUSED_QUOTA = 0,
  GMT_REFUSED_SPACE = 1,
  GMT_REFUSED_DEVICES = 2,
  GMT_REFUSED_LIMIT = 3,
  GMT_REFUSED_WHYS
};

typedef struct gmt_pod {
  gmt_pod_config_t cfg;
  bool connected;
  bool have_seq;         /* epoch and seq hold a heartbeat's */
  uint64_t epoch, seq;   /* of the last heartbeat applied */
  uint64_t last_seen_ms; /* monotonic, last Register or Heartbeat */
  int64_t owner_pid;     /* the pod manager that speaks for it (rpc.c), 0: none yet */
  /* When a refusal past its quota, or a report past its grants, was last
   * logged (monotonic ms; 0: never): one line a period, however often it
   * asks or says it. */
  uint64_t said_quota_ms, said_report_ms;
  /* Refusals by why (GMT_REFUSED_*, gmt_pods_refused); the last one's
   * words and when (Unix seconds; 0: none). */
  uint64_t refused[GMT_REFUSED_WHYS];
  char last_refusal[256];
  double last_refusal_unix;
  double limit_wait_ms; /* its ended spells waiting for a token at its LIMIT (rpc_token.c) */
  size_t nprocs;
  gmt_proc_t *procs; /* sorted by pid */
} gmt_pod_t;

typedef struct gmt_pods {
  size_t npods;
  gmt_pod_t *pods;    /* sorted by name, as the config */
  gmt_store_t *store; /* may be NULL */
} gmt_pods_t;

/* A table with one disconnected pod per configured pod. */
int gmt_pods_new(gmt_pods_t **out, const gmt_config_t *cfg, gmt_store_t *store);
void gmt_pods_free(gmt_pods_t *p);

gmt_pod_t *gmt_pods_find(gmt_pods_t *p, const char *name);

/* gmt-schd refused pod something for why (GMT_REFUSED_*) in these words:
 * counted, and kept with the wall clock's time as its last refusal. */
void gmt_pods_refused(gmt_pod_t *pod, int why, const char *words);

/* A pod manager said hello (Register, or the first heartbeat). */
void gmt_pods_register(gmt_pods_t *p, gmt_pod_t *pod, uint64_t now_ms);

/* Applies a heartbeat: the pod's process table becomes req's list. Returns
 * false, changing nothing, for a late duplicate (same epoch, seq not
 * newer). */
bool gmt_pods_heartbeat(gmt_pods_t *p, gmt_pod_t *pod, const Gmt__HeartbeatRequest *req,
                        uint64_t now_ms);

/* Marks disconnected every connected pod not heard from since
 * now_ms - timeout_ms, forgetting its processes. Returns how many. */
int gmt_pods_expire(gmt_pods_t *p, uint64_t now_ms, uint64_t timeout_ms);

/* Takes a new config: pods that stay keep their state with their new
 * shares, removed pods are dropped (their processes recorded as ended),
 * added pods start disconnected. Logs what changed. On failure (-ENOMEM)
 * the table is unchanged. */
int gmt_pods_reload(gmt_pods_t *p, const gmt_config_t *cfg);

#endif
