/* libFuzzer target: resource-config.txt text through the parser that
 * gmt_config_load and every reload use (gmt_config_parse). A file it takes
 * must hold what config.h promises; one it refuses must say why. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "gmt_error.h"

static void check(const gmt_config_t *cfg)
{
  for (size_t i = 0; i < cfg->npods; i++) {
    const gmt_pod_config_t *p = &cfg->pods[i];
    size_t n = strnlen(p->name, sizeof p->name);
    if (n == 0 || n > GMT_POD_NAME_MAX)
      abort();
    if (!(p->request >= 0 && p->request <= p->limit && p->limit <= 1))
      abort();
    if (i > 0 && strcmp(cfg->pods[i - 1].name, p->name) >= 0)
      abort(); /* sorted and unique */
    if (gmt_config_find(cfg, p->name) != p)
      abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  gmt_config_t *cfg = NULL;
  char *errors = NULL;
  int rc = gmt_config_parse("fuzz.txt", (const char *)data, size, &cfg, &errors);
  if (rc == 0) {
    if (!cfg || errors)
      abort();
    check(cfg);
  } else {
    if (cfg)
      abort();
    /* a refusal names the file and ends each line */
    if (rc == GMT_ECONFIG &&
        (!errors || strncmp(errors, "fuzz.txt:", 9) != 0 || errors[strlen(errors) - 1] != '\n'))
      abort();
  }
  gmt_config_free(cfg);
  free(errors);
  return 0;
}
