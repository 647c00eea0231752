/* gmt: the operator's CLI. This file owns the global flags and the command
 * table; each command lives in its own cmd_<name>.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#ifdef GMT_HAVE_TRACE
#include "cmd_trace.h"
#endif
#include "gmt_log.h"
#include "gmt_wire.h"

typedef struct {
  const char *name;
  int (*run)(const gmt_cmd_ctx_t *ctx, int argc, char **argv);
  const char *summary;
} command_t;

static const command_t commands[] = {
    {"status", gmt_cmd_status, "show every pod, its shares, memory and processes"},
    {"top", gmt_cmd_top, "a live full-screen view: pods, shares, memory, hottest buffers, GPUs"},
    {"topo", gmt_cmd_topo, "show this node's GPUs, their links, NUMA nodes, NICs and NVMe"},
    {"run", gmt_cmd_run, "run a command on the best GPU(s) and/or under the hook in a pod"},
#ifdef GMT_HAVE_TRACE
    {"trace", gmt_cmd_trace_run, "trace a process's CUDA allocations and copies (eBPF)"},
#endif
};

static void usage(FILE *f)
{
  fprintf(f,
          "usage: gmt [--schd URL] COMMAND [ARGS]\n"
          "\n"
          "options:\n"
          "  --schd URL   the scheduler (default $" GMT_SCHD_ENV ", else %s)\n"
          "  -h, --help   show this help\n"
          "\n"
          "commands:\n",
          GMT_DEFAULT_SCHD_IPC);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
  fprintf(f, "\nRun 'gmt COMMAND --help' for a command's options.\n");
}

int main(int argc, char **argv)
{
  gmt_cmd_ctx_t ctx = {.schd_url = GMT_DEFAULT_SCHD_IPC};
  gmt_log_init("gmt", GMT_LOG_WARN);

  int i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--schd")) {
      if (i + 1 >= argc || !argv[i + 1][0]) {
        fprintf(stderr, "gmt: --schd needs a URL\n");
        return 2;
      }
      ctx.schd_url = argv[++i];
      ctx.schd_given = 1;
    } else if (!strncmp(a, "--schd=", 7) && a[7]) {
      ctx.schd_url = a + 7;
      ctx.schd_given = 1;
    } else {
      fprintf(stderr, "gmt: unknown option '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  const char *env = gmt_schd_from_env();
  if (!ctx.schd_given && env) {
    ctx.schd_url = env;
    ctx.schd_given = 1;
  }
  if (i >= argc) {
    fprintf(stderr, "gmt: no command given\n");
    usage(stderr);
    return 2;
  }
  for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++)
    if (!strcmp(argv[i], commands[c].name))
      return commands[c].run(&ctx, argc - i, argv + i);
  fprintf(stderr, "gmt: unknown command '%s'\n", argv[i]);
  usage(stderr);
  return 2;
}
