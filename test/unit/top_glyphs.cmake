# gmt top's cells: text cut to a column, bars, the sparkline, colour and
# UTF-8 decisions (client/cli/top_glyphs.c).
gmt_unit_test(test_top_glyphs
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_top_glyphs.c
  LIBS gmttopview)
