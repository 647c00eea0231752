# The tracer's pure parts (bpf/): MemHistory and its dumps, and ELF symbol
# tables read now or later (symbols.c). Built only where the tracer is
# (kernel BTF at configure time, see bpf/CMakeLists.txt).
foreach(t test_memhistory test_symbols)
  if(TARGET gmttrace)
    gmt_unit_test(${t} SOURCES ${CMAKE_CURRENT_LIST_DIR}/${t}.c LIBS gmttrace)
  else()
    gmt_unbuilt_test(${t} "the tracer (bpf/) was not built: no kernel BTF at configure time")
  endif()
endforeach()
