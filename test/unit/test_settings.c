/* gmt's settings file (proto/gmt_settings.h): what it accepts, its
 * defaults, and its file:line errors for what it refuses. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "gmt_error.h"
#include "gmt_settings.h"
#include "gmt_wire.h"

static int parse(const char *text, gmt_settings_t *s, char **errors)
{
  return gmt_settings_parse("gmt.ini", text, strlen(text), s, errors);
}

/* Parses text that must fail; returns its errors (free()). */
static char *refused(const char *text)
{
  gmt_settings_t s;
  char *errors = NULL;
  assert_int_equal(parse(text, &s, &errors), GMT_ECONFIG);
  assert_non_null(errors);
  /* A refused file leaves the defaults. */
  gmt_settings_t d;
  gmt_settings_default(&d);
  assert_memory_equal(&s, &d, sizeof s);
  return errors;
}

static void test_settings_defaults_when_the_file_is_empty(void **state)
{
  (void)state;
  gmt_settings_t s;
  char *errors = (char *)1;
  assert_int_equal(parse("# nothing\n\n; nothing either\n", &s, &errors), 0);
  assert_null(errors);
  assert_string_equal(s.server_addr, GMT_DEFAULT_SCHD_IPC);
  assert_false(s.server_addr_set);
  assert_int_equal(s.max_queued_requests, 32);
  assert_int_equal(s.cache_max_age_ms, 1000);
  assert_int_equal(s.cache_max_requests, 10);
  assert_true(s.probe);
  assert_int_equal(s.probe_timeout_ms, 3000);
  assert_string_equal(s.path, "gmt.ini");
}

static void test_settings_read_sections_and_dotted_keys(void **state)
{
  (void)state;
  gmt_settings_t s;
  char *errors = NULL;
  const char *text = "server.addr = tcp://127.0.0.1:6000   # where gmt-schd is\n"
                     "[server]\n"
                     "  max-queued-requests=5\r\n"
                     "[daemon]\n"
                     "max-cache-time-interval = 250ms\n"
                     "max-cache-request = 3 ; a comment\n"
                     "probe = Off\n"
                     "probe-timeout = 1.5\n";
  assert_int_equal(parse(text, &s, &errors), 0);
  assert_null(errors);
  assert_string_equal(s.server_addr, "tcp://127.0.0.1:6000");
  assert_true(s.server_addr_set);
  assert_int_equal(s.max_queued_requests, 5);
  assert_int_equal(s.cache_max_age_ms, 250);
  assert_int_equal(s.cache_max_requests, 3);
  assert_false(s.probe);
  assert_int_equal(s.probe_timeout_ms, 1500);
}

static void test_settings_durations_take_units(void **state)
{
  (void)state;
  gmt_settings_t s;
  assert_int_equal(parse("daemon.max-cache-time-interval = 2min\n", &s, NULL), 0);
  assert_int_equal(s.cache_max_age_ms, 120000);
  assert_int_equal(parse("daemon.max-cache-time-interval = 0\n", &s, NULL), 0);
  assert_int_equal(s.cache_max_age_ms, 0);
  assert_int_equal(parse("daemon.max-cache-time-interval = 2 s\n", &s, NULL), 0);
  assert_int_equal(s.cache_max_age_ms, 2000);
}

static void test_settings_unknown_key_names_file_and_line(void **state)
{
  (void)state;
  char *e = refused("[daemon]\nprobe = on\nmax-cache-requests = 4\n");
  assert_non_null(strstr(e, "gmt.ini:3: unknown key 'daemon.max-cache-requests'"));
  free(e);
  e = refused("[gpu]\nx = 1\n");
  assert_non_null(strstr(e, "gmt.ini:1: unknown section [gpu]"));
  assert_null(strstr(e, ":2:")); /* its keys are not reported one by one */
  free(e);
  e = refused("addr = ipc:///x\n");
  assert_non_null(strstr(e, "gmt.ini:1: unknown key 'addr'"));
  free(e);
}

static void test_settings_bad_values_are_each_reported(void **state)
{
  (void)state;
  char *e = refused("[server]\n"
                    "addr = http://x\n"
                    "max-queued-requests = 0\n"
                    "[daemon]\n"
                    "max-cache-time-interval = 1h\n"
                    "max-cache-request = -1\n"
                    "probe = maybe\n"
                    "probe-timeout = 0\n");
  assert_non_null(strstr(e, "gmt.ini:2: server.addr 'http://x'"));
  assert_non_null(strstr(e, "gmt.ini:3: server.max-queued-requests '0'"));
  assert_non_null(strstr(e, "gmt.ini:5: daemon.max-cache-time-interval '1h'"));
  assert_non_null(strstr(e, "gmt.ini:6: daemon.max-cache-request '-1'"));
  assert_non_null(strstr(e, "gmt.ini:7: daemon.probe 'maybe'"));
  assert_non_null(strstr(e, "gmt.ini:8: daemon.probe-timeout '0'"));
  free(e);
}

static void test_settings_refuse_repeats_and_junk(void **state)
{
  (void)state;
  char *e = refused("daemon.probe = on\n[daemon]\nprobe = off\n");
  assert_non_null(strstr(e, "gmt.ini:3: daemon.probe given twice (first on line 1)"));
  free(e);
  e = refused("just words\n");
  assert_non_null(strstr(e, "gmt.ini:1: want 'key = value'"));
  free(e);
  e = refused("[server\n");
  assert_non_null(strstr(e, "gmt.ini:1: a section header"));
  free(e);
  e = refused("server.max-queued-requests =\n");
  assert_non_null(strstr(e, "gmt.ini:1: server.max-queued-requests has no value"));
  free(e);
  e = refused("[daemon]\nserver.addr = ipc:///x\n");
  assert_non_null(strstr(e, "gmt.ini:2: key 'server.addr' under [daemon]"));
  free(e);
  e = refused("daemon.max-cache-time-interval = 1.2.3\n");
  free(e);
  static const char nul[] = "probe\0 = on\n";
  gmt_settings_t s;
  char *errors = NULL;
  assert_int_equal(gmt_settings_parse("gmt.ini", nul, sizeof nul - 1, &s, &errors), GMT_ECONFIG);
  assert_non_null(strstr(errors, "gmt.ini:1: a NUL byte"));
  free(errors);
}

/* A binary file given by mistake: the first 50 problems, then one line
 * that counts the rest. */
static void test_settings_errors_stop_at_50_and_count_the_rest(void **state)
{
  (void)state;
  char text[60 * 5 + 1] = "";
  for (int i = 0; i < 60; i++)
    strcat(text, "junk\n");
  char *e = refused(text);
  assert_non_null(strstr(e, "gmt.ini:50: want 'key = value'"));
  assert_null(strstr(e, "gmt.ini:51:"));
  const char *last = "\ngmt.ini: 10 more problems not shown\n";
  assert_true(strlen(e) > strlen(last));
  assert_string_equal(e + strlen(e) - strlen(last), last);
  int lines = 0;
  for (const char *p = e; *p; p++)
    lines += *p == '\n';
  assert_int_equal(lines, 51);
  free(e);
}

static void test_settings_load_reads_a_file_and_refuses_a_missing_named_one(void **state)
{
  (void)state;
  char dir[] = "/tmp/gmt-test-settings-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof path, "%s/gmt.ini", dir);
  gmt_settings_t s;
  char *errors = NULL;
  assert_int_equal(gmt_settings_load(path, &s, &errors), -ENOENT);
  assert_non_null(errors);
  assert_non_null(strstr(errors, "cannot open"));
  free(errors);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("[daemon]\nmax-cache-request = 7\n", f);
  fclose(f);
  assert_int_equal(gmt_settings_load(path, &s, &errors), 0);
  assert_int_equal(s.cache_max_requests, 7);
  assert_string_equal(s.path, path);
  /* A folder is not a settings file. */
  assert_int_equal(gmt_settings_load(dir, &s, &errors), -EINVAL);
  free(errors);
  unlink(path);
  rmdir(dir);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_settings_defaults_when_the_file_is_empty),
      cmocka_unit_test(test_settings_read_sections_and_dotted_keys),
      cmocka_unit_test(test_settings_durations_take_units),
      cmocka_unit_test(test_settings_unknown_key_names_file_and_line),
      cmocka_unit_test(test_settings_bad_values_are_each_reported),
      cmocka_unit_test(test_settings_refuse_repeats_and_junk),
      cmocka_unit_test(test_settings_errors_stop_at_50_and_count_the_rest),
      cmocka_unit_test(test_settings_load_reads_a_file_and_refuses_a_missing_named_one),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
