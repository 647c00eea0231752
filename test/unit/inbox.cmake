gmt_unit_test(test_inbox SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_inbox.c LIBS gmtinbox)
