/* Registering a resource with the kubelet: one Register call to its
 * Registration service on kubelet.sock, with a deadline, its end reported
 * through the completion queue (cq_tag.h). And the kubelet socket's
 * identity, by which the plugin sees a restarted kubelet. */
#ifndef GMT_DP_REGISTRATION_H
#define GMT_DP_REGISTRATION_H

#include <stdbool.h>
#include <sys/types.h>

#include <grpc/grpc.h>

#include "deviceplugin.pb-c.h"

/* How long the kubelet has to answer a Register. */
#define GMT_DP_REGISTER_MS 5000

/* status: gRPC's (0 registered); why: its details, or a sentence. */
typedef void (*gmt_dp_register_cb)(void *arg, int status, const char *why);

typedef struct gmt_dp_reg gmt_dp_reg_t;

/* Sends req to the kubelet listening on the Unix socket kubelet_sock; cb
 * runs from the queue's loop when the kubelet answered, refused, or did
 * not answer within GMT_DP_REGISTER_MS (DEADLINE_EXCEEDED); never before
 * this returns. *reg is the call until cb runs. 0, or -ENOMEM or -EIO
 * (then cb will not run). */
int gmt_dp_register(grpc_completion_queue *cq, const char *kubelet_sock,
                    const V1beta1__RegisterRequest *req, gmt_dp_register_cb cb, void *arg,
                    gmt_dp_reg_t **reg);

/* Ends a Register still in flight at once (cb runs, CANCELLED). */
void gmt_dp_register_cancel(gmt_dp_reg_t *reg);

/* The socket at path: true and its device and inode, or false when
 * nothing is there or it is not a socket. A restarted kubelet makes a new
 * socket, so a new inode. */
bool gmt_dp_socket_id(const char *path, dev_t *dev, ino_t *ino);

#endif
