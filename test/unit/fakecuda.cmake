# The fake CUDA driver (test/fakecuda/): version routes of cuGetProcAddress,
# memory truth across processes, kernel timing, pools, VMM and graphs.
gmt_unit_test(test_fakecuda
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_fakecuda.c
  LIBS fakecuda
  INCLUDES ${GMT_CUDA_INCLUDE} ${CMAKE_SOURCE_DIR}/test/fakecuda)
