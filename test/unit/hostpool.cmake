# The hook's caching pool of pinned blocks (hook/hostpool.c).
gmt_unit_test(test_hostpool
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_hostpool.c ${PROJECT_SOURCE_DIR}/hook/hostpool.c
  INCLUDES ${PROJECT_SOURCE_DIR}/hook)
