/* The swap gate of copies and memsets (copy.c, memops.c). When some of the
 * process's memory is off the GPU it first passes the token gate, as a
 * launch does: memory comes back while the pod holds the token, since the
 * scheduler asks only pods that are not running to make room, and a pod
 * that only copies would otherwise never ask for the token and wait on a
 * holder that never lets go (docs/tiers.md). Not in swap mode, or with
 * everything on the GPU, it is gmt__swap_enter alone. Apart from swap.h,
 * which the token's own files include through the reporter. */
#ifndef GMT_HOOK_SWAPGATE_H
#define GMT_HOOK_SWAPGATE_H

#include "swap.h"
#include "token.h"

static inline CUresult gmt__swap_gate_enter(int *held)
{
  if (atomic_load_explicit(&gmt__swap_nout, memory_order_relaxed))
    gmt__token_gate();
  return gmt__swap_enter(held, gmt__token_gate);
}

#endif
