# The request head of gmt-schd's metrics server (server/http_head.c).
gmt_unit_test(test_http_head
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_http_head.c
  LIBS gmtschd_core)
