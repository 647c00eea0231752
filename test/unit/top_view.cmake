# gmt top's screen: client/cli/top_view.c
gmt_unit_test(test_top_view
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_top_view.c
  LIBS gmttopview)
