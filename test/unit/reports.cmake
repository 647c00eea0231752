# What a process's report may count: server/reports.c.
gmt_unit_test(test_reports
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_reports.c
  LIBS gmtschd_core)
