/* What a process's report may count (server/reports.c): its pins on
 * advice are the ledger's, its own pins count up to its room, its host
 * copies and spill files up to what it reserved; a lie lowers nothing
 * but itself, and an honest report stands. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "reports.h"

#define MIB (1024ull * 1024ull)

static void test_report_honest_numbers_stand(void **state)
{
  (void)state;
  /* 50 MiB on advice, 2 own of which 1 cached; copies within 300. */
  gmt_report_counts_t c = {.pinned_bytes = 52 * MIB,
                           .pinned_advised = 50 * MIB,
                           .pinned_cached = MIB,
                           .swap_host = 200 * MIB,
                           .swap_kept = 50 * MIB,
                           .swap_disk = 50 * MIB};
  gmt_report_grants_t g = {.reserved = 300 * MIB, .advised = 50 * MIB, .own_room = 32 * MIB};
  assert_int_equal(gmt_report_bound(&c, &g), 0);
  assert_int_equal(c.pinned_bytes, 52 * MIB);
  assert_int_equal(c.pinned_advised, 50 * MIB);
  assert_int_equal(c.pinned_cached, MIB);
  assert_int_equal(gmt_report_own_pins(&c), 2 * MIB);
  assert_int_equal(c.swap_host, 200 * MIB);
  assert_int_equal(c.swap_kept, 50 * MIB);
  assert_int_equal(c.swap_disk, 50 * MIB);
}

/* The lie: 2^64-1 pinned bytes count as the room, no more. */
static void test_report_every_byte_pinned_counts_only_its_room(void **state)
{
  (void)state;
  gmt_report_counts_t c = {.pinned_bytes = UINT64_MAX, .pinned_cached = UINT64_MAX};
  gmt_report_grants_t g = {.own_room = 32 * MIB};
  assert_int_equal(gmt_report_bound(&c, &g), GMT_REPORT_PINNED);
  assert_int_equal(c.pinned_bytes, 32 * MIB);
  assert_int_equal(c.pinned_advised, 0);
  assert_int_equal(c.pinned_cached, 32 * MIB);
  /* With grants on advice too: those plus the room. */
  c = (gmt_report_counts_t){.pinned_bytes = UINT64_MAX, .pinned_advised = 8 * MIB};
  g.advised = 16 * MIB;
  assert_int_equal(gmt_report_bound(&c, &g), GMT_REPORT_PINNED);
  assert_int_equal(c.pinned_bytes, 48 * MIB);
  assert_int_equal(gmt_report_own_pins(&c), 32 * MIB);
  /* No room: its own pins count nothing. */
  c = (gmt_report_counts_t){.pinned_bytes = MIB};
  g = (gmt_report_grants_t){0};
  assert_int_equal(gmt_report_bound(&c, &g), GMT_REPORT_PINNED);
  assert_int_equal(c.pinned_bytes, 0);
}

/* What it says gmt pinned for it is the ledger's, whatever it says:
 * claiming more only lowers its own pins; a report that lags a grant or
 * a release is no lie. */
static void test_report_pins_on_advice_are_the_ledgers(void **state)
{
  (void)state;
  gmt_report_counts_t c = {.pinned_bytes = UINT64_MAX, .pinned_advised = UINT64_MAX};
  gmt_report_grants_t g = {.advised = 0, .own_room = 32 * MIB};
  assert_int_equal(gmt_report_bound(&c, &g), 0);
  assert_int_equal(c.pinned_advised, 0);
  assert_int_equal(c.pinned_bytes, 0);
  /* Reported 50 on advice and 2 own; the ledger has 46 since a release. */
  c = (gmt_report_counts_t){.pinned_bytes = 52 * MIB, .pinned_advised = 50 * MIB};
  g.advised = 46 * MIB;
  assert_int_equal(gmt_report_bound(&c, &g), 0);
  assert_int_equal(c.pinned_bytes, 48 * MIB);
  assert_int_equal(c.pinned_advised, 46 * MIB);
  /* The ledger's grants past 2^64 with its own pins saturate. */
  c = (gmt_report_counts_t){.pinned_bytes = MIB};
  g.advised = UINT64_MAX;
  assert_int_equal(gmt_report_bound(&c, &g), 0);
  assert_true(c.pinned_bytes == UINT64_MAX);
}

/* The other lie: 2^62 bytes in host memory from a process that
 * reserved nothing counts nothing; one that reserved 300 MiB counts its
 * copies up to 300, host first, then kept, then disk. */
static void test_report_copies_count_at_most_what_it_reserved(void **state)
{
  (void)state;
  gmt_report_counts_t c = {.swap_host = 1ull << 62, .swap_kept = 1ull << 62, .swap_disk = 1};
  gmt_report_grants_t g = {0};
  assert_int_equal(gmt_report_bound(&c, &g), GMT_REPORT_SWAP);
  assert_int_equal(c.swap_host, 0);
  assert_int_equal(c.swap_kept, 0);
  assert_int_equal(c.swap_disk, 0);
  c = (gmt_report_counts_t){.swap_host = 200 * MIB, .swap_kept = UINT64_MAX, .swap_disk = 50 * MIB};
  g.reserved = 300 * MIB;
  assert_int_equal(gmt_report_bound(&c, &g), GMT_REPORT_SWAP);
  assert_int_equal(c.swap_host, 200 * MIB);
  assert_int_equal(c.swap_kept, 100 * MIB);
  assert_int_equal(c.swap_disk, 0);
  /* Exactly what it reserved stands. */
  c = (gmt_report_counts_t){.swap_host = 100 * MIB, .swap_kept = 100 * MIB, .swap_disk = 100 * MIB};
  assert_int_equal(gmt_report_bound(&c, &g), 0);
  assert_int_equal(c.swap_disk, 100 * MIB);
  c.swap_disk++;
  assert_int_equal(gmt_report_bound(&c, &g), GMT_REPORT_SWAP);
  assert_int_equal(c.swap_disk, 100 * MIB);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_report_honest_numbers_stand),
      cmocka_unit_test(test_report_every_byte_pinned_counts_only_its_room),
      cmocka_unit_test(test_report_pins_on_advice_are_the_ledgers),
      cmocka_unit_test(test_report_copies_count_at_most_what_it_reserved),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
