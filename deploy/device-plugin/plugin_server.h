/* The kubelet's DevicePlugin service for one resource, on a Unix socket
 * in the kubelet's folder: GetDevicePluginOptions, ListAndWatch (a stream
 * the server sends a whole device list on whenever it is told the devices
 * changed), GetPreferredAllocation, Allocate and PreStartContainer. gRPC's
 * C core, every event on the caller's completion queue (cq_tag.h): the
 * server is driven by the loop that drains it, on one thread.
 *
 * Bounds: at most GMT_DP_SERVER_MAX_CALLS calls at once (one more is
 * answered RESOURCE_EXHAUSTED), a unary call or a stream's send that has
 * not finished within GMT_DP_CALL_MS is cancelled, messages past
 * GMT_DP_MAX_MESSAGE are refused by gRPC. */
#ifndef GMT_DP_PLUGIN_SERVER_H
#define GMT_DP_PLUGIN_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include <grpc/grpc.h>

#include "deviceplugin.pb-c.h"

#define GMT_DP_SERVER_MAX_CALLS 64
#define GMT_DP_CALL_MS 10000

typedef struct gmt_dp_server gmt_dp_server_t;

/* What the service answers from. Each builds its reply with malloc'd
 * fields (the server frees it with protobuf_c_message_free_unpacked) and
 * returns 0 (GRPC_STATUS_OK), or a gRPC status code with why in err. */
typedef struct gmt_dp_server_ops {
  int (*list)(void *data, V1beta1__ListAndWatchResponse **out, char *err, size_t errlen);
  int (*prefer)(void *data, const V1beta1__PreferredAllocationRequest *req,
                V1beta1__PreferredAllocationResponse **out, char *err, size_t errlen);
  int (*allocate)(void *data, const V1beta1__AllocateRequest *req, V1beta1__AllocateResponse **out,
                  char *err, size_t errlen);
} gmt_dp_server_ops_t;

/* Serves on the Unix socket path (an old socket there is replaced), its
 * events on cq, answering GetDevicePluginOptions with options. ops and
 * data must outlive the server; name is for its log lines. 0, or -errno
 * (-EADDRINUSE when it could not listen there). */
int gmt_dp_server_start(gmt_dp_server_t **s, grpc_completion_queue *cq, const char *path,
                        const char *name, const V1beta1__DevicePluginOptions *options,
                        const gmt_dp_server_ops_t *ops, void *data);

/* Sends the devices (ops->list) anew on every open ListAndWatch stream. */
void gmt_dp_server_changed(gmt_dp_server_t *s);

/* Cancels the calls past GMT_DP_CALL_MS; call it every few hundred ms. */
void gmt_dp_server_tick(gmt_dp_server_t *s, uint64_t now_ms);

/* Whether its socket is still the one it listens on: the kubelet removes
 * every socket of its folder when it starts. */
bool gmt_dp_server_socket_ok(const gmt_dp_server_t *s);

/* ListAndWatch streams open now. */
unsigned gmt_dp_server_streams(const gmt_dp_server_t *s);

/* Stops listening, cancels every call and removes its socket. The server
 * frees itself once the queue has returned all its tags, and then calls
 * closed(arg) (may be NULL): a new server on the same path is started only
 * then, since gRPC removes a Unix listener's path as it lets go of it.
 * s is not to be used after this call. */
void gmt_dp_server_close(gmt_dp_server_t *s, void (*closed)(void *arg), void *arg);

#endif
