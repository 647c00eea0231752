# PCI bus ids (proto/util/busid.c): the spellings CUDA and NVML write, read as one.
gmt_unit_test(test_busid SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_busid.c LIBS gmtbusid)
