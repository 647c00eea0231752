# gmt top's per-pod share history ring (client/cli/top_history.c).
gmt_unit_test(test_top_history
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_top_history.c
  LIBS gmttopview)
