# gmt's settings file (proto/settings.c), the INI that gmt-schd and the CLI read.
gmt_unit_test(test_settings SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_settings.c LIBS gmtwire)
