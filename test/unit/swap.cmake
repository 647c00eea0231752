# mode=swap's resident bytes and eviction targets: server/swap.c.
gmt_unit_test(test_swap
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_swap.c
  LIBS gmtschd_core)
