# Where the tracer puts a uprobe in a function (bpf/prologue.c).
# Plain C: built wherever the unit tests are, tracer or not.
gmt_unit_test(test_prologue
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_prologue.c ${PROJECT_SOURCE_DIR}/bpf/prologue.c
  INCLUDES ${PROJECT_SOURCE_DIR}/bpf)
