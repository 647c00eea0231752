# gmt status --json: client/cli/status_json.c
gmt_unit_test(test_status_json
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_status_json.c
  LIBS gmtstatusjson)
