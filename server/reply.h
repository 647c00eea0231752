/* Replies that more than one of gmt-schd's handlers give: "no such pod",
 * a GPU its devices= refuses. Below the handlers (rpc*.c):
 * they call down to it, it names none of them and no daemon state. */
#ifndef GMT_SERVER_REPLY_H
#define GMT_SERVER_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "gmt_wire.h"
#include "pods.h"

/* Error{GMT_ENOPOD} for a pod that cfg does not list, naming the pods that
 * it does, so that an operator sees a typo at once. */
void gmt__reply_nopod(gmt_call_t *call, const gmt_config_t *cfg, const char *name);

/* Error{GMT_EDEVICE} for a pod confined by devices= that asked for
 * `what` ("a token", ...) on another of the node's GPUs: names the pod,
 * the GPUs it may use and the one it asked for. Logged at info level,
 * and counted as the pod's refusal for GMT_REFUSED_DEVICES (status). */
void gmt__reply_device_refused(gmt_call_t *call, const gmt_config_t *cfg, gmt_pod_t *pod,
                               uint32_t pid, int device, const char *what);

#endif
