/* mode=swap's host copies (docs/tiers.md, "Swap mode in the process"):
 * pinned pages, malloc'd memory or a spill file's mapping, made and freed.
 * No table and no lock: swap.c decides which copy an allocation gets. */
#ifndef GMT_HOOK_SWAPHOST_H
#define GMT_HOOK_SWAPHOST_H

#include <stdint.h>

/* size bytes of fresh pages registered with the real driver in the
 * current context, preferred on the NUMA node of CUDA ordinal dev, faulted
 * in first by up to fault_threads threads without the driver; NULL when
 * they cannot be had. before (if not NULL) is called between the two, as
 * the driver is about to be held. *driver_ms (if not NULL): how long the
 * registration held the driver. */
void *gmt__swaphost_pinned(uint64_t size, int dev, int fault_threads, void (*before)(void),
                           double *driver_ms);

/* Fresh pages p of size bytes, faulted in already, registered as
 * gmt__swaphost_pinned registers them: p, or NULL with p unmapped. */
void *gmt__swaphost_register(void *p, uint64_t size, double *driver_ms);

/* Prefers [p, p + size) on the NUMA node of CUDA ordinal dev, before its
 * pages are faulted in. */
void gmt__swaphost_place(void *p, uint64_t size, int dev);

/* A spill file's copy of size bytes under dir, mapped shared; NULL with
 * *err an errno when it cannot be. */
void *gmt__swaphost_spill(const char *dir, uint64_t size, int *err);

/* Host memory a copy pinned ahead (not to make room now) may take without
 * pressing on the rest of the node: /proc/meminfo's MemAvailable, or in a
 * cgroup v2 with a memory limit its memory.max less memory.current if
 * that is less, less a margin of an eighth of MemTotal. 0 when unknown. */
uint64_t gmt__swaphost_room(void);

/* Frees p, of kind GMT_SWAP_HOST_* (swaptab.h) and size bytes; a pinned
 * one in the current context. NULL: nothing. */
void gmt__swaphost_free(void *p, int kind, uint64_t size);

#endif
