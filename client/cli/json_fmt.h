/* Numbers in gmt's JSON (`gmt status --json`, its GPU table): written as
 * short as they read back, always looking like doubles. */
#ifndef GMT_JSON_FMT_H
#define GMT_JSON_FMT_H

#include <json-c/json.h>

/* v with a point or an exponent ("0.0", not "0"); NULL (JSON's null)
 * when not finite. */
json_object *gmt_json_double(double v);

#endif
