/* Devices and contexts of the fake driver: cuInit, device queries shaped
 * like an H100 (compute capability 9.0, 132 SMs), primary and created
 * contexts, and each thread's current-context stack. */
#include "fakecuda.h"
#include "gmt_busid.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CTX_STACK_MAX 16

static struct gmt__ctx *primary[GMT_FAKE_MAX_DEVICES];
static __thread struct gmt__ctx *ctx_stack[CTX_STACK_MAX];
static __thread int ctx_depth; /* ctx_stack[ctx_depth-1] is current */

static struct gmt__ctx *cur_ctx(void)
{
  return ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
}

CUresult gmt__ctx_dev_locked(int *dev)
{
  struct gmt__ctx *c = cur_ctx();
  if (!c || !gmt__handle_ok(c, GMT__K_CTX))
    return CUDA_ERROR_INVALID_CONTEXT;
  *dev = c->dev;
  return CUDA_SUCCESS;
}

void gmt__device_reset_child(void)
{
  /* Contexts are freed with the other plain handles. */
  memset(primary, 0, sizeof primary);
  ctx_depth = 0;
}

CUresult cuInit(unsigned int Flags)
{
  if (Flags != 0)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  gmt__fake_lock();
  CUresult r = gmt__fake_init();
  gmt__fake_unlock();
  GMT_FAKE_RET(r);
}

CUresult cuDriverGetVersion(int *driverVersion)
{
  if (!driverVersion)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  *driverVersion = GMT_FAKE_DRIVER_VERSION;
  GMT_FAKE_RET(CUDA_SUCCESS);
}

CUresult cuDeviceGetCount(int *count)
{
  GMT_FAKE_NEED_INIT();
  if (!count)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  *count = gmt__fake.ndev;
  GMT_FAKE_RET(CUDA_SUCCESS);
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
  GMT_FAKE_NEED_INIT();
  if (!device)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  if (!gmt__fake_dev_ok(ordinal))
    GMT_FAKE_RET(CUDA_ERROR_INVALID_DEVICE);
  *device = ordinal;
  GMT_FAKE_RET(CUDA_SUCCESS);
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
  GMT_FAKE_NEED_INIT();
  if (!name || len <= 0)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  if (!gmt__fake_dev_ok(dev))
    GMT_FAKE_RET(CUDA_ERROR_INVALID_DEVICE);
  snprintf(name, (size_t)len, "%s", GMT_FAKE_DEVICE_NAME);
  GMT_FAKE_RET(CUDA_SUCCESS);
}

/* The physical device's UUID, the one NVML reports for it. */
static void fake_uuid(CUuuid *u, CUdevice dev)
{
  unsigned char b[16];
  gmt__machine_uuid(gmt__fake.phys[dev], b);
  memcpy(u->bytes, b, sizeof b);
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
  GMT_FAKE_NEED_INIT();
  if (!uuid)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  if (!gmt__fake_dev_ok(dev))
    GMT_FAKE_RET(CUDA_ERROR_INVALID_DEVICE);
  fake_uuid(uuid, dev);
  GMT_FAKE_RET(CUDA_SUCCESS);
}

CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
  GMT_FAKE_NEED_INIT();
  if (!uuid)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  if (!gmt__fake_dev_ok(dev))
    GMT_FAKE_RET(CUDA_ERROR_INVALID_DEVICE);
  fake_uuid(uuid, dev);
  GMT_FAKE_RET(CUDA_SUCCESS);
}

CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
  GMT_FAKE_NEED_INIT();
  if (!pciBusId || len <= 0)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  if (!gmt__fake_dev_ok(dev))
    GMT_FAKE_RET(CUDA_ERROR_INVALID_DEVICE);
  /* As the real driver writes it: NVML's busIdLegacy of the device. */
  snprintf(pciBusId, (size_t)len, "0000:%02X:00.0", gmt__machine_bus(gmt__fake.phys[dev]));
  GMT_FAKE_RET(CUDA_SUCCESS);
}

/* The ordinal of the visible device at a PCI bus id, in any spelling the
 * real driver takes: "0000:02:00.0", NVML's "00000000:02:00.0", or
 * without the domain ("02:00.0"), any case. */
CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
  GMT_FAKE_NEED_INIT();
  if (!dev || !pciBusId)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  gmt_busid_t b;
  if (gmt_busid_parse(pciBusId, &b) < 0)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  for (int i = 0; i < gmt__fake.ndev; i++)
    if (b.domain == 0 && b.device == 0 && b.function == 0 &&
        b.bus == gmt__machine_bus(gmt__fake.phys[i])) {
      *dev = i;
      GMT_FAKE_RET(CUDA_SUCCESS);
    }
  GMT_FAKE_RET(CUDA_ERROR_INVALID_DEVICE);
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
  GMT_FAKE_NEED_INIT();
  if (!bytes)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  if (!gmt__fake_dev_ok(dev))
    GMT_FAKE_RET(CUDA_ERROR_INVALID_DEVICE);
  *bytes = gmt__machine.mem_bytes;
  GMT_FAKE_RET(CUDA_SUCCESS);
}

CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
  GMT_FAKE_NEED_INIT();
  if (!bytes)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  if (!gmt__fake_dev_ok(dev))
    GMT_FAKE_RET(CUDA_ERROR_INVALID_DEVICE);
  /* The 32-bit entry point cannot say more than 4 GiB. */
  *bytes = gmt__machine.mem_bytes > UINT_MAX ? UINT_MAX : (unsigned int)gmt__machine.mem_bytes;
  GMT_FAKE_RET(CUDA_SUCCESS);
}

static int attribute(CUdevice_attribute a, CUdevice dev)
{
  switch (a) {
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
  case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
  case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
  case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
  case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
  case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
  case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
  case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT: return 512;
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
  case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
  case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return (int)gmt__machine_bus(gmt__fake.phys[dev]);
  case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
  case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
  case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 52428800;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
  case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 3;
  case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
  case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: return 32;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
  case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 233472;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
  case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
  case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID: return dev;
  case CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO: return 2;
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 232448;
  case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
  case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: return 32505856;
  case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: return 134213632;
  case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: return 1024;
  case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
  case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES: return 1;
  case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return 1;
  case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT: return 4;
  case CU_DEVICE_ATTRIBUTE_NUMA_ID: return -1;
  case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: return gmt__machine.numa[gmt__fake.phys[dev]];
  default: return 0;
  }
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
  GMT_FAKE_NEED_INIT();
  if (!pi || (int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  if (!gmt__fake_dev_ok(dev))
    GMT_FAKE_RET(CUDA_ERROR_INVALID_DEVICE);
  *pi = attribute(attrib, dev);
  GMT_FAKE_RET(CUDA_SUCCESS);
}

CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
  GMT_FAKE_NEED_INIT();
  if (!major || !minor)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  if (!gmt__fake_dev_ok(dev))
    GMT_FAKE_RET(CUDA_ERROR_INVALID_DEVICE);
  *major = 9;
  *minor = 0;
  GMT_FAKE_RET(CUDA_SUCCESS);
}

/* ---- contexts ---- */

static struct gmt__ctx *ctx_new_locked(int dev, int is_primary, unsigned flags)
{
  struct gmt__ctx *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->dev = dev;
  c->primary = is_primary;
  c->flags = flags;
  if (gmt__handle_add(c, GMT__K_CTX) != 0) {
    free(c);
    return NULL;
  }
  return c;
}

static struct gmt__ctx *primary_locked(int dev)
{
  if (!primary[dev])
    primary[dev] = ctx_new_locked(dev, 1, 0);
  return primary[dev];
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
  GMT_FAKE_NEED_INIT();
  if (!pctx)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  if (!gmt__fake_dev_ok(dev))
    GMT_FAKE_RET(CUDA_ERROR_INVALID_DEVICE);
  gmt__fake_lock();
  struct gmt__ctx *c = primary_locked(dev);
  if (c)
    c->refs++;
  gmt__fake_unlock();
  if (c)
    gmt__fake_mark_ctx(dev);
  if (!c)
    GMT_FAKE_RET(CUDA_ERROR_OUT_OF_MEMORY);
  *pctx = (CUcontext)c;
  GMT_FAKE_RET(CUDA_SUCCESS);
}

static CUresult primary_release(CUdevice dev)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!gmt__fake_dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  gmt__fake_lock();
  CUresult r = CUDA_SUCCESS;
  /* The primary context object lives on at refcount 0, inactive, as the
   * runtime may retain it again. */
  if (!primary[dev] || primary[dev]->refs == 0)
    r = CUDA_ERROR_INVALID_CONTEXT;
  else
    primary[dev]->refs--;
  gmt__fake_unlock();
  return r;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
  GMT_FAKE_RET(primary_release(dev));
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
  GMT_FAKE_RET(primary_release(dev));
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
  GMT_FAKE_NEED_INIT();
  if (!flags || !active)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  if (!gmt__fake_dev_ok(dev))
    GMT_FAKE_RET(CUDA_ERROR_INVALID_DEVICE);
  gmt__fake_lock();
  *flags = primary[dev] ? primary[dev]->flags : 0;
  *active = primary[dev] && primary[dev]->refs > 0;
  gmt__fake_unlock();
  GMT_FAKE_RET(CUDA_SUCCESS);
}

static CUresult primary_set_flags(CUdevice dev, unsigned int flags)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!gmt__fake_dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  gmt__fake_lock();
  struct gmt__ctx *c = primary_locked(dev);
  if (c)
    c->flags = flags;
  gmt__fake_unlock();
  return c ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
  GMT_FAKE_RET(primary_set_flags(dev, flags));
}
CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
  GMT_FAKE_RET(primary_set_flags(dev, flags));
}

static CUresult primary_reset(CUdevice dev)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!gmt__fake_dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  gmt__queue_sync_device(dev); /* a reset waits for the device's work */
  gmt__fake_lock();
  if (primary[dev])
    primary[dev]->refs = 0;
  gmt__fake_unlock();
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
  GMT_FAKE_RET(primary_reset(dev));
}
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
  GMT_FAKE_RET(primary_reset(dev));
}

static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!pctx)
    return CUDA_ERROR_INVALID_VALUE;
  if (!gmt__fake_dev_ok(dev))
    return CUDA_ERROR_INVALID_DEVICE;
  if (ctx_depth == CTX_STACK_MAX)
    return CUDA_ERROR_OUT_OF_MEMORY;
  gmt__fake_lock();
  struct gmt__ctx *c = ctx_new_locked(dev, 0, flags);
  gmt__fake_unlock();
  if (!c)
    return CUDA_ERROR_OUT_OF_MEMORY;
  gmt__fake_mark_ctx(dev);
  ctx_stack[ctx_depth++] = c; /* a created context is pushed current */
  *pctx = (CUcontext)c;
  return CUDA_SUCCESS;
}

CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
  GMT_FAKE_RET(ctx_create(pctx, flags, dev));
}
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
  GMT_FAKE_RET(ctx_create(pctx, flags, dev));
}
CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                        unsigned int flags, CUdevice dev)
{
  if (numParams < 0 || (numParams > 0 && !paramsArray))
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  GMT_FAKE_RET(ctx_create(pctx, flags, dev));
}
CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                        CUdevice dev)
{
  (void)ctxCreateParams;
  GMT_FAKE_RET(ctx_create(pctx, flags, dev));
}

static CUresult ctx_destroy(CUcontext ctx)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  struct gmt__ctx *c = (struct gmt__ctx *)ctx;
  /* Destroying a context waits for its work; the fake's queues are per
   * device, so this waits for all of the process's. */
  gmt__queue_drain();
  gmt__fake_lock();
  if (!gmt__handle_ok(c, GMT__K_CTX) || c->primary) {
    gmt__fake_unlock();
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  gmt__handle_del(c);
  gmt__fake_unlock();
  /* Drop it from this thread's stack; other threads see it gone through
   * the registry. */
  int j = 0;
  for (int i = 0; i < ctx_depth; i++)
    if (ctx_stack[i] != c)
      ctx_stack[j++] = ctx_stack[i];
  ctx_depth = j;
  free(c);
  return CUDA_SUCCESS;
}

CUresult cuCtxDestroy(CUcontext ctx)
{
  GMT_FAKE_RET(ctx_destroy(ctx));
}
CUresult cuCtxDestroy_v2(CUcontext ctx)
{
  GMT_FAKE_RET(ctx_destroy(ctx));
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
  GMT_FAKE_NEED_INIT();
  if (!ctx) {
    if (ctx_depth)
      ctx_depth--;
    GMT_FAKE_RET(CUDA_SUCCESS);
  }
  gmt__fake_lock();
  int ok = gmt__handle_ok(ctx, GMT__K_CTX);
  gmt__fake_unlock();
  if (!ok)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_CONTEXT);
  if (ctx_depth)
    ctx_stack[ctx_depth - 1] = (struct gmt__ctx *)ctx;
  else
    ctx_stack[ctx_depth++] = (struct gmt__ctx *)ctx;
  GMT_FAKE_RET(CUDA_SUCCESS);
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
  GMT_FAKE_NEED_INIT();
  if (!pctx)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  *pctx = (CUcontext)cur_ctx();
  GMT_FAKE_RET(CUDA_SUCCESS);
}

static CUresult ctx_push(CUcontext ctx)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  gmt__fake_lock();
  int ok = gmt__handle_ok(ctx, GMT__K_CTX);
  gmt__fake_unlock();
  if (!ok)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx_depth == CTX_STACK_MAX)
    return CUDA_ERROR_OUT_OF_MEMORY;
  ctx_stack[ctx_depth++] = (struct gmt__ctx *)ctx;
  return CUDA_SUCCESS;
}

static CUresult ctx_pop(CUcontext *pctx)
{
  if (!gmt__fake.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!ctx_depth)
    return CUDA_ERROR_INVALID_CONTEXT;
  struct gmt__ctx *c = ctx_stack[--ctx_depth];
  if (pctx)
    *pctx = (CUcontext)c;
  return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext ctx)
{
  GMT_FAKE_RET(ctx_push(ctx));
}
CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
  GMT_FAKE_RET(ctx_push(ctx));
}
CUresult cuCtxPopCurrent(CUcontext *pctx)
{
  GMT_FAKE_RET(ctx_pop(pctx));
}
CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
  GMT_FAKE_RET(ctx_pop(pctx));
}

CUresult cuCtxGetDevice(CUdevice *device)
{
  GMT_FAKE_NEED_INIT();
  if (!device)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  gmt__fake_lock();
  int dev = 0;
  CUresult r = gmt__ctx_dev_locked(&dev);
  gmt__fake_unlock();
  if (r == CUDA_SUCCESS)
    *device = dev;
  GMT_FAKE_RET(r);
}

CUresult cuCtxGetFlags(unsigned int *flags)
{
  GMT_FAKE_NEED_INIT();
  if (!flags)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  struct gmt__ctx *c = cur_ctx();
  if (!c)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_CONTEXT);
  *flags = c->flags;
  GMT_FAKE_RET(CUDA_SUCCESS);
}

CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
  GMT_FAKE_NEED_INIT();
  if (!version)
    GMT_FAKE_RET(CUDA_ERROR_INVALID_VALUE);
  (void)ctx;
  *version = 3020;
  GMT_FAKE_RET(CUDA_SUCCESS);
}

CUresult cuCtxSynchronize(void)
{
  GMT_FAKE_NEED_INIT();
  gmt__fake_lock();
  int dev = 0;
  CUresult r = gmt__ctx_dev_locked(&dev);
  gmt__fake_unlock();
  if (r != CUDA_SUCCESS)
    GMT_FAKE_RET(r);
  /* Every stream of the device, non-blocking ones too; then pools give
   * memory back, as at every synchronize. */
  gmt__queue_sync_device(dev);
  gmt__fake_lock();
  gmt__pool_sync_locked();
  gmt__fake_unlock();
  GMT_FAKE_RET(CUDA_SUCCESS);
}
