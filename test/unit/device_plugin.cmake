# What gmt-device-plugin advertises (deploy/device-plugin/node.c, devices.c).
if(TARGET gmtdevplugin)
  gmt_unit_test(test_device_plugin
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_device_plugin.c
    LIBS gmtdevplugin)
endif()
