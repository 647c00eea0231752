/* The inbox (gmt_inbox.h): a locked queue, a uv_async_t to wake the loop,
 * and a gate that closing shuts. */
#include "gmt_inbox.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

static gmt_inbox_item_t *take_all(gmt_inbox_t *in)
{
  uv_mutex_lock(&in->lock);
  gmt_inbox_item_t *all = in->head;
  in->head = NULL;
  in->tail = &in->head;
  uv_mutex_unlock(&in->lock);
  return all;
}

/* Hands each item of the list to its callback; once the inbox is closed
 * (maybe by one of these callbacks) the rest go with -ESHUTDOWN. */
static void run(gmt_inbox_t *in, gmt_inbox_item_t *item)
{
  while (item) {
    gmt_inbox_item_t *next = item->next; /* the callback may free it */
    item->cb(item, in->closed ? -ESHUTDOWN : 0);
    item = next;
  }
}

static void on_async(uv_async_t *h)
{
  gmt_inbox_t *in = h->data;
  run(in, take_all(in));
}

int gmt_inbox_init(gmt_inbox_t *in, uv_loop_t *loop)
{
  int rc = uv_mutex_init(&in->lock);
  if (rc < 0)
    return rc;
  in->head = NULL;
  in->tail = &in->head;
  in->closed = false;
  rc = uv_async_init(loop, &in->async, on_async);
  if (rc < 0) {
    uv_mutex_destroy(&in->lock);
    return rc;
  }
  in->async.data = in;
  return 0;
}

int gmt_inbox_push(gmt_inbox_t *in, gmt_inbox_item_t *item, gmt_inbox_cb cb)
{
  item->cb = cb;
  item->next = NULL;
  uv_mutex_lock(&in->lock);
  if (in->closed) {
    uv_mutex_unlock(&in->lock);
    return -ESHUTDOWN;
  }
  *in->tail = item;
  in->tail = &item->next;
  /* Under the lock: close cannot close the handle between the gate's
   * check and this send. */
  uv_async_send(&in->async);
  uv_mutex_unlock(&in->lock);
  return 0;
}

void gmt_inbox_close(gmt_inbox_t *in)
{
  if (in->closed)
    return;
  uv_mutex_lock(&in->lock);
  in->closed = true;
  uv_mutex_unlock(&in->lock);
  run(in, take_all(in));
  uv_close((uv_handle_t *)&in->async, NULL);
}

/* ---- requests ---- */

typedef struct {
  gmt_inbox_item_t item; /* first: the callback finds the request from it */
  gmt_call_t *call;
  gmt_inbox_call_cb cb;
} call_item_t;

static void on_call(gmt_inbox_item_t *item, int status)
{
  call_item_t c = *(call_item_t *)item;
  free(item);
  c.cb(c.item.data, c.call, status);
}

int gmt_inbox_push_call(gmt_inbox_t *in, gmt_call_t *call, gmt_inbox_call_cb cb, void *data,
                        const char *who)
{
  call_item_t *c = malloc(sizeof *c);
  if (!c) {
    gmt_call_reply_error(call, -ENOMEM, "%s out of memory", who);
    return -ENOMEM;
  }
  c->item.data = data;
  c->call = call;
  c->cb = cb;
  int rc = gmt_inbox_push(in, &c->item, on_call);
  if (rc < 0) {
    free(c);
    gmt_call_reply_error(call, rc, "%s is stopping", who);
  }
  return rc;
}
