# Pin profiles kept per executable, classified and cached: server/pin_profile.c.
gmt_unit_test(test_pin_profile
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_pin_profile.c
  LIBS gmtschd_core)
