/* The hook's connection to its pod manager (conn.c): a fork-safe REQ peer
 * of nng's SP protocol over tcp:// or ipc://, one call at a time. */
#ifndef GMT_HOOK_CONN_H
#define GMT_HOOK_CONN_H

#include "gmt_wire.h"

typedef struct gmt_conn gmt_conn_t;

/* Connects now (at most timeout_ms); fails at once when nobody listens. */
int gmt__conn_open(gmt_conn_t **c, const char *url, int timeout_ms);
void gmt__conn_close(gmt_conn_t *c);

/* From now on a call (and a dial on its behalf) gives up with -EHOSTDOWN
 * once *flag is nonzero, looked at every slice_ms while it waits: a peer
 * found dead by another call does not hold this one until its timeout. */
void gmt__conn_set_give_up(gmt_conn_t *c, const _Atomic int *flag, int slice_ms);

/* Sends req and waits at most timeout_ms for its reply (-ETIMEDOUT). A
 * broken connection is dialled again on the next call. *rep is freed with
 * gmt_wire_free(); an Error reply is a reply (see gmt_wire_expect()). */
int gmt__conn_call(gmt_conn_t *c, const Gmt__Envelope *req, Gmt__Envelope **rep, int timeout_ms);

#endif
