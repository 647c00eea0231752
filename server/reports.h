/* A process's report as gmt-schd counts it (docs/security.md, "What is
 * checked"). The numbers a process says of itself that feed the node's
 * budgets are held to what gmt-schd granted it, so that a process can
 * lower its own count but never raise a node's total past its grants
 * (a report of 2^64-1 pinned bytes used to block every pod's pin advice,
 * and one of 2^62 bytes in host memory to fill the host tier):
 *
 *   pinned_advised  always the pinned ledger's: what Advise granted it;
 *   pinned_bytes    those grants plus the pins it made itself, these
 *                   counted at most own_room (its pod's part of the
 *                   budget less what its other processes count);
 *   pinned_cached   at most the pins it made itself, as counted;
 *   swap_host, swap_kept, swap_disk
 *                   copies of its allocations: together at most what it
 *                   reserved (the device ledger's grants), taken in that
 *                   order.
 *
 * Pure: no loop, no wire. Unit tested by test/unit/test_reports.c. */
#ifndef GMT_SERVER_REPORTS_H
#define GMT_SERVER_REPORTS_H

#include <stdint.h>

/* The numbers of a report that budgets count. */
typedef struct gmt_report_counts {
  uint64_t pinned_bytes, pinned_advised, pinned_cached;
  uint64_t swap_host, swap_kept, swap_disk;
} gmt_report_counts_t;

/* What gmt-schd granted the process. */
typedef struct gmt_report_grants {
  uint64_t reserved; /* the device ledger's bytes for it: its allocations */
  uint64_t advised;  /* the pinned ledger's: its pins on advice */
  uint64_t own_room; /* what the pins it made itself may still count */
} gmt_report_grants_t;

/* Which numbers of a report said more than its grants allow. */
#define GMT_REPORT_PINNED 1u /* its own pins past own_room */
#define GMT_REPORT_SWAP 2u   /* its copies past what it reserved */

/* Lowers c to what g allows; returns GMT_REPORT_* for what was past it
 * (0: the report stands as said, but for pinned_advised, which becomes
 * g->advised either way: a report lags its grants, so that alone is no
 * lie). */
unsigned gmt_report_bound(gmt_report_counts_t *c, const gmt_report_grants_t *g);

/* The pins c's process made itself, as counted (after gmt_report_bound). */
static inline uint64_t gmt_report_own_pins(const gmt_report_counts_t *c)
{
  return c->pinned_bytes > c->pinned_advised ? c->pinned_bytes - c->pinned_advised : 0;
}

#endif
