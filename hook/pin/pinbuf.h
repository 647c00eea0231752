/* Pin advice's state of one tracked host buffer (pin.c), kept in the heap's
 * record (heap.h) so that a free finds it without a second table. Read and
 * written with the heap lock held. */
#ifndef GMT_HOOK_PINBUF_H
#define GMT_HOOK_PINBUF_H

#include <stdint.h>

enum {
  GMT_PINBUF_NONE = 0,     /* pageable; may be asked about */
  GMT_PINBUF_ASKING = 1,   /* an Advise for it is under way */
  GMT_PINBUF_PINNED = 2,   /* registered by gmt on advice */
  GMT_PINBUF_DECLINED = 3, /* advice said no for good (cold, unprofiled, off) */
};

typedef struct {
  uint64_t copies[2]; /* [0] host to device, [1] device to host */
  uint64_t bytes[2];
  uint64_t last_copy_ms;
  double paid_ns;    /* what its pageable copies took beyond pinned ones */
  uint64_t retry_ms; /* refused for the budget: not asked again before */
  void *ctx;         /* the context it was registered in */
  uint8_t state;     /* GMT_PINBUF_* */
  uint8_t reason;    /* the last answer's PinReason */
} gmt_pinbuf_t;

#endif
