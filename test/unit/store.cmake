# The SQLite store: server/store.c (pruning, a corrupt file, file modes).
gmt_unit_test(test_store
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_store.c
  LIBS gmtschd_core)
