# gmt-schd's Prometheus metrics (server/metrics.c): the exposition format,
# label escaping, every value from a StatusReply, and --metrics ADDR.
gmt_unit_test(test_metrics
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_metrics.c
  LIBS gmtschd_core)
