/* The commands of the gmt CLI. Each takes the arguments after its name
 * (argv[0] is the command name) and returns the process exit code:
 * 0 done, 1 failed (the scheduler said no or could not be reached),
 * 2 bad usage. */
#ifndef GMT_CMD_H
#define GMT_CMD_H

#include <stdio.h>

typedef struct gmt_cmd_ctx {
  const char *schd_url; /* where the scheduler listens */
  int schd_given;       /* --schd or GMT_SCHD named it (else schd_url is the default) */
} gmt_cmd_ctx_t;

int gmt_cmd_status(const gmt_cmd_ctx_t *ctx, int argc, char **argv);
/* Local: reads this node's topology, asks no daemon. */
int gmt_cmd_topo(const gmt_cmd_ctx_t *ctx, int argc, char **argv);
/* A live full-screen view until q (client/cli/cmd_top.c); needs a terminal. */
int gmt_cmd_top(const gmt_cmd_ctx_t *ctx, int argc, char **argv);
/* Execs a command (client/cli/cmd_run.c): returns only when it cannot. */
int gmt_cmd_run(const gmt_cmd_ctx_t *ctx, int argc, char **argv);

/* A command whose only option is --json (and -h/--help): -1 to go on
 * with *json set, else the exit code (0 after help, 2 after an unknown
 * argument, said on stderr with usage). */
int gmt__cmd_json_args(const char *name, int argc, char **argv, void (*usage)(FILE *), int *json);

/* Why no scheduler could be dialled at url (rc: gmt_client_open's), in
 * words that name the address tried and how to name another, into buf. */
void gmt__cmd_no_schd(char *buf, size_t len, const char *url, int rc);

#endif
