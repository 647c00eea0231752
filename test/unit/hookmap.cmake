# The hook's map from real driver entry points to its wrappers (hook/base/hookmap.c).
gmt_unit_test(test_hookmap
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_hookmap.c ${PROJECT_SOURCE_DIR}/hook/base/hookmap.c
  INCLUDES ${PROJECT_SOURCE_DIR}/hook/base ${PROJECT_SOURCE_DIR}/hook/memory ${PROJECT_SOURCE_DIR}/hook/token
  ${PROJECT_SOURCE_DIR}/hook/pin ${PROJECT_SOURCE_DIR}/hook/swap ${PROJECT_SOURCE_DIR}/hook/logs)
