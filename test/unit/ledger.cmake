# The memory ledger: server/ledger.c.
gmt_unit_test(test_ledger
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ledger.c
  LIBS gmtschd_core)
