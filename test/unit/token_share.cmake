# How gmt-pmgr shares its pod's token among the pod's processes
# (client/pmgr/token_share.c), on a fake clock.
gmt_unit_test(test_token_share
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_token_share.c ${PROJECT_SOURCE_DIR}/client/pmgr/token_share.c
  INCLUDES ${PROJECT_SOURCE_DIR}/client/pmgr ${PROJECT_SOURCE_DIR}/proto/util ${PROJECT_SOURCE_DIR}/proto)
