/* gmt-schd's state: one struct, owned by the libuv loop thread. Only the
 * request queue is touched from other threads (nng's), under its mutex. */
#ifndef GMT_SERVER_SCHD_H
#define GMT_SERVER_SCHD_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "config.h"
#include "gmt_wire.h"
#include "pods.h"
#include "store.h"

/* A request waiting for the loop thread. */
typedef struct gmt__queued {
  struct gmt__queued *next;
  gmt_call_t *call;
} gmt__queued_t;

typedef struct gmt_schd {
  uv_loop_t *loop;
  gmt_config_t *cfg;
  const char *config_path;
  gmt_pods_t *pods;
  gmt_store_t *store;
  gmt_server_t *server;
  uint64_t pod_timeout_ms;

  uv_async_t wake; /* nng threads -> loop: the queue has calls */
  uv_mutex_t qlock;
  gmt__queued_t *qhead, **qtail;

  uv_timer_t expiry; /* disconnects silent pods */
  uv_signal_t sigterm, sigint, sighup;
  bool stopping;
} gmt_schd_t;

/* Answers one request (rpc.c); the loop thread only. */
void gmt__rpc_handle(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req);

#endif
