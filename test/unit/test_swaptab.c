/* hook/swap/swaptab.c: the table of swap allocations. Addresses and contexts
 * are made up; what matters is the totals per place after every move,
 * which allocations a keep target moves out and in what order, and that a
 * target heard twice or above what is on the GPU moves nothing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "swaptab.h"

#define MIB ((uint64_t)1 << 20)
#define A(x) ((void *)(uintptr_t)(x))

/* An allocation of size bytes at addr, its span rounded up to 2 MiB. */
static void add(gmt_swaptab_t *t, uint64_t addr, uint64_t size, void *ctx)
{
  gmt_swap_entry_t e = {.addr = addr,
                        .size = size,
                        .span = (size + 2 * MIB - 1) / (2 * MIB) * (2 * MIB),
                        .handle = addr + 1,
                        .ctx = ctx};
  assert_int_equal(gmt__swaptab_add(t, &e), 0);
}

static void move_out(gmt_swaptab_t *t, uint64_t addr)
{
  gmt_swap_entry_t *e = gmt__swaptab_find(t, addr);
  assert_non_null(e);
  gmt__swaptab_mark_out(t, e, A(addr + 7), 1);
}

static void move_in(gmt_swaptab_t *t, uint64_t addr)
{
  gmt_swap_entry_t *e = gmt__swaptab_find(t, addr);
  assert_non_null(e);
  gmt__swaptab_mark_in(t, e, addr + 9, 0, 0);
}

static void test_swaptab_totals_follow_every_move_and_free(void **state)
{
  (void)state;
  gmt_swaptab_t t;
  gmt__swaptab_init(&t);
  add(&t, 0x1000, 3 * MIB, NULL); /* span 4 MiB */
  add(&t, 0x2000, 2 * MIB, NULL); /* span 2 MiB */
  assert_int_equal(gmt__swaptab_add(&t, &(gmt_swap_entry_t){.addr = 0x1000}), -EEXIST);
  assert_int_equal(t.gpu_bytes, 6 * MIB);
  assert_int_equal(t.out_bytes, 0);

  move_out(&t, 0x1000);
  gmt_swap_entry_t *e = gmt__swaptab_find(&t, 0x1000);
  assert_int_equal(e->out, 1);
  assert_int_equal(e->handle, 0);
  assert_ptr_equal(e->host, A(0x1007));
  assert_int_equal(t.gpu_bytes, 2 * MIB);
  assert_int_equal(t.out_bytes, 4 * MIB);
  assert_int_equal(t.host_bytes, 3 * MIB); /* the host copy holds what was asked for */
  assert_int_equal(t.nout, 1);
  assert_int_equal(t.outs, 1);

  /* Twice out or twice in changes nothing. */
  move_out(&t, 0x1000);
  assert_int_equal(t.outs, 1);
  assert_int_equal(t.gpu_bytes, 2 * MIB);
  move_in(&t, 0x1000);
  move_in(&t, 0x1000);
  assert_int_equal(t.ins, 1);
  assert_int_equal(t.gpu_bytes, 6 * MIB);
  assert_int_equal(t.host_bytes, 0);
  assert_int_equal(t.nout, 0);
  assert_int_equal(gmt__swaptab_find(&t, 0x1000)->handle, 0x1009);

  /* A free of an entry out takes it off the host total. */
  move_out(&t, 0x2000);
  gmt_swap_entry_t gone;
  assert_int_equal(gmt__swaptab_remove(&t, 0x2000, &gone), 0);
  assert_ptr_equal(gone.host, A(0x2007));
  assert_int_equal(t.host_bytes, 0);
  assert_int_equal(t.out_bytes, 0);
  assert_int_equal(t.nout, 0);
  assert_int_equal(t.gpu_bytes, 4 * MIB);
  assert_int_equal(gmt__swaptab_remove(&t, 0x2000, NULL), -ENOENT);
  assert_int_equal(gmt__swaptab_remove(&t, 0x1000, NULL), 0);
  assert_int_equal(t.gpu_bytes, 0);
  assert_int_equal(t.n, 0);
  gmt__swaptab_close(&t);
}

static void test_swaptab_moves_out_least_recently_brought_in_first(void **state)
{
  (void)state;
  gmt_swaptab_t t;
  gmt__swaptab_init(&t);
  add(&t, 0xa, 2 * MIB, NULL);
  add(&t, 0xb, 2 * MIB, NULL);
  add(&t, 0xc, 2 * MIB, NULL);
  /* a goes out and comes back: now the most recent. */
  move_out(&t, 0xa);
  move_in(&t, 0xa);
  uint64_t pick[8];
  assert_int_equal(gmt__swaptab_pick_out(&t, 2 * MIB, pick, 8), 2);
  assert_int_equal(pick[0], 0xb);
  assert_int_equal(pick[1], 0xc);
  /* keep 0: all three, a last. */
  assert_int_equal(gmt__swaptab_pick_out(&t, 0, pick, 8), 3);
  assert_int_equal(pick[2], 0xa);
  /* A keep that is not a multiple of a span leaves at most keep. */
  assert_int_equal(gmt__swaptab_pick_out(&t, 3 * MIB, pick, 8), 2);
  /* cap bounds the answer. */
  assert_int_equal(gmt__swaptab_pick_out(&t, 0, pick, 1), 1);
  assert_int_equal(pick[0], 0xb);
  gmt__swaptab_close(&t);
}

static void test_swaptab_target_twice_or_above_resident_moves_nothing(void **state)
{
  (void)state;
  gmt_swaptab_t t;
  gmt__swaptab_init(&t);
  add(&t, 0xa, 2 * MIB, NULL);
  add(&t, 0xb, 2 * MIB, NULL);
  uint64_t pick[8];
  assert_int_equal(gmt__swaptab_pick_out(&t, 4 * MIB, pick, 8), 0); /* exactly resident */
  assert_int_equal(gmt__swaptab_pick_out(&t, 64 * MIB, pick, 8), 0);
  size_t n = gmt__swaptab_pick_out(&t, 2 * MIB, pick, 8);
  assert_int_equal(n, 1);
  move_out(&t, pick[0]);
  /* The same target again: already met. */
  assert_int_equal(gmt__swaptab_pick_out(&t, 2 * MIB, pick, 8), 0);
  /* Entries out are never picked again. */
  assert_int_equal(gmt__swaptab_pick_out(&t, 0, pick, 8), 1);
  assert_int_equal(pick[0], 0xb);
  gmt__swaptab_close(&t);
}

static void test_swaptab_lists_a_contexts_allocations_only(void **state)
{
  (void)state;
  gmt_swaptab_t t;
  gmt__swaptab_init(&t);
  add(&t, 0xa, MIB, A(0xc1));
  add(&t, 0xb, MIB, A(0xc2));
  add(&t, 0xc, MIB, A(0xc1));
  uint64_t got[8];
  assert_int_equal(gmt__swaptab_of_ctx(&t, A(0xc1), got, 8), 2);
  assert_true((got[0] == 0xa && got[1] == 0xc) || (got[0] == 0xc && got[1] == 0xa));
  assert_int_equal(gmt__swaptab_of_ctx(&t, A(0xc3), got, 8), 0);
  gmt__swaptab_close(&t);
}

static void test_swaptab_lists_what_is_out_per_device(void **state)
{
  (void)state;
  gmt_swaptab_t t;
  gmt__swaptab_init(&t);
  add(&t, 0xa, 3 * MIB, NULL);
  add(&t, 0xb, MIB, NULL);
  gmt_swap_entry_t e1 = {.addr = 0xc, .size = MIB, .span = 2 * MIB, .device = 1};
  assert_int_equal(gmt__swaptab_add(&t, &e1), 0);
  assert_int_equal(gmt__swaptab_out_device(&t), -1);
  uint64_t got[8], bytes = 99;
  assert_int_equal(gmt__swaptab_out_on(&t, 0, got, 8, &bytes), 0);
  assert_int_equal(bytes, 0);
  move_out(&t, 0xc);
  assert_int_equal(gmt__swaptab_out_device(&t), 1);
  move_out(&t, 0xa);
  assert_int_equal(gmt__swaptab_out_on(&t, 0, got, 8, &bytes), 1);
  assert_int_equal(got[0], 0xa);
  assert_int_equal(bytes, 4 * MIB); /* the span: what the GPU must hold again */
  assert_int_equal(gmt__swaptab_out_on(&t, 0, got, 0, &bytes), 0);
  assert_int_equal(bytes, 4 * MIB); /* cap 0 still sums */
  assert_int_equal(gmt__swaptab_out_on(&t, 1, got, 8, &bytes), 1);
  assert_int_equal(got[0], 0xc);
  assert_int_equal(bytes, 2 * MIB);
  /* The smallest span out per device: what a restore asks to get in part. */
  assert_int_equal(gmt__swaptab_out_least(&t, 0), 4 * MIB);
  move_out(&t, 0xb);
  assert_int_equal(gmt__swaptab_out_least(&t, 0), 2 * MIB);
  assert_int_equal(gmt__swaptab_out_least(&t, 1), 2 * MIB);
  assert_int_equal(gmt__swaptab_out_least(&t, 2), 0);
  gmt__swaptab_close(&t);
}

/* A copy in a spill file counts as disk bytes, not host ones, and is
 * never kept after a move in (the caller unmaps it); a removed entry out
 * takes its disk bytes with it. */
static void test_swaptab_a_spill_file_copy_counts_on_disk_and_is_not_kept(void **state)
{
  (void)state;
  gmt_swaptab_t t;
  gmt__swaptab_init(&t);
  add(&t, 0x1000, 3 * MIB, NULL);
  add(&t, 0x9000, 1 * MIB, NULL);
  gmt__swaptab_mark_out(&t, gmt__swaptab_find(&t, 0x1000), A(0x1007), GMT_SWAP_HOST_FILE);
  gmt__swaptab_mark_out(&t, gmt__swaptab_find(&t, 0x9000), A(0x9007), GMT_SWAP_HOST_PINNED);
  assert_int_equal(t.disk_bytes, 3 * MIB);
  assert_int_equal(t.host_bytes, 1 * MIB);
  gmt_swap_entry_t *e = gmt__swaptab_find(&t, 0x1000);
  gmt__swaptab_mark_in(&t, e, 0x1009, 1, 500); /* keep asked: not for a file */
  assert_null(e->kept);
  assert_int_equal(e->host_kind, GMT_SWAP_HOST_MALLOC);
  assert_int_equal(t.disk_bytes, 0);
  assert_int_equal(t.kept_bytes, 0);
  gmt__swaptab_mark_out(&t, e, A(0x1007), GMT_SWAP_HOST_FILE);
  assert_int_equal(gmt__swaptab_remove(&t, 0x1000, NULL), 0);
  assert_int_equal(t.disk_bytes, 0);
  assert_int_equal(t.host_bytes, 1 * MIB);
  gmt__swaptab_close(&t);
}

/* A host copy kept after a move in is counted apart from the copies of
 * entries out, taken back exactly once, and put back by an undone free. */
static void test_swaptab_a_kept_copy_is_counted_once_and_taken_once(void **state)
{
  (void)state;
  gmt_swaptab_t t;
  gmt__swaptab_init(&t);
  add(&t, 0x1000, 3 * MIB, NULL);
  move_out(&t, 0x1000);
  gmt_swap_entry_t *e = gmt__swaptab_find(&t, 0x1000);
  gmt__swaptab_mark_in(&t, e, 0x1009, 1, 500);
  assert_ptr_equal(e->kept, A(0x1007));
  assert_int_equal(e->kept_ms, 500);
  assert_int_equal(e->host_kind, 1); /* how to free it, later */
  assert_null(e->host);
  assert_int_equal(t.host_bytes, 0);
  assert_int_equal(t.kept_bytes, 3 * MIB);

  assert_ptr_equal(gmt__swaptab_take_kept(&t, e), A(0x1007));
  assert_null(gmt__swaptab_take_kept(&t, e));
  assert_int_equal(t.kept_bytes, 0);

  /* Out again into the same copy, in and kept, then removed and added
   * back (a free that failed): kept once, not twice. */
  gmt__swaptab_mark_out(&t, e, A(0x1007), 1);
  gmt__swaptab_mark_in(&t, e, 0x100a, 1, 900);
  gmt_swap_entry_t gone;
  assert_int_equal(gmt__swaptab_remove(&t, 0x1000, &gone), 0);
  assert_int_equal(t.kept_bytes, 0);
  assert_ptr_equal(gone.kept, A(0x1007));
  assert_int_equal(gmt__swaptab_add(&t, &gone), 0);
  assert_int_equal(t.kept_bytes, 3 * MIB);
  assert_ptr_equal(gmt__swaptab_find(&t, 0x1000)->kept, A(0x1007));
  gmt__swaptab_close(&t);
}

/* Prepared copies: the allocations without a copy come in pick_out's
 * order (least recently made or brought back first), managed ones and
 * those out never; a copy is taken only by an entry on the GPU of its
 * size with none, and counted as kept. */
static void test_swaptab_prepared_copies_go_to_entries_on_the_gpu_without_one(void **state)
{
  (void)state;
  gmt_swaptab_t t;
  gmt__swaptab_init(&t);
  add(&t, 0x1000, 3 * MIB, NULL);
  add(&t, 0x2000, 2 * MIB, NULL);
  add(&t, 0x3000, 2 * MIB, NULL);
  gmt__swaptab_find(&t, 0x3000)->managed = 1;
  move_out(&t, 0x1000);
  move_in(&t, 0x1000); /* brought back: now the most recent */
  gmt_swap_entry_t next;
  assert_int_equal(gmt__swaptab_unprepared(&t, &next), 1);
  assert_int_equal(next.addr, 0x2000);

  gmt_swap_entry_t *e = gmt__swaptab_find(&t, 0x2000);
  assert_int_equal(gmt__swaptab_give_kept(&t, e, A(0x2007), 3 * MIB, 1, 40), -EBUSY); /* size */
  assert_int_equal(gmt__swaptab_give_kept(&t, e, A(0x2007), 2 * MIB, 2, 40), -EBUSY); /* a file */
  assert_int_equal(gmt__swaptab_give_kept(&t, e, A(0x2007), 2 * MIB, 1, 40), 0);
  assert_int_equal(gmt__swaptab_give_kept(&t, e, A(0x2008), 2 * MIB, 1, 50), -EBUSY); /* has one */
  assert_ptr_equal(e->kept, A(0x2007));
  assert_int_equal(e->kept_ms, 40);
  assert_int_equal(t.kept_bytes, 2 * MIB);

  assert_int_equal(gmt__swaptab_unprepared(&t, &next), 1);
  assert_int_equal(next.addr, 0x1000);
  e = gmt__swaptab_find(&t, 0x1000);
  move_out(&t, 0x1000);
  assert_int_equal(gmt__swaptab_give_kept(&t, e, A(0x1008), 3 * MIB, 1, 60), -EBUSY); /* out */
  assert_int_equal(gmt__swaptab_unprepared(&t, &next), 0);
  assert_int_equal(
      gmt__swaptab_give_kept(&t, gmt__swaptab_find(&t, 0x3000), A(0x3007), 2 * MIB, 1, 60),
      -EBUSY); /* managed */
  assert_int_equal(t.kept_bytes, 2 * MIB);
  gmt__swaptab_close(&t);
}

/* The program's own exported physical memory stays: counted on the GPU,
 * never picked to move out, never given a prepared copy. */
static void test_swaptab_an_entry_that_stays_is_counted_and_never_picked(void **state)
{
  (void)state;
  gmt_swaptab_t t;
  gmt__swaptab_init(&t);
  gmt_swap_entry_t e = {
      .addr = 0x1000, .size = 4 * MIB, .span = 4 * MIB, .handle = 9, .prog = 1, .stays = 1};
  assert_int_equal(gmt__swaptab_add(&t, &e), 0);
  add(&t, 0x2000, 2 * MIB, A(1));
  assert_int_equal(t.gpu_bytes, 6 * MIB);
  uint64_t addrs[4];
  assert_int_equal(gmt__swaptab_pick_out(&t, 0, addrs, 4), 1);
  assert_int_equal(addrs[0], 0x2000);
  gmt_swap_entry_t got;
  assert_int_equal(gmt__swaptab_unprepared(&t, &got), 1);
  assert_int_equal(got.addr, 0x2000);
  move_out(&t, 0x2000);
  assert_int_equal(gmt__swaptab_pick_out(&t, 0, addrs, 4), 0);
  assert_int_equal(gmt__swaptab_unprepared(&t, &got), 0);
  assert_int_equal(t.gpu_bytes, 4 * MIB);
  assert_true(gmt__swaptab_find(&t, 0x1000)->prog);
  gmt__swaptab_close(&t);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_swaptab_totals_follow_every_move_and_free),
      cmocka_unit_test(test_swaptab_a_kept_copy_is_counted_once_and_taken_once),
      cmocka_unit_test(test_swaptab_prepared_copies_go_to_entries_on_the_gpu_without_one),
      cmocka_unit_test(test_swaptab_a_spill_file_copy_counts_on_disk_and_is_not_kept),
      cmocka_unit_test(test_swaptab_moves_out_least_recently_brought_in_first),
      cmocka_unit_test(test_swaptab_target_twice_or_above_resident_moves_nothing),
      cmocka_unit_test(test_swaptab_lists_a_contexts_allocations_only),
      cmocka_unit_test(test_swaptab_lists_what_is_out_per_device),
      cmocka_unit_test(test_swaptab_an_entry_that_stays_is_counted_and_never_picked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
