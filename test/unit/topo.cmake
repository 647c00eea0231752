# The node's topology: topo/ (/sys parsing against a fake tree, NVML
# through a stub table).
gmt_unit_test(test_topo SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_topo.c LIBS gmttopo)
