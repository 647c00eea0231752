/* A process's counters as one value (proto/gmt_counters.h): held by value
 * without what a newer sender added, read as zeros when absent, told
 * apart and added up on every field, a new one included. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmt_counters.h"

static void test_every_counter_is_a_scalar(void **state)
{
  (void)state;
  const ProtobufCMessageDescriptor *d = &gmt__process_counters__descriptor;
  assert_true(d->n_fields >= 16);
  for (unsigned i = 0; i < d->n_fields; i++) {
    assert_int_equal(d->fields[i].label, PROTOBUF_C_LABEL_NONE);
    assert_true(d->fields[i].type != PROTOBUF_C_TYPE_STRING &&
                d->fields[i].type != PROTOBUF_C_TYPE_BYTES &&
                d->fields[i].type != PROTOBUF_C_TYPE_MESSAGE);
  }
}

static void test_copy_of_nothing_is_zeros_that_pack(void **state)
{
  (void)state;
  Gmt__ProcessCounters c;
  memset(&c, 0xab, sizeof c);
  gmt_counters_copy(&c, NULL);
  assert_ptr_equal(c.base.descriptor, &gmt__process_counters__descriptor);
  assert_int_equal(c.launches, 0);
  assert_int_equal(c.swap_kept, 0);
  assert_int_equal(protobuf_c_message_get_packed_size(&c.base), 0);
  assert_int_equal(gmt_counters_of(NULL)->memory_used, 0);
  assert_ptr_equal(gmt_counters_of(&c), &c);
}

/* A sender newer than this build adds field 99: the copy keeps the
 * counters it knows and nothing that points into the sender's message. */
static void test_copy_keeps_the_counters_and_drops_unknown_fields(void **state)
{
  (void)state;
  Gmt__ProcessCounters sent = GMT__PROCESS_COUNTERS__INIT;
  sent.memory_used = 3ull << 40;
  sent.swap_device = -1;
  sent.swap_kept = 7;
  uint8_t buf[128];
  size_t n = protobuf_c_message_pack(&sent.base, buf);
  /* Field 99, a varint: a key of two bytes, then the value. */
  buf[n++] = (uint8_t)(((99 << 3) & 0x7f) | 0x80);
  buf[n++] = (uint8_t)((99 << 3) >> 7);
  buf[n++] = 42;
  Gmt__ProcessCounters *got = gmt__process_counters__unpack(NULL, n, buf);
  assert_non_null(got);
  assert_int_equal(got->base.n_unknown_fields, 1);

  Gmt__ProcessCounters held;
  gmt_counters_copy(&held, got);
  gmt__process_counters__free_unpacked(got, NULL);
  assert_int_equal(held.base.n_unknown_fields, 0);
  assert_null(held.base.unknown_fields);
  assert_int_equal(held.memory_used, 3ull << 40);
  assert_int_equal(held.swap_device, -1);
  assert_int_equal(held.swap_kept, 7);
  assert_true(gmt_counters_same(&held, &sent));
  /* It packs as what was sent, without the unknown field. */
  uint8_t again[128];
  assert_int_equal(protobuf_c_message_pack(&held.base, again), n - 3);
  assert_memory_equal(again, buf, n - 3);
}

/* Each field in turn, through the descriptor: a counter added to
 * gmt.proto is compared without a change here or in counters.c. */
static void test_same_tells_apart_a_change_in_any_counter(void **state)
{
  (void)state;
  const ProtobufCMessageDescriptor *d = &gmt__process_counters__descriptor;
  Gmt__ProcessCounters a = GMT__PROCESS_COUNTERS__INIT;
  a.launches = 5;
  a.swap_device = 2;
  for (unsigned i = 0; i < d->n_fields; i++) {
    Gmt__ProcessCounters b;
    gmt_counters_copy(&b, &a);
    assert_true(gmt_counters_same(&a, &b));
    char *f = (char *)&b + d->fields[i].offset;
    f[0] ^= 0x10; /* the low byte: every scalar has one */
    assert_false(gmt_counters_same(&a, &b));
    assert_false(gmt_counters_same(&b, &a));
  }
}

/* A pod's totals: every byte and count adds up, a new uint64 counter
 * too; the sum stops at UINT64_MAX; swap_device is no sum. */
static void test_add_sums_every_uint64_counter_and_saturates(void **state)
{
  (void)state;
  const ProtobufCMessageDescriptor *d = &gmt__process_counters__descriptor;
  Gmt__ProcessCounters sum = GMT__PROCESS_COUNTERS__INIT, one = GMT__PROCESS_COUNTERS__INIT;
  sum.swap_device = 3;
  one.swap_device = 5;
  for (unsigned i = 0; i < d->n_fields; i++)
    if (d->fields[i].type == PROTOBUF_C_TYPE_UINT64)
      *(uint64_t *)((char *)&one + d->fields[i].offset) = 1000 + i;
  gmt_counters_add(&sum, &one);
  gmt_counters_add(&sum, &one);
  unsigned sums = 0;
  for (unsigned i = 0; i < d->n_fields; i++)
    if (d->fields[i].type == PROTOBUF_C_TYPE_UINT64) {
      assert_int_equal(*(uint64_t *)((char *)&sum + d->fields[i].offset), 2 * (1000 + i));
      sums++;
    }
  assert_int_equal(sums, d->n_fields - 1); /* all but swap_device */
  assert_int_equal(sum.swap_device, 3);

  one.pinned_bytes = UINT64_MAX - 1;
  gmt_counters_add(&sum, &one);
  assert_true(sum.pinned_bytes == UINT64_MAX);
  assert_int_equal(sum.memory_used, 3 * one.memory_used);
}

/* A report as a hook built before ProcessCounters packed it (the
 * counters as ProcessReport's fields 3..19), bytes written out by hand:
 * pid 7, exe "x", memory_used 300 (3), launches 5 (4), an event (5) that
 * is no counter, pinned_bytes 1 (9), swap_device -1 (18, zigzag),
 * swap_kept 2 (19). */
static void test_report_from_an_older_hook_reads(void **state)
{
  (void)state;
  static const uint8_t old[] = {0x08, 7,    0x12, 1,    'x', 0x18, 0xac, 0x02, 0x20, 5,    0x2a,
                                0x02, 0x08, 0x01, 0x48, 1,   0x90, 0x01, 0x01, 0x98, 0x01, 2};
  Gmt__ProcessReport *r = gmt__process_report__unpack(NULL, sizeof old, old);
  assert_non_null(r);
  assert_null(r->counters);
  assert_int_equal(r->n_events, 1);
  Gmt__ProcessCounters c;
  gmt_report_counters(r, &c);
  assert_int_equal(c.memory_used, 300);
  assert_int_equal(c.launches, 5);
  assert_int_equal(c.pinned_bytes, 1);
  assert_int_equal(c.swap_device, -1);
  assert_int_equal(c.swap_kept, 2);
  assert_int_equal(c.allocs, 0);
  assert_int_equal(c.base.n_unknown_fields, 0);
  gmt__process_report__free_unpacked(r, NULL);

  /* A report of this build: its counters message, as it is. */
  Gmt__ProcessCounters sent = GMT__PROCESS_COUNTERS__INIT;
  sent.memory_used = 42;
  sent.swap_device = 2;
  Gmt__ProcessReport now = GMT__PROCESS_REPORT__INIT;
  now.pid = 7;
  now.counters = &sent;
  gmt_report_counters(&now, &c);
  assert_true(gmt_counters_same(&c, &sent));
  now.counters = NULL;
  gmt_report_counters(&now, &c);
  assert_int_equal(c.memory_used, 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_counter_is_a_scalar),
      cmocka_unit_test(test_copy_of_nothing_is_zeros_that_pack),
      cmocka_unit_test(test_copy_keeps_the_counters_and_drops_unknown_fields),
      cmocka_unit_test(test_same_tells_apart_a_change_in_any_counter),
      cmocka_unit_test(test_add_sums_every_uint64_counter_and_saturates),
      cmocka_unit_test(test_report_from_an_older_hook_reads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
