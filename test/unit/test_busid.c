/* PCI bus ids (proto/util/gmt_busid.h): CUDA's, NVML's and the short spelling of
 * one device compare equal; anything else, trailing junk included, is
 * refused and leaves the output alone. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gmt_busid.h"

static gmt_busid_t parsed(const char *s)
{
  gmt_busid_t b;
  assert_int_equal(gmt_busid_parse(s, &b), 0);
  return b;
}

static void assert_refused(const char *s)
{
  gmt_busid_t b = {0xdead, 0xbe, 0xef, 0x42};
  if (gmt_busid_parse(s, &b) != -EINVAL)
    fail_msg("'%s' was not refused", s);
  assert_int_equal(b.domain, 0xdead);
  assert_int_equal(b.bus, 0xbe);
  assert_int_equal(b.device, 0xef);
  assert_int_equal(b.function, 0x42);
}

static void test_busid_cuda_and_nvml_spellings_are_equal(void **state)
{
  (void)state;
  gmt_busid_t cuda = parsed("0000:17:00.0");     /* cuDeviceGetPCIBusId, busIdLegacy */
  gmt_busid_t nvml = parsed("00000000:17:00.0"); /* NVML's busId */
  assert_true(gmt_busid_equal(&cuda, &nvml));
  assert_int_equal(cuda.domain, 0);
  assert_int_equal(cuda.bus, 0x17);
  assert_int_equal(cuda.device, 0);
  assert_int_equal(cuda.function, 0);
}

static void test_busid_case_of_hex_digits_does_not_matter(void **state)
{
  (void)state;
  gmt_busid_t upper = parsed("0000:AB:1F.7");
  gmt_busid_t lower = parsed("0000:ab:1f.7");
  assert_true(gmt_busid_equal(&upper, &lower));
  assert_int_equal(upper.bus, 0xab);
  assert_int_equal(upper.device, 0x1f);
  assert_int_equal(upper.function, 7);
}

static void test_busid_short_form_is_domain_zero(void **state)
{
  (void)state;
  gmt_busid_t s = parsed("17:00.0");
  gmt_busid_t full = parsed("0000:17:00.0");
  assert_true(gmt_busid_equal(&s, &full));
  gmt_busid_t one = parsed("3:1.2");
  assert_int_equal(one.domain, 0);
  assert_int_equal(one.bus, 3);
  assert_int_equal(one.device, 1);
  assert_int_equal(one.function, 2);
}

static void test_busid_other_devices_are_not_equal(void **state)
{
  (void)state;
  gmt_busid_t a = parsed("0000:17:00.0");
  const char *others[] = {"0000:18:00.0", "0001:17:00.0", "0000:17:01.0", "0000:17:00.1"};
  for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
    gmt_busid_t b = parsed(others[i]);
    if (gmt_busid_equal(&a, &b))
      fail_msg("%s equals 0000:17:00.0", others[i]);
  }
}

static void test_busid_takes_the_largest_of_each_field(void **state)
{
  (void)state;
  gmt_busid_t b = parsed("ffffffff:ff:1f.7");
  assert_int_equal(b.domain, 0xffffffffu);
  assert_int_equal(b.bus, 0xff);
  assert_int_equal(b.device, 0x1f);
  assert_int_equal(b.function, 7);
  /* VMD's domains are past 16 bits; a domain of 5 digits is a domain. */
  assert_int_equal(parsed("10000:e1:00.0").domain, 0x10000);
}

static void test_busid_refuses_trailing_junk(void **state)
{
  (void)state;
  assert_refused("0000:17:00.0x");
  assert_refused("0000:17:00.0 ");
  assert_refused("0000:17:00.0\n");
  assert_refused("0000:17:00.0.0");
  assert_refused("0000:17:00.0:0");
  assert_refused("0000:17:00.00");
  assert_refused("17:00.0,");
}

static void test_busid_refuses_empty_and_null(void **state)
{
  (void)state;
  assert_refused("");
  assert_refused(NULL);
  assert_int_equal(gmt_busid_parse("0000:17:00.0", NULL), -EINVAL);
}

static void test_busid_refuses_what_is_not_a_bus_id(void **state)
{
  (void)state;
  const char *bad[] = {
      " 0000:17:00.0", /* white space */
      "0x0:17:00.0",   /* a C prefix */
      "+0:17:00.0",    /* a sign */
      "-1:17:00.0",
      "0000:17:00",   /* no function */
      "0000:17.00.0", /* '.' for ':' */
      "0000::00.0",   /* an empty field */
      ":17:00.0",
      "0000:17:.0",
      "0000:17:00.",
      "000000000:17:00.0", /* a domain of 9 digits */
      "0000:117:00.0",     /* a bus of 3 digits */
      "117:00.0",
      "0000:17:000.0",   /* a device of 3 digits */
      "0000:17:20.0",    /* device past 0x1f */
      "0000:17:00.8",    /* function past 7 */
      "0000:17:0g.0",    /* not hex */
      "0000:17:00:00.0", /* four fields */
      "17",
      "gpu0",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    assert_refused(bad[i]);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_busid_cuda_and_nvml_spellings_are_equal),
      cmocka_unit_test(test_busid_case_of_hex_digits_does_not_matter),
      cmocka_unit_test(test_busid_short_form_is_domain_zero),
      cmocka_unit_test(test_busid_other_devices_are_not_equal),
      cmocka_unit_test(test_busid_takes_the_largest_of_each_field),
      cmocka_unit_test(test_busid_refuses_trailing_junk),
      cmocka_unit_test(test_busid_refuses_empty_and_null),
      cmocka_unit_test(test_busid_refuses_what_is_not_a_bus_id),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
