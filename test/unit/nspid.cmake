# Pids across PID namespaces (server/nspid.c), on a /proc made of files.
gmt_unit_test(test_nspid
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nspid.c
  LIBS gmtschd_core)
