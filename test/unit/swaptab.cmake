# The table of a mode=swap process's allocations (hook/swaptab.c).
gmt_unit_test(test_swaptab
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_swaptab.c ${PROJECT_SOURCE_DIR}/hook/swaptab.c
  INCLUDES ${PROJECT_SOURCE_DIR}/hook)
