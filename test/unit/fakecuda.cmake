# The fake CUDA driver (test/fakecuda/): version routes of cuGetProcAddress,
# memory truth across processes, kernel timing, pools, VMM and graphs, and
# its queues: streams, events, synchronizes, frees, fork and threads.
gmt_unit_test(test_fakecuda
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_fakecuda.c
  LIBS fakecuda Threads::Threads
  INCLUDES ${GMT_CUDA_INCLUDE} ${CMAKE_SOURCE_DIR}/test/fakecuda)
