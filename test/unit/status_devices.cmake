# The node's GPUs in gmt status, text and JSON: client/cli/status_devices.c
gmt_unit_test(test_status_devices
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_status_devices.c
  LIBS gmtstatusjson)
