/* Numbers in gmt's JSON (json_fmt.h). */
#include "json_fmt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_object *gmt_json_double(double v)
{
  if (!isfinite(v))
    return NULL;
  char buf[64];
  snprintf(buf, sizeof buf, "%.15g", v);
  if (strtod(buf, NULL) != v)
    snprintf(buf, sizeof buf, "%.17g", v);
  if (!strpbrk(buf, ".eE"))
    strncat(buf, ".0", sizeof buf - strlen(buf) - 1);
  return json_object_new_double_s(v, buf);
}
