/* Where in a function to put its uprobe so that a hit stays cheap. */
#ifndef GMT_TRACE_PROLOGUE_H
#define GMT_TRACE_PROLOGUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gmt_probe_site {
  uint32_t skip; /* bytes past the function's start to probe at */
  bool fast;     /* the instruction there is emulated by the kernel */
} gmt_probe_site_t;

/* CODE: the function's first N bytes (x86-64). The site keeps the
 * argument registers and [rsp] (the return address) as at the entry, so
 * both entry and return probes may use it. */
gmt_probe_site_t gmt_probe_site(const uint8_t *code, size_t n);

#endif
