/* Arguments the commands share (see cmd.h). */
#include "cmd.h"

#include <string.h>

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
