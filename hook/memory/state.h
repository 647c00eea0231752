/* What this process holds on the devices (state.c): live allocations, the
 * running totals, and the queue of events the reporter sends. */
#ifndef GMT_HOOK_STATE_H
#define GMT_HOOK_STATE_H

#include <stddef.h>
#include <stdint.h>

/* Where an address lives: device pointers and the handles of cuMemCreate,
 * CUarray and CUmipmappedArray are different spaces that may overlap. */
enum {
  GMT_NS_PTR = 0,
  GMT_NS_PHYSICAL = 1,
  GMT_NS_ARRAY = 2,
  GMT_NS_MIPMAP = 3,
};

/* One recorded allocation or free, as it goes into a report. */
typedef struct {
  uint64_t address;
  uint64_t size;
  int32_t device;
  uint8_t kind; /* Gmt__AllocKind */
  uint8_t free;
} gmt_hook_event_t;

#define GMT_HOOK_EVENT_CAP 4096

/* Records an allocation; returns 1 when it replaced one we thought live
 * (its free went unseen), described in *replaced (may be NULL). */
int gmt__state_alloc(int ns, uint64_t address, uint64_t size, int kind, int device,
                     gmt_hook_event_t *replaced);
/* Forgets an allocation; returns 1 and what it was in *freed (may be
 * NULL) when address was live, 0 when it was not ours. */
int gmt__state_free(int ns, uint64_t address, gmt_hook_event_t *freed);
/* How many allocations and frees were recorded so far, without a lock:
 * the token's idle thread counts a process that allocates or frees as
 * busy (PyTorch releasing its cached pages, as the hook has it do before
 * a move out, launches nothing for 0.5 s). */
uint64_t gmt__state_calls(void);

/* The totals as one report carries them. */
typedef struct {
  uint64_t memory_used;
  uint64_t allocs;
  uint64_t frees;
  uint64_t launches;
  uint64_t dropped;         /* events lost to the bounded queue, ever */
  uint64_t memory_reserved; /* held in the ledger (reserve.c; set by the reporter) */
} gmt_hook_totals_t;

/* Reporter side. wait_change waits at most poll_ms for an alloc or free
 * and returns 1 when there is something to report (one happened, or the
 * launch counter is no longer last_launches). take copies the totals and
 * moves up to cap queued events into ev, returning how many; untake puts
 * back the events of a report that failed, ahead of newer ones, dropping
 * the oldest when the queue is full. */
int gmt__state_wait_change(uint64_t last_launches, int poll_ms);
size_t gmt__state_take(gmt_hook_totals_t *t, gmt_hook_event_t *ev, size_t cap);
void gmt__state_untake(const gmt_hook_event_t *ev, size_t n);

#endif
