/* CUDA_VISIBLE_DEVICES from a Pick's answer (proto/gmt.proto, PickReply),
 * written once for `gmt run` (client/cli/cmd_run.c: --auto-device, and --pod's
 * confinement) and the hook's GMT_AUTO_DEVICE (hook/memory/autodev.c: =N and
 * =pod). */
#ifndef GMT_VISIBLE_H
#define GMT_VISIBLE_H

#include <stddef.h>

#include "gmt.pb-c.h"

/* Writes the picked GPUs into buf, best first, comma-separated: each one's
 * UUID, or its node index where the UUID is empty (UUIDs survive a
 * container's renumbering; CUDA takes either). 0; -ENODEV when the reply
 * names no GPU; -EPROTO when it is malformed (a negative index, a UUID
 * with characters CUDA_VISIBLE_DEVICES cannot hold, more UUIDs than
 * devices); -ENOSPC when buf is too small. buf is "" on failure. */
int gmt_visible_from_pick(const Gmt__PickReply *r, char *buf, size_t len);

/* The answer to a Pick with `allowed` set (the GPUs a pod may use): 0 and
 * buf as gmt_visible_from_pick when the pod has devices= (r->confined), to
 * be set; GMT_VISIBLE_ALL (buf "") when it has none, so every GPU is its
 * own and CUDA_VISIBLE_DEVICES stays as it is; -ENODEV when its devices=
 * names none of the node's GPUs; -EPROTO, -ENOSPC as above. The one rule
 * of `gmt run --pod` and GMT_AUTO_DEVICE=pod. */
#define GMT_VISIBLE_ALL 1
int gmt_visible_from_allowed(const Gmt__PickReply *r, char *buf, size_t len);

/* gmt_visible_from_allowed's failure in words, for "pod NAME: <words>". */
const char *gmt_visible_allowed_strerror(int rc);

#endif
