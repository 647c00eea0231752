/* `gmt trace`: the standalone eBPF tracer (server/trace) on one process.
 *
 *   gmt trace -p PID [--duration S] [-o FILE] [--wait-libcuda S] ...
 *   gmt trace --load FILE [-o FILE]
 *
 * argv[0] is the command's name. Returns the exit code: 0 done; 2 bad
 * usage, no such process, libcuda never mapped, or no rights to load BPF;
 * 1 any other failure (a file that cannot be written or read). */
#ifndef GMT_CMD_TRACE_H
#define GMT_CMD_TRACE_H

#include "cmd.h"

int gmt_cmd_trace(int argc, char **argv);
/* The same, with the signature of gmt.c's command table (ctx unused: the
 * standalone tracer needs no scheduler). */
int gmt_cmd_trace_run(const gmt_cmd_ctx_t *ctx, int argc, char **argv);

#endif
