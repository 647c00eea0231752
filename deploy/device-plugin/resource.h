/* One resource's life beside the kubelet: its DevicePlugin server
 * (plugin_server.h) answering from the node (devices.h), kept serving on
 * its socket in the kubelet's folder, and registered with the kubelet, and
 * again whenever the kubelet comes back (a new kubelet.sock) or removed
 * the socket. Driven by the plugin's loop: everything runs on its thread. */
#ifndef GMT_DP_RESOURCE_H
#define GMT_DP_RESOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include <grpc/grpc.h>

#include "devices.h"
#include "node.h"

/* The longest wait between two tries to serve or to register. */
#define GMT_DP_RETRY_MAX_MS 10000

typedef struct gmt_dp_res gmt_dp_res_t;

/* The resource kind, served in dir (its socket: the resource's endpoint
 * there) and registered with the kubelet at kubelet_sock, its devices
 * read from *node (owned by the caller, changed only between calls), in
 * units of unit bytes (memory). Nothing happens before the first tick.
 * 0 or -ENOMEM. */
int gmt_dp_res_new(gmt_dp_res_t **r, gmt_dp_kind_t kind, const char *dir, const char *kubelet_sock,
                   uint64_t unit, const gmt_dp_node_t *node, grpc_completion_queue *cq);

/* *node changed: every ListAndWatch stream gets the new list. */
void gmt_dp_res_changed(gmt_dp_res_t *r);

/* Serves anew where the socket went, registers where the kubelet is new
 * or the last try is due again, cancels calls past their bound. */
void gmt_dp_res_tick(gmt_dp_res_t *r, uint64_t now_ms);

/* Stops serving (the socket is removed) and cancels a Register in flight.
 * Free it once the queue has been drained to its shutdown. */
void gmt_dp_res_close(gmt_dp_res_t *r);
void gmt_dp_res_free(gmt_dp_res_t *r);

#endif
