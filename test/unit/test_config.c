/* resource-config.txt: what gmt-schd accepts, and what it says about what
 * it refuses. Each test writes its file into a fresh mkdtemp folder. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "gmt_bytes.h"
#include "gmt_error.h"
#include "gmt_wire.h"

typedef struct {
  char dir[64];
  char path[PATH_MAX];
  gmt_config_t *cfg;
  char *errors;
} fixture_t;

static int setup(void **state)
{
  fixture_t *f = calloc(1, sizeof *f);
  if (!f)
    return -1;
  strcpy(f->dir, "/tmp/gmt-test-config-XXXXXX");
  if (!mkdtemp(f->dir)) {
    free(f);
    return -1;
  }
  snprintf(f->path, sizeof f->path, "%s/resource-config.txt", f->dir);
  *state = f;
  return 0;
}

static int teardown(void **state)
{
  fixture_t *f = *state;
  gmt_config_free(f->cfg);
  free(f->errors);
  unlink(f->path);
  rmdir(f->dir);
  free(f);
  return 0;
}

/* Writes text as the config file and loads it. */
static int load(fixture_t *f, const char *text)
{
  FILE *fp = fopen(f->path, "w");
  assert_non_null(fp);
  assert_int_equal(fputs(text, fp) >= 0, 1);
  assert_int_equal(fclose(fp), 0);
  gmt_config_free(f->cfg);
  free(f->errors);
  f->cfg = NULL;
  f->errors = NULL;
  return gmt_config_load(f->path, &f->cfg, &f->errors);
}

static int count_lines(const char *s)
{
  int n = 0;
  for (; s && *s; s++)
    n += *s == '\n';
  return n;
}

/* The file is refused with exactly one error, on line, that says what. */
static void expect_one_error(fixture_t *f, const char *text, int line, const char *what)
{
  char want[PATH_MAX + 64];
  int rc = load(f, text);
  assert_int_equal(rc, GMT_ECONFIG);
  assert_null(f->cfg);
  assert_non_null(f->errors);
  snprintf(want, sizeof want, "%s:%d: ", f->path, line);
  if (strncmp(f->errors, want, strlen(want)) != 0 || !strstr(f->errors, what) ||
      count_lines(f->errors) != 1)
    fail_msg("want one error \"%s...%s\", got:\n%s", want, what, f->errors);
}

/* ---- good files ---- */

static void test_good_file_gives_values_sorted_by_name(void **state)
{
  fixture_t *f = *state;
  int rc = load(f, "# pods on this node\n"
                   "\n"
                   "3\n"
                   "zeta 0.5 1 1073741824\n"
                   "   # a comment after blanks\n"
                   "alpha 0.25 0.75 4G\n"
                   "\t\n"
                   "mid-1.x_y 0 .5 512Mi\n");
  assert_int_equal(rc, 0);
  assert_null(f->errors);
  assert_non_null(f->cfg);
  assert_int_equal(f->cfg->npods, 3);
  assert_string_equal(f->cfg->path, f->path);

  const gmt_pod_config_t *p = f->cfg->pods;
  assert_string_equal(p[0].name, "alpha");
  assert_true(p[0].request == 0.25 && p[0].limit == 0.75);
  assert_int_equal(p[0].memory_limit, 4294967296ull);
  assert_int_equal(p[0].line, 6);
  assert_string_equal(p[1].name, "mid-1.x_y");
  assert_true(p[1].request == 0.0 && p[1].limit == 0.5);
  assert_int_equal(p[1].memory_limit, 536870912ull);
  assert_string_equal(p[2].name, "zeta");
  assert_true(p[2].request == 0.5 && p[2].limit == 1.0);
  assert_int_equal(p[2].memory_limit, 1073741824ull);
}

static void test_find_returns_pod_by_exact_name(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(load(f, "2\na 0.1 0.2 1K\nb 0.3 0.4 2K\n"), 0);
  const gmt_pod_config_t *b = gmt_config_find(f->cfg, "b");
  assert_non_null(b);
  assert_int_equal(b->memory_limit, 2048);
  assert_null(gmt_config_find(f->cfg, "c"));
  assert_null(gmt_config_find(f->cfg, "B"));
  assert_null(gmt_config_find(f->cfg, ""));
  assert_null(gmt_config_find(f->cfg, NULL));
  char longname[200];
  memset(longname, 'a', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  assert_null(gmt_config_find(f->cfg, longname));
}

static void test_memory_suffixes_are_powers_of_1024_in_any_case(void **state)
{
  (void)state;
  static const struct {
    const char *s;
    uint64_t v;
  } cases[] = {
      {"0", 0},
      {"123", 123},
      {"1K", 1024},
      {"1k", 1024},
      {"2Ki", 2048},
      {"2kI", 2048},
      {"3M", 3145728},
      {"3mi", 3145728},
      {"1G", 1073741824},
      {"1Gi", 1073741824},
      {"16g", 17179869184ull},
      {"1T", 1099511627776ull},
      {"5ti", 5497558138880ull},
      {"18446744073709551615", UINT64_MAX},
      {"16777215T", 16777215ull << 40},
      {"007", 7},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint64_t v = 1;
    if (gmt_parse_bytes(cases[i].s, &v) != 0 || v != cases[i].v)
      fail_msg("'%s': want %llu, got %llu", cases[i].s, (unsigned long long)cases[i].v,
               (unsigned long long)v);
  }
}

static void test_memory_rejects_other_suffixes_and_forms(void **state)
{
  (void)state;
  static const char *const bad[] = {"",   "K",  "1X",   "1KB", "1MB", "1Kii", "1 K", "1.5G",
                                    "-1", "+1", "0x10", "1e3", "1P",  "1i",   "G1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint64_t v = 0;
    int rc = gmt_parse_bytes(bad[i], &v);
    if (rc != -EINVAL)
      fail_msg("'%s': want -EINVAL, got %d", bad[i], rc);
  }
}

static void test_memory_overflow_is_range_error(void **state)
{
  (void)state;
  uint64_t v = 0;
  assert_int_equal(gmt_parse_bytes("18446744073709551616", &v), -ERANGE);
  assert_int_equal(gmt_parse_bytes("99999999999999999999999", &v), -ERANGE);
  assert_int_equal(gmt_parse_bytes("16777216T", &v), -ERANGE);
  assert_int_equal(gmt_parse_bytes("17179869184G", &v), -ERANGE);
  assert_int_equal(gmt_parse_bytes("18014398509481984K", &v), -ERANGE);
}

static void test_shares_accept_bounds_and_equal_request_limit(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(load(f, "4\na 0 0 0\nb 1 1 1\nc 0.000 1.0 1\nd +0.5 0.5 1\n"), 0);
  assert_true(gmt_config_find(f->cfg, "a")->limit == 0.0);
  assert_true(gmt_config_find(f->cfg, "b")->request == 1.0);
  assert_true(gmt_config_find(f->cfg, "c")->limit == 1.0);
  assert_true(gmt_config_find(f->cfg, "d")->request == 0.5);
}

static void test_name_of_62_characters_is_accepted(void **state)
{
  fixture_t *f = *state;
  char text[256], name[63];
  memset(name, 'n', 62);
  name[62] = '\0';
  snprintf(text, sizeof text, "1\n%s 0.1 0.2 1M\n", name);
  assert_int_equal(load(f, text), 0);
  assert_non_null(gmt_config_find(f->cfg, name));
}

static void test_crlf_line_ends_are_accepted(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(load(f, "1\r\na 0.1 0.2 1M\r\n"), 0);
  assert_int_equal(gmt_config_find(f->cfg, "a")->memory_limit, 1048576);
}

static void test_no_trailing_newline_is_accepted(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(load(f, "1\na 0.1 0.2 1M"), 0);
  assert_int_equal(f->cfg->npods, 1);
}

static void test_zero_pods_is_an_empty_config(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(load(f, "0\n"), 0);
  assert_int_equal(f->cfg->npods, 0);
  assert_null(gmt_config_find(f->cfg, "a"));
}

/* ---- bad files: one kind of mistake each ---- */

static void test_count_that_is_not_a_number_is_refused(void **state)
{
  fixture_t *f = *state;
  expect_one_error(f, "two\na 0.1 0.2 1M\n", 1, "must be the number of pods, got 'two'");
  expect_one_error(f, "# c\n-1\n", 2, "must be the number of pods, got '-1'");
  expect_one_error(f, "1.5\na 0.1 0.2 1M\n", 1, "number of pods");
}

static void test_count_with_extra_fields_is_refused(void **state)
{
  fixture_t *f = *state;
  expect_one_error(f, "1 2\na 0.1 0.2 1M\n", 1, "number of pods alone, got 2 fields");
  /* A file that starts with a pod line has no count. */
  expect_one_error(f, "a 0.1 0.2 1M\n", 1, "got 4 fields");
}

static void test_empty_file_has_no_count(void **state)
{
  fixture_t *f = *state;
  int rc = load(f, "# only a comment\n\n");
  assert_int_equal(rc, GMT_ECONFIG);
  assert_non_null(strstr(f->errors, "no pod count"));
  assert_int_equal(strncmp(f->errors, f->path, strlen(f->path)), 0);
}

static void test_wrong_field_count_is_refused(void **state)
{
  fixture_t *f = *state;
  expect_one_error(f, "1\na 0.1 0.2\n", 2,
                   "want 4 fields (ID REQUEST LIMIT GPU_MEM) and at most 12 key=value, got 3");
  expect_one_error(f, "1\na 0.1 0.2 1M extra\n", 2, "field 'extra' after GPU_MEM is not key=value");
  expect_one_error(f, "1\na 0.1 0.2 1M # no trailing comments\n", 2,
                   "a comment goes on a line of its own");
  expect_one_error(f,
                   "1\na 0.1 0.2 1M pin=off pin=off pin=off pin=off pin=off pin=off pin=off "
                   "pin=off pin=off pin=off pin=off pin=off pin=off\n",
                   2, "at most 12 key=value, got 17");
}

/* key=value fields after GPU_MEM: pin= (the 4-field form stays valid, and
 * means pin=off). */
static void test_pin_key(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(load(f, "3\na 0.1 0.2 1M pin=adaptive\nb 0.1 0.2 1M\nc 0 0 1 pin=use\n"), 0);
  assert_int_equal(f->cfg->pods[0].pin, 3);
  assert_int_equal(f->cfg->pods[1].pin, 0);
  assert_int_equal(f->cfg->pods[2].pin, 2);
  assert_string_equal(gmt_pin_mode_name(f->cfg->pods[0].pin), "adaptive");
  assert_int_equal(load(f, "1\na 0.1 0.2 1M pin=profile\n"), 0);
  assert_string_equal(gmt_pin_mode_name(f->cfg->pods[0].pin), "profile");
  expect_one_error(f, "1\na 0.1 0.2 1M pin=always\n", 2,
                   "pin 'always' is not one of off, profile, use, adaptive");
  expect_one_error(f, "1\na 0.1 0.2 1M pin=\n", 2, "pin '' is not one of");
  expect_one_error(f, "1\na 0.1 0.2 1M gpus=0\n", 2,
                   "unknown key 'gpus' (known: pin, mode, devices, class, idle-out)");
  expect_one_error(f, "1\na 0.1 0.2 1M =use\n", 2, "field '=use' after GPU_MEM is not key=value");
  expect_one_error(f, "1\na 0.1 0.2 1M pin=use pin=off\n", 2, "key 'pin' given twice");
}

/* mode=: strict unless said otherwise, in any order with pin=. */
static void test_mode_key(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(load(f, "4\na 0.1 0.2 1M mode=swap\nb 0.1 0.2 1M\nc 0 0 1 pin=use mode=um\n"
                           "d 0 0 1 mode=strict pin=adaptive\n"),
                   0);
  assert_int_equal(f->cfg->pods[0].mode, GMT__MEM_MODE__MEM_SWAP);
  assert_int_equal(f->cfg->pods[1].mode, GMT__MEM_MODE__MEM_STRICT);
  assert_int_equal(f->cfg->pods[2].mode, GMT__MEM_MODE__MEM_UM);
  assert_string_equal(gmt_pin_mode_name(f->cfg->pods[2].pin), "use");
  assert_int_equal(f->cfg->pods[3].mode, GMT__MEM_MODE__MEM_STRICT);
  assert_string_equal(gmt_pin_mode_name(f->cfg->pods[3].pin), "adaptive");
  assert_string_equal(gmt_mem_mode_name(f->cfg->pods[0].mode), "swap");
  assert_string_equal(gmt_mem_mode_name(GMT__MEM_MODE__MEM_UM), "um");
  assert_string_equal(gmt_mem_mode_name(9), "unknown");
  assert_int_equal(gmt_mem_mode_parse("SWAP"), -EINVAL);
  assert_int_equal(gmt_mem_mode_parse("swap"), GMT__MEM_MODE__MEM_SWAP);
  expect_one_error(f, "1\na 0.1 0.2 1M mode=oversubscribe\n", 2,
                   "mode 'oversubscribe' is not one of strict, swap, um");
  expect_one_error(f, "1\na 0.1 0.2 1M mode=\n", 2, "mode '' is not one of");
  expect_one_error(f, "1\na 0.1 0.2 1M mode=Swap\n", 2, "mode 'Swap' is not one of");
  expect_one_error(f, "1\na 0.1 0.2 1M mode=um mode=swap\n", 2, "key 'mode' given twice");
  /* Each bad line says so, on its own line. */
  assert_int_equal(load(f, "2\na 0.1 0.2 1M mode=x\nb 0.1 0.2 1M mode=y pin=z\n"), GMT_ECONFIG);
  assert_int_equal(count_lines(f->errors), 3);
  assert_non_null(strstr(f->errors, ":2: mode 'x'"));
  assert_non_null(strstr(f->errors, ":3: mode 'y'"));
  assert_non_null(strstr(f->errors, ":3: pin 'z'"));
}

/* class=: batch (the default) or latency. */
static void test_class_key(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(load(f, "3\na 0.1 0.2 1M class=latency\nb 0.1 0.2 1M\nc 0 0 1 class=batch "
                           "mode=swap\n"),
                   0);
  assert_int_equal(f->cfg->pods[0].klass, GMT__POD_CLASS__CLASS_LATENCY);
  assert_int_equal(f->cfg->pods[1].klass, GMT__POD_CLASS__CLASS_BATCH);
  assert_int_equal(f->cfg->pods[2].klass, GMT__POD_CLASS__CLASS_BATCH);
  assert_int_equal(f->cfg->pods[2].mode, GMT__MEM_MODE__MEM_SWAP);
  assert_string_equal(gmt_pod_class_name(f->cfg->pods[0].klass), "latency");
  assert_string_equal(gmt_pod_class_name(7), "unknown");
  assert_int_equal(gmt_pod_class_parse("Latency"), -EINVAL);
  expect_one_error(f, "1\na 0.1 0.2 1M class=realtime\n", 2,
                   "class 'realtime' is not one of batch, latency");
  expect_one_error(f, "1\na 0.1 0.2 1M class=latency class=batch\n", 2, "key 'class' given twice");
}

/* idle-out=: seconds (a decimal, 0 up to a day) or off; 30 s without it;
 * carried on the wire in ms, off as -1. */
static void test_idle_out_key(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(load(f, "4\na 0 0 1M mode=swap idle-out=0\nb 0 0 1M\nc 0 0 1M idle-out=off\n"
                           "d 0 0 1M idle-out=2.5\n"),
                   0);
  assert_int_equal(f->cfg->pods[0].idle_out_ms, 0);
  assert_int_equal(f->cfg->pods[1].idle_out_ms, GMT_IDLE_OUT_DEFAULT_MS);
  assert_int_equal(f->cfg->pods[1].idle_out_ms, 30000);
  assert_int_equal(f->cfg->pods[2].idle_out_ms, -1);
  assert_int_equal(f->cfg->pods[3].idle_out_ms, 2500);
  Gmt__PodConfig pc;
  gmt_pod_config_wire(&f->cfg->pods[2], &pc);
  assert_int_equal(pc.idle_out_ms, -1);
  expect_one_error(f, "1\na 0 0 1M idle-out=-1\n", 2,
                   "idle-out '-1' is not seconds from 0 to 86400, or off");
  expect_one_error(f, "1\na 0 0 1M idle-out=86401\n", 2,
                   "idle-out '86401' is not seconds from 0 to 86400, or off");
  expect_one_error(f, "1\na 0 0 1M idle-out=30s\n", 2,
                   "idle-out '30s' is not seconds from 0 to 86400, or off");
}

/* devices=: the node's GPUs, ascending, each once; empty or absent: every
 * GPU; in any order with the other keys. */
static void test_devices_key(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(load(f, "4\na 0.1 0.2 1M devices=0,1\nb 0.1 0.2 1M\n"
                           "c 0 0 1 mode=swap devices=1023 pin=use\nd 0 0 1 devices=\n"),
                   0);
  const gmt_pod_config_t *a = &f->cfg->pods[0], *b = &f->cfg->pods[1], *c = &f->cfg->pods[2],
                         *d = &f->cfg->pods[3];
  assert_int_equal(a->ndevices, 2);
  assert_int_equal(a->devices[0], 0);
  assert_int_equal(a->devices[1], 1);
  assert_int_equal(b->ndevices, 0);
  assert_int_equal(c->ndevices, 1);
  assert_int_equal(c->devices[0], 1023);
  assert_int_equal(c->mode, GMT__MEM_MODE__MEM_SWAP);
  assert_int_equal(d->ndevices, 0);

  assert_true(gmt_pod_config_allows(a, 0));
  assert_true(gmt_pod_config_allows(a, 1));
  assert_false(gmt_pod_config_allows(a, 2));
  assert_false(gmt_pod_config_allows(a, -1));
  assert_true(gmt_pod_config_allows(b, 0));
  assert_true(gmt_pod_config_allows(b, 1023));
  assert_true(gmt_pod_config_allows(d, 7));
  assert_false(gmt_pod_config_allows(c, 0));
  assert_true(gmt_pod_config_allows(c, 1023));

  char buf[32];
  assert_string_equal(gmt_pod_config_devices_str(a, buf, sizeof buf), "0,1");
  assert_string_equal(gmt_pod_config_devices_str(b, buf, sizeof buf), "all");
  assert_string_equal(gmt_pod_config_devices_str(c, buf, sizeof buf), "1023");

  /* 64 GPUs is the most: all of them listed, and the text cut short. */
  char text[1024];
  int n = snprintf(text, sizeof text, "1\na 0.1 0.2 1M devices=");
  for (int i = 0; i < GMT_CONFIG_MAX_DEVICES; i++)
    n += snprintf(text + n, sizeof text - (size_t)n, "%s%d", i ? "," : "", i * 10);
  snprintf(text + n, sizeof text - (size_t)n, "\n");
  assert_int_equal(load(f, text), 0);
  assert_int_equal(f->cfg->pods[0].ndevices, GMT_CONFIG_MAX_DEVICES);
  assert_int_equal(f->cfg->pods[0].devices[63], 630);
  assert_true(gmt_pod_config_allows(&f->cfg->pods[0], 630));
  assert_false(gmt_pod_config_allows(&f->cfg->pods[0], 631));
  gmt_pod_config_devices_str(&f->cfg->pods[0], buf, sizeof buf);
  assert_true(strlen(buf) < sizeof buf);
  assert_string_equal(buf + strlen(buf) - 4, ",...");
  assert_memory_equal(buf, "0,10,20,", 8);
  n = (int)strlen(text) - 1;
  snprintf(text + n, sizeof text - (size_t)n, ",640\n");
  expect_one_error(f, text, 2, "lists more than 64 GPUs");

  expect_one_error(f, "1\na 0.1 0.2 1M devices=1,0\n", 2,
                   "devices '1,0': GPU 0 comes after GPU 1 (list them in ascending order)");
  expect_one_error(f, "1\na 0.1 0.2 1M devices=0,2,2\n", 2, "devices '0,2,2' lists GPU 2 twice");
  expect_one_error(f, "1\na 0.1 0.2 1M devices=1024\n", 2,
                   "devices '1024': GPU index too large (at most 1023)");
  expect_one_error(f, "1\na 0.1 0.2 1M devices=99999999999999999999\n", 2,
                   "GPU index too large (at most 1023)");
  expect_one_error(f, "1\na 0.1 0.2 1M devices=0,\n", 2,
                   "devices '0,' is not a list of GPU indices like 0,1 (digits and commas)");
  expect_one_error(f, "1\na 0.1 0.2 1M devices=0,,1\n", 2, "devices '0,,1' is not a list");
  expect_one_error(f, "1\na 0.1 0.2 1M devices=-1\n", 2, "devices '-1' is not a list");
  expect_one_error(f, "1\na 0.1 0.2 1M devices=GPU-0\n", 2, "devices 'GPU-0' is not a list");
  expect_one_error(f, "1\na 0.1 0.2 1M devices=0 1\n", 2, "field '1' after GPU_MEM is not");
  expect_one_error(f, "1\na 0.1 0.2 1M devices=0;1\n", 2, "devices '0;1' is not a list");
  expect_one_error(f, "1\na 0.1 0.2 1M devices=0 devices=1\n", 2, "key 'devices' given twice");
}

static void test_bad_characters_in_name_are_refused(void **state)
{
  fixture_t *f = *state;
  expect_one_error(f, "1\npod/1 0.1 0.2 1M\n", 2, "pod name 'pod/1' has a bad character '/'");
  expect_one_error(f, "1\npod:1 0.1 0.2 1M\n", 2, "bad character ':'");
  expect_one_error(f, "1\np\xc3\xa9 0.1 0.2 1M\n", 2, "bad byte 0xc3");
}

static void test_name_longer_than_62_is_refused(void **state)
{
  fixture_t *f = *state;
  char text[256], name[64];
  memset(name, 'n', 63);
  name[63] = '\0';
  snprintf(text, sizeof text, "1\n%s 0.1 0.2 1M\n", name);
  expect_one_error(f, text, 2, "is 63 characters long (at most 62)");
}

static void test_duplicate_name_is_refused_naming_first_line(void **state)
{
  fixture_t *f = *state;
  expect_one_error(f, "3\na 0.1 0.2 1M\nb 0.1 0.2 1M\na 0.3 0.4 1M\n", 4,
                   "pod 'a' is already listed on line 2");
}

static void test_request_above_limit_is_refused(void **state)
{
  fixture_t *f = *state;
  expect_one_error(f, "1\na 0.8 0.5 1M\n", 2, "request 0.8 is above limit 0.5");
}

static void test_negative_shares_are_refused(void **state)
{
  fixture_t *f = *state;
  expect_one_error(f, "1\na -0.1 0.5 1M\n", 2, "request -0.1 is below 0");
  expect_one_error(f, "1\na 0 -1 1M\n", 2, "limit -1 is below 0");
}

static void test_shares_above_one_are_refused(void **state)
{
  fixture_t *f = *state;
  expect_one_error(f, "1\na 0.5 1.01 1M\n", 2, "limit 1.01 is above 1");
  /* Both are reported, and request > limit is not, being moot. */
  int rc = load(f, "1\na 2 3 1M\n");
  assert_int_equal(rc, GMT_ECONFIG);
  assert_int_equal(count_lines(f->errors), 2);
  assert_non_null(strstr(f->errors, "request 2 is above 1"));
  assert_non_null(strstr(f->errors, "limit 3 is above 1"));
}

static void test_shares_that_are_not_decimal_numbers_are_refused(void **state)
{
  fixture_t *f = *state;
  static const char *const bad[] = {"abc", "0x1", "1e-1", "nan", "inf", ".", "0.5.", "50%"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[128], what[64];
    snprintf(text, sizeof text, "1\na %s 1 1M\n", bad[i]);
    snprintf(what, sizeof what, "request '%s' is not a decimal number", bad[i]);
    expect_one_error(f, text, 2, what);
  }
  expect_one_error(f, "1\na 0 one 1M\n", 2, "limit 'one' is not a decimal number");
}

static void test_bad_memory_suffix_is_refused(void **state)
{
  fixture_t *f = *state;
  expect_one_error(f, "1\na 0.1 0.2 1X\n", 2, "memory '1X' is not a byte count");
  expect_one_error(f, "1\na 0.1 0.2 1GB\n", 2, "memory '1GB' is not a byte count");
  expect_one_error(f, "1\na 0.1 0.2 lots\n", 2, "memory 'lots' is not a byte count");
}

static void test_memory_overflow_is_refused(void **state)
{
  fixture_t *f = *state;
  expect_one_error(f, "1\na 0.1 0.2 16777216T\n", 2, "memory '16777216T' does not fit in 64 bits");
  expect_one_error(f, "1\na 0.1 0.2 18446744073709551616\n", 2, "does not fit in 64 bits");
}

static void test_count_mismatch_is_refused_on_count_line(void **state)
{
  fixture_t *f = *state;
  expect_one_error(f, "\n# header\n3\na 0.1 0.2 1M\nb 0.1 0.2 1M\n", 3,
                   "the first line says 3 pods but 2 are listed");
  expect_one_error(f, "1\na 0.1 0.2 1M\nb 0.1 0.2 1M\n", 1,
                   "the first line says 1 pod but 2 are listed");
  expect_one_error(f, "2\n", 1, "the first line says 2 pods but 0 are listed");
}

static void test_missing_file_says_cannot_open(void **state)
{
  fixture_t *f = *state;
  char path[PATH_MAX + 16], want[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/nope.txt", f->dir);
  int rc = gmt_config_load(path, &f->cfg, &f->errors);
  assert_int_equal(rc, -ENOENT);
  assert_null(f->cfg);
  snprintf(want, sizeof want, "%s: cannot open: No such file or directory\n", path);
  assert_string_equal(f->errors, want);
}

static void test_directory_says_cannot_read(void **state)
{
  fixture_t *f = *state;
  int rc = gmt_config_load(f->dir, &f->cfg, &f->errors);
  assert_int_equal(rc, -EISDIR);
  assert_non_null(strstr(f->errors, ": cannot read: Is a directory"));
}

/* ---- files that are not config files, and huge ones ---- */

static long elapsed_ms(const struct timespec *t0)
{
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

/* A FIFO with no writer blocks a plain open() for ever. */
static void test_fifo_is_refused_at_once(void **state)
{
  fixture_t *f = *state;
  char want[PATH_MAX + 64];
  assert_int_equal(mkfifo(f->path, 0600), 0);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = gmt_config_load(f->path, &f->cfg, &f->errors);
  assert_true(elapsed_ms(&t0) < 1000);
  assert_int_equal(rc, -EINVAL);
  assert_null(f->cfg);
  snprintf(want, sizeof want, "%s: not a regular file (a FIFO)\n", f->path);
  assert_string_equal(f->errors, want);
}

/* /dev/zero never ends: it must be refused, not read. */
static void test_character_device_is_refused(void **state)
{
  fixture_t *f = *state;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = gmt_config_load("/dev/zero", &f->cfg, &f->errors);
  assert_true(elapsed_ms(&t0) < 1000);
  assert_int_equal(rc, -EINVAL);
  assert_string_equal(f->errors, "/dev/zero: not a regular file (a character device)\n");
}

static void test_file_over_16_mib_is_refused(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(truncate(f->path, 0) == 0 || errno == ENOENT, 1);
  FILE *fp = fopen(f->path, "w");
  assert_non_null(fp);
  assert_int_equal(ftruncate(fileno(fp), (off_t)GMT_CONFIG_MAX_BYTES + 1), 0);
  fclose(fp);
  int rc = gmt_config_load(f->path, &f->cfg, &f->errors);
  assert_int_equal(rc, -EFBIG);
  assert_non_null(strstr(f->errors, ": larger than 16 MiB"));
}

/* Text for n pods whose first line says count. */
static char *many_pods(long count, long n, size_t *len)
{
  size_t cap = 32 + (size_t)n * 40;
  char *t = malloc(cap);
  assert_non_null(t);
  size_t k = (size_t)snprintf(t, cap, "%ld\n", count);
  for (long i = 0; i < n; i++)
    k += (size_t)snprintf(t + k, cap - k, "pod-%ld 0.0001 0.5 1M\n", i);
  *len = k;
  return t;
}

/* Checking 100,001 names for duplicates took 13 s: refused at once now. */
static void test_too_many_pods_are_refused_fast(void **state)
{
  (void)state;
  static const long counts[] = {100001, 1};
  for (size_t c = 0; c < 2; c++) {
    size_t len;
    char *text = many_pods(counts[c], 100001, &len);
    gmt_config_t *cfg = NULL;
    char *errors = NULL;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(gmt_config_parse("big", text, len, &cfg, &errors), GMT_ECONFIG);
    assert_true(elapsed_ms(&t0) < 2000);
    assert_null(cfg);
    assert_non_null(errors);
    assert_non_null(strstr(errors, c == 0 ? "100001 pods is too many (at most 4096)"
                                          : "more than 4096 pods listed"));
    free(errors);
    free(text);
  }
}

static void test_most_pods_allowed_are_accepted(void **state)
{
  (void)state;
  size_t len;
  char *text = many_pods(GMT_CONFIG_MAX_PODS, GMT_CONFIG_MAX_PODS, &len);
  gmt_config_t *cfg = NULL;
  assert_int_equal(gmt_config_parse("max", text, len, &cfg, NULL), 0);
  assert_int_equal(cfg->npods, GMT_CONFIG_MAX_PODS);
  gmt_config_free(cfg);
  free(text);
}

/* Overcommitted requests are Gemini-legal: a warning, not an error. */
static void test_requests_above_one_are_accepted(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(load(f, "2\na 0.7 1 1M\nb 0.7 1 1M\n"), 0);
  assert_int_equal(f->cfg->npods, 2);
}

/* ---- how errors are reported ---- */

static void test_every_error_is_reported_with_file_and_line(void **state)
{
  fixture_t *f = *state;
  int rc = load(f, "5\n"                   /* 1: count says 5, 6 listed */
                   "good 0.1 0.2 1M\n"     /* 2 */
                   "bad/name 0.1 0.2 1M\n" /* 3 */
                   "# comment\n"           /* 4 */
                   "c 0.9 0.1 1M\n"        /* 5 */
                   "d 0.1 0.2\n"           /* 6 */
                   "\n"                    /* 7 */
                   "good 0.1 0.2 1M\n"     /* 8 */
                   "e 0.1 0.2 1Q\n");      /* 9 */
  assert_int_equal(rc, GMT_ECONFIG);
  assert_null(f->cfg);
  assert_int_equal(count_lines(f->errors), 6);

  static const struct {
    int line;
    const char *what;
  } want[] = {
      {3, "bad character '/'"}, {5, "request 0.9 is above limit 0.1"},
      {6, "want 4 fields"},     {8, "pod 'good' is already listed on line 2"},
      {9, "memory '1Q'"},       {1, "says 5 pods but 6 are listed"},
  };
  const char *line = f->errors;
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    char prefix[PATH_MAX + 32];
    snprintf(prefix, sizeof prefix, "%s:%d: ", f->path, want[i].line);
    const char *nl = strchr(line, '\n');
    assert_non_null(nl);
    if (strncmp(line, prefix, strlen(prefix)) != 0 ||
        !memmem(line, (size_t)(nl - line), want[i].what, strlen(want[i].what)))
      fail_msg("error %zu: want \"%s...%s\", got \"%.*s\"", i, prefix, want[i].what,
               (int)(nl - line), line);
    line = nl + 1;
  }
}

static void test_many_errors_are_capped_with_a_count(void **state)
{
  fixture_t *f = *state;
  size_t cap = 150 * 32 + 16, len = 0;
  char *text = malloc(cap);
  assert_non_null(text);
  len += (size_t)snprintf(text, cap, "150\n");
  for (int i = 0; i < 150; i++)
    len += (size_t)snprintf(text + len, cap - len, "p%d x 1 1M\n", i);
  int rc = load(f, text);
  free(text);
  assert_int_equal(rc, GMT_ECONFIG);
  assert_int_equal(count_lines(f->errors), 101);
  assert_non_null(strstr(f->errors, "... and 50 more errors\n"));
}

/* The sums behind the overcommit warning and swap pressure: a pod counts on every GPU
 * its devices= allows (all without it), in the strict sum or the moving one. */
static void test_strict_quotas_sum_per_device_without_swap_and_um_pods(void **state)
{
  fixture_t *f = *state;
  assert_int_equal(load(f, "5\na 0.1 0.2 4Gi\nb 0.1 0.2 3Gi devices=1\nc 0.1 0.2 2Gi mode=swap\n"
                           "d 0.1 0.2 1Gi mode=um\ne 0.1 0.2 1Gi mode=strict devices=0,1\n"),
                   0);
  size_t pods[5], n = 99;
  assert_int_equal(gmt_config_quotas_on(f->cfg, 0, false, pods, &n), 5ull << 30);
  assert_int_equal(n, 2);
  assert_string_equal(f->cfg->pods[pods[0]].name, "a");
  assert_string_equal(f->cfg->pods[pods[1]].name, "e");
  assert_int_equal(gmt_config_quotas_on(f->cfg, 1, false, pods, &n), 8ull << 30);
  assert_int_equal(n, 3);
  assert_string_equal(f->cfg->pods[pods[1]].name, "b");
  /* The others: the swap and um pods', on every GPU (what pressure and
   * prepared copies weigh against a card, server/rpc_swap.c). */
  assert_int_equal(gmt_config_quotas_on(f->cfg, 1, true, pods, &n), 3ull << 30);
  assert_int_equal(n, 2);
  assert_string_equal(f->cfg->pods[pods[0]].name, "c");
  /* A GPU only the pods without devices= may use; no list asked. */
  assert_int_equal(gmt_config_quotas_on(f->cfg, 7, false, NULL, NULL), 4ull << 30);
  assert_int_equal(gmt_config_quotas_on(f->cfg, 7, false, NULL, &n), 4ull << 30);
  assert_int_equal(n, 1);
  assert_int_equal(gmt_config_quotas_on(NULL, 0, false, NULL, &n), 0);
  assert_int_equal(n, 0);
  /* Saturates rather than wraps. */
  assert_int_equal(load(f, "2\na 0 0 15000000Ti\nb 0 0 15000000Ti\n"), 0);
  assert_int_equal(gmt_config_quotas_on(f->cfg, 0, false, NULL, NULL), UINT64_MAX);
}

static void test_parse_without_error_buffer_still_refuses(void **state)
{
  (void)state;
  gmt_config_t *cfg = (gmt_config_t *)1;
  static const char text[] = "1\na 2 1 1M\n";
  assert_int_equal(gmt_config_parse("mem", text, sizeof text - 1, &cfg, NULL), GMT_ECONFIG);
  assert_null(cfg);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
      T(test_good_file_gives_values_sorted_by_name),
      T(test_find_returns_pod_by_exact_name),
      T(test_memory_suffixes_are_powers_of_1024_in_any_case),
      T(test_memory_rejects_other_suffixes_and_forms),
      T(test_memory_overflow_is_range_error),
      T(test_shares_accept_bounds_and_equal_request_limit),
      T(test_name_of_62_characters_is_accepted),
      T(test_crlf_line_ends_are_accepted),
      T(test_no_trailing_newline_is_accepted),
      T(test_zero_pods_is_an_empty_config),
      T(test_count_that_is_not_a_number_is_refused),
      T(test_count_with_extra_fields_is_refused),
      T(test_empty_file_has_no_count),
      T(test_wrong_field_count_is_refused),
      T(test_pin_key),
      T(test_mode_key),
      T(test_class_key),
      T(test_idle_out_key),
      T(test_devices_key),
      T(test_strict_quotas_sum_per_device_without_swap_and_um_pods),
      T(test_bad_characters_in_name_are_refused),
      T(test_name_longer_than_62_is_refused),
      T(test_duplicate_name_is_refused_naming_first_line),
      T(test_request_above_limit_is_refused),
      T(test_negative_shares_are_refused),
      T(test_shares_above_one_are_refused),
      T(test_shares_that_are_not_decimal_numbers_are_refused),
      T(test_bad_memory_suffix_is_refused),
      T(test_memory_overflow_is_refused),
      T(test_count_mismatch_is_refused_on_count_line),
      T(test_missing_file_says_cannot_open),
      T(test_directory_says_cannot_read),
      T(test_fifo_is_refused_at_once),
      T(test_character_device_is_refused),
      T(test_file_over_16_mib_is_refused),
      T(test_too_many_pods_are_refused_fast),
      T(test_most_pods_allowed_are_accepted),
      T(test_requests_above_one_are_accepted),
      T(test_every_error_is_reported_with_file_and_line),
      T(test_many_errors_are_capped_with_a_count),
      T(test_parse_without_error_buffer_still_refuses),
#undef T
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
