/* A process's report as gmt-schd counts it (see reports.h). */
#include "reports.h"

#include "gmt_bytes.h"

static uint64_t min_u64(uint64_t a, uint64_t b)
{
  return a < b ? a : b;
}

unsigned gmt_report_bound(gmt_report_counts_t *c, const gmt_report_grants_t *g)
{
  unsigned past = 0;
  /* Its own pins are what it says it holds beyond what it says gmt
   * pinned for it: saying more of the latter only lowers them. */
  uint64_t own = gmt_report_own_pins(c);
  if (own > g->own_room) {
    own = g->own_room;
    past |= GMT_REPORT_PINNED;
  }
  c->pinned_advised = g->advised;
  c->pinned_bytes = gmt_bytes_add(g->advised, own);
  if (c->pinned_cached > own) {
    c->pinned_cached = own;
    past |= GMT_REPORT_PINNED;
  }

  /* Each allocation is on the GPU (with or without a kept host copy), in
   * host memory or in a spill file: its copies together are at most the
   * bytes it reserved. */
  uint64_t left = g->reserved;
  uint64_t host = min_u64(c->swap_host, left);
  left -= host;
  uint64_t kept = min_u64(c->swap_kept, left);
  left -= kept;
  uint64_t disk = min_u64(c->swap_disk, left);
  if (host != c->swap_host || kept != c->swap_kept || disk != c->swap_disk)
    past |= GMT_REPORT_SWAP;
  c->swap_host = host;
  c->swap_kept = kept;
  c->swap_disk = disk;
  return past;
}
