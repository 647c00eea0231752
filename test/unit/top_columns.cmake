# gmt top's column fitting to the terminal's width (client/cli/top_columns.c).
gmt_unit_test(test_top_columns
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_top_columns.c
  LIBS gmttopview)
