/* Byte counts read and shown (gmt_bytes.h). */
#include "gmt_bytes.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>

int gmt_parse_bytes(const char *s, uint64_t *out)
{
  const char *p = s;
  uint64_t v = 0;
  bool overflow = false;
  if (!isdigit((unsigned char)*p))
    return -EINVAL;
  for (; isdigit((unsigned char)*p); p++) {
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10)
      overflow = true;
    else
      v = v * 10 + d;
  }
  unsigned shift = 0;
  if (*p) {
    switch (tolower((unsigned char)*p)) {
    case 'k': shift = 10; break;
    case 'm': shift = 20; break;
    case 'g': shift = 30; break;
    case 't': shift = 40; break;
    default: return -EINVAL;
    }
    p++;
    if (*p == 'i' || *p == 'I')
      p++;
    if (*p)
      return -EINVAL;
  }
  if (overflow || (shift && v > (UINT64_MAX >> shift)))
    return -ERANGE;
  *out = v << shift;
  return 0;
}

void gmt_human_bytes(char *buf, size_t len, uint64_t bytes)
{
  static const char *unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) {
    snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    return;
  }
  double v = (double)bytes / 1024;
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    u++;
  }
  snprintf(buf, len, "%.1f %s", v, unit[u]);
}
