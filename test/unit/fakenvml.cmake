# The fake NVML (test/fakecuda/nvml.c) over the fake machine it shares with
# the fake libcuda: memory info from one ledger, identities that agree,
# CUDA_VISIBLE_DEVICES, and GMT_FAKE_TOPO.
gmt_unit_test(test_fakenvml
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_fakenvml.c
  LIBS fakecuda fakenvml Threads::Threads
  INCLUDES ${GMT_CUDA_INCLUDE} ${CMAKE_SOURCE_DIR}/proto/util)
