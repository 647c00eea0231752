/* gmt run's options, the LD_PRELOAD it builds and where it finds the hook
 * (client/cli/run_env.c), and CUDA_VISIBLE_DEVICES from a Pick's answer
 * (proto/visible.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "gmt_visible.h"
#include "run_env.h"

/* ---- options ---- */

#define ARGV(...) ((char *[]){"run", __VA_ARGS__, NULL})

static int parse(char **argv, int argc, gmt_run_opts_t *o, char *err)
{
  return gmt__run_parse(argc, argv, o, err, 256);
}

static void test_run_parses_every_option_before_the_command(void **state)
{
  (void)state;
  char **argv = ARGV("--pod", "a", "--pmgr=tcp://127.0.0.1:9", "--auto-device", "--count", "2",
                     "--bytes=512Mi", "--config", "/etc/x.ini", "--timeout", "700", "-q", "--",
                     "prog", "--pod", "x");
  int argc = 0;
  while (argv[argc])
    argc++;
  gmt_run_opts_t o;
  char err[256] = "";
  assert_int_equal(parse(argv, argc, &o, err), 0);
  assert_string_equal(o.pod, "a");
  assert_string_equal(o.pmgr, "tcp://127.0.0.1:9");
  assert_true(o.auto_device);
  assert_int_equal(o.count, 2);
  assert_int_equal(o.bytes, 512ull << 20);
  assert_string_equal(o.config, "/etc/x.ini");
  assert_int_equal(o.timeout_ms, 700);
  assert_true(o.quiet);
  /* Everything after "--" is the command's, options included. */
  assert_string_equal(o.cmd[0], "prog");
  assert_string_equal(o.cmd[1], "--pod");
  assert_string_equal(o.cmd[2], "x");
  assert_null(o.cmd[3]);
}

static void test_run_command_starts_at_first_non_option(void **state)
{
  (void)state;
  char *argv[] = {"run", "--auto-device", "python", "-q", "train.py", NULL};
  gmt_run_opts_t o;
  char err[256] = "";
  assert_int_equal(parse(argv, 5, &o, err), 0);
  assert_string_equal(o.cmd[0], "python");
  assert_string_equal(o.cmd[1], "-q"); /* the command's, not gmt's */
  assert_false(o.quiet);
  assert_int_equal(o.count, 1); /* defaults */
  assert_int_equal(o.bytes, 0);
  assert_int_equal(o.timeout_ms, GMT_RUN_TIMEOUT_MS);
  assert_null(o.pod);
}

static void test_run_help_is_asked_before_the_command(void **state)
{
  (void)state;
  char *argv[] = {"run", "--help", "prog", NULL};
  gmt_run_opts_t o;
  char err[256] = "";
  assert_int_equal(parse(argv, 3, &o, err), 1);
  char *argv2[] = {"run", "prog", "--help", NULL};
  assert_int_equal(parse(argv2, 3, &o, err), 0); /* prog's --help */
}

/* Each bad use is refused with a reason that names what was wrong. */
static void test_run_refuses_bad_use_saying_what(void **state)
{
  (void)state;
  struct {
    char *argv[8];
    const char *says;
  } cases[] = {
      {{"run", NULL}, "no command"},
      {{"run", "--auto-device", NULL}, "no command"},
      {{"run", "--auto-device", "--", NULL}, "no command"},
      {{"run", "--pod", NULL}, "--pod needs"},
      {{"run", "--pod=", "x", NULL}, "--pod needs"},
      {{"run", "--auto-device", "--count", "0", "x", NULL}, "--count '0'"},
      {{"run", "--auto-device", "--count", "65", "x", NULL}, "--count '65'"},
      {{"run", "--auto-device", "--count", "-1", "x", NULL}, "--count '-1'"},
      {{"run", "--auto-device", "--count", "2x", "x", NULL}, "--count '2x'"},
      {{"run", "--auto-device", "--bytes", "lots", "x", NULL}, "--bytes 'lots'"},
      {{"run", "--auto-device", "--timeout", "0", "x", NULL}, "--timeout '0'"},
      {{"run", "--count", "2", "x", NULL}, "--count only means something with --auto-device"},
      {{"run", "--bytes", "1G", "x", NULL}, "--bytes only means something with --auto-device"},
      {{"run", "--config", "/etc/gmt/gmt.ini", "x", NULL},
       "--config only means something with --auto-device"},
      {{"run", "--pmgr", "tcp://h:1", "x", NULL}, "--pmgr needs --pod"},
      {{"run", "--frobnicate", "x", NULL}, "unknown option '--frobnicate'"},
      {{"run", "--podx", "a", "x", NULL}, "unknown option '--podx'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int argc = 0;
    while (cases[i].argv[argc])
      argc++;
    gmt_run_opts_t o;
    char err[256] = "";
    int rc = gmt__run_parse(argc, cases[i].argv, &o, err, sizeof err);
    if (rc != -EINVAL || !strstr(err, cases[i].says))
      fail_msg("case %zu: rc %d, err '%s', want '%s'", i, rc, err, cases[i].says);
  }
}

/* ---- LD_PRELOAD ---- */

static void test_run_preload_puts_the_hook_first(void **state)
{
  (void)state;
  char out[256];
  assert_int_equal(gmt__run_preload("/b/hook/libgmthook.so", NULL, out, sizeof out), 0);
  assert_string_equal(out, "/b/hook/libgmthook.so");
  assert_int_equal(gmt__run_preload("/b/hook/libgmthook.so", "", out, sizeof out), 0);
  assert_string_equal(out, "/b/hook/libgmthook.so");
  assert_int_equal(gmt__run_preload("/asan.so:/b/libgmthook.so", "/x/libfoo.so", out, sizeof out),
                   0);
  assert_string_equal(out, "/asan.so:/b/libgmthook.so:/x/libfoo.so");
}

static void test_run_preload_keeps_a_hook_already_there(void **state)
{
  (void)state;
  char out[256];
  assert_int_equal(gmt__run_preload("/b/libgmthook.so", "/x/libfoo.so /opt/gmt/lib/libgmthook.so",
                                    out, sizeof out),
                   0);
  assert_string_equal(out, "/x/libfoo.so /opt/gmt/lib/libgmthook.so");
  assert_int_equal(gmt__run_preload("/b/libgmthook.so", "libgmthook.so", out, sizeof out), 0);
  assert_string_equal(out, "libgmthook.so");
  /* A name that only ends like it is another library. */
  assert_int_equal(gmt__run_preload("/b/libgmthook.so", "/x/notlibgmthook.so", out, sizeof out), 0);
  assert_string_equal(out, "/b/libgmthook.so:/x/notlibgmthook.so");
}

static void test_run_preload_too_long_is_refused(void **state)
{
  (void)state;
  char out[8];
  assert_int_equal(gmt__run_preload("/b/libgmthook.so", NULL, out, sizeof out), -ENOSPC);
  assert_string_equal(out, "");
}

/* ---- finding the hook ---- */

static char g_tmp[256];

static void put(const char *rel, const char *text)
{
  char path[512];
  snprintf(path, sizeof path, "%s/%s", g_tmp, rel);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void mk(const char *rel)
{
  char path[512];
  snprintf(path, sizeof path, "%s/%s", g_tmp, rel);
  assert_int_equal(mkdir(path, 0755), 0);
}

static int tree_setup(void **state)
{
  (void)state;
  snprintf(g_tmp, sizeof g_tmp, "/tmp/gmt-test-run-XXXXXX");
  if (!mkdtemp(g_tmp))
    return -1;
  return 0;
}

static int tree_teardown(void **state)
{
  (void)state;
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
  return system(cmd) == 0 ? 0 : -1;
}

static void test_run_finds_the_hook_in_order(void **state)
{
  (void)state;
  /* build/: client/gmt, hook/libgmthook.so; prefix/: bin/gmt, lib/. */
  mk("build");
  mk("build/client");
  mk("build/hook");
  put("build/client/gmt", "");
  put("build/hook/libgmthook.so", "");
  mk("prefix");
  mk("prefix/bin");
  mk("prefix/lib");
  put("prefix/bin/gmt", "");
  put("prefix/lib/libgmthook.so", "");
  put("own.so", "");
  char out[1024], err[1024], want[1024], exe[512], build[512];
  snprintf(exe, sizeof exe, "%s/build/client/gmt", g_tmp);
  snprintf(build, sizeof build, "%s/build", g_tmp);

  /* GMT_HOOK_LIB first, as given. */
  snprintf(want, sizeof want, "%s/own.so", g_tmp);
  assert_int_equal(gmt__run_find_hook(want, build, exe, out, sizeof out, err, sizeof err), 0);
  assert_string_equal(out, want);
  /* Then GMT_BUILD_DIR. */
  snprintf(want, sizeof want, "%s/build/hook/libgmthook.so", g_tmp);
  assert_int_equal(
      gmt__run_find_hook(NULL, build, "/usr/bin/gmt", out, sizeof out, err, sizeof err), 0);
  assert_string_equal(out, want);
  /* Then beside gmt: a build tree's ../hook/ (no ".." left in the path). */
  assert_int_equal(gmt__run_find_hook("", "", exe, out, sizeof out, err, sizeof err), 0);
  assert_string_equal(out, want);
  /* An installed gmt's ../lib/. */
  snprintf(exe, sizeof exe, "%s/prefix/bin/gmt", g_tmp);
  snprintf(want, sizeof want, "%s/prefix/lib/libgmthook.so", g_tmp);
  assert_int_equal(gmt__run_find_hook(NULL, NULL, exe, out, sizeof out, err, sizeof err), 0);
  assert_string_equal(out, want);
}

static void test_run_uses_a_builds_preload_list(void **state)
{
  (void)state;
  mk("san");
  mk("san/hook");
  put("san/hook/libgmthook.so", "");
  put("libasan.so", "");
  char list[1024], out[1024], err[1024], build[512];
  snprintf(list, sizeof list, "%s/libasan.so:%s/san/hook/libgmthook.so\n", g_tmp, g_tmp);
  put("san/hook/preload.txt", list);
  snprintf(build, sizeof build, "%s/san", g_tmp);
  assert_int_equal(gmt__run_find_hook(NULL, build, NULL, out, sizeof out, err, sizeof err), 0);
  list[strlen(list) - 1] = '\0';
  assert_string_equal(out, list);
  /* A list naming a file that is gone is not used: the .so is. */
  put("san/hook/preload.txt", "/nonexistent/libasan.so:/x/libgmthook.so\n");
  assert_int_equal(gmt__run_find_hook(NULL, build, NULL, out, sizeof out, err, sizeof err), 0);
  snprintf(list, sizeof list, "%s/san/hook/libgmthook.so", g_tmp);
  assert_string_equal(out, list);
}

static void test_run_hook_variables_set_wrong_are_errors(void **state)
{
  (void)state;
  char out[1024], err[1024], exe[512];
  snprintf(exe, sizeof exe, "%s/build/client/gmt", g_tmp);
  /* Set but wrong: said, never a quiet fall back to another hook. */
  assert_int_equal(
      gmt__run_find_hook("/nonexistent/libgmthook.so", NULL, exe, out, sizeof out, err, sizeof err),
      -ENOENT);
  assert_non_null(strstr(err, "GMT_HOOK_LIB=/nonexistent/libgmthook.so"));
  assert_string_equal(out, "");
  assert_int_equal(gmt__run_find_hook(NULL, "/nonexistent", exe, out, sizeof out, err, sizeof err),
                   -ENOENT);
  assert_non_null(strstr(err, "GMT_BUILD_DIR=/nonexistent"));
  assert_int_equal(
      gmt__run_find_hook(NULL, NULL, "/nonexistent/bin/gmt", out, sizeof out, err, sizeof err),
      -ENOENT);
  assert_non_null(strstr(err, "GMT_HOOK_LIB"));
}

/* ---- CUDA_VISIBLE_DEVICES from a Pick ---- */

static void test_visible_lists_uuids_best_first(void **state)
{
  (void)state;
  int32_t devs[] = {3, 1};
  char *uuids[] = {"GPU-aaaa-1", "GPU-bbbb-2"};
  Gmt__PickReply r = GMT__PICK_REPLY__INIT;
  r.n_devices = 2;
  r.devices = devs;
  r.n_uuids = 2;
  r.uuids = uuids;
  char buf[64];
  assert_int_equal(gmt_visible_from_pick(&r, buf, sizeof buf), 0);
  assert_string_equal(buf, "GPU-aaaa-1,GPU-bbbb-2");
}

static void test_visible_uses_the_index_where_a_uuid_is_empty(void **state)
{
  (void)state;
  int32_t devs[] = {1, 0, 2};
  char *uuids[] = {"", "GPU-x"}; /* the third has none at all */
  Gmt__PickReply r = GMT__PICK_REPLY__INIT;
  r.n_devices = 3;
  r.devices = devs;
  r.n_uuids = 2;
  r.uuids = uuids;
  char buf[64];
  assert_int_equal(gmt_visible_from_pick(&r, buf, sizeof buf), 0);
  assert_string_equal(buf, "1,GPU-x,2");
}

static void test_visible_refuses_what_cuda_would_misread(void **state)
{
  (void)state;
  int32_t devs[] = {0, 1};
  char buf[64];
  Gmt__PickReply r = GMT__PICK_REPLY__INIT;
  assert_int_equal(gmt_visible_from_pick(&r, buf, sizeof buf), -ENODEV);
  assert_string_equal(buf, "");
  /* A comma in a UUID would show CUDA one more GPU than was picked. */
  char *comma[] = {"GPU-a,1"};
  r.n_devices = 1;
  r.devices = devs;
  r.n_uuids = 1;
  r.uuids = comma;
  assert_int_equal(gmt_visible_from_pick(&r, buf, sizeof buf), -EPROTO);
  assert_string_equal(buf, "");
  char *blank[] = {"GPU-a b"};
  r.uuids = blank;
  assert_int_equal(gmt_visible_from_pick(&r, buf, sizeof buf), -EPROTO);
  int32_t neg[] = {-1};
  r.devices = neg;
  r.n_uuids = 0;
  assert_int_equal(gmt_visible_from_pick(&r, buf, sizeof buf), -EPROTO);
  char *two[] = {"GPU-a", "GPU-b"};
  r.devices = devs;
  r.n_uuids = 2; /* more UUIDs than devices */
  r.uuids = two;
  assert_int_equal(gmt_visible_from_pick(&r, buf, sizeof buf), -EPROTO);
}

static void test_visible_too_long_is_refused(void **state)
{
  (void)state;
  int32_t devs[] = {0, 1};
  char *uuids[] = {"GPU-aaaa", "GPU-bbbb"};
  Gmt__PickReply r = GMT__PICK_REPLY__INIT;
  r.n_devices = 2;
  r.devices = devs;
  r.n_uuids = 2;
  r.uuids = uuids;
  char buf[17]; /* "GPU-aaaa,GPU-bbbb" needs 18 */
  assert_int_equal(gmt_visible_from_pick(&r, buf, sizeof buf), -ENOSPC);
  assert_string_equal(buf, "");
  char ok[18];
  assert_int_equal(gmt_visible_from_pick(&r, ok, sizeof ok), 0);
}

/* ---- the GPUs a pod may use (Pick with allowed: gmt run --pod and
 * GMT_AUTO_DEVICE=pod) ---- */

static void test_visible_allowed_sets_a_confined_pods_gpus(void **state)
{
  (void)state;
  int32_t devs[] = {1, 3};
  char *uuids[] = {"GPU-b", "GPU-d"};
  Gmt__PickReply r = GMT__PICK_REPLY__INIT;
  r.n_devices = 2;
  r.devices = devs;
  r.n_uuids = 2;
  r.uuids = uuids;
  r.confined = true;
  char buf[64];
  assert_int_equal(gmt_visible_from_allowed(&r, buf, sizeof buf), 0);
  assert_string_equal(buf, "GPU-b,GPU-d");
}

static void test_visible_allowed_leaves_a_pod_without_devices_unset(void **state)
{
  (void)state;
  int32_t devs[] = {0, 1};
  char *uuids[] = {"GPU-a", "GPU-b"};
  Gmt__PickReply r = GMT__PICK_REPLY__INIT; /* every GPU, not confined */
  r.n_devices = 2;
  r.devices = devs;
  r.n_uuids = 2;
  r.uuids = uuids;
  char buf[64] = "x";
  assert_int_equal(gmt_visible_from_allowed(&r, buf, sizeof buf), GMT_VISIBLE_ALL);
  assert_string_equal(buf, "");
  r.n_devices = r.n_uuids = 0; /* a node whose GPUs are not known */
  assert_int_equal(gmt_visible_from_allowed(&r, buf, sizeof buf), GMT_VISIBLE_ALL);
}

static void test_visible_allowed_refuses_devices_naming_no_gpu_here(void **state)
{
  (void)state;
  Gmt__PickReply r = GMT__PICK_REPLY__INIT;
  r.confined = true; /* devices=5 on a node of two */
  char buf[64];
  assert_int_equal(gmt_visible_from_allowed(&r, buf, sizeof buf), -ENODEV);
  assert_string_equal(buf, "");
  assert_non_null(strstr(gmt_visible_allowed_strerror(-ENODEV), "names none of this node's GPUs"));
  int32_t devs[] = {1};
  char *comma[] = {"GPU-a,0"};
  r.n_devices = r.n_uuids = 1;
  r.devices = devs;
  r.uuids = comma;
  assert_int_equal(gmt_visible_from_allowed(&r, buf, sizeof buf), -EPROTO);
  assert_int_equal(gmt_visible_from_allowed(NULL, buf, sizeof buf), -EPROTO);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_run_parses_every_option_before_the_command),
      cmocka_unit_test(test_run_command_starts_at_first_non_option),
      cmocka_unit_test(test_run_help_is_asked_before_the_command),
      cmocka_unit_test(test_run_refuses_bad_use_saying_what),
      cmocka_unit_test(test_run_preload_puts_the_hook_first),
      cmocka_unit_test(test_run_preload_keeps_a_hook_already_there),
      cmocka_unit_test(test_run_preload_too_long_is_refused),
      cmocka_unit_test(test_visible_lists_uuids_best_first),
      cmocka_unit_test(test_visible_uses_the_index_where_a_uuid_is_empty),
      cmocka_unit_test(test_visible_refuses_what_cuda_would_misread),
      cmocka_unit_test(test_visible_too_long_is_refused),
      cmocka_unit_test(test_visible_allowed_sets_a_confined_pods_gpus),
      cmocka_unit_test(test_visible_allowed_leaves_a_pod_without_devices_unset),
      cmocka_unit_test(test_visible_allowed_refuses_devices_naming_no_gpu_here),
  };
  const struct CMUnitTest tree_tests[] = {
      cmocka_unit_test(test_run_finds_the_hook_in_order),
      cmocka_unit_test(test_run_uses_a_builds_preload_list),
      cmocka_unit_test(test_run_hook_variables_set_wrong_are_errors),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  failed += cmocka_run_group_tests(tree_tests, tree_setup, tree_teardown);
  return failed;
}
