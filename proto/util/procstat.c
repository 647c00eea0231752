/* /proc/PID/stat after the name (see gmt_procstat.h). */
#include "gmt_procstat.h"

#include <stdio.h>
#include <string.h>

const char *gmt_procstat_fields(uint32_t pid, char *buf, size_t len)
{
  char fn[64];
  snprintf(fn, sizeof fn, "/proc/%u/stat", pid);
  FILE *f = fopen(fn, "re");
  if (!f || len < 2) {
    if (f)
      fclose(f);
    return NULL;
  }
  size_t n = fread(buf, 1, len - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')'); /* the name may hold spaces and ')' */
  return p && p[1] == ' ' && p[2] ? p + 2 : NULL;
}
