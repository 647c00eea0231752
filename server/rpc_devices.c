/* The node's GPUs on the wire (docs/devices.md): Devices, which turns the
 * bus ids a hooked process sees into the node's indices. devices.c holds
 * the facts. */
#include <errno.h>
#include <stdlib.h>

#include "devices.h"
#include "gmt_log.h"
#include "schd.h"

int gmt__devices_init(gmt_schd_t *s)
{
  int rc = gmt_devices_open(&s->devices);
  if (rc < 0)
    return rc;
  const gmt_devices_t *d = s->devices;
  if (d->have_nvml)
    gmt_info("%d GPU%s (NVML)", d->topo->n_gpus, d->topo->n_gpus == 1 ? "" : "s");
  else
    gmt_info("%d GPU%s from /sys; without NVML (%s): processes' devices are taken as CUDA "
             "ordinals",
             d->topo->n_gpus, d->topo->n_gpus == 1 ? "" : "s", d->nvml_why);
  return 0;
}

void gmt__devices_close(gmt_schd_t *s)
{
  gmt_devices_close(s->devices);
  s->devices = NULL;
}

/* At most this many GPUs in one question: more than any node has. */
#define MAX_ASKED 256

void gmt__rpc_devices(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req)
{
  const Gmt__DevicesRequest *r = req->devices_req;
  if (r->n_bus_ids > MAX_ASKED) {
    gmt_call_reply_error(call, -EINVAL, "Devices names %zu GPUs; at most %d", r->n_bus_ids,
                         MAX_ASKED);
    return;
  }
  int32_t *index = calloc(r->n_bus_ids + 1, sizeof *index);
  if (!index) {
    gmt_call_reply_error(call, -ENOMEM, "out of memory answering Devices");
    return;
  }
  for (size_t i = 0; i < r->n_bus_ids; i++)
    index[i] = gmt_devices_index_of_bus(s->devices, r->bus_ids[i]);
  gmt_debug("Devices: %zu bus id%s from pid %u", r->n_bus_ids, r->n_bus_ids == 1 ? "" : "s",
            r->pid);
  Gmt__DevicesReply body = GMT__DEVICES_REPLY__INIT;
  body.n_index = r->n_bus_ids;
  body.index = index;
  gmt_call_reply_body(call, GMT__ENVELOPE__BODY_DEVICES_REP, &body);
  free(index);
}
