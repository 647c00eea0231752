/* The JSON form of a StatusReply, as `gmt status --json` prints it and as
 * docs/protocol.md documents it. Kept apart from the command so that a unit
 * test can render a reply built in memory and read it back. */
#ifndef GMT_STATUS_JSON_H
#define GMT_STATUS_JSON_H

#include "gmt.pb-c.h"
#include "gmt_bytes.h" /* gmt_human_bytes, for the text form */
#include "json_fmt.h"

/* Renders st as one line of JSON (no trailing newline) into a new string
 * owned by the caller (free()). Returns 0 or -ENOMEM. */
int gmt_status_json(const Gmt__StatusReply *st, char **out);

#endif
