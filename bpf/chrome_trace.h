/* Chrome trace-event JSON of a MemHistory, for Perfetto (ui.perfetto.dev)
 * and chrome://tracing: each allocation a slice from its allocation to its
 * free, each copy a slice on the thread that made it, each fault batch an
 * instant event. Written out as it goes: a long trace is not built in
 * memory first. */
#ifndef GMT_TRACE_CHROME_TRACE_H
#define GMT_TRACE_CHROME_TRACE_H

#include "memhistory.h"
#include "trace_meta.h"

int gmt_chrome_trace_write(gmt_memhistory_t *mh, const gmt_trace_meta_t *meta, const char *path);

#endif
