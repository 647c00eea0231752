/* gmt-pmgr internals: the state of one pod manager and the entry points its
 * files share. The loop thread owns everything below "loop-owned"; nng
 * threads touch only the queue, under mu. */
#ifndef GMT_PMGR_H
#define GMT_PMGR_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "gmt_wire.h"

#define PMGR_FORWARD_TIMEOUT_MS 5000 /* Token/Reserve/Release/MemInfo */
#define PMGR_HB_TIMEOUT_MS 1000      /* the scheduler forgets a pod after 3 s */
#define PMGR_HB_PERIOD_MS 500
#define PMGR_HB_SOON_MS 5 /* after a change: coalesces a burst of reports */

/* The pod's shares as the scheduler last said them. */
typedef struct pmgr_config {
  char *name;
  double request;
  double limit;
  uint64_t memory_limit;
} pmgr_config_t;

typedef struct pmgr_proc pmgr_proc_t;
struct gmt_pmgr;

/* Work handed from an nng thread to the loop: a process's request, or the
 * outcome of a heartbeat (call == NULL). */
typedef struct pmgr_item {
  struct pmgr_item *next;
  gmt_call_t *call;
  int rc;
  Gmt__Envelope *rep;
  /* Set: the loop calls it instead (an upstream reply of pmgr_token.c;
   * the item is freed after, and rep is fn's to free). */
  void (*fn)(struct gmt_pmgr *pm, struct pmgr_item *item);
} pmgr_item_t;

typedef struct pmgr_tokens pmgr_tokens_t;

typedef struct gmt_pmgr {
  /* Fixed before the loop starts. */
  const char *name;
  const char *schd_url;
  uint64_t epoch; /* start time, CLOCK_REALTIME ns */
  gmt_client_t *schd;
  gmt_server_t *server;

  /* Loop-owned. */
  uv_loop_t *loop;
  uv_async_t wake;
  uv_signal_t sigterm, sigint;
  uv_timer_t hb_tick, hb_soon;
  pmgr_config_t config;
  pmgr_proc_t *procs;
  size_t nprocs;
  uint64_t seq;
  bool hb_in_flight, hb_dirty;
  bool schd_down; /* an outage has been logged and not yet its end */
  bool pod_unlisted;
  int exit_code;
  pmgr_item_t hb_item; /* the outcome of the heartbeat in flight */
  pmgr_tokens_t *tokens; /* pmgr_token.c, made at the first Token */

  /* Shared with nng threads. */
  pthread_mutex_t mu;
  pthread_cond_t forwards_done;
  bool stopping;      /* no more work is taken: everything is answered at once */
  int forwards;       /* forwarded calls whose reply has not come back */
  pmgr_item_t *head, *tail;
} gmt_pmgr_t;

/* pmgr_calls.c: the nng handler, the queue, forwarding. */
void gmt__pmgr_on_request(void *arg, gmt_call_t *call, const Gmt__Envelope *req);
void gmt__pmgr_on_wake(uv_async_t *h);
int gmt__pmgr_push(gmt_pmgr_t *pm, pmgr_item_t *item);
/* Stops taking work, answers what is queued, closes the scheduler client
 * and waits for forwarded calls to come back, so that gmt_server_free()
 * drops nothing that a callback still holds. */
void gmt__pmgr_quiesce(gmt_pmgr_t *pm);

/* pmgr_procs.c: the table of the pod's processes. */
void gmt__pmgr_handle_register(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__RegisterRequest *r);
void gmt__pmgr_handle_report(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__ReportRequest *r);
/* Fills an array of nprocs reports (totals only) for a heartbeat. */
void gmt__pmgr_proc_reports(gmt_pmgr_t *pm, Gmt__ProcessReport *out, Gmt__ProcessReport **ptrs);
void gmt__pmgr_procs_close(gmt_pmgr_t *pm);
void gmt__pmgr_fill_config(const gmt_pmgr_t *pm, Gmt__PodConfig *out);

/* pmgr_token.c: the pod's token, shared by its processes. */
void gmt__pmgr_handle_token(gmt_pmgr_t *pm, gmt_call_t *call, const Gmt__TokenRequest *r);
/* A process exited: whatever share of a token it had is given back. */
void gmt__pmgr_token_proc_gone(gmt_pmgr_t *pm, uint32_t pid);
/* Answers every waiting Token call and closes the timers (on stop). */
void gmt__pmgr_tokens_close(gmt_pmgr_t *pm);

/* pmgr_heartbeat.c: the pod's view, sent to the scheduler. */
int gmt__pmgr_heartbeat_init(gmt_pmgr_t *pm);
void gmt__pmgr_heartbeat_close(gmt_pmgr_t *pm);
/* Something in the pod changed: a heartbeat goes out within 20 ms. */
void gmt__pmgr_changed(gmt_pmgr_t *pm);
void gmt__pmgr_heartbeat_done(gmt_pmgr_t *pm, int rc, Gmt__Envelope *rep);
/* Takes a config from the scheduler, logging what changed. */
int gmt__pmgr_set_config(gmt_pmgr_t *pm, const Gmt__PodConfig *c, bool log_changes);

#endif
