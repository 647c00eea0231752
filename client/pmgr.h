/* gmt-pmgr internals: the state of one pod manager and the entry points its
 * files share. The loop thread owns everything below "loop-owned"; nng
 * threads touch only the inbox and what is under mu. */
#ifndef GMT_PMGR_H
#define GMT_PMGR_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "gmt_inbox.h"
#include "gmt_wire.h"

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

typedef struct pmgr_tokens pmgr_tokens_t;

typedef struct gmt_pmgr {
  /* Fixed before the loop starts. */
  const char *name;
  const char *schd_url;
  uint64_t epoch; /* start time, CLOCK_REALTIME ns */
  gmt_client_t *schd;
  gmt_server_t *server;

  gmt_inbox_t inbox; /* nng threads -> loop: requests and replies */

  /* Loop-owned. */
  uv_loop_t *loop;
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
  /* The outcome of the heartbeat in flight, on its way to the loop. */
  gmt_inbox_item_t hb_item;
  int hb_rc;
  Gmt__Envelope *hb_rep;
  pmgr_tokens_t *tokens; /* pmgr_token.c, made at the first Token */

  /* Shared with nng threads (pmgr_schd.c). */
  pthread_mutex_t mu;
  pthread_cond_t calls_done;
  bool stopping; /* no more calls to the scheduler */
  int calls;     /* calls to the scheduler whose callback has not returned */
} gmt_pmgr_t;

/* pmgr_schd.c: the line to the scheduler. */
/* Calls the scheduler from any thread (gmt_client_call_async()): cb runs
 * on an nng thread. -ESHUTDOWN once closing has begun. */
int gmt__pmgr_schd_call(gmt_pmgr_t *pm, const Gmt__Envelope *req, int timeout_ms,
                        gmt_client_cb cb, void *arg);
/* Refuses new calls, closes the client (which fails the calls in flight)
 * and waits until their callbacks have returned. */
void gmt__pmgr_schd_close(gmt_pmgr_t *pm);

/* pmgr_calls.c: the nng handler, forwarding. */
void gmt__pmgr_on_request(void *arg, gmt_call_t *call, const Gmt__Envelope *req);

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
/* Takes a config from the scheduler, logging what changed. */
int gmt__pmgr_set_config(gmt_pmgr_t *pm, const Gmt__PodConfig *c, bool log_changes);

#endif
