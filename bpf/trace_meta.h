/* What a trace says besides its histories: the dumps write it, the Chrome
 * trace and `gmt trace` read it. A header of its own so that dump.c, which
 * calls the Chrome trace writer, and chrome_trace.c share it without
 * including each other. */
#ifndef GMT_TRACE_META_H
#define GMT_TRACE_META_H

#include <stdint.h>

typedef struct gmt_trace_meta {
  uint32_t root_pid;
  uint64_t start_ns, end_ns; /* CLOCK_MONOTONIC */
  uint64_t dropped_events;   /* lost in the kernel: always reported */
  uint64_t xid_errors;
} gmt_trace_meta_t;

#endif
