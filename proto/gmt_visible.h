/* CUDA_VISIBLE_DEVICES from a Pick's answer (proto/gmt.proto, PickReply),
 * written once for `gmt run --auto-device` (client/cmd_run.c) and the
 * hook's GMT_AUTO_DEVICE (hook/autodev.c). */
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

#endif
