/* A pod's config as both daemons hold it (proto/gmt_podconfig.h): an
 * owned copy, the GPUs it allows, and the one diff both daemons log. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmt_podconfig.h"
#include "gmt_wire.h"

static int32_t one[] = {1}, both[] = {0, 1};

static Gmt__PodConfig config(void)
{
  Gmt__PodConfig c = GMT__POD_CONFIG__INIT;
  c.name = "a";
  c.request = 0.5;
  c.limit = 1.0;
  c.memory_limit = 1ull << 30;
  c.mode = GMT__MEM_MODE__MEM_SWAP;
  c.n_devices = 1;
  c.devices = one;
  return c;
}

static void test_copy_owns_its_name_and_devices(void **state)
{
  (void)state;
  char name[] = "pod-a";
  int32_t devs[] = {2, 5};
  Gmt__PodConfig src = config(), held = GMT__POD_CONFIG__INIT;
  src.name = name;
  src.devices = devs;
  src.n_devices = 2;
  assert_int_equal(gmt_podcfg_copy(&held, &src), 0);
  name[0] = 'X';
  devs[0] = 9;
  assert_string_equal(held.name, "pod-a");
  assert_int_equal(held.n_devices, 2);
  assert_int_equal(held.devices[0], 2);
  assert_int_equal(held.devices[1], 5);
  assert_true(held.request == 0.5);
  assert_int_equal(held.memory_limit, 1ull << 30);
  assert_int_equal(held.mode, GMT__MEM_MODE__MEM_SWAP);

  /* Copied over: the old name and list are freed (ASan would tell). */
  Gmt__PodConfig next = config();
  next.n_devices = 0;
  next.devices = NULL;
  next.name = NULL;
  assert_int_equal(gmt_podcfg_copy(&held, &next), 0);
  assert_null(held.name);
  assert_null(held.devices);
  assert_int_equal(held.n_devices, 0);
  gmt_podcfg_clear(&held);
  assert_ptr_equal(held.base.descriptor, &gmt__pod_config__descriptor);
  assert_true(held.request == 0);
  gmt_podcfg_clear(&held); /* an initialised one too: its name is not ours */
}

static void test_a_pod_without_devices_may_use_every_gpu(void **state)
{
  (void)state;
  int32_t d[] = {1, 3};
  assert_true(gmt_podcfg_devices_allow(NULL, 0, 7));
  assert_true(gmt_podcfg_devices_allow(d, 2, 1));
  assert_true(gmt_podcfg_devices_allow(d, 2, 3));
  assert_false(gmt_podcfg_devices_allow(d, 2, 2));
  assert_false(gmt_podcfg_devices_allow(d, 2, 0));
}

static void test_devices_read_as_the_config_writes_them(void **state)
{
  (void)state;
  char buf[96];
  int32_t d[64];
  assert_string_equal(gmt_podcfg_devices_str(NULL, 0, buf, sizeof buf), "all");
  assert_string_equal(gmt_podcfg_devices_str(both, 2, buf, sizeof buf), "0,1");
  for (int i = 0; i < 64; i++)
    d[i] = 100 + i;
  gmt_podcfg_devices_str(d, 64, buf, sizeof buf);
  assert_true(strlen(buf) < sizeof buf);
  assert_string_equal(buf + strlen(buf) - 4, ",...");
  assert_memory_equal(buf, "100,101,", 8);
}

static void test_diff_of_the_same_config_is_empty(void **state)
{
  (void)state;
  Gmt__PodConfig a = config(), b = config();
  char what[256] = "x";
  b.name = "renamed"; /* the pod's name is who it is, not a share */
  assert_int_equal(gmt_podcfg_diff(&a, &b, what, sizeof what), 0);
  assert_string_equal(what, "");
}

/* The line gmt-schd logged before the two daemons shared it. */
static void test_diff_says_each_change_in_order(void **state)
{
  (void)state;
  Gmt__PodConfig a = config(), b = config();
  char what[512];
  b.request = 0.25;
  b.limit = 0.9;
  b.memory_limit = 2ull << 30;
  b.pin = GMT__PIN_MODE__PIN_ADAPTIVE;
  b.mode = GMT__MEM_MODE__MEM_UM;
  b.n_devices = 2;
  b.devices = both;
  assert_int_equal(gmt_podcfg_diff(&a, &b, what, sizeof what), 6);
  assert_string_equal(what, "request 0.5 -> 0.25, limit 1 -> 0.9, memory 1073741824 -> "
                            "2147483648, pin off -> adaptive, mode swap -> um, devices 1 -> 0,1");
  b = config();
  b.n_devices = 0;
  assert_int_equal(gmt_podcfg_diff(&a, &b, what, sizeof what), 1);
  assert_string_equal(what, "devices 1 -> all");
  /* Cut to the buffer, still counted. */
  b.request = 0.75;
  assert_int_equal(gmt_podcfg_diff(&a, &b, what, 10), 2);
  assert_string_equal(what, "request 0");
}

/* Enums by the names resource-config.txt and gmt status use. */
static void test_diff_names_modes_as_the_config_does(void **state)
{
  (void)state;
  Gmt__PodConfig a = config(), b = config();
  char what[128], want[128];
  a.pin = GMT__PIN_MODE__PIN_OFF;
  for (int v = 1; v <= GMT__PIN_MODE__PIN_ADAPTIVE; v++) {
    b.pin = (Gmt__PinMode)v;
    assert_int_equal(gmt_podcfg_diff(&a, &b, what, sizeof what), 1);
    snprintf(want, sizeof want, "pin off -> %s", gmt_pin_mode_name(v));
    assert_string_equal(what, want);
  }
  b = config();
  a.mode = GMT__MEM_MODE__MEM_STRICT;
  for (int v = 1; v <= GMT__MEM_MODE__MEM_UM; v++) {
    b.mode = (Gmt__MemMode)v;
    assert_int_equal(gmt_podcfg_diff(&a, &b, what, sizeof what), 1);
    snprintf(want, sizeof want, "mode strict -> %s", gmt_mem_mode_name(v));
    assert_string_equal(what, want);
  }
}

/* Every field but the name, changed alone, is said under its own name: a
 * key added to PodConfig is logged with no change to podconfig.c (and a
 * kind of field it cannot say fails here). */
static void test_diff_says_every_field_of_the_message(void **state)
{
  (void)state;
  const ProtobufCMessageDescriptor *d = &gmt__pod_config__descriptor;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (!strcmp(f->name, "name"))
      continue;
    Gmt__PodConfig a = config(), b = config();
    char *at = (char *)&b + f->offset;
    if (f->label == PROTOBUF_C_LABEL_REPEATED)
      *(size_t *)((char *)&b + f->quantifier_offset) = 0;
    else if (f->type == PROTOBUF_C_TYPE_DOUBLE)
      *(double *)at += 0.125;
    else if (f->type == PROTOBUF_C_TYPE_UINT64)
      *(uint64_t *)at += 1;
    else
      *(int32_t *)at ^= 1;
    char what[256];
    assert_int_equal(gmt_podcfg_diff(&a, &b, what, sizeof what), 1);
    const char *label = strcmp(f->name, "memory_limit") ? f->name : "memory";
    assert_memory_equal(what, label, strlen(label));
    assert_non_null(strstr(what, " -> "));
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_copy_owns_its_name_and_devices),
      cmocka_unit_test(test_a_pod_without_devices_may_use_every_gpu),
      cmocka_unit_test(test_devices_read_as_the_config_writes_them),
      cmocka_unit_test(test_diff_of_the_same_config_is_empty),
      cmocka_unit_test(test_diff_says_each_change_in_order),
      cmocka_unit_test(test_diff_names_modes_as_the_config_does),
      cmocka_unit_test(test_diff_says_every_field_of_the_message),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
