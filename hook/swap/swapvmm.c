/* The program's own physical memory in a mode=swap process (see
 * swapvmm.h): the calls the program makes, and the driver steps that move
 * a handle's bytes, which swap.c runs through the ops registered at the
 * bottom. Its entries ride on swap.c's table and Resident like gmt's own
 * allocations, so the scheduler counts them in the process's resident
 * bytes and its targets move them.
 *
 * Locks: g_mu guards the table of handles and mappings (vmmtab.h). In
 * hook/base/fork.h's order it sits in SWAP after gmt__swap_rw and swap.c's
 * g_res_mu, before g_prep_mu and g_tab_mu; it is held across the driver
 * calls of a move (under the exclusive lock) and of the program's VMM
 * calls (under the lock held shared), never across a Resident RPC or a wait,
 * and is not taken at fork (the child starts a table of its own). The window,
 * an address range of gmt's own through which a move copies a handle's
 * bytes whatever the program mapped of it, is used under the exclusive
 * lock only. */
#include "swapvmm.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"
#include "frame.h"
#include "gmt_log.h"
#include "log.h"
#include "swapgate.h"
#include "vmmtab.h"

_Static_assert(sizeof(CUmemAllocationProp) <= GMT_VMM_PROP_BYTES, "room for the properties");

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static gmt_vmmtab_t g_vt;
static uint64_t g_keys; /* the next key's serial */
static CUdeviceptr g_win;
static size_t g_win_size;
static _Atomic int g_export_said, g_pool_said;

static CUresult no_driver(void)
{
  return CUDA_ERROR_NOT_FOUND;
}

/* ---- the driver steps of a move (exclusive lock held, g_mu held) ---- */

/* The window mapped onto real (size bytes on dev), read/write: 0 on
 * success. */
static CUresult window_on(uint64_t real, uint64_t size, int dev)
{
  __typeof__(&cuMemAddressReserve) reserve = GMT_REAL(cuMemAddressReserve);
  __typeof__(&cuMemAddressFree) addr_free = GMT_REAL(cuMemAddressFree);
  __typeof__(&cuMemMap) map = GMT_REAL(cuMemMap);
  __typeof__(&cuMemUnmap) unmap = GMT_REAL(cuMemUnmap);
  __typeof__(&cuMemSetAccess) access = GMT_REAL(cuMemSetAccess);
  if (!reserve || !addr_free || !map || !unmap || !access)
    return no_driver();
  if (g_win_size < size) {
    if (g_win)
      addr_free(g_win, g_win_size);
    g_win = 0;
    g_win_size = 0;
    CUresult rc = reserve(&g_win, size, 0, 0, 0);
    if (rc != CUDA_SUCCESS)
      return rc;
    g_win_size = size;
  }
  CUresult rc = map(g_win, size, 0, real, 0);
  if (rc != CUDA_SUCCESS)
    return rc;
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof acc);
  acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  acc.location.id = dev;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  rc = access(g_win, size, &acc, 1);
  if (rc != CUDA_SUCCESS)
    unmap(g_win, size);
  return rc;
}

static void window_off(uint64_t size)
{
  __typeof__(&cuMemUnmap) unmap = GMT_REAL(cuMemUnmap);
  if (unmap && unmap(g_win, size) != CUDA_SUCCESS)
    GMT_HOOK_DEBUG("cannot unmap the copy window (%llu bytes)", (unsigned long long)size);
}

/* The program's mapping m of real, with the access it set, in order. */
static CUresult map_one(const gmt_vmm_map_t *m, uint64_t real)
{
  __typeof__(&cuMemMap) map = GMT_REAL(cuMemMap);
  __typeof__(&cuMemUnmap) unmap = GMT_REAL(cuMemUnmap);
  __typeof__(&cuMemSetAccess) access = GMT_REAL(cuMemSetAccess);
  if (!map || !unmap || !access)
    return no_driver();
  CUresult rc = map(m->va, m->len, m->offset, real, 0);
  for (size_t k = 0; rc == CUDA_SUCCESS && k < m->nacc; k++) {
    const gmt_vmm_access_t *a = &m->acc[k];
    CUmemAccessDesc d;
    memset(&d, 0, sizeof d);
    d.location.type = (CUmemLocationType)a->loc_type;
    d.location.id = a->loc_id;
    d.flags = (CUmemAccess_flags)a->flags;
    rc = access(m->va + a->off, a->len, &d, 1);
  }
  if (rc != CUDA_SUCCESS)
    unmap(m->va, m->len);
  return rc;
}

/* Maps every mapping of prog onto real (all or none). */
static CUresult map_all(uint64_t prog, uint64_t real)
{
  __typeof__(&cuMemUnmap) unmap = GMT_REAL(cuMemUnmap);
  CUresult rc = unmap ? CUDA_SUCCESS : no_driver();
  size_t i = 0;
  for (; rc == CUDA_SUCCESS && i < g_vt.nm; i++)
    if (g_vt.m[i].prog == prog)
      rc = map_one(&g_vt.m[i], real);
  if (rc != CUDA_SUCCESS)
    for (size_t j = 0; j + 1 < i; j++)
      if (g_vt.m[j].prog == prog)
        unmap(g_vt.m[j].va, g_vt.m[j].len);
  return rc;
}

static CUresult op_out(const gmt_swap_entry_t *e, void *host, gmt_swap_out_times_t *t)
{
  __typeof__(&cuMemcpyDtoH_v2) dtoh = GMT_REAL(cuMemcpyDtoH_v2);
  __typeof__(&cuMemUnmap) unmap = GMT_REAL(cuMemUnmap);
  __typeof__(&cuMemRelease) release = GMT_REAL(cuMemRelease);
  if (!dtoh || !unmap || !release)
    return no_driver();
  pthread_mutex_lock(&g_mu);
  gmt_vmm_handle_t *h = gmt__vmmtab_find_key(&g_vt, e->addr);
  uint64_t t0 = gmt_now_ns(), t1 = t0, t2 = t0;
  CUresult rc = h && h->real ? window_on(h->real, h->size, h->device) : CUDA_ERROR_INVALID_VALUE;
  if (rc == CUDA_SUCCESS) {
    /* All of its bytes, whatever the program mapped of it (a part, or
     * the same bytes at several addresses): a handle is the unit. */
    t1 = gmt_now_ns();
    rc = dtoh(host, g_win, h->size);
    t2 = gmt_now_ns();
    window_off(h->size);
  }
  size_t undone = 0; /* the mappings below this one are unmapped */
  for (; rc == CUDA_SUCCESS && undone < g_vt.nm; undone++)
    if (g_vt.m[undone].prog == h->prog && (rc = unmap(g_vt.m[undone].va, g_vt.m[undone].len)))
      break;
  if (rc == CUDA_SUCCESS)
    rc = release(h->real);
  t->copy_ns += t2 - t1;
  t->map_ns += gmt_now_ns() - t0 - (t2 - t1);
  if (rc == CUDA_SUCCESS) {
    h->real = 0;
  } else if (h) {
    /* Mapped back where it was unmapped already: it stays on the GPU. */
    for (size_t j = 0; j < undone; j++)
      if (g_vt.m[j].prog == h->prog && map_one(&g_vt.m[j], h->real) != CUDA_SUCCESS)
        GMT_HOOK_DEBUG("cannot map 0x%llx back after a failed move out",
                       (unsigned long long)g_vt.m[j].va);
  }
  pthread_mutex_unlock(&g_mu);
  return rc;
}

static CUresult op_in(const gmt_swap_entry_t *e, uint64_t *real)
{
  __typeof__(&cuMemCreate) create = GMT_REAL(cuMemCreate);
  __typeof__(&cuMemRelease) release = GMT_REAL(cuMemRelease);
  __typeof__(&cuMemcpyHtoD_v2) htod = GMT_REAL(cuMemcpyHtoD_v2);
  if (!create || !release || !htod)
    return no_driver();
  pthread_mutex_lock(&g_mu);
  gmt_vmm_handle_t *h = gmt__vmmtab_find_key(&g_vt, e->addr);
  CUmemGenericAllocationHandle nh = 0;
  CUresult rc = CUDA_ERROR_INVALID_VALUE;
  if (h && !h->real) {
    CUmemAllocationProp prop;
    memcpy(&prop, h->prop, sizeof prop);
    rc = create(&nh, h->size, &prop, h->flags); /* the real one: charged once, by the program's */
  }
  if (rc == CUDA_SUCCESS) {
    rc = window_on(nh, h->size, h->device);
    if (rc == CUDA_SUCCESS) {
      rc = htod(g_win, e->host, h->size);
      window_off(h->size);
    }
    if (rc == CUDA_SUCCESS)
      rc = map_all(h->prog, nh);
    if (rc == CUDA_SUCCESS) {
      h->real = nh;
      *real = nh;
    } else {
      release(nh);
    }
  }
  pthread_mutex_unlock(&g_mu);
  return rc;
}

static uint64_t op_addr(uint64_t key)
{
  uint64_t at = 0;
  pthread_mutex_lock(&g_mu);
  gmt_vmm_handle_t *h = gmt__vmmtab_find_key(&g_vt, key);
  for (size_t i = 0; h && !at && i < g_vt.nm; i++)
    if (g_vt.m[i].prog == h->prog)
      at = g_vt.m[i].va;
  pthread_mutex_unlock(&g_mu);
  return at;
}

static void op_lost(uint64_t key)
{
  pthread_mutex_lock(&g_mu);
  gmt_vmm_handle_t *h = gmt__vmmtab_find_key(&g_vt, key);
  if (h) {
    uint64_t prog = h->prog, none[1];
    for (size_t i = 0; i < g_vt.nm;)
      if (g_vt.m[i].prog == prog)
        gmt__vmmtab_unmap(&g_vt, g_vt.m[i].va, g_vt.m[i].len, none, 0);
      else
        i++;
    gmt__vmmtab_remove(&g_vt, prog);
  }
  pthread_mutex_unlock(&g_mu);
}

/* The child holds no device memory: the table is the parent's, and may
 * have been in the middle of a change (g_mu is not taken at fork), so it
 * is left, not freed. */
static void op_child(void)
{
  gmt__vmmtab_init(&g_vt);
  g_win = 0;
  g_win_size = 0;
  g_export_said = g_pool_said = 0;
  pthread_mutex_init(&g_mu, NULL);
}

static const gmt_swap_prog_ops_t g_ops = {op_out, op_in, op_addr, op_lost, op_child};

__attribute__((constructor)) static void swapvmm_register(void)
{
  gmt__swap_prog_register(&g_ops);
}

/* ---- the program's calls ---- */

/* The driver's handle for the program's value (itself when not ours). */
static uint64_t real_of(uint64_t prog, gmt_vmm_handle_t **out)
{
  gmt_vmm_handle_t *h = gmt__vmmtab_find(&g_vt, prog);
  if (out)
    *out = h;
  return h ? h->real : prog;
}

CUresult gmt__swap_vmm_create(CUmemGenericAllocationHandle *handle, size_t size,
                              const CUmemAllocationProp *prop, unsigned long long flags)
{
  __typeof__(&cuMemCreate) create = GMT_REAL(cuMemCreate);
  __typeof__(&cuMemRelease) release = GMT_REAL(cuMemRelease);
  if (!create || !release)
    return no_driver();
  CUcontext ctx = gmt__current_ctx();
  if (!handle || !prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || !size || !ctx)
    return create(handle, size, prop, flags); /* not the GPU's, or nothing to move it in */
  int dev = prop->location.id;
  int c = gmt__swap_prog_claim(dev, size, gmt__token_gate);
  if (c < 0) {
    fprintf(stderr, "gmt[%d]: the scheduler did not grant %llu more bytes on device %d\n",
            (int)getpid(), (unsigned long long)size, dev);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUmemGenericAllocationHandle real = 0;
  CUresult rc = create(&real, size, prop, flags);
  if (rc != CUDA_SUCCESS) {
    gmt__swap_prog_unclaim(dev, size);
    return rc;
  }
  pthread_mutex_lock(&g_mu);
  gmt_vmm_handle_t h = {.prog = gmt__vmmtab_new_value(&g_vt, real),
                        .real = real,
                        .key = GMT_SWAP_PROG_KEY | ++g_keys,
                        .size = size,
                        .device = dev,
                        .refs = 1,
                        .flags = flags};
  memcpy(h.prop, prop, sizeof *prop);
  int added = gmt__vmmtab_add(&g_vt, &h);
  pthread_mutex_unlock(&g_mu);
  gmt_swap_entry_t e = {.addr = h.key,
                        .size = size,
                        .span = size,
                        .handle = real,
                        .ctx = ctx,
                        .device = dev,
                        .prog = 1};
  if (added == 0 && gmt__swap_prog_track(&e) < 0) {
    pthread_mutex_lock(&g_mu);
    gmt__vmmtab_remove(&g_vt, h.prog);
    pthread_mutex_unlock(&g_mu);
    added = -ENOMEM;
  }
  if (added < 0) {
    release(real);
    gmt__swap_prog_unclaim(dev, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (h.prog != real)
    GMT_HOOK_DEBUG("the driver's handle 0x%llx is one the program holds already: it gets 0x%llx",
                   (unsigned long long)real, (unsigned long long)h.prog);
  *handle = h.prog;
  return CUDA_SUCCESS;
}

/* After the program let go of prog (a release or an unmap), with the lock
 * held shared: when it holds no reference and no mapping of it, its memory goes
 * (g_mu held) and gone hears of it. Adds the bytes to unclaim on *dev to
 * *bytes. */
static void maybe_gone(uint64_t prog, int *dev, uint64_t *bytes, gmt_swap_vmm_gone_fn gone)
{
  __typeof__(&cuMemRelease) release = GMT_REAL(cuMemRelease);
  gmt_vmm_handle_t *h = gmt__vmmtab_find(&g_vt, prog);
  if (!h || h->refs > 0 || gmt__vmmtab_nmaps(&g_vt, prog))
    return;
  uint64_t key = h->key, real = h->real;
  gmt__vmmtab_remove(&g_vt, prog);
  uint64_t t0 = gmt_now_ns();
  if (real && release && release(real) != CUDA_SUCCESS)
    GMT_HOOK_DEBUG("cuMemRelease of the program's handle 0x%llx failed", (unsigned long long)real);
  gmt__swap_note_release(gmt_now_ns() - t0);
  *bytes += gmt__swap_prog_untrack(key, dev);
  if (gone)
    gone(prog);
}

CUresult gmt__swap_vmm_release(CUmemGenericAllocationHandle handle, gmt_swap_vmm_gone_fn gone)
{
  __typeof__(&cuMemRelease) release = GMT_REAL(cuMemRelease);
  if (!release)
    return no_driver();
  /* Held, not the gate: a release touches no bytes, and one of a handle
   * that is out only drops its host copy (maybe_gone). Through the gate,
   * PyTorch's empty_cache with some handles out waited for the token and
   * then brought every handle back, those it was releasing included. */
  int held = gmt__swap_hold();
  CUresult rc = CUDA_SUCCESS;
  int dev = 0;
  uint64_t bytes = 0;
  pthread_mutex_lock(&g_mu);
  gmt_vmm_handle_t *h = gmt__vmmtab_find(&g_vt, handle);
  if (!h) {
    rc = release(handle);
    if (rc == CUDA_SUCCESS && gone)
      gone(handle);
  } else if (h->refs <= 0) {
    rc = CUDA_ERROR_INVALID_VALUE; /* released already (still mapped) */
  } else {
    /* The driver keeps one reference of gmt's while the program holds
     * any, or a mapping: a move out needs the handle alive to copy it. */
    h->refs--;
    maybe_gone(handle, &dev, &bytes, gone);
  }
  pthread_mutex_unlock(&g_mu);
  gmt__swap_leave(held);
  gmt__swap_prog_unclaim(dev, bytes);
  return rc;
}

CUresult gmt__swap_vmm_map(CUdeviceptr ptr, size_t size, size_t offset,
                           CUmemGenericAllocationHandle handle, unsigned long long flags)
{
  __typeof__(&cuMemMap) map = GMT_REAL(cuMemMap);
  __typeof__(&cuMemUnmap) unmap = GMT_REAL(cuMemUnmap);
  if (!map || !unmap)
    return no_driver();
  int held;
  CUresult rc = gmt__swap_gate_enter(&held);
  if (rc != CUDA_SUCCESS)
    return rc;
  pthread_mutex_lock(&g_mu);
  gmt_vmm_handle_t *h;
  uint64_t real = real_of(handle, &h);
  rc = h && h->refs <= 0 ? CUDA_ERROR_INVALID_VALUE : map(ptr, size, offset, real, flags);
  if (rc == CUDA_SUCCESS && h && gmt__vmmtab_map(&g_vt, ptr, size, offset, handle) < 0) {
    unmap(ptr, size); /* a mapping the table cannot hold would not come back */
    rc = CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_unlock(&g_mu);
  gmt__swap_leave(held);
  return rc;
}

/* The table's mappings wholly in [ptr, ptr+size) are gone (g_mu held):
 * what that frees adds to *dev, *bytes. */
static void drop_maps(CUdeviceptr ptr, size_t size, int *dev, uint64_t *bytes,
                      gmt_swap_vmm_gone_fn gone)
{
  size_t cap = g_vt.nm;
  uint64_t *progs = cap ? malloc(cap * sizeof(*progs)) : NULL;
  size_t n = gmt__vmmtab_unmap(&g_vt, ptr, size, progs, progs ? cap : 0);
  for (size_t i = 0; progs && i < n; i++)
    maybe_gone(progs[i], dev, bytes, gone);
  free(progs);
}

CUresult gmt__swap_vmm_unmap(CUdeviceptr ptr, size_t size, gmt_swap_vmm_gone_fn gone)
{
  __typeof__(&cuMemUnmap) unmap = GMT_REAL(cuMemUnmap);
  if (!unmap)
    return no_driver();
  /* Held, as for a release: an unmap touches no bytes. */
  int held = gmt__swap_hold();
  pthread_mutex_lock(&g_mu);
  gmt_vmm_span_t sp = gmt__vmmtab_span(&g_vt, ptr, size);
  if (sp.out && (sp.in || sp.partial)) {
    /* Out and on the GPU in one range, or out in part: what the driver
     * would say is known once all is back, so through the gate. */
    pthread_mutex_unlock(&g_mu);
    gmt__swap_leave(held);
    CUresult rc = gmt__swap_gate_enter(&held);
    if (rc != CUDA_SUCCESS)
      return rc;
    pthread_mutex_lock(&g_mu);
    sp = gmt__vmmtab_span(&g_vt, ptr, size);
  }
  int dev = 0;
  uint64_t bytes = 0;
  /* Wholly out: the move unmapped it from the driver already, and only
   * the table has it. */
  CUresult rc = sp.out ? CUDA_SUCCESS : unmap(ptr, size);
  if (rc == CUDA_SUCCESS)
    drop_maps(ptr, size, &dev, &bytes, gone);
  pthread_mutex_unlock(&g_mu);
  gmt__swap_leave(held);
  gmt__swap_prog_unclaim(dev, bytes);
  return rc;
}

CUresult gmt__swap_vmm_address_free(CUdeviceptr ptr, size_t size, gmt_swap_vmm_gone_fn gone)
{
  __typeof__(&cuMemAddressFree) addr_free = GMT_REAL(cuMemAddressFree);
  if (!addr_free)
    return no_driver();
  /* Held, as for a release: the mappings of handles that are out are
   * the table's alone, and go from it. */
  int held = gmt__swap_hold();
  int dev = 0;
  uint64_t bytes = 0;
  pthread_mutex_lock(&g_mu);
  CUresult rc = addr_free(ptr, size);
  if (rc == CUDA_SUCCESS) /* a driver that unmaps what is left in the range */
    drop_maps(ptr, size, &dev, &bytes, gone);
  pthread_mutex_unlock(&g_mu);
  gmt__swap_leave(held);
  gmt__swap_prog_unclaim(dev, bytes);
  return rc;
}

CUresult gmt__swap_vmm_set_access(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                  size_t count)
{
  __typeof__(&cuMemSetAccess) access = GMT_REAL(cuMemSetAccess);
  if (!access)
    return no_driver();
  int held;
  CUresult rc = gmt__swap_gate_enter(&held);
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = access(ptr, size, desc, count);
  gmt_vmm_access_t *d = rc == CUDA_SUCCESS && count ? calloc(count, sizeof(*d)) : NULL;
  for (size_t i = 0; d && i < count; i++)
    d[i] = (gmt_vmm_access_t){.loc_type = (int)desc[i].location.type,
                              .loc_id = desc[i].location.id,
                              .flags = (unsigned long long)desc[i].flags};
  pthread_mutex_lock(&g_mu);
  if (rc == CUDA_SUCCESS && (!d || gmt__vmmtab_access(&g_vt, ptr, size, d, count) < 0) &&
      gmt__vmmtab_map_at(&g_vt, ptr)) {
    /* Set, but not kept: a move back would map it without it. */
    fprintf(stderr, "gmt[%d]: no memory to keep the access set on 0x%llx\n", (int)getpid(),
            (unsigned long long)ptr);
    rc = CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_unlock(&g_mu);
  free(d);
  gmt__swap_leave(held);
  return rc;
}

CUresult gmt__swap_vmm_get_access(unsigned long long *flags, const CUmemLocation *location,
                                  CUdeviceptr ptr)
{
  __typeof__(&cuMemGetAccess) get = GMT_REAL(cuMemGetAccess);
  if (!get)
    return no_driver();
  int held;
  CUresult rc = gmt__swap_gate_enter(&held);
  if (rc != CUDA_SUCCESS)
    return rc;
  rc = get(flags, location, ptr);
  gmt__swap_leave(held);
  return rc;
}

CUresult gmt__swap_vmm_retain(CUmemGenericAllocationHandle *handle, void *addr)
{
  __typeof__(&cuMemRetainAllocationHandle) retain = GMT_REAL(cuMemRetainAllocationHandle);
  if (!retain)
    return no_driver();
  int held;
  CUresult rc = gmt__swap_gate_enter(&held);
  if (rc != CUDA_SUCCESS)
    return rc;
  pthread_mutex_lock(&g_mu);
  const gmt_vmm_map_t *m = gmt__vmmtab_map_at(&g_vt, (uint64_t)(uintptr_t)addr);
  gmt_vmm_handle_t *h = m ? gmt__vmmtab_find(&g_vt, m->prog) : NULL;
  if (h && handle) {
    /* One more reference of the program's, counted here: the driver
     * holds one for gmt whatever the program holds (see release). */
    h->refs++;
    *handle = h->prog;
  } else {
    rc = retain(handle, addr);
  }
  pthread_mutex_unlock(&g_mu);
  gmt__swap_leave(held);
  return rc;
}

CUresult gmt__swap_vmm_props(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
  __typeof__(&cuMemGetAllocationPropertiesFromHandle) get =
      GMT_REAL(cuMemGetAllocationPropertiesFromHandle);
  if (!get)
    return no_driver();
  pthread_mutex_lock(&g_mu);
  gmt_vmm_handle_t *h = gmt__vmmtab_find(&g_vt, handle);
  CUresult rc = CUDA_SUCCESS;
  if (h && h->real && prop)
    rc = get(prop, h->real);
  else if (h && prop) /* out: as the program made it */
    memcpy(prop, h->prop, sizeof *prop);
  else if (h)
    rc = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_unlock(&g_mu);
  return h ? rc : get(prop, handle);
}

CUresult gmt__swap_vmm_export(void *shareable, CUmemGenericAllocationHandle handle,
                              CUmemAllocationHandleType type, unsigned long long flags)
{
  __typeof__(&cuMemExportToShareableHandle) exp = GMT_REAL(cuMemExportToShareableHandle);
  if (!exp)
    return no_driver();
  int held;
  CUresult rc = gmt__swap_gate_enter(&held);
  if (rc != CUDA_SUCCESS)
    return rc;
  pthread_mutex_lock(&g_mu);
  gmt_vmm_handle_t *h;
  uint64_t real = real_of(handle, &h);
  rc = exp(shareable, real, type, flags);
  uint64_t key = 0, size = 0;
  if (rc == CUDA_SUCCESS && h && !h->exported) {
    h->exported = 1;
    key = h->key;
    size = h->size;
  }
  pthread_mutex_unlock(&g_mu);
  if (key) {
    gmt__swap_prog_stays(key);
    if (!atomic_exchange(&g_export_said, 1))
      fprintf(stderr,
              "gmt[%d]: the program exported %llu bytes of its physical memory "
              "(cuMemExportToShareableHandle): another process may map the same memory, so it "
              "stays on the GPU and counts there until released, and so will any other it "
              "exports (said once)\n",
              (int)getpid(), (unsigned long long)size);
    else
      GMT_HOOK_DEBUG("exported %llu bytes of physical memory: they stay on the GPU",
                     (unsigned long long)size);
  }
  gmt__swap_leave(held);
  return rc;
}

void gmt__swap_vmm_pool_note(void)
{
  if (!gmt__swap_vmm_on() || atomic_exchange(&g_pool_said, 1))
    return;
  fprintf(stderr,
          "gmt[%d]: stream-ordered memory (cuMemAllocAsync, memory pools: PyTorch's "
          "cudaMallocAsync backend) does not move off the GPU in mode=swap: the driver's pool "
          "hands out parts of its own physical memory and reuses them in stream order, which "
          "gmt cannot copy out, release and map back without the pool's knowledge; it counts "
          "against the quota and stays on the GPU. For memory that moves, use PyTorch's "
          "default allocator (PYTORCH_CUDA_ALLOC_CONF without backend:cudaMallocAsync), with "
          "expandable_segments:True if wanted (said once)\n",
          (int)getpid());
}
