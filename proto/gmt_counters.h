/* A process's counters (gmt.proto's ProcessCounters) as one value: what
 * the hook measures, passed whole from the hook through gmt-pmgr and
 * gmt-schd to the renderers. These helpers work on every field through the
 * message's descriptor, so a new counter needs nothing here. */
#ifndef GMT_COUNTERS_H
#define GMT_COUNTERS_H

#include <stdbool.h>

#include "gmt.pb-c.h"

/* *dst becomes src (zeros when src is NULL: a sender that said none), held
 * by value: fields a newer sender added and this build does not know are
 * dropped, since they point into src's message. */
void gmt_counters_copy(Gmt__ProcessCounters *dst, const Gmt__ProcessCounters *src);

/* *out becomes the counters report r carries. A hook built before
 * ProcessCounters (one still running across an upgrade of the daemons,
 * docs/operators.md) sent them as the report's own fields; they keep their
 * numbers in ProcessCounters, so they are read from r's unknown fields.
 * Zeros when r says none. */
void gmt_report_counters(const Gmt__ProcessReport *r, Gmt__ProcessCounters *out);

/* c, or all zeros when c is NULL: what a renderer reads. */
const Gmt__ProcessCounters *gmt_counters_of(const Gmt__ProcessCounters *c);

/* Adds src's counters to dst's: each uint64 one (bytes, counts) with a
 * sum that stops at UINT64_MAX; a counter of another kind (swap_device)
 * is no sum and stays as dst had it. For a pod's and the node's totals. */
void gmt_counters_add(Gmt__ProcessCounters *dst, const Gmt__ProcessCounters *src);

/* Whether every counter of a equals b's. */
bool gmt_counters_same(const Gmt__ProcessCounters *a, const Gmt__ProcessCounters *b);

#endif
