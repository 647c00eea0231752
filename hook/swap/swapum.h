/* mode=um's driver steps (docs/tiers.md, "Unified memory"): an allocation
 * is the driver's managed memory, and a move is a prefetch, to the host
 * out and to its device back, not a copy: the bytes never leave their
 * allocation. swap.c keeps the table, the scheduler's leave (Resident)
 * and the gate for both modes and calls these. */
#ifndef GMT_HOOK_SWAPUM_H
#define GMT_HOOK_SWAPUM_H

#include <stdint.h>

#include "driver.h"

/* What occupies the card for a managed allocation of bytes: the driver
 * moves managed memory in 2 MiB pages on the GPU. */
uint64_t gmt__um_span(uint64_t bytes);

/* The card's free bytes now, as the REAL driver says (not the pod's view
 * that gmt's cuMemGetInfo gives); the calling thread's context. */
CUresult gmt__um_card_free(uint64_t *free_bytes);

/* cuMemAllocManaged(CU_MEM_ATTACH_GLOBAL) of the real driver. */
CUresult gmt__um_alloc(CUdeviceptr *p, uint64_t bytes);

/* Prefetches [p, p+bytes) to device dev (dev < 0: the host) and waits
 * for it (the entry's context current, its work synchronized). */
CUresult gmt__um_move(CUdeviceptr p, uint64_t bytes, int dev);

/* cuMemFree of a managed allocation, after its work. */
CUresult gmt__um_free(CUdeviceptr p);

#endif
