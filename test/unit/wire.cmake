gmt_unit_test(test_wire SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_wire.c LIBS gmtwire)
