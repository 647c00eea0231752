/* Device memory of the fake driver: the table of fake device-address
 * ranges (held in host memory, handed out at addresses that are never host
 * pointers), cuMemAlloc and friends, cuMemGetInfo and CUDA arrays. Every byte
 * is charged to the machine-wide ledger in state.c. */
#include "fakecuda.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Full addresses live in [HIGH_BASE, HIGH_END): above where Linux puts PIE
 * images, heaps and mmaps, below the ASan shadow's end, 256-byte aligned.
 * The v1 entry points return 32-bit CUdeviceptr_v1 and get [LOW_BASE,
 * LOW_END). */
#define HIGH_BASE 0x200000000000ull
#define HIGH_END 0x300000000000ull
#define LOW_BASE 0x10000000ull
#define LOW_END 0xfff00000ull
#define MMAP_MIN ((size_t)64 << 10)

static struct gmt__range **tab; /* sorted by base */
static size_t ntab, captab;
static CUdeviceptr cursor_hi = HIGH_BASE, cursor_lo = LOW_BASE;

char *gmt__hostbuf_new(size_t n)
{
  if (n < MMAP_MIN)
    return calloc(1, n ? n : 1);
  /* Pages are only committed when touched, so a test can "allocate" all of
   * a 16 GiB fake device on a small machine. */
  void *p =
      mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

void gmt__hostbuf_free(char *p, size_t n)
{
  if (!p)
    return;
  if (n < MMAP_MIN)
    free(p);
  else
    munmap(p, n);
}

/* Index of the first range with base > p. */
static size_t upper(CUdeviceptr p)
{
  size_t lo = 0, hi = ntab;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (tab[mid]->base <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

struct gmt__range *gmt__mem_find(CUdeviceptr p)
{
  size_t i = upper(p);
  if (i == 0)
    return NULL;
  struct gmt__range *r = tab[i - 1];
  return p - r->base < r->size ? r : NULL;
}

struct gmt__range *gmt__mem_find_base(CUdeviceptr p)
{
  struct gmt__range *r = gmt__mem_find(p);
  return r && r->base == p ? r : NULL;
}

/* First-fit gap in [lo, hi) for size bytes, after the cursor first and
 * from the bottom once the cursor reaches the end. */
static CUdeviceptr va_find(CUdeviceptr *cursor, CUdeviceptr lo, CUdeviceptr hi, size_t size,
                           size_t align)
{
  CUdeviceptr c = gmt__round_up(*cursor, align);
  if (c + size <= hi && c + size > c) {
    *cursor = c + size;
    return c;
  }
  CUdeviceptr cand = gmt__round_up(lo, align);
  for (size_t i = upper(lo - 1); i < ntab && tab[i]->base < hi; i++) {
    if (cand + size <= tab[i]->base)
      return cand;
    cand = gmt__round_up(tab[i]->base + tab[i]->size, align);
  }
  return cand + size <= hi ? cand : 0;
}

static int tab_insert(struct gmt__range *r)
{
  if (ntab == captab) {
    size_t ncap = captab ? captab * 2 : 64;
    struct gmt__range **n = realloc(tab, ncap * sizeof *n);
    if (!n)
      return -1;
    tab = n;
    captab = ncap;
  }
  size_t i = upper(r->base);
  memmove(&tab[i + 1], &tab[i], (ntab - i) * sizeof *tab);
  tab[i] = r;
  ntab++;
  return 0;
}

static void tab_remove(struct gmt__range *r)
{
  size_t i = upper(r->base);
  if (i == 0 || tab[i - 1] != r)
    return;
  memmove(&tab[i - 1], &tab[i], (ntab - i) * sizeof *tab);
  ntab--;
}

CUresult gmt__mem_new(int dev, int kind, size_t size, size_t charge, int backed, int low,
                      size_t align, struct gmt__range **out)
{
  if (size == 0 || size > (HIGH_END - HIGH_BASE) / 2)
    return CUDA_ERROR_OUT_OF_MEMORY;
  size = gmt__round_up(size, GMT_FAKE_ALIGN);
  if (align < GMT_FAKE_ALIGN)
    align = GMT_FAKE_ALIGN;
  CUdeviceptr base = low ? va_find(&cursor_lo, LOW_BASE, LOW_END, size, align)
                         : va_find(&cursor_hi, HIGH_BASE, HIGH_END, size, align);
  if (!base)
    return CUDA_ERROR_OUT_OF_MEMORY;
  struct gmt__range *r = calloc(1, sizeof *r);
  if (!r)
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (charge) {
    CUresult cr = gmt__fake_charge(dev, charge);
    if (cr != CUDA_SUCCESS) {
      free(r);
      return cr;
    }
  }
  if (backed && !(r->host = gmt__hostbuf_new(size))) {
    if (charge)
      gmt__fake_uncharge(dev, charge);
    free(r);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  r->base = base;
  r->size = size;
  r->kind = kind;
  r->dev = dev;
  r->charged = charge;
  if (tab_insert(r) != 0) {
    gmt__hostbuf_free(r->host, size);
    if (charge)
      gmt__fake_uncharge(dev, charge);
    free(r);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *out = r;
  return CUDA_SUCCESS;
}

void gmt__mem_delete(struct gmt__range *r)
{
  tab_remove(r);
  if (r->charged)
    gmt__fake_uncharge(r->dev, r->charged);
  gmt__hostbuf_free(r->host, r->size);
  free(r->maps);
  free(r);
}

char *gmt__mem_resolve(CUdeviceptr p, size_t *avail)
{
  struct gmt__range *r = gmt__mem_find(p);
  if (!r || r->kind == GMT__MEM_POOL_CACHED)
    return NULL;
  if (r->kind != GMT__MEM_RESERVE) {
    *avail = r->size - (size_t)(p - r->base);
    return r->host + (p - r->base);
  }
  for (size_t i = 0; i < r->nmaps; i++) {
    struct gmt__map *m = &r->maps[i];
    if (p - m->base < m->size) {
      int any = 0;
      for (int d = 0; d < GMT_FAKE_MAX_DEVICES && !any; d++)
        any = m->prot[d] != CU_MEM_ACCESS_FLAGS_PROT_NONE;
      if (!any)
        return NULL; /* mapped, but no device may touch it yet */
      *avail = m->size - (size_t)(p - m->base);
      return m->h->host + m->offset + (p - m->base);
    }
  }
  return NULL;
}

void gmt__mem_detach_pool(const struct gmt__pool *p)
{
  for (size_t i = 0; i < ntab; i++)
    if (tab[i]->pool == p)
      tab[i]->pool = NULL;
}

void gmt__mem_reset_child(void)
{
  /* Pool and VMM owners have dropped their parts already. */
  for (size_t i = 0; i < ntab; i++) {
    gmt__hostbuf_free(tab[i]->host, tab[i]->size);
    free(tab[i]->maps);
    free(tab[i]);
  }
  free(tab);
  tab = NULL;
  ntab = captab = 0;
  cursor_hi = HIGH_BASE;
  cursor_lo = LOW_BASE;
}

/* ---- cuMemAlloc family ---- */

static CUresult mem_alloc(CUdeviceptr *dptr, size_t size, int kind, int low)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!dptr || size == 0)
    return CUDA_ERROR_INVALID_VALUE;
  gmt__fake_lock();
  int dev = 0;
  CUresult r = gmt__ctx_dev_locked(&dev);
  struct gmt__range *rg = NULL;
  if (r == CUDA_SUCCESS)
    r = gmt__mem_new(dev, kind, size, gmt__round_up(size, GMT_FAKE_ALIGN), 1, low, 0, &rg);
  gmt__fake_unlock();
  if (r == CUDA_SUCCESS)
    *dptr = rg->base;
  gmt__fake_log("alloc %zu bytes on device %d -> 0x%llx (%d)", size, dev,
                rg ? (unsigned long long)rg->base : 0ull, (int)r);
  return r;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
  GMT_FAKE_RET(mem_alloc(dptr, bytesize, GMT__MEM_ALLOC, 0));
}

CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
  CUdeviceptr p = 0;
  if (!dptr)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  CUresult r = mem_alloc(&p, bytesize, GMT__MEM_ALLOC, 1);
  if (r == CUDA_SUCCESS)
    *dptr = (CUdeviceptr_v1)p;
  GMT_FAKE_RET(r);
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  GMT_FAKE_RET(mem_alloc(dptr, bytesize, GMT__MEM_MANAGED, 0));
}

/* Prefetch of managed memory: to the host, a whole allocation's bytes
 * leave the device's ledger; to a device, they come back when it has room
 * (else they stay on the host and the call still succeeds, as a real
 * driver's prefetch is only a hint). Part of an allocation moves nothing.
 * No byte moves (managed memory is host memory here wherever the ledger
 * counts it), so it takes effect at once, not in the stream's order. */
static CUresult prefetch(CUdeviceptr p, size_t count, int to_host, int dev)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (count == 0)
    return CUDA_ERROR_INVALID_VALUE;
  gmt__fake_lock();
  struct gmt__range *r = gmt__mem_find(p);
  CUresult rc = CUDA_SUCCESS;
  if (!r || r->kind != GMT__MEM_MANAGED || count > r->size - (size_t)(p - r->base))
    rc = CUDA_ERROR_INVALID_VALUE;
  else if (!to_host && (dev < 0 || dev >= gmt__fake.ndev))
    rc = CUDA_ERROR_INVALID_DEVICE;
  int whole = rc == CUDA_SUCCESS && p == r->base && count >= r->size - (GMT_FAKE_ALIGN - 1);
  const char *where = "stays";
  if (whole && to_host && r->charged) {
    gmt__fake_uncharge(r->dev, r->charged);
    r->charged = 0;
    where = "host";
  } else if (whole && !to_host && !r->charged) {
    if (gmt__fake_charge(dev, r->size) == CUDA_SUCCESS) {
      r->charged = r->size;
      r->dev = dev;
      where = "device";
    }
  }
  gmt__fake_unlock();
  gmt__fake_log("prefetch %zu bytes at 0x%llx to %s %d: %s (%d)", count, (unsigned long long)p,
                to_host ? "host" : "device", to_host ? -1 : dev, where, (int)rc);
  return rc;
}

CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                               unsigned int flags, CUstream hStream)
{
  (void)hStream;
  if (flags != 0)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  int to_host = location.type == CU_MEM_LOCATION_TYPE_HOST ||
                location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
                location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
  if (!to_host && location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  GMT_FAKE_RET(prefetch(devPtr, count, to_host, location.id));
}

CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream)
{
  (void)hStream;
  GMT_FAKE_RET(prefetch(devPtr, count, dstDevice == CU_DEVICE_CPU, dstDevice));
}

static CUresult pitch_alloc(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                            unsigned elem, int low)
{
  if (!pitch || width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16))
    return CUDA_ERROR_INVALID_VALUE;
  size_t p = gmt__round_up(width, 512); /* the real driver's pitch alignment */
  CUresult r = mem_alloc(dptr, p * height, GMT__MEM_ALLOC, low);
  if (r == CUDA_SUCCESS)
    *pitch = p;
  return r;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes)
{
  GMT_FAKE_NEED_INIT();
  GMT_FAKE_RET(pitch_alloc(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes, 0));
}

CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                         unsigned int Height, unsigned int ElementSizeBytes)
{
  GMT_FAKE_NEED_INIT();
  if (!dptr || !pPitch)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr p = 0;
  size_t pitch = 0;
  CUresult r = pitch_alloc(&p, &pitch, WidthInBytes, Height, ElementSizeBytes, 1);
  if (r == CUDA_SUCCESS) {
    *dptr = (CUdeviceptr_v1)p;
    *pPitch = (unsigned int)pitch;
  }
  GMT_FAKE_RET(r);
}

static CUresult mem_free(CUdeviceptr p)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (p == 0)
    return CUDA_SUCCESS; /* like cudaFree(NULL) */
  /* Like the driver, cuMemFree waits for the work queued before it: the
   * worker must never move freed memory. */
  gmt__queue_drain();
  gmt__fake_lock();
  struct gmt__range *r = gmt__mem_find_base(p);
  CUresult res = CUDA_SUCCESS;
  if (r && (r->kind == GMT__MEM_ALLOC || r->kind == GMT__MEM_MANAGED))
    gmt__mem_delete(r);
  else if (r && r->kind == GMT__MEM_POOL)
    gmt__pool_free_block_locked(r); /* cuMemFree of an async allocation */
  else
    res = CUDA_ERROR_INVALID_VALUE;
  gmt__fake_unlock();
  gmt__fake_log("free 0x%llx (%d)", (unsigned long long)p, (int)res);
  return res;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
  GMT_FAKE_RET(mem_free(dptr));
}
CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
  GMT_FAKE_RET(mem_free(dptr));
}

static CUresult addr_range(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  gmt__fake_lock();
  struct gmt__range *r = gmt__mem_find(p);
  CUresult res = CUDA_ERROR_NOT_FOUND;
  if (r && r->kind != GMT__MEM_POOL_CACHED) {
    if (base)
      *base = r->base;
    if (size)
      *size = r->size;
    res = CUDA_SUCCESS;
  }
  gmt__fake_unlock();
  return res;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
  GMT_FAKE_RET(addr_range(pbase, psize, dptr));
}

CUresult cuMemGetAddressRange(CUdeviceptr_v1 *pbase, unsigned int *psize, CUdeviceptr_v1 dptr)
{
  CUdeviceptr b = 0;
  size_t s = 0;
  CUresult r = addr_range(&b, &s, dptr);
  if (r == CUDA_SUCCESS) {
    if (pbase)
      *pbase = (CUdeviceptr_v1)b;
    if (psize)
      *psize = (unsigned int)s;
  }
  GMT_FAKE_RET(r);
}

static CUresult mem_info(size_t *free_b, size_t *total_b)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!free_b || !total_b)
    return CUDA_ERROR_INVALID_VALUE;
  gmt__fake_lock();
  int dev = 0;
  CUresult r = gmt__ctx_dev_locked(&dev);
  gmt__fake_unlock();
  if (r != CUDA_SUCCESS)
    return r;
  uint64_t f, t;
  gmt__fake_meminfo(dev, &f, &t);
  *free_b = f;
  *total_b = t;
  return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
  GMT_FAKE_RET(mem_info(free, total));
}

CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
  if (!free || !total)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  size_t f = 0, t = 0;
  CUresult r = mem_info(&f, &t);
  if (r == CUDA_SUCCESS) {
    *free = f > UINT_MAX ? UINT_MAX : (unsigned int)f;
    *total = t > UINT_MAX ? UINT_MAX : (unsigned int)t;
  }
  GMT_FAKE_RET(r);
}

/* ---- CUDA arrays: device memory without a device address ---- */

struct gmt__array {
  int dev;
  size_t bytes;
  char *host;
  CUDA_ARRAY3D_DESCRIPTOR desc;
};

static size_t format_bytes(CUarray_format f)
{
  switch (f) {
  case CU_AD_FORMAT_UNSIGNED_INT8:
  case CU_AD_FORMAT_SIGNED_INT8: return 1;
  case CU_AD_FORMAT_UNSIGNED_INT16:
  case CU_AD_FORMAT_SIGNED_INT16:
  case CU_AD_FORMAT_HALF: return 2;
  case CU_AD_FORMAT_UNSIGNED_INT32:
  case CU_AD_FORMAT_SIGNED_INT32:
  case CU_AD_FORMAT_FLOAT: return 4;
  default: return 4;
  }
}

static size_t desc_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d)
{
  size_t h = d->Height ? d->Height : 1, z = d->Depth ? d->Depth : 1;
  return d->Width * h * z * d->NumChannels * format_bytes(d->Format);
}

static CUresult array_new(void **out, int kind, const CUDA_ARRAY3D_DESCRIPTOR *d, size_t bytes)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!out || !d || d->Width == 0 ||
      !(d->NumChannels == 1 || d->NumChannels == 2 || d->NumChannels == 4))
    return CUDA_ERROR_INVALID_VALUE;
  bytes = gmt__round_up(bytes, GMT_FAKE_ALIGN);
  gmt__fake_lock();
  int dev = 0;
  CUresult r = gmt__ctx_dev_locked(&dev);
  struct gmt__array *a = NULL;
  if (r == CUDA_SUCCESS)
    r = gmt__fake_charge(dev, bytes);
  if (r == CUDA_SUCCESS) {
    a = calloc(1, sizeof *a);
    if (a)
      a->host = gmt__hostbuf_new(bytes);
    if (!a || !a->host || gmt__handle_add(a, kind) != 0) {
      if (a)
        gmt__hostbuf_free(a->host, bytes);
      free(a);
      a = NULL;
      gmt__fake_uncharge(dev, bytes);
      r = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  if (a) {
    a->dev = dev;
    a->bytes = bytes;
    a->desc = *d;
    *out = a;
  }
  gmt__fake_unlock();
  return r;
}

static CUresult array_free(void *h, int kind)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  gmt__queue_drain(); /* as cuMemFree: nothing queued may touch it after */
  gmt__fake_lock();
  struct gmt__array *a = h;
  CUresult r = CUDA_ERROR_INVALID_HANDLE;
  if (gmt__handle_ok(a, kind)) {
    gmt__handle_del(a);
    gmt__fake_uncharge(a->dev, a->bytes);
    gmt__hostbuf_free(a->host, a->bytes);
    free(a);
    r = CUDA_SUCCESS;
  }
  gmt__fake_unlock();
  return r;
}

CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *p)
{
  if (!p)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  CUDA_ARRAY3D_DESCRIPTOR d = {p->Width, p->Height, 0, p->Format, p->NumChannels, 0};
  GMT_FAKE_RET(array_new((void **)pHandle, GMT__K_ARRAY, &d, desc_bytes(&d)));
}

CUresult cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *p)
{
  if (!p)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  CUDA_ARRAY3D_DESCRIPTOR d = {p->Width, p->Height, 0, p->Format, p->NumChannels, 0};
  GMT_FAKE_RET(array_new((void **)pHandle, GMT__K_ARRAY, &d, desc_bytes(&d)));
}

CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *p)
{
  if (!p)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  GMT_FAKE_RET(array_new((void **)pHandle, GMT__K_ARRAY, p, desc_bytes(p)));
}

CUresult cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *p)
{
  if (!p)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  CUDA_ARRAY3D_DESCRIPTOR d = {p->Width, p->Height, p->Depth, p->Format, p->NumChannels, p->Flags};
  GMT_FAKE_RET(array_new((void **)pHandle, GMT__K_ARRAY, &d, desc_bytes(&d)));
}

CUresult cuArrayDestroy(CUarray hArray)
{
  GMT_FAKE_RET(array_free(hArray, GMT__K_ARRAY));
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *p,
                                unsigned int numMipmapLevels)
{
  if (!p || numMipmapLevels == 0)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  CUDA_ARRAY3D_DESCRIPTOR lv = *p;
  size_t total = 0;
  for (unsigned i = 0; i < numMipmapLevels; i++) {
    total += desc_bytes(&lv);
    lv.Width = lv.Width > 1 ? lv.Width / 2 : 1;
    lv.Height = lv.Height > 1 ? lv.Height / 2 : lv.Height;
    lv.Depth = lv.Depth > 1 ? lv.Depth / 2 : lv.Depth;
  }
  GMT_FAKE_RET(array_new((void **)pHandle, GMT__K_MIPMAP, p, total));
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray h)
{
  GMT_FAKE_RET(array_free(h, GMT__K_MIPMAP));
}
