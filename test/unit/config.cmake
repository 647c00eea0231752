# resource-config.txt parsing (server/config.c).
gmt_unit_test(test_config
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_config.c
  LIBS gmtschd_core)
