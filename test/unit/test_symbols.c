/* ELF files read in two steps (bpf/symbols.c): the segments at once, the
 * symbol table now or later. A symbolizer reads large tables on a thread
 * of its own so that gmt-schd's loop does not wait for them; until then a
 * file's offsets map to addresses, and no function is named. The file
 * read here is this test's own program. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "symbols.h"

/* A function of ours to look for. */
__attribute__((noinline, used)) int gmt_test_marker_fn(int x)
{
  return x * 3 + 1;
}

/* The marker's address in the file (ELF virtual address), from a full read. */
static uint64_t marker_vaddr(void)
{
  gmt_elf_t *full = NULL;
  assert_int_equal(gmt_elf_open("/proc/self/exe", &full), 0);
  uint64_t off = 0, va = 0;
  assert_int_equal(gmt_elf_func_offset(full, "gmt_test_marker_fn", &off), 0);
  assert_int_equal(gmt_elf_off_to_vaddr(full, off, &va), 0);
  gmt_elf_close(full);
  return va;
}

static void test_a_small_file_is_read_whole_at_once(void **state)
{
  (void)state;
  gmt_elf_t *e = NULL;
  int fd = 0;
  assert_int_equal(gmt_elf_open_some("/proc/self/exe", UINT64_MAX, &e, &fd), 0);
  assert_int_equal(fd, -1);
  char name[128];
  assert_true(gmt_elf_symbolize(e, marker_vaddr() + 2, name, sizeof name));
  assert_string_equal(name, "gmt_test_marker_fn+0x2");
  gmt_elf_close(e);
}

static void test_a_large_file_names_functions_once_its_symbols_are_read(void **state)
{
  (void)state;
  uint64_t va = marker_vaddr();
  gmt_elf_t *full = NULL, *e = NULL;
  assert_int_equal(gmt_elf_open("/proc/self/exe", &full), 0);
  int fd = -1;
  /* Larger than 0 bytes: the symbols are left for later. */
  assert_int_equal(gmt_elf_open_some("/proc/self/exe", 0, &e, &fd), 0);
  assert_true(fd >= 0);
  char name[128];
  assert_false(gmt_elf_symbolize(e, va, name, sizeof name));
  uint64_t off = 0;
  assert_int_equal(gmt_elf_func_offset(e, "gmt_test_marker_fn", &off), -EAGAIN);
  /* The segments are there already: call sites keep module + address. */
  assert_int_equal(gmt_elf_func_offset(full, "gmt_test_marker_fn", &off), 0);
  uint64_t now = 0;
  assert_int_equal(gmt_elf_off_to_vaddr(e, off, &now), 0);
  assert_int_equal(now, va);

  gmt_elf_load_symbols(e, fd);
  assert_true(gmt_elf_symbolize(e, va, name, sizeof name));
  assert_string_equal(name, "gmt_test_marker_fn+0x0");
  gmt_elf_close(e);
  gmt_elf_close(full);
}

static void test_an_unreadable_table_names_nothing_and_is_not_read_again(void **state)
{
  (void)state;
  gmt_elf_t *e = NULL;
  int fd = -1;
  assert_int_equal(gmt_elf_open_some("/proc/self/exe", 0, &e, &fd), 0);
  /* A descriptor that is not the ELF file: the read fails, once. */
  int pipefd[2];
  assert_int_equal(pipe(pipefd), 0);
  close(pipefd[1]);
  gmt_elf_load_symbols(e, pipefd[0]);
  char name[128];
  assert_false(gmt_elf_symbolize(e, marker_vaddr(), name, sizeof name));
  uint64_t off;
  assert_int_equal(gmt_elf_func_offset(e, "gmt_test_marker_fn", &off), -ENOENT);
  close(fd);
  gmt_elf_close(e);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_small_file_is_read_whole_at_once),
      cmocka_unit_test(test_a_large_file_names_functions_once_its_symbols_are_read),
      cmocka_unit_test(test_an_unreadable_table_names_nothing_and_is_not_read_again),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
