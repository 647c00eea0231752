# Best-GPU selection: the score, the decision and the cache rule (server/pick.c).
gmt_unit_test(test_pick
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_pick.c
  LIBS gmtschd_core m
  INCLUDES ${PROJECT_SOURCE_DIR}/server)
