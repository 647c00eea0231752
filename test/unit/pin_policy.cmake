# Pin advice's decisions and the learned hot/cold threshold: server/pin_policy.c.
gmt_unit_test(test_pin_policy
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_pin_policy.c
  LIBS gmtschd_core m)
