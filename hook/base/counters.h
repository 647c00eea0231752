/* Counters that the hot paths bump without a lock. */
#ifndef GMT_HOOK_COUNTERS_H
#define GMT_HOOK_COUNTERS_H

#include <stdatomic.h>
#include <stdint.h>

/* Kernel launches since start (or since fork in a child): the launch path
 * only ever does a relaxed increment of this. */
extern _Atomic uint64_t gmt__launches;

#endif
