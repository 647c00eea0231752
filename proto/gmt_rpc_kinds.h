/* What each kind of envelope body is, in one table below both daemons:
 * its name, whether it is a request and which reply answers it, which of
 * its fields name the caller's pod and process, whether it only reads,
 * how a pod manager serves it and what the pod manager answers when
 * gmt-schd cannot be reached. gmt-schd and gmt-pmgr look these facts up
 * here instead of each keeping a switch of its own; their handlers stay
 * theirs. Adding an RPC is one row in rpc_kinds.c plus its handlers. */
#ifndef GMT_RPC_KINDS_H
#define GMT_RPC_KINDS_H

#include <stdbool.h>
#include <stdint.h>

#include "gmt.pb-c.h"

/* How a pod manager serves a request from its pod's processes. */
typedef enum {
  GMT_RPC_PMGR_NONE = 0, /* refused: not a process's call (or a reply) */
  GMT_RPC_PMGR_OWN,      /* answered from the pod manager's process table */
  GMT_RPC_PMGR_SHARE,    /* the pod's one token, shared among its processes */
  GMT_RPC_PMGR_FORWARD,  /* sent on to gmt-schd with the pod's name, its answer passed back */
} gmt_rpc_pmgr_t;

/* What a pod manager answers a request while gmt-schd is unreachable. */
typedef enum {
  GMT_RPC_OUTAGE_NONE = 0, /* nothing of its own: not asked of gmt-schd */
  GMT_RPC_OUTAGE_COUNT,    /* from its count of the pod's memory (client/pmgr/outage_policy.h) */
  GMT_RPC_OUTAGE_GRANT,    /* granted, marked unreachable: refusing would stall the process */
  GMT_RPC_OUTAGE_REFUSE,   /* refused: only gmt-schd sees the node */
  GMT_RPC_OUTAGE_UNKNOWN,  /* answered "unknown", which the process then keeps as it was */
} gmt_rpc_outage_t;

typedef struct gmt_rpc_kind {
  const char *name;              /* "Reserve", "ReserveReply": as logs and errors say it */
  Gmt__Envelope__BodyCase reply; /* the reply that answers it; NOT_SET for a reply */
  /* Its fields that name the caller's pod and process (a path through
   * sub-messages, "process.pid"), NULL where it names none. A pod field
   * that only selects is not the caller's (TraceSpots': whose trace an
   * operator reads). */
  const char *pod, *pid;
  bool view; /* only reads: any local user may ask gmt-schd (docs/security.md) */
  gmt_rpc_pmgr_t pmgr;
  gmt_rpc_outage_t outage;
  int pmgr_wait_ms; /* how long a pod manager waits for gmt-schd on it (FORWARD) */
} gmt_rpc_kind_t;

/* A pod manager's wait for gmt-schd on a forwarded memory call: well below
 * the hook's own bound on one (1.5 s), so that a process gets the pod's
 * answer, not its own. */
#define GMT_RPC_PMGR_WAIT_MS 800

/* The row of body case c; NULL when c is no body of the envelope. */
const gmt_rpc_kind_t *gmt_rpc_kind(Gmt__Envelope__BodyCase c);

/* The body case of row k (the table is indexed by it). */
Gmt__Envelope__BodyCase gmt_rpc_case(const gmt_rpc_kind_t *k);

/* Where env's request names the caller's pod (a string field, in env's
 * own message) or process; NULL when its kind names none. Writing
 * through the pointer changes env's body. */
char **gmt_rpc_pod(const Gmt__Envelope *env);
uint32_t *gmt_rpc_pid(const Gmt__Envelope *env);

/* Sets *out to env with its caller's pod replaced by pod, for forwarding:
 * the body is copied shallowly into *copy (free() it once out is packed),
 * so that env and the strings both point to stay untouched. -EINVAL when
 * env's kind names no pod, -ENOMEM. */
int gmt_rpc_with_pod(const Gmt__Envelope *env, const char *pod, Gmt__Envelope *out, void **copy);

#endif
