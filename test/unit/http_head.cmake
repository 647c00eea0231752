# The head of an HTTP/1.x request (proto/util/http_head.c): gmt-schd's /metrics
# and gmt-webhook read requests with it.
gmt_unit_test(test_http_head
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_http_head.c
  LIBS gmthttp)
