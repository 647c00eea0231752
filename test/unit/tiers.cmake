# The memory tier spaces: server/tiers.c.
gmt_unit_test(test_tiers
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_tiers.c
  LIBS gmtschd_core)
