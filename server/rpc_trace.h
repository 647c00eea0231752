/* gmt-schd's eBPF tracer (rpc_trace.c): every process the pods report is
 * traced, and the TraceSpots RPC answers which of a pod's buffers are hot
 * and which are cold. Loop thread only. */
#ifndef GMT_SERVER_RPC_TRACE_H
#define GMT_SERVER_RPC_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "schd.h"

/* Starts the node's tracer on s->loop when enabled and this process may
 * load BPF programs. When it cannot (not root, no kernel BTF, a kernel
 * without what the probes need, a build without the tracer) it logs one
 * warning saying why, and the daemon runs on without it: returns 0 then
 * too. Negative only when out of memory. */
int gmt__trace_init(gmt_schd_t *s, bool enabled);
/* Stops tracing and closes its handles; their memory goes in their close
 * callbacks, so the loop must run on (stop() is the place). */
void gmt__trace_close(gmt_schd_t *s);
/* The pod's process set changed (heartbeat, expiry, reload): processes
 * not yet traced are, once they have mapped libcuda.so.1. Processes that
 * are gone keep their histories a while (see rpc_trace.c). */
void gmt__trace_pod_changed(gmt_schd_t *s, const gmt_pod_t *pod);
/* For /metrics: events the kernel lost (ring buffer full) and histories of
 * ended allocations let go, since start. False, with both 0, when
 * tracing is off. */
bool gmt__trace_drops(gmt_schd_t *s, uint64_t *events, uint64_t *histories);
/* TraceSpots: the pod's hottest and coldest allocations. */
void gmt__rpc_trace_spots(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req);

#endif
