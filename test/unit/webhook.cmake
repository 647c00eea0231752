# The admission webhook's review and JSONPatch (deploy/webhook/review.c, patch.c).
if(TARGET gmtwebhook)
  gmt_unit_test(test_webhook
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_webhook.c
    LIBS gmtwebhook)
endif()
