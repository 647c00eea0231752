# mode=swap's turns: their cost and length, the card's switch rate (server/swap_turn.c).
gmt_unit_test(test_swap_turn
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_swap_turn.c
  LIBS gmtschd_core m)
