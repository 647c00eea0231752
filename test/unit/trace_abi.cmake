# The tracer's copies of driver structure layouts (bpf/cudatrace.h) against
# cuda.h. Plain C: built wherever the unit tests are.
gmt_unit_test(test_trace_abi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_trace_abi.c
  INCLUDES ${PROJECT_SOURCE_DIR}/bpf ${GMT_CUDA_INCLUDE})
