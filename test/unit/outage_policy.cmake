# What a pod manager grants while gmt-schd is away, and its held Reserves'
# timer: client/pmgr/outage_policy.c (on slack_policy.c).
gmt_unit_test(test_outage_policy
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_outage_policy.c ${PROJECT_SOURCE_DIR}/client/pmgr/outage_policy.c
          ${PROJECT_SOURCE_DIR}/client/pmgr/slack_policy.c
  LIBS gmtwire
  INCLUDES ${PROJECT_SOURCE_DIR}/client/pmgr)
