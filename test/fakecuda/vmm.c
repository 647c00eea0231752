/* Virtual memory management of the fake driver (cuMemCreate, cuMemMap...),
 * as PyTorch's expandable segments use it: physical handles are charged to
 * the ledger, reserved address ranges are not, and mappings make a reserved
 * range resolve piecewise to the handles' memory. As on a GPU: a handle is
 * counted (cuMemCreate and each cuMemRetainAllocationHandle take a
 * reference, cuMemRelease drops one) and its bytes are gone once no
 * reference and no mapping is left; a mapping is reachable only once
 * cuMemSetAccess gave some device access to it, and an unmapped range
 * faults; an unmapped range can be mapped again; a handle exports (a file
 * descriptor, a fabric handle) only as a type it was created for. Handle
 * values are the bookkeeping's addresses, so a released one may come back
 * as a new handle's value, as the real driver's may. */
#include "fakecuda.h"

#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

static struct gmt__vmm *vmm_of(CUmemGenericAllocationHandle h)
{
  struct gmt__vmm *v = (struct gmt__vmm *)(uintptr_t)h;
  return gmt__handle_ok(v, GMT__K_VMM) ? v : NULL;
}

/* Physical memory goes when it is released and no longer mapped. */
static void vmm_maybe_free(struct gmt__vmm *v)
{
  if (v->refs || v->maps)
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
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      (prop->requestedHandleTypes &
       ~(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC)))
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
    v->refs = 1;
    v->flags = flags;
    v->prop = *prop;
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
  if (v && v->refs) {
    v->refs--;
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
  if (!r || r->kind != GMT__MEM_RESERVE || ptr + size > r->base + r->size || !v || !v->refs ||
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
  r->maps[r->nmaps++] = (struct gmt__map){.base = ptr, .size = size, .h = v, .offset = offset};
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
  for (size_t i = 0; i < count; i++)
    if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
        desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
        desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  gmt__fake_lock();
  /* The whole range must be mapped; each mapping it touches then gives
   * those devices that access (the fake's granule is a whole mapping). */
  struct gmt__range *r = gmt__mem_find(ptr);
  CUresult res = r && r->kind == GMT__MEM_RESERVE && size && ptr + size <= r->base + r->size
                     ? CUDA_SUCCESS
                     : CUDA_ERROR_INVALID_VALUE;
  for (CUdeviceptr p = ptr; res == CUDA_SUCCESS && p < ptr + size;) {
    struct gmt__map *m = NULL;
    for (size_t i = 0; i < r->nmaps && !m; i++)
      if (p - r->maps[i].base < r->maps[i].size)
        m = &r->maps[i];
    if (!m)
      res = CUDA_ERROR_INVALID_VALUE;
    else
      p = m->base + m->size;
  }
  for (size_t i = 0; res == CUDA_SUCCESS && i < r->nmaps; i++) {
    struct gmt__map *m = &r->maps[i];
    if (m->base < ptr + size && ptr < m->base + m->size)
      for (size_t k = 0; k < count; k++)
        m->prot[desc[k].location.id] = (unsigned char)desc[k].flags;
  }
  gmt__fake_unlock();
  GMT_FAKE_RET(res);
}

CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
  GMT_FAKE_NEED_INIT();
  if (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE ||
      !gmt__fake_dev_ok(location->id))
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  gmt__fake_lock();
  struct gmt__range *r = gmt__mem_find(ptr);
  CUresult res = CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; r && r->kind == GMT__MEM_RESERVE && i < r->nmaps; i++)
    if (ptr - r->maps[i].base < r->maps[i].size) {
      *flags = r->maps[i].prot[location->id];
      res = CUDA_SUCCESS;
    }
  gmt__fake_unlock();
  GMT_FAKE_RET(res);
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
  GMT_FAKE_NEED_INIT();
  if (!handle)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr p = (CUdeviceptr)(uintptr_t)addr;
  gmt__fake_lock();
  struct gmt__range *r = gmt__mem_find(p);
  CUresult res = CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; r && r->kind == GMT__MEM_RESERVE && i < r->nmaps; i++)
    if (p - r->maps[i].base < r->maps[i].size) {
      r->maps[i].h->refs++;
      *handle = (CUmemGenericAllocationHandle)(uintptr_t)r->maps[i].h;
      res = CUDA_SUCCESS;
    }
  gmt__fake_unlock();
  GMT_FAKE_RET(res);
}

/* A file descriptor (an eventfd the program closes) or a fabric handle
 * naming the allocation; only as a type it was created for. No other
 * process can import it here: the fake's device memory is this process's
 * own. */
CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType handleType,
                                      unsigned long long flags)
{
  GMT_FAKE_NEED_INIT();
  if (!shareableHandle || flags != 0 ||
      (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR &&
       handleType != CU_MEM_HANDLE_TYPE_FABRIC))
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  gmt__fake_lock();
  struct gmt__vmm *v = vmm_of(handle);
  CUresult res = CUDA_ERROR_INVALID_VALUE;
  if (v && v->refs && (v->prop.requestedHandleTypes & handleType)) {
    res = CUDA_SUCCESS;
    if (handleType == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
      int fd = eventfd(0, EFD_CLOEXEC);
      if (fd < 0)
        res = CUDA_ERROR_OUT_OF_MEMORY;
      else
        *(int *)shareableHandle = fd;
    } else {
      CUmemFabricHandle fh;
      memset(&fh, 0, sizeof fh);
      memcpy(fh.data, &v, sizeof v);
      memcpy(shareableHandle, &fh, sizeof fh);
    }
    if (res == CUDA_SUCCESS)
      v->exported = 1;
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
  if (v && v->refs)
    *prop = v->prop;
  gmt__fake_unlock();
  GMT_FAKE_RET(v && v->refs ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
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
