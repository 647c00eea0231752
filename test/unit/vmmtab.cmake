# The program's own physical memory in a mode=swap process (hook/swap/vmmtab.c).
gmt_unit_test(test_vmmtab
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_vmmtab.c ${PROJECT_SOURCE_DIR}/hook/swap/vmmtab.c
  INCLUDES ${PROJECT_SOURCE_DIR}/hook/swap)
