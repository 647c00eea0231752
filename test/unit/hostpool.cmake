# The hook's caching pool of pinned blocks (hook/pin/hostpool.c).
gmt_unit_test(test_hostpool
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_hostpool.c ${PROJECT_SOURCE_DIR}/hook/pin/hostpool.c
  INCLUDES ${PROJECT_SOURCE_DIR}/hook/base ${PROJECT_SOURCE_DIR}/hook/memory ${PROJECT_SOURCE_DIR}/hook/token
  ${PROJECT_SOURCE_DIR}/hook/pin ${PROJECT_SOURCE_DIR}/hook/swap ${PROJECT_SOURCE_DIR}/hook/logs)
