/* hook/swap/vmmtab.c: the program's own physical memory in a swap process.
 * Handle values, addresses and locations are made up; what matters is that
 * the value the program holds stays its own while the driver's handle
 * behind it changes, that mappings come and go whole, and that the access
 * a move back replays is the program's, in its order, clipped to each
 * mapping. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "vmmtab.h"

#define MIB ((uint64_t)1 << 20)

static void add(gmt_vmmtab_t *t, uint64_t prog, uint64_t size)
{
  gmt_vmm_handle_t h = {.prog = prog, .real = prog, .key = prog | 1, .size = size, .refs = 1};
  assert_int_equal(gmt__vmmtab_add(t, &h), 0);
}

/* t with handles 0x10 (4 MiB) and 0x20 (2 MiB); where their mappings go. */
static uint64_t two_handles(gmt_vmmtab_t *t)
{
  gmt__vmmtab_init(t);
  add(t, 0x10, 4 * MIB);
  add(t, 0x20, 2 * MIB);
  return 0x7000000000;
}

static void test_vmmtab_a_reused_driver_value_gets_a_value_of_its_own(void **state)
{
  (void)state;
  gmt_vmmtab_t t;
  gmt__vmmtab_init(&t);
  assert_int_equal(gmt__vmmtab_new_value(&t, 0x1000), 0x1000);
  add(&t, 0x1000, 2 * MIB);
  /* Moved out and back: the driver's handle is another now, and the
   * program's value may come back from the driver for a new handle. */
  gmt__vmmtab_find(&t, 0x1000)->real = 0x2000;
  uint64_t v = gmt__vmmtab_new_value(&t, 0x1000);
  assert_true(v != 0x1000 && v != 0);
  gmt_vmm_handle_t h = {.prog = v, .real = 0x1000, .size = 2 * MIB, .refs = 1};
  assert_int_equal(gmt__vmmtab_add(&t, &h), 0);
  uint64_t w = gmt__vmmtab_new_value(&t, 0x1000);
  assert_true(w != v && w != 0x1000);
  /* Each value finds its own handle. */
  assert_int_equal(gmt__vmmtab_find(&t, 0x1000)->real, 0x2000);
  assert_int_equal(gmt__vmmtab_find(&t, v)->real, 0x1000);
  assert_int_equal(gmt__vmmtab_add(&t, &h), -EEXIST);
  assert_ptr_equal(gmt__vmmtab_find_key(&t, 0x1001), gmt__vmmtab_find(&t, 0x1000));
  assert_int_equal(gmt__vmmtab_remove(&t, 0x1000), 0);
  assert_null(gmt__vmmtab_find(&t, 0x1000));
  assert_int_equal(gmt__vmmtab_remove(&t, 0x1000), -ENOENT);
  assert_int_equal(gmt__vmmtab_new_value(&t, 0x1000), 0x1000);
  gmt__vmmtab_close(&t);
}

static void test_vmmtab_mappings_come_and_go_whole(void **state)
{
  (void)state;
  gmt_vmmtab_t t;
  uint64_t va = two_handles(&t);
  /* One handle at two addresses, the first half of it at a third. */
  assert_int_equal(gmt__vmmtab_map(&t, va, 4 * MIB, 0, 0x10), 0);
  assert_int_equal(gmt__vmmtab_map(&t, va + 8 * MIB, 4 * MIB, 0, 0x10), 0);
  assert_int_equal(gmt__vmmtab_map(&t, va + 16 * MIB, 2 * MIB, 2 * MIB, 0x10), 0);
  assert_int_equal(gmt__vmmtab_map(&t, va + 4 * MIB, 2 * MIB, 0, 0x20), 0);
  assert_int_equal(gmt__vmmtab_map(&t, va + 2 * MIB, 2 * MIB, 0, 0x20), -EEXIST);
  assert_int_equal(gmt__vmmtab_map(&t, va + 30 * MIB, 2 * MIB, 0, 0x30), -ENOENT);
  assert_int_equal(gmt__vmmtab_nmaps(&t, 0x10), 3);
  const gmt_vmm_map_t *m = gmt__vmmtab_map_at(&t, va + 17 * MIB);
  assert_non_null(m);
  assert_int_equal(m->va, va + 16 * MIB);
  assert_int_equal(m->offset, 2 * MIB);
  assert_null(gmt__vmmtab_map_at(&t, va + 6 * MIB));
  /* A range that holds part of a mapping leaves it. */
  uint64_t progs[4] = {0};
  assert_int_equal(gmt__vmmtab_unmap(&t, va, 3 * MIB, progs, 4), 0);
  assert_int_equal(gmt__vmmtab_unmap(&t, va, 6 * MIB, progs, 4), 2);
  assert_true((progs[0] == 0x10 && progs[1] == 0x20) || (progs[0] == 0x20 && progs[1] == 0x10));
  assert_int_equal(gmt__vmmtab_nmaps(&t, 0x10), 2);
  assert_int_equal(gmt__vmmtab_nmaps(&t, 0x20), 0);
  /* Mapped again where it was. */
  assert_int_equal(gmt__vmmtab_map(&t, va, 2 * MIB, 0, 0x20), 0);
  assert_int_equal(gmt__vmmtab_unmap(&t, 0, UINT64_MAX, progs, 1), 3);
  assert_int_equal(t.nm, 0);
  gmt__vmmtab_close(&t);
}

static void assert_span(gmt_vmmtab_t *t, uint64_t va, uint64_t len, size_t in, size_t out,
                        size_t partial)
{
  gmt_vmm_span_t sp = gmt__vmmtab_span(t, va, len);
  assert_int_equal(sp.in, in);
  assert_int_equal(sp.out, out);
  assert_int_equal(sp.partial, partial);
}

/* What an unmap may skip the driver for (swapvmm.c): a range wholly of
 * handles that are out. */
static void test_vmmtab_a_span_counts_mappings_on_the_gpu_and_out(void **state)
{
  (void)state;
  gmt_vmmtab_t t;
  uint64_t va = two_handles(&t);
  assert_int_equal(gmt__vmmtab_map(&t, va, 4 * MIB, 0, 0x10), 0);
  assert_int_equal(gmt__vmmtab_map(&t, va + 4 * MIB, 2 * MIB, 0, 0x20), 0);
  assert_int_equal(gmt__vmmtab_map(&t, va + 8 * MIB, 2 * MIB, 0, 0x20), 0);
  gmt__vmmtab_find(&t, 0x20)->real = 0; /* moved out */
  assert_span(&t, va, 4 * MIB, 1, 0, 0);
  assert_span(&t, va + 4 * MIB, 2 * MIB, 0, 1, 0);
  assert_span(&t, va, 10 * MIB, 1, 2, 0);
  assert_span(&t, va + 5 * MIB, 4 * MIB, 0, 2, 2);
  assert_span(&t, va + 2 * MIB, 3 * MIB, 1, 1, 2);
  assert_span(&t, va + 6 * MIB, 2 * MIB, 0, 0, 0);
  gmt__vmmtab_close(&t);
}

static void test_vmmtab_access_is_clipped_ordered_and_superseded(void **state)
{
  (void)state;
  gmt_vmmtab_t t;
  gmt__vmmtab_init(&t);
  add(&t, 0x10, 4 * MIB);
  add(&t, 0x20, 4 * MIB);
  uint64_t va = 0x7000000000;
  assert_int_equal(gmt__vmmtab_map(&t, va, 4 * MIB, 0, 0x10), 0);
  assert_int_equal(gmt__vmmtab_map(&t, va + 4 * MIB, 4 * MIB, 0, 0x20), 0);
  /* Across the seam of two mappings: half of each. */
  gmt_vmm_access_t rw0 = {.loc_type = 1, .loc_id = 0, .flags = 3};
  gmt_vmm_access_t r1 = {.loc_type = 1, .loc_id = 1, .flags = 1};
  assert_int_equal(gmt__vmmtab_access(&t, va + 2 * MIB, 4 * MIB, &rw0, 1), 2);
  const gmt_vmm_map_t *a = gmt__vmmtab_map_at(&t, va), *b = gmt__vmmtab_map_at(&t, va + 4 * MIB);
  assert_int_equal(a->nacc, 1);
  assert_int_equal(a->acc[0].off, 2 * MIB);
  assert_int_equal(a->acc[0].len, 2 * MIB);
  assert_int_equal(b->acc[0].off, 0);
  assert_int_equal(b->acc[0].len, 2 * MIB);
  /* Two devices at once over all of the first: kept in order; the whole
   * mapping for device 0 replaces its part before. */
  gmt_vmm_access_t both[2] = {rw0, r1};
  assert_int_equal(gmt__vmmtab_access(&t, va, 4 * MIB, both, 2), 1);
  a = gmt__vmmtab_map_at(&t, va);
  assert_int_equal(a->nacc, 2);
  assert_int_equal(a->acc[0].loc_id, 0);
  assert_int_equal(a->acc[0].len, 4 * MIB);
  assert_int_equal(a->acc[1].loc_id, 1);
  assert_int_equal(a->acc[1].flags, 1);
  /* Device 1 taken away again: its last word is what stays. */
  gmt_vmm_access_t none1 = {.loc_type = 1, .loc_id = 1, .flags = 0};
  assert_int_equal(gmt__vmmtab_access(&t, va, 4 * MIB, &none1, 1), 1);
  a = gmt__vmmtab_map_at(&t, va);
  assert_int_equal(a->nacc, 2);
  assert_int_equal(a->acc[1].flags, 0);
  /* Nowhere mapped: nothing touched. */
  assert_int_equal(gmt__vmmtab_access(&t, va + 64 * MIB, 2 * MIB, &rw0, 1), 0);
  gmt__vmmtab_close(&t);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vmmtab_a_reused_driver_value_gets_a_value_of_its_own),
      cmocka_unit_test(test_vmmtab_mappings_come_and_go_whole),
      cmocka_unit_test(test_vmmtab_a_span_counts_mappings_on_the_gpu_and_out),
      cmocka_unit_test(test_vmmtab_access_is_clipped_ordered_and_superseded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
