# The node's bell (proto/util/bell.c): its sealed memory, rings, and the
# socket that hands it out.
gmt_unit_test(test_bell SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_bell.c LIBS gmtwire)
