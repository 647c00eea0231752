# gmt run (client/cli/run_env.c) and CUDA_VISIBLE_DEVICES from a Pick
# (proto/visible.c), which gmt run and the hook's GMT_AUTO_DEVICE share.
gmt_unit_test(test_run
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_run.c
  LIBS gmtrunenv gmtwire)
