/* gmt-pmgr's state: one struct for the pod manager, shared by its files
 * (each declares its functions in its own header). The loop thread owns
 * everything below "loop-owned"; nng threads touch only the inbox and the
 * scheduler line's fields, each under its own lock. */
#ifndef GMT_PMGR_STATE_H
#define GMT_PMGR_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "gmt_inbox.h"
#include "gmt_peer.h"
#include "gmt_podconfig.h"
#include "gmt_wire.h"

typedef struct pmgr_proc pmgr_proc_t;
typedef struct pmgr_tokens pmgr_tokens_t;
typedef struct pmgr_mem_proc pmgr_mem_proc_t;
typedef struct pmgr_held pmgr_held_t;

typedef struct gmt_pmgr {
  /* Fixed before the loop starts. */
  const char *name;
  const char *schd_url;
  uint64_t epoch; /* start time, CLOCK_REALTIME ns */
  gmt_client_t *schd;
  gmt_server_t *server;
  gmt_admit_t admit; /* the users whose processes may join the pod */

  gmt_inbox_t inbox; /* nng threads -> loop: requests and replies */

  /* Loop-owned. */
  uv_loop_t *loop;
  uv_signal_t sigterm, sigint;
  uv_timer_t hb_tick, hb_soon;
  /* The pod's shares as the scheduler last said them (gmt_podconfig.h:
   * owned, gmt_podcfg_copy). */
  Gmt__PodConfig config;
  pmgr_proc_t *procs;
  size_t nprocs;
  /* Told of every change to the process table (pmgr_procs.h). */
  void (*procs_cb)(struct gmt_pmgr *pm, uint32_t pid, bool gone);
  uint64_t seq;
  bool hb_in_flight, hb_dirty;
  uint64_t hb_sent_ms; /* the loop's clock when the last heartbeat went */
  bool schd_down;      /* an outage has been logged and not yet its end */
  bool pod_unlisted;
  /* mode=swap: the last heartbeat reply's prepare, passed on with every
   * Report reply (false once a heartbeat fails). */
  bool prepare, prepare_bounded;
  uint64_t prepare_host_room;
  /* The outcome of the heartbeat in flight, on its way to the loop. */
  gmt_inbox_item_t hb_item;
  int hb_rc;
  Gmt__Envelope *hb_rep;
  pmgr_tokens_t *tokens;      /* pmgr_token.c, made at the first Token */
  pmgr_mem_proc_t *mem_local; /* pmgr_memory.c: grants made here since the reports */
  /* pmgr_memory.c: Reserves refused for the quota, held while the pod's
   * processes give back their slack (client/pmgr/slack_policy.h); each Report
   * reply asks for slack while nheld > 0. */
  pmgr_held_t *held; /* in arrival order */
  size_t nheld;
  uv_timer_t held_timer;

  /* Closing the line to the scheduler left calls whose callback had not
   * returned (pmgr_schd.h): the server must outlive them. */
  bool schd_left_calls;

  /* Shared with nng threads (pmgr_schd.c). */
  pthread_mutex_t mu;
  bool stopping; /* no more calls to the scheduler */
  /* The pod's total in the ledger as the last Reserve or Release reply
   * passed back said it, and how many such replies came (pmgr_memory.c:
   * when a held Reserve is worth asking again). */
  _Atomic uint64_t ledger_seen, ledger_news;
} gmt_pmgr_t;

#endif
