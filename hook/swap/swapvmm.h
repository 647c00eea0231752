/* The program's own virtual memory calls in a mode=swap process
 * (docs/tiers.md, "The program's own VMM memory"): the physical memory it
 * makes with cuMemCreate moves off the GPU and back like gmt's own swap
 * allocations. alloc.c's wrappers of the VMM entry points call these while
 * gmt__swap_vmm_on(); each does the whole call, the real one included.
 *
 * The handle value the program holds stays its own: a move out releases
 * the driver's handle and a move back makes another, and these calls look
 * the driver's up for it. Mapped ranges are kept with the access the
 * program set, to be mapped again as it left them. A handle the program
 * exports (cuMemExportToShareableHandle) stays on the GPU from then on:
 * another process may map it. Every call that may touch a handle's
 * mapping passes the swap gate first (swapgate.h), so its memory is on the
 * GPU when the driver sees it, but those that only let go (a release, an
 * unmap of handles wholly out, the free of a range): they hold the lock
 * without bringing anything back, and a handle that is out goes from the
 * table and its host copy, the driver having nothing of it. */
#ifndef GMT_HOOK_SWAPVMM_H
#define GMT_HOOK_SWAPVMM_H

#include "swap.h"

static inline int gmt__swap_vmm_on(void)
{
  return atomic_load_explicit(&gmt__swap_on, memory_order_relaxed) == GMT_SWAP_COPIES;
}

/* cuMemCreate of device memory: asks Resident for size bytes first, as an
 * allocation does (the quota is the caller's). */
CUresult gmt__swap_vmm_create(CUmemGenericAllocationHandle *handle, size_t size,
                              const CUmemAllocationProp *prop, unsigned long long flags);
/* Called with each handle value whose physical memory is gone (the
 * program holds no reference and no mapping of it: in a release, an unmap
 * or the free of a range), for the caller to give its quota back; a
 * handle that is not gmt's goes at its release, as the driver says. */
typedef void (*gmt_swap_vmm_gone_fn)(uint64_t handle);
CUresult gmt__swap_vmm_release(CUmemGenericAllocationHandle handle, gmt_swap_vmm_gone_fn gone);
CUresult gmt__swap_vmm_map(CUdeviceptr ptr, size_t size, size_t offset,
                           CUmemGenericAllocationHandle handle, unsigned long long flags);
CUresult gmt__swap_vmm_unmap(CUdeviceptr ptr, size_t size, gmt_swap_vmm_gone_fn gone);
CUresult gmt__swap_vmm_address_free(CUdeviceptr ptr, size_t size, gmt_swap_vmm_gone_fn gone);
CUresult gmt__swap_vmm_set_access(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                  size_t count);
CUresult gmt__swap_vmm_get_access(unsigned long long *flags, const CUmemLocation *location,
                                  CUdeviceptr ptr);
CUresult gmt__swap_vmm_retain(CUmemGenericAllocationHandle *handle, void *addr);
CUresult gmt__swap_vmm_props(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle);
CUresult gmt__swap_vmm_export(void *shareable, CUmemGenericAllocationHandle handle,
                              CUmemAllocationHandleType type, unsigned long long flags);

/* A stream-ordered allocation (cuMemAllocAsync, a pool's): in a swap
 * process, says once on stderr why it does not move and what to use. */
void gmt__swap_vmm_pool_note(void);

#endif
