/* The program's own physical memory in a mode=swap process (docs/tiers.md,
 * "The program's own VMM memory"): each handle it made with cuMemCreate,
 * the value it holds and the driver's handle behind it now (a move out
 * releases the driver's, a move back makes another), and each range it
 * mapped with its access, so that a move back can map it again as the
 * program left it. Pure bookkeeping, no driver calls and no lock:
 * swapvmm.c holds its own around every call, and test/unit/test_vmmtab.c
 * checks it with made-up values. */
#ifndef GMT_HOOK_VMMTAB_H
#define GMT_HOOK_VMMTAB_H

#include <stddef.h>
#include <stdint.h>

/* Room for the driver's allocation properties (CUmemAllocationProp, 32
 * bytes in CUDA 13), kept as bytes: the table does not need cuda.h. */
#define GMT_VMM_PROP_BYTES 64

typedef struct {
  uint64_t prog; /* the value the program holds */
  uint64_t real; /* the driver's handle behind it now; 0 while out */
  uint64_t key;  /* its entry in the swap table (swaptab.h) */
  uint64_t size;
  int device;
  int refs;     /* the program's: cuMemCreate, each retain, less its releases */
  int exported; /* exported once: another process may map it, it stays */
  unsigned long long flags;
  unsigned char prop[GMT_VMM_PROP_BYTES];
} gmt_vmm_handle_t;

/* One cuMemSetAccess descriptor as applied to part of a mapping. */
typedef struct {
  uint64_t off, len; /* within the mapping */
  int loc_type, loc_id;
  unsigned long long flags;
} gmt_vmm_access_t;

typedef struct {
  uint64_t va, len, offset; /* cuMemMap(va, len, offset, prog) */
  uint64_t prog;
  gmt_vmm_access_t *acc; /* in the order the program set them */
  size_t nacc, capacc;
} gmt_vmm_map_t;

typedef struct {
  gmt_vmm_handle_t *h;
  size_t nh, caph;
  gmt_vmm_map_t *m;
  size_t nm, capm;
  uint64_t serial; /* for values the program gets that the driver did not give */
} gmt_vmmtab_t;

void gmt__vmmtab_init(gmt_vmmtab_t *t);
void gmt__vmmtab_close(gmt_vmmtab_t *t);

/* The value to give the program for a new driver handle real: real itself
 * unless a handle the program holds already has that value (the driver
 * reuses a handle's value once it is released, and a move out released
 * the one the program was first given), then one no handle has. */
uint64_t gmt__vmmtab_new_value(gmt_vmmtab_t *t, uint64_t real);

/* Adds h. -EEXIST when h->prog is there, -ENOMEM. */
int gmt__vmmtab_add(gmt_vmmtab_t *t, const gmt_vmm_handle_t *h);
/* The handle the program holds as prog / whose swap table key is key, or
 * NULL. Valid until the table changes. */
gmt_vmm_handle_t *gmt__vmmtab_find(gmt_vmmtab_t *t, uint64_t prog);
gmt_vmm_handle_t *gmt__vmmtab_find_key(gmt_vmmtab_t *t, uint64_t key);
/* Removes the handle prog (its mappings are the caller's to have
 * removed). 0, or -ENOENT. */
int gmt__vmmtab_remove(gmt_vmmtab_t *t, uint64_t prog);

/* A mapping of prog at [va, va+len), from offset in it. -EEXIST when it
 * overlaps a mapping of the table, -ENOENT when prog is not there, -ENOMEM. */
int gmt__vmmtab_map(gmt_vmmtab_t *t, uint64_t va, uint64_t len, uint64_t offset, uint64_t prog);
/* Removes the mappings that lie wholly in [va, va+len) (a driver unmaps
 * whole mappings): the handles they mapped into progs (up to cap, one per
 * mapping); returns how many were removed. */
size_t gmt__vmmtab_unmap(gmt_vmmtab_t *t, uint64_t va, uint64_t len, uint64_t *progs, size_t cap);
/* The mappings that overlap [va, va+len): how many map a handle on the
 * GPU (real set), how many one that is out, and how many of either lie
 * only partly in the range. */
typedef struct {
  size_t in, out, partial;
} gmt_vmm_span_t;
gmt_vmm_span_t gmt__vmmtab_span(gmt_vmmtab_t *t, uint64_t va, uint64_t len);
/* The mapping that holds addr, or NULL. */
const gmt_vmm_map_t *gmt__vmmtab_map_at(const gmt_vmmtab_t *t, uint64_t addr);
/* How many mappings prog has. */
size_t gmt__vmmtab_nmaps(const gmt_vmmtab_t *t, uint64_t prog);

/* cuMemSetAccess over [va, va+len) with n descriptors: recorded on each
 * mapping of the table it covers part of, clipped to it. A descriptor
 * that covers a whole mapping replaces the ones before it for the same
 * location there, so the records stay as few as the program's distinct
 * settings. Returns how many mappings it touched, or -ENOMEM (then some
 * may have it recorded, some not). */
int gmt__vmmtab_access(gmt_vmmtab_t *t, uint64_t va, uint64_t len, const gmt_vmm_access_t *d,
                       size_t n);

#endif
