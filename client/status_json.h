/* The JSON form of a StatusReply, as `gmt status --json` prints it and as
 * docs/protocol.md documents it. Kept apart from the command so that a unit
 * test can render a reply built in memory and read it back. */
#ifndef GMT_STATUS_JSON_H
#define GMT_STATUS_JSON_H

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

#include "gmt.pb-c.h"

/* Renders st as one line of JSON (no trailing newline) into a new string
 * owned by the caller (free()). Returns 0 or -ENOMEM. */
int gmt_status_json(const Gmt__StatusReply *st, char **out);

/* A double written as short as it reads back, always with a point or an
 * exponent ("0.0", not "0"); NULL (JSON's null) when not finite. */
json_object *gmt_json_double(double v);

/* bytes for people: "512 B", "1.5 GiB". */
void gmt_human_bytes(char *buf, size_t len, uint64_t bytes);

#endif
