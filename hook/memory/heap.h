/* The program's large host buffers: malloc, calloc, realloc, reallocarray,
 * posix_memalign, aligned_alloc, memalign and free are interposed so that
 * pin advice (pin.c) knows each buffer of GMT_HEAP_MIN bytes or more:
 * where it was allocated, the nth at that site, and when its memory goes
 * back. munmap is interposed so that memory gmt registered is never unmapped
 * while the driver still holds it.
 *
 * A base module: it names no user. Whoever acts on buffers (pin.c) sets a
 * callback that runs before a tracked buffer's memory goes back (free,
 * realloc, munmap), on a copy of its record that has left the table, with
 * no lock held (it may call the driver, which may wait on threads that
 * allocate), and keeps its own state in the record's `pin` field.
 *
 * Tracking is on from the start (a program allocates before it calls
 * cuInit, and so before its pod's pin mode is known) and turned off for
 * good when the mode is off. It is off, and every call passes straight
 * through, when another library (an ASan runtime, an allocator linked into
 * the program) owns malloc: gmt could not see every free, so it must not
 * register what it cannot unregister.
 *
 * Lock order: the heap lock is the last of the hook's (fork.h, HEAP): it is
 * taken inside a large malloc or free, so its holder calls nothing (not
 * the driver, not dladdr) and never allocates through the wrappers. */
#ifndef GMT_HOOK_HEAP_H
#define GMT_HOOK_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include "pinbuf.h"

#define GMT_HEAP_MIN ((size_t)1 << 20)
#define GMT_HEAP_MAX_BUFFERS 65536 /* beyond this, new buffers go untracked */
#define GMT_HEAP_SITES 1024        /* distinct allocation sites with an nth count */
#define GMT_HEAP_MODULE_MAX 256

/* One allocation site: the code that called the allocator. */
typedef struct {
  uintptr_t pc;                     /* the return address in this process */
  uint64_t offset;                  /* pc less its module's load address */
  uint32_t count;                   /* buffers allocated here so far */
  char module[GMT_HEAP_MODULE_MAX]; /* path of that module; "" when unknown */
} gmt_heap_site_t;

typedef struct {
  uintptr_t addr;
  size_t size;
  uint64_t id; /* unique in this process: finds it again after the lock was let go */
  uint64_t born_ms;
  const gmt_heap_site_t *site; /* NULL when the site table was full */
  uint32_t nth;                /* buffers allocated at site before this one */
  gmt_pinbuf_t pin;            /* pin.c's state, zero at birth */
} gmt_hostbuf_t;

/* Called, without the lock, before b's memory goes back; b is a copy. */
typedef void (*gmt_heap_gone_fn)(gmt_hostbuf_t *b);
void gmt__heap_set_gone(gmt_heap_gone_fn fn);

/* Off for good: forgets every buffer (none may be registered then). */
void gmt__heap_stop_tracking(void);
/* Whether any buffer is tracked now (none once tracking stopped): a
 * relaxed read, for a copy's fast path (a buffer tracked this instant by
 * another thread may be missed). */
int gmt__heap_any(void);

void gmt__heap_lock(void);
void gmt__heap_unlock(void);
/* With the lock held: the buffer that holds [p, p+n), or NULL. */
gmt_hostbuf_t *gmt__heap_find_locked(const void *p, size_t n);
/* With the lock held: the buffer at addr with this id, or NULL once it is
 * gone (another buffer at the same address has another id). */
gmt_hostbuf_t *gmt__heap_by_id_locked(const void *addr, uint64_t id);
/* With the lock held: calls fn on every live buffer. */
void gmt__heap_each_locked(void (*fn)(gmt_hostbuf_t *b, void *arg), void *arg);

#endif
