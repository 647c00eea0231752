# ELF symbol tables read now or later (bpf/symbols.c). Built only where the
# tracer is (kernel BTF at configure time, see bpf/CMakeLists.txt).
if(TARGET gmttrace)
  gmt_unit_test(test_symbols
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_symbols.c
    LIBS gmttrace)
else()
  gmt_unbuilt_test(test_symbols "the tracer (bpf/) was not built: no kernel BTF at configure time")
endif()
