# Device memory per process from NVML (server/procmem.c), through a stub
# table: context memory in gmt status.
gmt_unit_test(test_procmem
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_procmem.c
  LIBS gmtschd_core)
