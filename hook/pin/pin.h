/* Pin advice, the hook's side (docs/pinning.md): which of the program's
 * large pageable host buffers (heap.h) gmt registers with the driver, so
 * that their copies run at pinned speed, within the node's pinned budget.
 *
 * Each copy to or from a tracked buffer is counted before it is made
 * (copy.c). By the pod's pin mode (learned at registration):
 *  - profile: a buffer is pinned at its first copy, and its history (site,
 *    size, copies each way) goes to gmt-schd when it ends;
 *  - use: at its first copy gmt-schd is asked what the profile says;
 *  - adaptive: a buffer is pinned once what its pageable copies took
 *    beyond pinned ones pays for registering and unregistering it (ski
 *    rental: measured copy rates and registration cost, no constant);
 * each pin first gets a yes from gmt-schd (Advise), which charges it to the
 * node's pinned ledger. A pinned buffer is unregistered before its memory
 * goes back (free, realloc, munmap), and the bytes are given back with the
 * next Advise. Anything that fails leaves the buffer pageable: a copy
 * never fails or returns other bytes because of advice. */
#ifndef GMT_HOOK_PIN_H
#define GMT_HOOK_PIN_H

#include <stddef.h>
#include <stdint.h>

/* The pod's pin mode (Gmt__PinMode), from registration; off stops the
 * heap's tracking for good. */
void gmt__pin_set_mode(int mode);
/* 1 once registration said pin advice is on for the pod (any mode but
 * off): gmt may then manage the program's pinned memory too (hostpin.c's
 * caching pool). */
int gmt__pin_on(void);

/* One copy as copy.c sees it. */
typedef struct {
  uint64_t id;    /* the tracked buffer, 0 for none */
  uint64_t t0_ns; /* when the real copy began */
  size_t bytes;
  int pinned; /* the buffer was registered by gmt when the copy began */
  int sync;   /* the call returns when the copy is done: its time is the copy's */
} gmt_pin_copy_t;

/* Before a copy of n bytes from src or into dst (either may be a device
 * address, or NULL): counts it against the host buffer, and may pin it
 * first. */
void gmt__pin_copy_begin(gmt_pin_copy_t *c, const void *src, const void *dst, size_t n, int sync);
/* After it: a synchronous copy's time refines the copy rates. */
void gmt__pin_copy_end(const gmt_pin_copy_t *c, int ok);

/* The program registers [p, p+n) itself: what gmt registered there is
 * unregistered first, so that the program's call does as without gmt. */
void gmt__pin_yield(const void *p, size_t n);

/* Bytes gmt holds registered on advice now. */
uint64_t gmt__pin_advised_bytes(void);

/* Reporter thread: gives back what was unpinned and sends the histories of
 * buffers that ended (one Advise with nothing asked), when there are any. */
void gmt__pin_tick(void);

#endif
