# The table of a mode=swap process's allocations (hook/swap/swaptab.c).
gmt_unit_test(test_swaptab
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_swaptab.c ${PROJECT_SOURCE_DIR}/hook/swap/swaptab.c
  INCLUDES ${PROJECT_SOURCE_DIR}/hook/base ${PROJECT_SOURCE_DIR}/hook/memory ${PROJECT_SOURCE_DIR}/hook/token
  ${PROJECT_SOURCE_DIR}/hook/pin ${PROJECT_SOURCE_DIR}/hook/swap ${PROJECT_SOURCE_DIR}/hook/logs)
