/* The table of a mode=swap process's allocations (docs/tiers.md, "Swap
 * mode in the process"): where each one's bytes are, the totals per place,
 * and which to move out for a target. Pure bookkeeping, no driver calls
 * and no lock: swap.c holds its own around every call, and
 * test/unit/test_swaptab.c checks it with made-up addresses. */
#ifndef GMT_HOOK_SWAPTAB_H
#define GMT_HOOK_SWAPTAB_H

#include <stddef.h>
#include <stdint.h>

/* Where a host copy lives: malloc'd, cuMemHostAlloc'd (pinned), or a
 * shared mapping of an unlinked spill file on the disk tier (its pages go
 * to the disk as the kernel writes them back; counted as disk bytes). */
enum { GMT_SWAP_HOST_MALLOC = 0, GMT_SWAP_HOST_PINNED = 1, GMT_SWAP_HOST_FILE = 2 };

typedef struct {
  uint64_t addr;   /* the reserved range's base: the address the program holds */
  uint64_t size;   /* bytes the program asked for: what a move copies */
  uint64_t span;   /* bytes reserved and mapped (size rounded up): what the GPU holds */
  uint64_t handle; /* the physical allocation while on the GPU, else 0 */
  void *host;      /* the host copy while out, else NULL */
  void *ctx;       /* the context it was made in */
  int device;
  int managed;   /* mode=um: managed memory, moved by prefetch (host stays NULL) */
  int host_kind; /* what host is: GMT_SWAP_HOST_MALLOC, _PINNED or _FILE */
  int out;       /* 1: moved off the GPU */
  /* The program's own physical memory (cuMemCreate: swapvmm.c moves it);
   * addr is then a key of its own, not an address (GMT_SWAP_PROG_KEY). */
  int prog;
  int stays;      /* never moved (an exported handle): counted on the GPU only */
  uint64_t stamp; /* when made or last brought back, in the table's own ticks */
  /* On the GPU: the host copy it came back from, kept (size bytes, pinned
   * or not as host_kind says) so that moving it out again copies into
   * memory already pinned and touched instead of allocating anew: on a
   * GPU, pinning costs about ten times the copy. Stale while on the GPU;
   * NULL when none is kept. */
  void *kept;
  uint64_t kept_ms; /* when it was kept (swap.c's clock) */
} gmt_swap_entry_t;

typedef struct {
  gmt_swap_entry_t *v;
  size_t n, cap;
  uint64_t clock;      /* the next stamp */
  uint64_t gpu_bytes;  /* spans of the entries on the GPU */
  uint64_t out_bytes;  /* spans of the entries out: what a restore needs granted */
  uint64_t host_bytes; /* sizes of the host copies of the entries out, in memory */
  uint64_t disk_bytes; /* sizes of those in spill files */
  uint64_t kept_bytes; /* sizes of the host copies kept by entries on the GPU */
  uint64_t nout;       /* entries out */
  uint64_t outs, ins;  /* moves off and back since start */
} gmt_swaptab_t;

void gmt__swaptab_init(gmt_swaptab_t *t);
/* Frees the table's memory (not the entries' host copies: the caller's). */
void gmt__swaptab_close(gmt_swaptab_t *t);

/* Adds e as on the GPU, stamped now. -EEXIST when addr is in the table,
 * -ENOMEM. */
int gmt__swaptab_add(gmt_swaptab_t *t, const gmt_swap_entry_t *e);

/* The entry at addr (its base), or NULL. Valid until the table changes. */
gmt_swap_entry_t *gmt__swaptab_find(gmt_swaptab_t *t, uint64_t addr);

/* Removes the entry at addr, copied to *out (may be NULL). 0, or -ENOENT. */
int gmt__swaptab_remove(gmt_swaptab_t *t, uint64_t addr, gmt_swap_entry_t *out);

/* Whom to move out so that at most keep bytes stay on the GPU: the
 * addresses, in the order to move them, into addrs (up to cap); returns
 * how many; never an entry that stays. The least recently made or brought back go first: a cheap
 * stand-in for "least recently used" until the tracer's per-allocation
 * history can say which are cold. Nothing when the GPU holds keep bytes or
 * fewer, so hearing a target twice moves nothing more. */
size_t gmt__swaptab_pick_out(const gmt_swaptab_t *t, uint64_t keep, uint64_t *addrs, size_t cap);

/* The addresses of the entries made in ctx (up to cap); returns how many. */
size_t gmt__swaptab_of_ctx(const gmt_swaptab_t *t, const void *ctx, uint64_t *addrs, size_t cap);

/* The addresses of the entries out on device (up to cap; returns how
 * many) and, in *bytes, the spans of all of them (cap 0: only that). */
size_t gmt__swaptab_out_on(const gmt_swaptab_t *t, int device, uint64_t *addrs, size_t cap,
                           uint64_t *bytes);
/* The smallest span of the entries out on device (0: none is out). */
uint64_t gmt__swaptab_out_least(const gmt_swaptab_t *t, int device);
/* A device with an entry out, or -1 when none is out. */
int gmt__swaptab_out_device(const gmt_swaptab_t *t);

/* e was moved out: its bytes are now in host, of kind (GMT_SWAP_HOST_*). */
void gmt__swaptab_mark_out(gmt_swaptab_t *t, gmt_swap_entry_t *e, void *host, int kind);
/* e was brought back into physical allocation handle. Its host copy stays
 * with it as e->kept (stamped now_ms) when keep is set (never a spill
 * file's); otherwise it is the caller's to free (taken before the
 * call). */
void gmt__swaptab_mark_in(gmt_swaptab_t *t, gmt_swap_entry_t *e, uint64_t handle, int keep,
                          uint64_t now_ms);
/* Takes e's kept host copy (NULL when none) out of the table: the caller
 * reuses or frees it. */
void *gmt__swaptab_take_kept(gmt_swaptab_t *t, gmt_swap_entry_t *e);

/* Prepared copies (docs/tiers.md, "Prepared host copies"): the first entry,
 * in pick_out's order, that is on the GPU, not managed, does not stay and
 * has no kept copy, copied to *out; 1, or 0 when there is none. */
int gmt__swaptab_unprepared(const gmt_swaptab_t *t, gmt_swap_entry_t *out);
/* host (size bytes of kind, never a spill file) becomes e's kept copy,
 * stamped now_ms, when e is on the GPU, not managed, of that size and has
 * none: 0. Otherwise -EBUSY, and host stays the caller's. */
int gmt__swaptab_give_kept(gmt_swaptab_t *t, gmt_swap_entry_t *e, void *host, uint64_t size,
                           int kind, uint64_t now_ms);

#endif
