# A pod's config as both daemons hold it: proto/podconfig.c
gmt_unit_test(test_podconfig SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_podconfig.c LIBS gmtwire)
