# Fresh host pages faulted in ahead of a move out (hook/swap/faultahead.c).
gmt_unit_test(test_faultahead
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_faultahead.c ${PROJECT_SOURCE_DIR}/hook/swap/faultahead.c
  INCLUDES ${PROJECT_SOURCE_DIR}/hook/swap
  LIBS Threads::Threads)
