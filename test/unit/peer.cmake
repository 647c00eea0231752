gmt_unit_test(test_peer SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_peer.c LIBS gmtwire)
