/* The tracer's BPF side reads the driver's CUDA_MEMCPY2D/3D through its own
 * copies of their layouts (bpf/cudatrace.h): they must match cuda.h field
 * for field, or 2D/3D copies would be traced with wrong addresses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <cuda.h>

#include "cudatrace.h"

#define SAME(ours, theirs, a, b)                                                                   \
  assert_int_equal(offsetof(struct ours, a), offsetof(theirs, b));                                 \
  assert_int_equal(sizeof(((struct ours *)0)->a), sizeof(((theirs *)0)->b))

static void memcpy2d_layout(void **state)
{
  (void)state;
  assert_int_equal(sizeof(struct gmt_cu_memcpy2d), sizeof(CUDA_MEMCPY2D));
  SAME(gmt_cu_memcpy2d, CUDA_MEMCPY2D, src_x, srcXInBytes);
  SAME(gmt_cu_memcpy2d, CUDA_MEMCPY2D, src_y, srcY);
  SAME(gmt_cu_memcpy2d, CUDA_MEMCPY2D, src_type, srcMemoryType);
  SAME(gmt_cu_memcpy2d, CUDA_MEMCPY2D, src_host, srcHost);
  SAME(gmt_cu_memcpy2d, CUDA_MEMCPY2D, src_device, srcDevice);
  SAME(gmt_cu_memcpy2d, CUDA_MEMCPY2D, src_array, srcArray);
  SAME(gmt_cu_memcpy2d, CUDA_MEMCPY2D, src_pitch, srcPitch);
  SAME(gmt_cu_memcpy2d, CUDA_MEMCPY2D, dst_x, dstXInBytes);
  SAME(gmt_cu_memcpy2d, CUDA_MEMCPY2D, dst_y, dstY);
  SAME(gmt_cu_memcpy2d, CUDA_MEMCPY2D, dst_type, dstMemoryType);
  SAME(gmt_cu_memcpy2d, CUDA_MEMCPY2D, dst_host, dstHost);
  SAME(gmt_cu_memcpy2d, CUDA_MEMCPY2D, dst_device, dstDevice);
  SAME(gmt_cu_memcpy2d, CUDA_MEMCPY2D, dst_array, dstArray);
  SAME(gmt_cu_memcpy2d, CUDA_MEMCPY2D, dst_pitch, dstPitch);
  SAME(gmt_cu_memcpy2d, CUDA_MEMCPY2D, width, WidthInBytes);
  SAME(gmt_cu_memcpy2d, CUDA_MEMCPY2D, height, Height);
}

static void memcpy3d_layout(void **state)
{
  (void)state;
  assert_int_equal(sizeof(struct gmt_cu_memcpy3d), sizeof(CUDA_MEMCPY3D));
  SAME(gmt_cu_memcpy3d, CUDA_MEMCPY3D, src_x, srcXInBytes);
  SAME(gmt_cu_memcpy3d, CUDA_MEMCPY3D, src_y, srcY);
  SAME(gmt_cu_memcpy3d, CUDA_MEMCPY3D, src_z, srcZ);
  SAME(gmt_cu_memcpy3d, CUDA_MEMCPY3D, src_type, srcMemoryType);
  SAME(gmt_cu_memcpy3d, CUDA_MEMCPY3D, src_host, srcHost);
  SAME(gmt_cu_memcpy3d, CUDA_MEMCPY3D, src_device, srcDevice);
  SAME(gmt_cu_memcpy3d, CUDA_MEMCPY3D, src_pitch, srcPitch);
  SAME(gmt_cu_memcpy3d, CUDA_MEMCPY3D, src_height, srcHeight);
  SAME(gmt_cu_memcpy3d, CUDA_MEMCPY3D, dst_x, dstXInBytes);
  SAME(gmt_cu_memcpy3d, CUDA_MEMCPY3D, dst_y, dstY);
  SAME(gmt_cu_memcpy3d, CUDA_MEMCPY3D, dst_z, dstZ);
  SAME(gmt_cu_memcpy3d, CUDA_MEMCPY3D, dst_type, dstMemoryType);
  SAME(gmt_cu_memcpy3d, CUDA_MEMCPY3D, dst_host, dstHost);
  SAME(gmt_cu_memcpy3d, CUDA_MEMCPY3D, dst_device, dstDevice);
  SAME(gmt_cu_memcpy3d, CUDA_MEMCPY3D, dst_pitch, dstPitch);
  SAME(gmt_cu_memcpy3d, CUDA_MEMCPY3D, dst_height, dstHeight);
  SAME(gmt_cu_memcpy3d, CUDA_MEMCPY3D, width, WidthInBytes);
  SAME(gmt_cu_memcpy3d, CUDA_MEMCPY3D, height, Height);
  SAME(gmt_cu_memcpy3d, CUDA_MEMCPY3D, depth, Depth);
}

static void memory_types(void **state)
{
  (void)state;
  assert_int_equal(GMT_CU_MEMORYTYPE_HOST, CU_MEMORYTYPE_HOST);
  assert_int_equal(GMT_CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_DEVICE);
  assert_int_equal(GMT_CU_MEMORYTYPE_ARRAY, CU_MEMORYTYPE_ARRAY);
  assert_int_equal(GMT_CU_MEMORYTYPE_UNIFIED, CU_MEMORYTYPE_UNIFIED);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(memcpy2d_layout),
      cmocka_unit_test(memcpy3d_layout),
      cmocka_unit_test(memory_types),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
