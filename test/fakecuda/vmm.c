/* Virtual memory management of the fake driver (cuMemCreate, cuMemMap...),
 * as PyTorch's expandable segments use it: physical handles are charged to
 * the ledger, reserved address ranges are not, and mappings make a reserved
 * range resolve piecewise to the handles' memory. */
#include "fakecuda.h"

#include <stdlib.h>
#include <string.h>

static struct gmt__vmm *vmm_of(CUmemGenericAllocationHandle h)
{
  struct gmt__vmm *v = (struct gmt__vmm *)(uintptr_t)h;
  return gmt__handle_ok(v, GMT__K_VMM) ? v : NULL;
}

/* Physical memory goes when it is released and no longer mapped. */
static void vmm_maybe_free(struct gmt__vmm *v)
{
  if (!v->released || v->maps)
    return;
  gmt__handle_del(v);
  gmt__fake_uncharge(v->dev, v->size);
  gmt__hostbuf_free(v->host, v->size);
  free(v);
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
  GMT_FAKE_NEED_INIT();
  (void)option;
  if (!granularity || !prop)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  *granularity = GMT_FAKE_GRANULARITY;
  GMT_FAKE_RET(CUDA_SUCCESS);
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
  GMT_FAKE_NEED_INIT();
  if (!handle || !prop || flags != 0 || size == 0 || size % GMT_FAKE_GRANULARITY != 0 ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  int dev = prop->location.id;
  if (!gmt__fake_dev_ok(dev))
    GMT_FAKE_RET(CUDA_ERROR_INVALID_DEVICE);
  gmt__fake_lock();
  CUresult r = gmt__fake_charge(dev, size);
  struct gmt__vmm *v = NULL;
  if (r == CUDA_SUCCESS) {
    v = calloc(1, sizeof *v);
    if (v)
      v->host = gmt__hostbuf_new(size);
    if (!v || !v->host || gmt__handle_add(v, GMT__K_VMM) != 0) {
      if (v)
        gmt__hostbuf_free(v->host, size);
      free(v);
      v = NULL;
      gmt__fake_uncharge(dev, size);
      r = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  if (v) {
    v->dev = dev;
    v->size = size;
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)v;
  }
  gmt__fake_unlock();
  gmt__fake_log("cuMemCreate %zu bytes on device %d (%d)", size, dev, (int)r);
  GMT_FAKE_RET(r);
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
  GMT_FAKE_NEED_INIT();
  /* Releasing, unmapping and freeing the address range may free the
   * memory: first the work queued before, which may still touch it. */
  gmt__queue_drain();
  gmt__fake_lock();
  struct gmt__vmm *v = vmm_of(handle);
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  if (v && !v->released) {
    v->released = 1;
    vmm_maybe_free(v);
    r = CUDA_SUCCESS;
  }
  gmt__fake_unlock();
  GMT_FAKE_RET(r);
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags)
{
  GMT_FAKE_NEED_INIT();
  (void)addr; /* a hint only; the fake does not honour it */
  if (!ptr || size == 0 || size % GMT_FAKE_GRANULARITY != 0 || flags != 0 ||
      (alignment & (alignment - 1)) != 0)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  gmt__fake_lock();
  struct gmt__range *r = NULL;
  size_t align = alignment > GMT_FAKE_GRANULARITY ? alignment : GMT_FAKE_GRANULARITY;
  CUresult res = gmt__mem_new(0, GMT__MEM_RESERVE, size, 0, 0, 0, align, &r);
  gmt__fake_unlock();
  if (res == CUDA_SUCCESS)
    *ptr = r->base;
  GMT_FAKE_RET(res);
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
  GMT_FAKE_NEED_INIT();
  gmt__queue_drain();
  gmt__fake_lock();
  struct gmt__range *r = gmt__mem_find_base(ptr);
  CUresult res = CUDA_ERROR_INVALID_VALUE;
  if (r && r->kind == GMT__MEM_RESERVE && r->size == size) {
    for (size_t i = 0; i < r->nmaps; i++) {
      r->maps[i].h->maps--;
      vmm_maybe_free(r->maps[i].h);
    }
    gmt__mem_delete(r);
    res = CUDA_SUCCESS;
  }
  gmt__fake_unlock();
  GMT_FAKE_RET(res);
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
  GMT_FAKE_NEED_INIT();
  if (flags != 0 || size == 0)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  gmt__fake_lock();
  struct gmt__range *r = gmt__mem_find(ptr);
  struct gmt__vmm *v = vmm_of(handle);
  CUresult res = CUDA_ERROR_INVALID_VALUE;
  if (!r || r->kind != GMT__MEM_RESERVE || ptr + size > r->base + r->size || !v || v->released ||
      offset > v->size || size > v->size - offset)
    goto out;
  for (size_t i = 0; i < r->nmaps; i++) {
    struct gmt__map *m = &r->maps[i];
    if (ptr < m->base + m->size && m->base < ptr + size)
      goto out; /* already mapped */
  }
  if (r->nmaps == r->capmaps) {
    size_t ncap = r->capmaps ? r->capmaps * 2 : 8;
    struct gmt__map *n = realloc(r->maps, ncap * sizeof *n);
    if (!n) {
      res = CUDA_ERROR_OUT_OF_MEMORY;
      goto out;
    }
    r->maps = n;
    r->capmaps = ncap;
  }
  r->maps[r->nmaps++] = (struct gmt__map){ptr, size, v, offset};
  v->maps++;
  res = CUDA_SUCCESS;
out:
  gmt__fake_unlock();
  GMT_FAKE_RET(res);
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
  GMT_FAKE_NEED_INIT();
  gmt__queue_drain();
  gmt__fake_lock();
  struct gmt__range *r = gmt__mem_find(ptr);
  CUresult res = CUDA_ERROR_INVALID_VALUE;
  if (r && r->kind == GMT__MEM_RESERVE) {
    size_t j = 0;
    for (size_t i = 0; i < r->nmaps; i++) {
      struct gmt__map m = r->maps[i];
      if (m.base >= ptr && m.base + m.size <= ptr + size) {
        m.h->maps--;
        vmm_maybe_free(m.h);
        res = CUDA_SUCCESS;
      } else {
        r->maps[j++] = m;
      }
    }
    r->nmaps = j;
  }
  gmt__fake_unlock();
  GMT_FAKE_RET(res);
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
  GMT_FAKE_NEED_INIT();
  if (!desc || count == 0)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  for (size_t i = 0; i < count; i++)
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        !gmt__fake_dev_ok(desc[i].location.id))
      GMT_FAKE_RET(CUDA_ERROR_INVALID_DEVICE);
  gmt__fake_lock();
  /* The whole range must be mapped; the fake then allows every access. */
  CUresult res = CUDA_SUCCESS;
  for (CUdeviceptr p = ptr; p < ptr + size && res == CUDA_SUCCESS;) {
    size_t avail = 0;
    if (!gmt__mem_resolve(p, &avail))
      res = CUDA_ERROR_INVALID_VALUE;
    else
      p += avail;
  }
  gmt__fake_unlock();
  GMT_FAKE_RET(res);
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                CUmemGenericAllocationHandle handle)
{
  GMT_FAKE_NEED_INIT();
  if (!prop)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  gmt__fake_lock();
  struct gmt__vmm *v = vmm_of(handle);
  if (v) {
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = v->dev;
  }
  gmt__fake_unlock();
  GMT_FAKE_RET(v ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

static void vmm_free_child(void *p)
{
  struct gmt__vmm *v = p;
  gmt__hostbuf_free(v->host, v->size);
  gmt__handle_del(v);
  free(v);
}

void gmt__vmm_reset_child(void)
{
  gmt__handle_each(GMT__K_VMM, vmm_free_child);
}
