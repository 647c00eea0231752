# The lines and file names of Alnair's per-call logs (hook/logs/callfmt.c).
gmt_unit_test(test_callfmt
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_callfmt.c ${PROJECT_SOURCE_DIR}/hook/logs/callfmt.c
  INCLUDES ${PROJECT_SOURCE_DIR}/hook/base ${PROJECT_SOURCE_DIR}/hook/memory ${PROJECT_SOURCE_DIR}/hook/token
  ${PROJECT_SOURCE_DIR}/hook/pin ${PROJECT_SOURCE_DIR}/hook/swap ${PROJECT_SOURCE_DIR}/hook/logs)
