/* gmt_probe_site(): probes go on an instruction the kernel emulates, past
 * an endbr64 and never further (a return probe needs [rsp] untouched). The
 * byte patterns are those of libcuda 580 and of gcc with and without CET. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "prologue.h"

#define SITE(...)                                                                                  \
  ({                                                                                               \
    static const uint8_t c_[] = {__VA_ARGS__};                                                     \
    gmt_probe_site(c_, sizeof c_);                                                                 \
  })

static void libcuda_push_rbp_is_fast_in_place(void **state)
{
  (void)state;
  /* push %rbp; mov %rsp,%rbp; push %r12 */
  gmt_probe_site_t s = SITE(0x55, 0x48, 0x89, 0xe5, 0x41, 0x54);
  assert_int_equal(s.skip, 0);
  assert_true(s.fast);
}

static void endbr64_is_skipped(void **state)
{
  (void)state;
  gmt_probe_site_t s = SITE(0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5);
  assert_int_equal(s.skip, 4);
  assert_true(s.fast);
  /* endbr64 then push %r15 */
  s = SITE(0xf3, 0x0f, 0x1e, 0xfa, 0x41, 0x57);
  assert_int_equal(s.skip, 4);
  assert_true(s.fast);
}

static void other_first_instructions_are_slow_and_not_skipped(void **state)
{
  (void)state;
  /* sub $0x10,%rsp: probing past it would move [rsp] */
  gmt_probe_site_t s = SITE(0x48, 0x83, 0xec, 0x10, 0x55);
  assert_int_equal(s.skip, 0);
  assert_false(s.fast);
  /* endbr64; lea 0x10a49(%rip),%rax */
  s = SITE(0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x8d, 0x05, 0x49, 0x0a, 0x01, 0x00);
  assert_int_equal(s.skip, 4);
  assert_false(s.fast);
  /* 0x41 not followed by a push: mov %esi,%r8d-like (41 89 f0) */
  s = SITE(0x41, 0x89, 0xf0);
  assert_false(s.fast);
  /* a 4-byte nop is not the 5-byte one the kernel handles */
  s = SITE(0x0f, 0x1f, 0x40, 0x00, 0xc3);
  assert_false(s.fast);
}

static void branches_and_nops_are_fast(void **state)
{
  (void)state;
  assert_true(SITE(0xe9, 0x10, 0x00, 0x00, 0x00).fast); /* jmp rel32 (a thunk) */
  assert_true(SITE(0xeb, 0x02).fast);                   /* jmp rel8 */
  assert_true(SITE(0xe8, 0x00, 0x00, 0x00, 0x00).fast); /* call rel32 */
  assert_true(SITE(0x90, 0xc3).fast);
  assert_true(SITE(0x0f, 0x1f, 0x44, 0x00, 0x00).fast);
}

static void short_reads_are_slow(void **state)
{
  (void)state;
  gmt_probe_site_t s = gmt_probe_site(NULL, 0);
  assert_int_equal(s.skip, 0);
  assert_false(s.fast);
  /* endbr64 and nothing after it (the file ended) */
  s = SITE(0xf3, 0x0f, 0x1e, 0xfa);
  assert_int_equal(s.skip, 4);
  assert_false(s.fast);
  s = SITE(0x41); /* half a push %r8 */
  assert_false(s.fast);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(libcuda_push_rbp_is_fast_in_place),
      cmocka_unit_test(endbr64_is_skipped),
      cmocka_unit_test(other_first_instructions_are_slow_and_not_skipped),
      cmocka_unit_test(branches_and_nops_are_fast),
      cmocka_unit_test(short_reads_are_slow),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
