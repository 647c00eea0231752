/* An inbox: work handed from other threads (nng's) to one libuv loop, so
 * that the loop's state needs no locks. Any thread pushes an item; the
 * loop runs each item's callback in push order. The inbox names no user:
 * an item carries its callback, and the user's struct embeds the item (as
 * it embeds a libuv request) and finds itself from it.
 *
 * Closing is a gate: from gmt_inbox_close() on, a push fails with
 * -ESHUTDOWN, and the items still queued are handed to their callbacks
 * with -ESHUTDOWN, so that each is answered or freed exactly once.
 *
 * Its own small library (gmtinbox): it needs libuv, which the hook, linked
 * with gmtwire, must not. */
#ifndef GMT_INBOX_H
#define GMT_INBOX_H

#include <stdbool.h>

#include <uv.h>

#include "gmt_wire.h"

typedef struct gmt_inbox_item gmt_inbox_item_t;

/* Runs once for each item that was pushed: on the loop with status 0 in
 * its turn, or with -ESHUTDOWN when the inbox closed with the item still
 * queued (then answer or free it, start nothing new). The callback may
 * free the item. */
typedef void (*gmt_inbox_cb)(gmt_inbox_item_t *item, int status);

struct gmt_inbox_item {
  void *data; /* the user's */
  /* private */
  gmt_inbox_cb cb;
  gmt_inbox_item_t *next;
};

typedef struct gmt_inbox {
  /* private */
  uv_async_t async;
  uv_mutex_t lock;
  gmt_inbox_item_t *head, **tail;
  bool closed;
} gmt_inbox_t;

/* On the loop's thread, before anything pushes. Negative: libuv's error. */
int gmt_inbox_init(gmt_inbox_t *in, uv_loop_t *loop);

/* From any thread: queues item for cb. -ESHUTDOWN once the inbox is closed
 * (cb does not run then; the item is still the caller's). */
int gmt_inbox_push(gmt_inbox_t *in, gmt_inbox_item_t *item, gmt_inbox_cb cb);

/* On the loop's thread: closes the gate and hands every queued item to its
 * callback with -ESHUTDOWN, then closes the loop handle (the loop must run
 * on to finish that). The inbox must outlive every thread that may still
 * push: such a push fails, but it takes the lock. */
void gmt_inbox_close(gmt_inbox_t *in);

/* ---- requests: the daemons' common case ---- */

/* Runs on the loop for a call pushed with gmt_inbox_push_call(): status 0
 * in its turn, or -ESHUTDOWN when the inbox closed first (then answer the
 * call or drop it, as the owner's stop rules say). */
typedef void (*gmt_inbox_call_cb)(void *data, gmt_call_t *call, int status);

/* From an nng thread: hands call to the loop. When it cannot (out of
 * memory, inbox closed) the call is answered at once with an Error naming
 * who ("<who> out of memory", "<who> is stopping") and the code returned. */
int gmt_inbox_push_call(gmt_inbox_t *in, gmt_call_t *call, gmt_inbox_call_cb cb, void *data,
                        const char *who);

#endif
