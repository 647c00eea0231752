# A process's counters as one value: proto/counters.c
gmt_unit_test(test_counters SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_counters.c LIBS gmtwire)
