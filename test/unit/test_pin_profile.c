/* Pin profiles (server/pin_profile.c): histories recorded under an
 * executable are classified from all of its rows, looked up by their exact
 * site, learned again when new histories come, and kept across a restart
 * (a new store on the same folder). */
#include <limits.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pin_profile.h"
#include "store.h"

#define MIB (1ull << 20)
#define EXE "/opt/train/bin/python3"
#define LIB "/usr/lib/libtorch_cpu.so"

typedef struct {
  char dir[64];
  gmt_store_t *st;
  gmt_pin_profiles_t *p;
} fixture_t;

static void open_all(fixture_t *f)
{
  char err[256] = "";
  if (gmt_store_open(&f->st, f->dir, err, sizeof err) < 0)
    fail_msg("open: %s", err);
  assert_int_equal(gmt_pin_profiles_new(&f->p, f->st), 0);
}

static void close_all(fixture_t *f)
{
  gmt_pin_profiles_free(f->p);
  gmt_store_close(f->st);
  f->p = NULL;
  f->st = NULL;
}

static int setup(void **state)
{
  fixture_t *f = calloc(1, sizeof *f);
  if (!f)
    return -1;
  strcpy(f->dir, "/tmp/gmt-test-pinprof-XXXXXX");
  if (!mkdtemp(f->dir)) {
    free(f);
    return -1;
  }
  open_all(f);
  *state = f;
  return 0;
}

static int teardown(void **state)
{
  fixture_t *f = *state;
  char cmd[PATH_MAX];
  close_all(f);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
  if (system(cmd) != 0)
    fprintf(stderr, "cannot remove %s\n", f->dir);
  free(f);
  return 0;
}

/* One buffer of 4 MiB at offset off, copied h2d and d2h times each way. */
static gmt_store_profile_row_t hist(uint64_t off, uint32_t nth, uint64_t h2d, uint64_t d2h)
{
  return (gmt_store_profile_row_t){.module = LIB,
                                   .offset = off,
                                   .nth = nth,
                                   .size_class = 22,
                                   .size = 4 * MIB,
                                   .h2d_copies = h2d,
                                   .d2h_copies = d2h,
                                   .h2d_bytes = h2d * 4 * MIB,
                                   .d2h_bytes = d2h * 4 * MIB,
                                   .lifetime_ms = 1000};
}

/* Issue 11's run: two buffers (offset 0x100, nth 0 and 1) copied 175 times
 * each way, 25 (offset 0x200, nth 0..24) once each way. */
static void record_issue_run(fixture_t *f, const char *exe)
{
  gmt_store_profile_row_t h[27];
  size_t added = 0;
  h[0] = hist(0x100, 0, 175, 175);
  h[1] = hist(0x100, 1, 175, 175);
  for (uint32_t i = 0; i < 25; i++)
    h[2 + i] = hist(0x200, i, 1, 1);
  assert_int_equal(gmt_pin_profiles_add(f->p, exe, h, 27, 1000, &added), 0);
  assert_int_equal(added, 27);
}

static gmt_pin_site_t site(fixture_t *f, const char *exe, uint64_t off, uint32_t nth)
{
  return gmt_pin_profiles_site(f->p, exe, LIB, off, nth, 22);
}

static void test_hot_cold_and_unknown_sites_of_a_recorded_run(void **state)
{
  fixture_t *f = *state;
  record_issue_run(f, EXE);
  assert_int_equal(site(f, EXE, 0x100, 0), GMT_PIN_SITE_HOT);
  assert_int_equal(site(f, EXE, 0x100, 1), GMT_PIN_SITE_HOT);
  for (uint32_t i = 0; i < 25; i++)
    assert_int_equal(site(f, EXE, 0x200, i), GMT_PIN_SITE_COLD);
  /* Only the exact key: another nth, size class, module or exe is unknown. */
  assert_int_equal(site(f, EXE, 0x100, 2), GMT_PIN_SITE_UNKNOWN);
  assert_int_equal(gmt_pin_profiles_site(f->p, EXE, LIB, 0x100, 0, 23), GMT_PIN_SITE_UNKNOWN);
  assert_int_equal(gmt_pin_profiles_site(f->p, EXE, "/lib/other.so", 0x100, 0, 22),
                   GMT_PIN_SITE_UNKNOWN);
  assert_int_equal(site(f, "/bin/else", 0x100, 0), GMT_PIN_SITE_UNKNOWN);
  assert_int_equal(site(f, "", 0x100, 0), GMT_PIN_SITE_UNKNOWN);
}

/* A whole site's answer, as the hook keeps it: its hot nths, and whether
 * the profile knows it at all (in that size class). */
static void test_a_site_as_a_whole(void **state)
{
  fixture_t *f = *state;
  record_issue_run(f, EXE);
  uint32_t nths[8];
  bool known = false;
  size_t n = gmt_pin_profiles_site_hot(f->p, EXE, LIB, 0x100, 22, nths, 8, &known);
  assert_true(known);
  assert_int_equal(n, 2);
  assert_int_equal(nths[0], 0);
  assert_int_equal(nths[1], 1);
  n = gmt_pin_profiles_site_hot(f->p, EXE, LIB, 0x200, 22, nths, 8, &known);
  assert_true(known);
  assert_int_equal(n, 0);
  n = gmt_pin_profiles_site_hot(f->p, EXE, LIB, 0x100, 1, nths, 1, &known); /* a cap of 1 */
  assert_int_equal(n, 0);
  assert_false(known); /* no buffer of that size class there */
  n = gmt_pin_profiles_site_hot(f->p, EXE, LIB, 0x100, 22, nths, 1, &known);
  assert_int_equal(n, 1);
  n = gmt_pin_profiles_site_hot(f->p, EXE, LIB, 0x300, 22, nths, 8, &known);
  assert_int_equal(n, 0);
  assert_false(known);
  n = gmt_pin_profiles_site_hot(f->p, "/bin/else", LIB, 0x100, 22, nths, 8, &known);
  assert_false(known);
}

static void test_new_histories_are_learned_from_at_once(void **state)
{
  fixture_t *f = *state;
  record_issue_run(f, EXE);
  assert_int_equal(site(f, EXE, 0x200, 7), GMT_PIN_SITE_COLD); /* now cached */
  /* Another run in which buffer 7 worked as hard as the hot ones. */
  gmt_store_profile_row_t h = hist(0x200, 7, 1000, 1000);
  assert_int_equal(gmt_pin_profiles_add(f->p, EXE, &h, 1, 2000, NULL), 0);
  assert_int_equal(site(f, EXE, 0x200, 7), GMT_PIN_SITE_HOT);
  assert_int_equal(site(f, EXE, 0x200, 8), GMT_PIN_SITE_COLD);
}

static void test_profiles_outlive_a_restart(void **state)
{
  fixture_t *f = *state;
  record_issue_run(f, EXE);
  close_all(f);
  open_all(f);
  assert_int_equal(site(f, EXE, 0x100, 1), GMT_PIN_SITE_HOT);
  assert_int_equal(site(f, EXE, 0x200, 3), GMT_PIN_SITE_COLD);
}

/* More executables than the cache holds: each is read again when asked. */
static void test_every_exe_answers_past_the_cache_bound(void **state)
{
  fixture_t *f = *state;
  char exe[GMT_PIN_PROFILE_CACHE + 4][32];
  for (int i = 0; i < GMT_PIN_PROFILE_CACHE + 4; i++) {
    snprintf(exe[i], sizeof exe[i], "/bin/job%d", i);
    record_issue_run(f, exe[i]);
  }
  for (int round = 0; round < 2; round++)
    for (int i = 0; i < GMT_PIN_PROFILE_CACHE + 4; i++) {
      assert_int_equal(site(f, exe[i], 0x100, 0), GMT_PIN_SITE_HOT);
      assert_int_equal(site(f, exe[i], 0x200, 0), GMT_PIN_SITE_COLD);
    }
}

static void test_without_a_store_every_site_is_unknown(void **state)
{
  (void)state;
  gmt_pin_profiles_t *p;
  assert_int_equal(gmt_pin_profiles_new(&p, NULL), 0);
  gmt_store_profile_row_t h = hist(0x100, 0, 175, 175);
  assert_int_equal(gmt_pin_profiles_add(p, EXE, &h, 1, 1, NULL), 0);
  assert_int_equal(gmt_pin_profiles_site(p, EXE, LIB, 0x100, 0, 22), GMT_PIN_SITE_UNKNOWN);
  gmt_pin_profiles_free(p);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
      T(test_hot_cold_and_unknown_sites_of_a_recorded_run),
      T(test_a_site_as_a_whole),
      T(test_new_histories_are_learned_from_at_once),
      T(test_profiles_outlive_a_restart),
      T(test_every_exe_answers_past_the_cache_bound),
      cmocka_unit_test(test_without_a_store_every_site_is_unknown),
#undef T
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
