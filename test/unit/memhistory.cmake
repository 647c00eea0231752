# MemHistory and the tracer's dumps (bpf/). Built only where the tracer is
# (kernel BTF at configure time, see bpf/CMakeLists.txt).
if(TARGET gmttrace)
  gmt_unit_test(test_memhistory
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_memhistory.c
    LIBS gmttrace)
else()
  gmt_unbuilt_test(test_memhistory "the tracer (bpf/) was not built: no kernel BTF at configure time")
endif()
