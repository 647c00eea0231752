/* hook/base/hookmap.c: the map that turns an address the real driver handed
 * out (through dlsym or cuGetProcAddress) into the hook's wrapper of the
 * symbol at that address. Addresses here are made up; what matters is that
 * each real address finds its own wrapper, so that old and new versions of
 * one function (different signatures) never get each other's wrapper. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "hookmap.h"

#define A(x) ((void *)(uintptr_t)(x))

/* A driver's entry points sit 16 bytes apart or so; wrappers elsewhere. */
static const struct {
  const char *name;
  uintptr_t real, wrapper;
} k_syms[] = {
    {"cuGetProcAddress", 0x7f1200001000, 0x7f3400000100},
    {"cuGetProcAddress_v2", 0x7f1200001010, 0x7f3400000200},
    {"cuMemAlloc", 0x7f1200002000, 0x7f3400000300},
    {"cuMemAlloc_v2", 0x7f1200002010, 0x7f3400000400},
    {"cuLaunchKernel", 0x7f1200003000, 0x7f3400000500},
    {"cuLaunchKernel_ptsz", 0x7f1200003010, 0x7f3400000600},
};
#define NSYMS (sizeof(k_syms) / sizeof(k_syms[0]))

static int setup_syms(void **state)
{
  gmt_hookmap_t *m = calloc(1, sizeof(*m));
  assert_non_null(m);
  assert_int_equal(gmt__hookmap_init(m, NSYMS), 0);
  for (size_t i = 0; i < NSYMS; i++)
    assert_int_equal(gmt__hookmap_add(m, A(k_syms[i].real), A(k_syms[i].wrapper)), 0);
  *state = m;
  return 0;
}

static int teardown_map(void **state)
{
  gmt_hookmap_t *m = *state;
  gmt__hookmap_close(m);
  free(m);
  return 0;
}

static void test_hookmap_gives_each_version_its_own_wrapper(void **state)
{
  gmt_hookmap_t *m = *state;
  assert_int_equal(m->count, NSYMS);
  for (size_t i = 0; i < NSYMS; i++) {
    assert_ptr_equal(gmt__hookmap_find(m, A(k_syms[i].real)), A(k_syms[i].wrapper));
    assert_ptr_equal(gmt__hookmap_swap(m, A(k_syms[i].real)), A(k_syms[i].wrapper));
  }
  /* The 4-argument and 5-argument cuGetProcAddress, and cuMemAlloc with
   * a 32-bit and a 64-bit size, must not be confused. */
  assert_ptr_not_equal(gmt__hookmap_swap(m, A(0x7f1200001000)),
                       gmt__hookmap_swap(m, A(0x7f1200001010)));
  assert_ptr_equal(gmt__hookmap_swap(m, A(0x7f1200001000)), A(0x7f3400000100));
  assert_ptr_equal(gmt__hookmap_swap(m, A(0x7f1200001010)), A(0x7f3400000200));
  assert_ptr_equal(gmt__hookmap_swap(m, A(0x7f1200002000)), A(0x7f3400000300));
  assert_ptr_equal(gmt__hookmap_swap(m, A(0x7f1200002010)), A(0x7f3400000400));
}

static void test_hookmap_passes_unknown_addresses_through(void **state)
{
  gmt_hookmap_t *m = *state;
  /* An entry point we do not wrap, one byte off a wrapped one, and a
   * wrapper itself (what dlsym(RTLD_DEFAULT) finds first) stay as they are. */
  const uintptr_t unknown[] = {0x7f1200004000, 0x7f1200001001, 0x7f1200001008, 0x7f3400000100, 0x1};
  for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
    assert_null(gmt__hookmap_find(m, A(unknown[i])));
    assert_ptr_equal(gmt__hookmap_swap(m, A(unknown[i])), A(unknown[i]));
  }
  assert_null(gmt__hookmap_find(m, NULL));
  assert_null(gmt__hookmap_swap(m, NULL));
}

static void test_hookmap_skips_symbols_the_driver_lacks(void **state)
{
  gmt_hookmap_t *m = *state;
  size_t before = m->count;
  assert_int_equal(gmt__hookmap_add(m, NULL, A(0x7f3400000700)), 0);
  assert_int_equal(m->count, before);
  assert_null(gmt__hookmap_find(m, NULL));
}

static void test_hookmap_keeps_first_wrapper_of_an_aliased_address(void **state)
{
  gmt_hookmap_t *m = *state;
  assert_int_equal(gmt__hookmap_add(m, A(0x7f1200002010), A(0x7f3400000999)), -EEXIST);
  assert_ptr_equal(gmt__hookmap_find(m, A(0x7f1200002010)), A(0x7f3400000400));
}

static void test_hookmap_holds_many_entries_and_refuses_past_its_size(void **state)
{
  (void)state;
  enum { N = 5000 };
  gmt_hookmap_t m;
  assert_int_equal(gmt__hookmap_init(&m, N), 0);
  for (uintptr_t i = 0; i < N; i++)
    assert_int_equal(gmt__hookmap_add(&m, A(0x7f0000000000 + 16 * i), A(0x5500000000 + 8 * i)), 0);
  assert_int_equal(m.count, N);
  for (uintptr_t i = 0; i < N; i++) {
    assert_ptr_equal(gmt__hookmap_find(&m, A(0x7f0000000000 + 16 * i)), A(0x5500000000 + 8 * i));
    /* Between two entry points, and past the last one: unknown. */
    assert_null(gmt__hookmap_find(&m, A(0x7f0000000000 + 16 * i + 8)));
  }
  assert_null(gmt__hookmap_find(&m, A(0x7f0000000000 + 16 * N)));
  /* Sized for N (at most half full): a full map says so, never loops. */
  int rc = 0;
  for (uintptr_t i = N; rc == 0 && i < 100 * N; i++)
    rc = gmt__hookmap_add(&m, A(0x7f0000000000 + 16 * i), A(0x1000));
  assert_int_equal(rc, -ENOSPC);
  assert_true(2 * m.count <= m.mask + 1);
  assert_ptr_equal(gmt__hookmap_find(&m, A(0x7f0000000000)), A(0x5500000000));
  gmt__hookmap_close(&m);
  assert_null(gmt__hookmap_find(&m, A(0x7f0000000000)));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_hookmap_gives_each_version_its_own_wrapper, setup_syms,
                                      teardown_map),
      cmocka_unit_test_setup_teardown(test_hookmap_passes_unknown_addresses_through, setup_syms,
                                      teardown_map),
      cmocka_unit_test_setup_teardown(test_hookmap_skips_symbols_the_driver_lacks, setup_syms,
                                      teardown_map),
      cmocka_unit_test_setup_teardown(test_hookmap_keeps_first_wrapper_of_an_aliased_address,
                                      setup_syms, teardown_map),
      cmocka_unit_test(test_hookmap_holds_many_entries_and_refuses_past_its_size),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
