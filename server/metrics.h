/* gmt-schd's Prometheus metrics: a pure function from what Status shows
 * (a StatusReply) and the tracer's losses to the text exposition format,
 * version 0.0.4 (docs/operators.md, "Prometheus metrics", lists every
 * family). It reads nothing else and keeps no state, so it is unit-tested
 * alone; http_metrics.c serves what it writes. */
#ifndef GMT_SERVER_METRICS_H
#define GMT_SERVER_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmt.pb-c.h"

/* Not 9400, dcgm-exporter's default, which a GPU node usually runs (nor
 * 9445 or 9835, the other GPU exporters'): gmt-schd would then run
 * without metrics there. */
#define GMT_METRICS_DEFAULT_ADDR "127.0.0.1:9479"
#define GMT_METRICS_ADDR_MAX 255

/* The Content-Type of what gmt_metrics_render() writes. */
#define GMT_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

typedef struct gmt_metrics_input {
  const Gmt__StatusReply *status;   /* as Status sends it; NULL: no pods, no host, no GPUs */
  bool tracing;                     /* the eBPF tracer runs: the two counts below mean something */
  uint64_t trace_dropped_events;    /* lost in the kernel (ring buffer full) since start */
  uint64_t trace_dropped_histories; /* ended allocations' histories let go since start */
} gmt_metrics_input_t;

/* Writes in as the exposition format into a new buffer, NUL-terminated
 * (*len without the NUL; free() it). Every family has its # HELP and
 * # TYPE once, before its samples, and its samples together; counters end
 * in _total; label values are escaped (\\, \", \n) and made valid UTF-8.
 * A value that is not known (a GPU without NVML) is left out, never
 * written as 0. 0, or -ENOMEM (then *out is NULL). */
int gmt_metrics_render(const gmt_metrics_input_t *in, char **out, size_t *len);

/* gmt-schd --metrics ADDR: HOST:PORT, HOST a name, a dotted quad or
 * [an IPv6 address], PORT 1 to 65535. Writes "http://HOST:PORT" into url
 * and whether HOST is a loopback address (127.0.0.0/8, [::1],
 * localhost). -EINVAL for anything else (a bare IPv6 address, no port,
 * a path). */
int gmt_metrics_addr_parse(const char *addr, char *url, size_t len, bool *loopback);

#endif
