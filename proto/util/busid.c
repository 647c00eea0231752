/* PCI bus ids read (gmt_busid.h). By hand rather than sscanf("%x"), which
 * would take white space, signs, "0x" and any number of digits. */
#include "gmt_busid.h"

#include <ctype.h>
#include <errno.h>

/* The hex digits at *p into *v, *p past them: how many there were (more
 * than 8 leave *v meaningless; the callers refuse them). */
static int hex(const char **p, unsigned *v)
{
  int n = 0;
  unsigned x = 0;
  for (; isxdigit((unsigned char)**p); (*p)++, n++) {
    int c = tolower((unsigned char)**p);
    if (n < 8)
      x = x * 16 + (unsigned)(c <= '9' ? c - '0' : c - 'a' + 10);
  }
  *v = x;
  return n;
}

int gmt_busid_parse(const char *s, gmt_busid_t *out)
{
  gmt_busid_t b = {0};
  unsigned a, c;
  if (!s || !out)
    return -EINVAL;
  const char *p = s;
  int na = hex(&p, &a);
  if (na < 1 || *p != ':')
    return -EINVAL;
  p++;
  int nc = hex(&p, &c);
  if (nc < 1 || nc > 2)
    return -EINVAL;
  if (*p == ':') { /* a was the domain, c the bus */
    p++;
    if (na > 8)
      return -EINVAL;
    b.domain = a;
    b.bus = c;
    int nd = hex(&p, &b.device);
    if (nd < 1 || nd > 2)
      return -EINVAL;
  } else { /* no domain: a was the bus, c the device */
    if (na > 2)
      return -EINVAL;
    b.bus = a;
    b.device = c;
  }
  if (*p != '.')
    return -EINVAL;
  p++;
  if (hex(&p, &b.function) != 1 || *p != '\0' || b.device > 0x1f || b.function > 7)
    return -EINVAL;
  *out = b;
  return 0;
}
