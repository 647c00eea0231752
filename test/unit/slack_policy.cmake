# When a pod manager holds a refused Reserve for its pod's slack, and whom
# it asks: client/pmgr/slack_policy.c.
gmt_unit_test(test_slack_policy
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_slack_policy.c ${PROJECT_SOURCE_DIR}/client/pmgr/slack_policy.c
  INCLUDES ${PROJECT_SOURCE_DIR}/client/pmgr)
