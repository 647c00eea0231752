# When a grant is busy or idle (hook/busy.c), on a fake clock.
gmt_unit_test(test_busy
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_busy.c ${PROJECT_SOURCE_DIR}/hook/busy.c
  INCLUDES ${PROJECT_SOURCE_DIR}/hook)
