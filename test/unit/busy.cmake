# When a grant is busy or idle (hook/token/busy.c), on a fake clock.
gmt_unit_test(test_busy
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_busy.c ${PROJECT_SOURCE_DIR}/hook/token/busy.c
  INCLUDES ${PROJECT_SOURCE_DIR}/hook/base ${PROJECT_SOURCE_DIR}/hook/memory ${PROJECT_SOURCE_DIR}/hook/token
  ${PROJECT_SOURCE_DIR}/hook/pin ${PROJECT_SOURCE_DIR}/hook/swap ${PROJECT_SOURCE_DIR}/hook/logs
  ${PROJECT_SOURCE_DIR}/proto)
