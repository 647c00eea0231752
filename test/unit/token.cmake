# The GPU time token policy (server/token.c), on a fake clock.
gmt_unit_test(test_token
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_token.c
  LIBS gmtschd_core m
  INCLUDES ${PROJECT_SOURCE_DIR}/server)
