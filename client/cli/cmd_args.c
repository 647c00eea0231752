/* Arguments the commands share (see cmd.h). */
#include "cmd.h"

#include <string.h>

#include "gmt_error.h"
#include "gmt_wire.h" /* GMT_SCHD_ENV */

int gmt__cmd_json_args(const char *name, int argc, char **argv, void (*usage)(FILE *), int *json)
{
  *json = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) {
      *json = 1;
    } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "gmt %s: unknown argument '%s'\n", name, argv[i]);
      usage(stderr);
      return 2;
    }
  }
  return -1;
}

void gmt__cmd_no_schd(char *buf, size_t len, const char *url, int rc)
{
  snprintf(buf, len,
           "no scheduler at %s (%s): is gmt-schd running and listening there? Name its address "
           "with --schd URL or " GMT_SCHD_ENV "=URL",
           url, gmt_strerror(rc));
}
