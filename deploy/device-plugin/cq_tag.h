/* A completion-queue tag: every operation gmt-device-plugin starts on its
 * one gRPC completion queue names one of these, and the loop calls its
 * done() when the queue reports it (libuv's handle with its callback).
 * Embed it in the struct that owns the operation and recover that with
 * gmt_dp_container_of, so the loop names no user. */
#ifndef GMT_DP_CQ_TAG_H
#define GMT_DP_CQ_TAG_H

#include <stdbool.h>
#include <stddef.h>

typedef struct gmt_dp_tag gmt_dp_tag_t;
struct gmt_dp_tag {
  /* ok: gRPC's success bit for the batch (false: the call was cancelled,
   * its peer went away, or the server is shutting down). */
  void (*done)(gmt_dp_tag_t *tag, bool ok);
};

#define gmt_dp_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

#endif
