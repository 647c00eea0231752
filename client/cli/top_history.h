/* The last refreshes' share of each pod, for `gmt top`'s sparkline: a
 * ring of depth values per pod, by name, so that a pod keeps its history
 * when the sort moves its row. A refresh is begin, one add per pod, end;
 * a pod the refresh did not add is forgotten (gone from the config), and
 * one that comes back starts afresh. Pure: no clock, no I/O. */
#ifndef GMT_TOP_HISTORY_H
#define GMT_TOP_HISTORY_H

#include <stddef.h>

typedef struct gmt_top_history gmt_top_history_t;

/* 0, -EINVAL for a depth of 0, or -ENOMEM. */
int gmt_top_history_new(gmt_top_history_t **h, size_t depth);
void gmt_top_history_free(gmt_top_history_t *h);

void gmt_top_history_begin(gmt_top_history_t *h);
/* value of pod name at this refresh (a second add of one name in one
 * refresh replaces the first). 0 or -ENOMEM (the pod then has no
 * history; the others keep theirs). */
int gmt_top_history_add(gmt_top_history_t *h, const char *name, double value);
void gmt_top_history_end(gmt_top_history_t *h);

/* Copies name's last values into out, oldest first, at most max of
 * them; returns how many (0 for a pod it does not know). */
size_t gmt_top_history_get(const gmt_top_history_t *h, const char *name, double *out, size_t max);

/* The values kept per pod. */
size_t gmt_top_history_depth(const gmt_top_history_t *h);

#endif
