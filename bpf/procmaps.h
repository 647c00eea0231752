/* What a traced process has mapped: /proc/PID/maps, read once and cached
 * per process, read again when an address falls outside what was cached
 * (not more than every GMT_PROCMAPS_REREAD_MS per process, so that a
 * stream of addresses no re-read would place costs nothing), and what a
 * mapping means for a host buffer the tracer never saw allocated.
 *
 * The symbolizer (code mappings for call sites) and MemHistory's "attach"
 * buffers (host memory that copies touch) share one cache. Not
 * thread-safe: one cache belongs to one event handler. */
#ifndef GMT_TRACE_PROCMAPS_H
#define GMT_TRACE_PROCMAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memhistory.h"

#define GMT_PROCMAPS_REREAD_MS 200

typedef enum {
  GMT_PMAP_ANON = 0, /* no file: what mmap and malloc hand out */
  GMT_PMAP_HEAP,     /* [heap]: brk */
  GMT_PMAP_STACK,    /* [stack] */
  GMT_PMAP_FILE,     /* a file, shared memory, a device: "/..." */
  GMT_PMAP_SPECIAL,  /* any other "[...]": [vdso], [vvar], [anon:name] */
} gmt_pmap_type_t;

typedef struct gmt_procmap {
  uint64_t start, end, offset;
  bool read, write, exec, shared;
  uint8_t type;     /* gmt_pmap_type_t */
  bool deleted;     /* the file was removed (" (deleted)", not in path) */
  const char *path; /* a file's; "" for every other type */
} gmt_procmap_t;

typedef struct gmt_procmap_list {
  gmt_procmap_t *maps; /* in address order */
  size_t n;
  char *names; /* the paths, which maps[].path point into */
  size_t nameslen;
} gmt_procmap_list_t;

/* One read of /proc/PID/maps; free it with gmt_procmaps_list_free().
 * -ESRCH when there is no such process. */
int gmt_procmaps_read(uint32_t pid, gmt_procmap_list_t *out);
void gmt_procmaps_list_free(gmt_procmap_list_t *l);

typedef struct gmt_procmaps gmt_procmaps_t;

int gmt_procmaps_new(gmt_procmaps_t **out);
void gmt_procmaps_free(gmt_procmaps_t *pm);
/* Reads pid's maps now (a process about to be traced, a new child), so
 * that its addresses still resolve after it exits. */
int gmt_procmaps_load(gmt_procmaps_t *pm, uint32_t pid);
/* child starts with parent's maps (fork copies the address space). */
void gmt_procmaps_fork(gmt_procmaps_t *pm, uint32_t parent, uint32_t child);
void gmt_procmaps_forget(gmt_procmaps_t *pm, uint32_t pid);
/* The mapping of pid that holds addr, or NULL. Valid until the next call
 * on pm: a miss may read the maps again. */
const gmt_procmap_t *gmt_procmaps_find(gmt_procmaps_t *pm, uint32_t pid, uint64_t addr);

/* A gmt_host_region_fn (memhistory.h) over a gmt_procmaps_t (arg): the
 * mapping of pid holding addr, whole when it is a file's (a file, shared
 * memory, a device's memory: one object mapped once), not when it is
 * anonymous memory, the heap or the stack (the kernel merges neighbouring
 * anonymous mappings, so one holds many allocations: measured, seven
 * malloc(1 MiB) made one mapping). -ENOENT when no mapping holds addr or
 * the one that does may be neither read nor written (an address-space
 * reservation). */
int gmt_procmaps_host_region(void *pm, uint32_t pid, uint64_t addr, gmt_host_region_t *out);

#endif
