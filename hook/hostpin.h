/* Page-locked host memory the process holds: what it allocated pinned
 * (cuMemAllocHost, cuMemHostAlloc) or registered (cuMemHostRegister) and
 * has not freed or unregistered. Reported to the pod (pinned_bytes): the
 * node's pinned budget is shared, and pinning a lot slows everyone's
 * pageable memory. */
#ifndef GMT_HOOK_HOSTPIN_H
#define GMT_HOOK_HOSTPIN_H

#include <stdint.h>

uint64_t gmt__hostpin_bytes(void);

#endif
