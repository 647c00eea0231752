/* `gmt trace`: the standalone eBPF tracer (bpf/) on one process,
 * or the scheduler's tracer on one pod.
 *
 *   gmt trace -p PID [--duration S] [-o FILE] [--wait-libcuda S] ...
 *   gmt trace --load FILE [-o FILE]
 *   gmt trace --pod NAME [-k K] [--json] [--schd URL]
 *
 * argv[0] is the command's name. Returns the exit code: 0 done; 2 bad
 * usage, no such process, libcuda never mapped, or no rights to load BPF;
 * 1 any other failure (a file that cannot be written or read, a scheduler
 * that cannot be reached or says no: unknown pod, tracing off). */
#ifndef GMT_CMD_TRACE_H
#define GMT_CMD_TRACE_H

#include "cmd.h"

/* --pod asks the scheduler at ctx->schd_url unless --schd says. */
int gmt_cmd_trace_run(const gmt_cmd_ctx_t *ctx, int argc, char **argv);

#endif
