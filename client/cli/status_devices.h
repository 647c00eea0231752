/* The node's GPUs in `gmt status` (StatusReply.devices, docs/devices.md):
 * what gmt-schd sampled for best-GPU selection on each, as a table for
 * people and as the JSON list "devices" for programs. Part of
 * gmtstatusjson, so that a unit test can render a reply built in memory. */
#ifndef GMT_STATUS_DEVICES_H
#define GMT_STATUS_DEVICES_H

#include <json-c/json.h>
#include <stdio.h>

#include "gmt.pb-c.h"

/* st's devices as a JSON array (empty from a scheduler that sends none);
 * NULL when out of memory. A value not known is null. */
json_object *gmt_status_devices_json(const Gmt__StatusReply *st);

/* st's devices as a table on f, after a blank line; nothing when there
 * are none. */
void gmt_status_devices_print(FILE *f, const Gmt__StatusReply *st);

/* A GPU's "free / total" for people ("?" for a total not known). */
void gmt_status_device_memory(char *buf, size_t len, const Gmt__DeviceStatus *d);

#endif
