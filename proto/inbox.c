/* The inbox (gmt_inbox.h): a locked queue, a uv_async_t to wake the loop,
 * and a gate that closing shuts. */
#include "gmt_inbox.h"

#include <errno.h>
#include <stddef.h>

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
