/* Dumps of a MemHistory: human-readable JSON (json-c), compressed binary
 * (.gmtz: "GMTZ", a version, then zstd of the TraceDump message of
 * proto/gmt.proto), and Chrome trace events (chrome_trace.h). The first
 * two load back into a MemHistory. */
#ifndef GMT_TRACE_DUMP_H
#define GMT_TRACE_DUMP_H

#include <stdint.h>

#include "gmt.pb-c.h"
#include "memhistory.h"
#include "trace_meta.h"

struct json_object;

#define GMT_TRACE_DUMP_VERSION 1u

typedef enum {
  GMT_DUMP_JSON = 1,
  GMT_DUMP_GMTZ = 2,
  GMT_DUMP_CHROME = 3,
} gmt_dump_format_t;

/* The format a file name asks for: .trace.json, .json, .gmtz; -EINVAL
 * for anything else. */
int gmt_trace_format_of(const char *path);

int gmt_trace_dump_json(gmt_memhistory_t *mh, const gmt_trace_meta_t *meta, const char *path);
int gmt_trace_dump_gmtz(gmt_memhistory_t *mh, const gmt_trace_meta_t *meta, const char *path);
/* By the file name's extension. */
int gmt_trace_dump(gmt_memhistory_t *mh, const gmt_trace_meta_t *meta, const char *path);

/* Loads a .json or .gmtz dump (told apart by content) into a new
 * MemHistory. GMT_EDECODE for a file that is neither. */
int gmt_trace_load(const char *path, gmt_memhistory_t **mh, gmt_trace_meta_t *meta);
/* The same from len bytes in memory (what gmt_trace_load reads, and what
 * test/fuzz/fuzz_dump.c feeds it). */
int gmt_trace_load_buf(const void *buf, size_t len, gmt_memhistory_t **mh, gmt_trace_meta_t *meta);

/* One allocation without its events, as the dumps and the TraceSpots RPC
 * carry it: the wire message (pointing into in and site, which must
 * outlive it), back, and the JSON object of the .json dump (no
 * "events"; NULL when out of memory). */
void gmt_trace_alloc_to_pb(const gmt_alloc_info_t *in, Gmt__TraceAllocation *a,
                           Gmt__TraceSite *site);
void gmt_trace_alloc_from_pb(const Gmt__TraceAllocation *a, gmt_alloc_info_t *in);
struct json_object *gmt_trace_alloc_json(const gmt_alloc_info_t *in);

#endif
