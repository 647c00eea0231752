# The table of request kinds below both daemons: proto/rpc_kinds.c.
gmt_unit_test(test_rpc_kinds SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_rpc_kinds.c LIBS gmtwire)
