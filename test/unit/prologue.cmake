# Where the tracer puts a uprobe in a function (server/trace/prologue.c).
# Plain C: built wherever the unit tests are, tracer or not.
gmt_unit_test(test_prologue
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_prologue.c ${PROJECT_SOURCE_DIR}/server/trace/prologue.c
  INCLUDES ${PROJECT_SOURCE_DIR}/server/trace)
