/* hook/pin/hostpool.c: the caching pool of pinned blocks. Blocks and contexts
 * here are made-up addresses; what matters is which block a request gets
 * back, that a block is never handed out twice or across flags or
 * contexts, and which blocks go back to the driver and when. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "hostpool.h"

#define A(x) ((void *)(uintptr_t)(x))
#define MIB ((size_t)1 << 20)

static const void *const k_ctx1 = A(0xc1);
static const void *const k_ctx2 = A(0xc2);

static void pool_init(gmt_hostpool_t *pl)
{
  *pl = (gmt_hostpool_t){.idle_ms = 5000, .max_cached_bytes = 64 * MIB};
}

static void test_hostpool_classes_waste_at_most_an_eighth(void **state)
{
  (void)state;
  assert_int_equal(gmt__hostpool_class(MIB - 1), 0); /* small: not pooled */
  assert_int_equal(gmt__hostpool_class(MIB), MIB);
  assert_int_equal(gmt__hostpool_class(MIB + 1), MIB + MIB / 8);
  assert_int_equal(gmt__hostpool_class(64 * MIB), 64 * MIB);
  assert_int_equal(gmt__hostpool_class(100 * MIB), 104 * MIB); /* step 8 MiB in [64, 128) */
  assert_int_equal(gmt__hostpool_class(SIZE_MAX), 0);          /* would overflow */
  for (size_t n = MIB; n < 300 * MIB; n = n * 9 / 7 + 4097) {
    size_t c = gmt__hostpool_class(n);
    assert_true(c >= n);
    assert_true(c - n <= n / 8);
    assert_int_equal(c % 4096, 0);
    assert_int_equal(gmt__hostpool_class(c), c); /* a class is its own class */
  }
}

static void test_hostpool_freed_block_comes_back_for_its_class_flags_and_context(void **state)
{
  (void)state;
  gmt_hostpool_t pl;
  pool_init(&pl);
  size_t cls = gmt__hostpool_class(3 * MIB);
  assert_null(gmt__hostpool_take(&pl, cls, 0, k_ctx1)); /* empty: a miss */
  assert_int_equal(gmt__hostpool_made(&pl, A(0x1000000), cls, 0, k_ctx1), 0);
  gmt_hostpool_block_t b;
  assert_int_equal(gmt__hostpool_give(&pl, A(0x1000000), 100, &b), 1);
  assert_ptr_equal(b.p, A(0x1000000));
  assert_ptr_equal(b.ctx, k_ctx1);
  assert_int_equal(pl.cached_bytes, cls);
  /* Another class, other flags, another context: not this block. */
  assert_null(gmt__hostpool_take(&pl, gmt__hostpool_class(5 * MIB), 0, k_ctx1));
  assert_null(gmt__hostpool_take(&pl, cls, 1 /* PORTABLE */, k_ctx1));
  assert_null(gmt__hostpool_take(&pl, cls, 0, k_ctx2));
  assert_ptr_equal(gmt__hostpool_take(&pl, cls, 0, k_ctx1), A(0x1000000));
  assert_int_equal(pl.cached_bytes, 0);
  /* Live again: never handed out twice. */
  assert_null(gmt__hostpool_take(&pl, cls, 0, k_ctx1));
  assert_int_equal(pl.hits, 1);
  assert_int_equal(pl.misses, 5);
  free(pl.b);
}

static void test_hostpool_give_of_unknown_or_cached_block_is_the_drivers(void **state)
{
  (void)state;
  gmt_hostpool_t pl;
  pool_init(&pl);
  gmt_hostpool_block_t b;
  assert_int_equal(gmt__hostpool_give(&pl, A(0x5000), 1, &b), 0); /* not the pool's */
  assert_int_equal(gmt__hostpool_made(&pl, A(0x1000000), MIB, 0, k_ctx1), 0);
  assert_int_equal(gmt__hostpool_give(&pl, A(0x1000000), 1, &b), 1);
  /* A double free goes to the driver, which says it is wrong. */
  assert_int_equal(gmt__hostpool_give(&pl, A(0x1000000), 2, &b), 0);
  assert_int_equal(pl.cached_bytes, MIB);
  /* A give the caller could not complete is undone. */
  gmt__hostpool_ungive(&pl, A(0x1000000));
  assert_int_equal(pl.cached_bytes, 0);
  assert_null(gmt__hostpool_take(&pl, MIB, 0, k_ctx1));
  free(pl.b);
}

static void test_hostpool_evicts_idle_then_oldest_over_the_cap(void **state)
{
  (void)state;
  gmt_hostpool_t pl;
  pool_init(&pl);
  pl.max_cached_bytes = 40 * MIB;
  gmt_hostpool_block_t b, out[8];
  for (uintptr_t i = 0; i < 3; i++) {
    assert_int_equal(gmt__hostpool_made(&pl, A(0x10000000 * (i + 1)), 16 * MIB, 0, k_ctx1), 0);
    assert_int_equal(gmt__hostpool_give(&pl, A(0x10000000 * (i + 1)), 1000 + i, &b), 1);
  }
  /* 48 MiB cached over a cap of 40: the oldest goes, the rest stay. */
  assert_int_equal(gmt__hostpool_evict(&pl, 1003, 0, out, 8), 1);
  assert_ptr_equal(out[0].p, A(0x10000000));
  assert_int_equal(pl.cached_bytes, 32 * MIB);
  assert_int_equal(gmt__hostpool_evict(&pl, 1003, 0, out, 8), 0);
  /* Idle for idle_ms: it goes, and only the one cached that long. */
  assert_int_equal(gmt__hostpool_evict(&pl, 1001 + 5000, 0, out, 8), 1);
  assert_ptr_equal(out[0].p, A(0x20000000));
  /* all: every cached block, whatever its age; live ones stay. */
  assert_int_equal(gmt__hostpool_made(&pl, A(0x90000000), 16 * MIB, 0, k_ctx1), 0);
  assert_int_equal(gmt__hostpool_evict(&pl, 1003, 1, out, 8), 1);
  assert_ptr_equal(out[0].p, A(0x30000000));
  assert_int_equal(pl.cached_bytes, 0);
  assert_int_equal(pl.n, 1);
  /* A clock that went back never counts as idle. */
  assert_int_equal(gmt__hostpool_give(&pl, A(0x90000000), 9000, &b), 1);
  assert_int_equal(gmt__hostpool_evict(&pl, 10, 0, out, 8), 0);
  /* At most max per call. */
  assert_int_equal(gmt__hostpool_evict(&pl, 10, 1, out, 0), 0);
  free(pl.b);
}

static int gone_ctx2(const gmt_hostpool_block_t *b, void *arg)
{
  int *calls = arg;
  (*calls)++;
  return b->ctx == k_ctx2;
}

static void test_hostpool_forgets_blocks_their_context_took(void **state)
{
  (void)state;
  gmt_hostpool_t pl;
  pool_init(&pl);
  gmt_hostpool_block_t b;
  assert_int_equal(gmt__hostpool_made(&pl, A(0x1000000), MIB, 0, k_ctx1), 0);
  assert_int_equal(gmt__hostpool_made(&pl, A(0x2000000), MIB, 0, k_ctx2), 0);
  assert_int_equal(gmt__hostpool_made(&pl, A(0x3000000), 2 * MIB, 0, k_ctx2), 0);
  assert_int_equal(gmt__hostpool_give(&pl, A(0x3000000), 5, &b), 1);
  int calls = 0;
  assert_int_equal(gmt__hostpool_forget(&pl, gone_ctx2, &calls), 2 * MIB);
  assert_int_equal(calls, 3);
  assert_int_equal(pl.n, 1);
  assert_int_equal(pl.cached_bytes, 0);
  assert_null(gmt__hostpool_take(&pl, 2 * MIB, 0, k_ctx2));
  assert_int_equal(gmt__hostpool_give(&pl, A(0x2000000), 6, &b), 0);
  assert_int_equal(gmt__hostpool_give(&pl, A(0x1000000), 6, &b), 1);
  /* The driver hands an address out again: the stale block is replaced. */
  assert_int_equal(gmt__hostpool_give(&pl, A(0x1000000), 7, &b), 0);
  assert_int_equal(gmt__hostpool_made(&pl, A(0x1000000), 4 * MIB, 1, k_ctx2), 0);
  assert_int_equal(pl.n, 1);
  assert_int_equal(pl.cached_bytes, 0);
  assert_int_equal(gmt__hostpool_give(&pl, A(0x1000000), 8, &b), 1);
  assert_int_equal(b.bytes, 4 * MIB);
  assert_ptr_equal(b.ctx, k_ctx2);
  gmt__hostpool_reset(&pl);
  assert_int_equal(pl.n, 0);
  assert_int_equal(pl.cached_bytes, 0);
  free(pl.b);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hostpool_classes_waste_at_most_an_eighth),
      cmocka_unit_test(test_hostpool_freed_block_comes_back_for_its_class_flags_and_context),
      cmocka_unit_test(test_hostpool_give_of_unknown_or_cached_block_is_the_drivers),
      cmocka_unit_test(test_hostpool_evicts_idle_then_oldest_over_the_cap),
      cmocka_unit_test(test_hostpool_forgets_blocks_their_context_took),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
