# The hook's map from real driver entry points to its wrappers (hook/hookmap.c).
gmt_unit_test(test_hookmap
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_hookmap.c ${PROJECT_SOURCE_DIR}/hook/hookmap.c
  INCLUDES ${PROJECT_SOURCE_DIR}/hook)
