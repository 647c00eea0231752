# Which connection to gmt-schd's metrics port gives way (server/http_admit.c).
gmt_unit_test(test_http_admit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_http_admit.c
  LIBS gmtschd_core)
