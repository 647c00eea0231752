/* gmt-trace-dev: `gmt trace` as a program of its own, for machines and
 * builds where the gmt CLI is not at hand (and for the tracer's end-to-end
 * tests before the CLI links it). Same arguments, same exit codes. */
#include "cmd_trace.h"
#include "gmt_log.h"

int main(int argc, char **argv)
{
  gmt_log_init("gmt", GMT_LOG_WARN);
  return gmt_cmd_trace(argc, argv);
}
