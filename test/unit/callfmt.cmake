# The lines and file names of Alnair's per-call logs (hook/callfmt.c).
gmt_unit_test(test_callfmt
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_callfmt.c ${PROJECT_SOURCE_DIR}/hook/callfmt.c
  INCLUDES ${PROJECT_SOURCE_DIR}/hook)
