/* gmt top's cells (client/cli/top_glyphs.c): text cut and padded to a
 * column with only printable ASCII, the bars' glyphs and colours for a
 * share against its REQUEST and memory against its quota, the sparkline
 * in blocks or ASCII, and when colour and UTF-8 are used. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "top_glyphs.h"

#define MIB (1ull << 20)

/* The colours of c as one letter each: . none, g good, w warn, b bad, d dim. */
static const char *colours(const gmt_top_cells_t *c)
{
  static char buf[GMT_TOP_CELLS_MAX + 1];
  static const char letter[] = ".gwbd";
  for (int i = 0; i < c->n; i++)
    buf[i] = letter[c->color[i]];
  buf[c->n] = '\0';
  return buf;
}

static void test_top_text_is_padded_cut_and_made_printable(void **state)
{
  (void)state;
  gmt_top_cells_t c;
  gmt_top_cells_text(&c, "train", 8, false, GMT_TOP_C_NONE);
  assert_string_equal(c.text, "train   ");
  assert_int_equal(c.n, 8);
  gmt_top_cells_text(&c, "42", 5, true, GMT_TOP_C_BAD);
  assert_string_equal(c.text, "   42");
  assert_string_equal(colours(&c), "bbbbb");
  /* Longer than the column: cut, the last cell saying so. */
  gmt_top_cells_text(&c, "a-very-long-pod-name", 8, false, GMT_TOP_C_NONE);
  assert_string_equal(c.text, "a-very-~");
  /* Exactly the width: whole. */
  gmt_top_cells_text(&c, "exactly8", 8, false, GMT_TOP_C_NONE);
  assert_string_equal(c.text, "exactly8");
  /* A terminal escape or UTF-8 from a process never reaches the screen. */
  gmt_top_cells_text(&c, "ev\x1b[2J\xc3\xa9", 10, false, GMT_TOP_C_NONE);
  assert_string_equal(c.text, "ev?[2J??  ");
  gmt_top_cells_text(&c, NULL, 3, false, GMT_TOP_C_NONE);
  assert_string_equal(c.text, "   ");
  gmt_top_cells_text(&c, "x", 0, false, GMT_TOP_C_NONE);
  assert_string_equal(c.text, "");
  assert_int_equal(c.n, 0);
}

/* A share bar is the whole GPU: '|' used within REQUEST, '+' borrowed
 * above it, '.' its request left unused. */
static void test_top_share_bar_shows_use_against_request(void **state)
{
  (void)state;
  gmt_top_cells_t c;
  gmt_top_share_bar(&c, 12, 0.2, 0.5); /* 10 inner cells */
  assert_string_equal(c.text, "[||...     ]");
  assert_string_equal(colours(&c), ".ggddd......");
  gmt_top_share_bar(&c, 12, 0.8, 0.3);
  assert_string_equal(c.text, "[|||+++++  ]");
  assert_string_equal(colours(&c), ".gggwwwww...");
  gmt_top_share_bar(&c, 12, 1.0, 1.0);
  assert_string_equal(c.text, "[||||||||||]");
  /* Running at all shows, however little. */
  gmt_top_share_bar(&c, 12, 0.001, 0.3);
  assert_string_equal(c.text, "[|..       ]");
  /* Idle: only its request, unused. */
  gmt_top_share_bar(&c, 12, 0, 0.3);
  assert_string_equal(c.text, "[...       ]");
  /* A share past the whole GPU (a window's rounding) stays in the bar. */
  gmt_top_share_bar(&c, 12, 1.3, 0.3);
  assert_string_equal(c.text, "[|||+++++++]");
  /* Too narrow for brackets: blank, never garbage. */
  gmt_top_share_bar(&c, 2, 0.5, 0.5);
  assert_string_equal(c.text, "  ");
  assert_int_equal(c.n, 2);
}

static void test_top_memory_bar_fills_its_quota_and_warns_near_it(void **state)
{
  (void)state;
  gmt_top_cells_t c;
  gmt_top_memory_bar(&c, 12, 512 * MIB, 2048 * MIB);
  assert_string_equal(c.text, "[|||.......]");
  assert_string_equal(colours(&c), ".gggddddddd.");
  gmt_top_memory_bar(&c, 12, 1600 * MIB, 2000 * MIB); /* 80% */
  assert_string_equal(c.text, "[||||||||..]");
  assert_string_equal(colours(&c), ".wwwwwwwwdd.");
  gmt_top_memory_bar(&c, 12, 1900 * MIB, 2000 * MIB); /* 95% */
  assert_string_equal(c.text, "[||||||||||]");
  assert_string_equal(colours(&c), ".bbbbbbbbbb.");
  /* No quota: nothing to fill. */
  gmt_top_memory_bar(&c, 12, 512 * MIB, 0);
  assert_string_equal(c.text, "[          ]");
  /* The thresholds, exactly. */
  assert_int_equal(gmt_top_memory_color(74, 100), GMT_TOP_C_GOOD);
  assert_int_equal(gmt_top_memory_color(75, 100), GMT_TOP_C_WARN);
  assert_int_equal(gmt_top_memory_color(89, 100), GMT_TOP_C_WARN);
  assert_int_equal(gmt_top_memory_color(90, 100), GMT_TOP_C_BAD);
  assert_int_equal(gmt_top_memory_color(1, 0), GMT_TOP_C_GOOD);
}

static void test_top_spark_is_newest_on_the_right(void **state)
{
  (void)state;
  gmt_top_cells_t c;
  const double v[] = {0, 0.25, 0.5, 0.75, 1.0};
  gmt_top_spark(&c, 8, v, 5, 1.0, false);
  assert_string_equal(c.text, "   _-+*#");
  assert_int_equal(c.n, 8);
  /* UTF-8: one block per cell, from the lowest to the full one. */
  gmt_top_spark(&c, 5, v, 5, 1.0, true);
  assert_string_equal(c.text, "\xe2\x96\x81\xe2\x96\x83\xe2\x96\x85\xe2\x96\x86\xe2\x96\x88");
  assert_int_equal(c.n, 5);
  /* Narrower than the history: its newest values. */
  gmt_top_spark(&c, 2, v, 5, 1.0, false);
  assert_string_equal(c.text, "*#");
  /* Past full and below 0 are clamped; nothing yet is blank. */
  const double odd[] = {2.0, -1.0};
  gmt_top_spark(&c, 3, odd, 2, 1.0, false);
  assert_string_equal(c.text, " #_");
  gmt_top_spark(&c, 3, NULL, 0, 1.0, true);
  assert_string_equal(c.text, "   ");
}

static void test_top_colour_only_on_a_terminal_that_wants_it(void **state)
{
  (void)state;
  assert_true(gmt_top_use_color(true, "xterm-256color", NULL));
  assert_true(gmt_top_use_color(true, "screen", ""));    /* empty: unset (no-color.org) */
  assert_false(gmt_top_use_color(false, "xterm", NULL)); /* a pipe or a file */
  assert_false(gmt_top_use_color(true, "dumb", NULL));
  assert_false(gmt_top_use_color(true, NULL, NULL));
  assert_false(gmt_top_use_color(true, "", NULL));
  assert_false(gmt_top_use_color(true, "xterm", "1"));
  assert_true(gmt_top_use_utf8("UTF-8"));
  assert_true(gmt_top_use_utf8("utf8"));
  assert_false(gmt_top_use_utf8("ANSI_X3.4-1968")); /* the C locale */
  assert_false(gmt_top_use_utf8(NULL));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_top_text_is_padded_cut_and_made_printable),
      cmocka_unit_test(test_top_share_bar_shows_use_against_request),
      cmocka_unit_test(test_top_memory_bar_fills_its_quota_and_warns_near_it),
      cmocka_unit_test(test_top_spark_is_newest_on_the_right),
      cmocka_unit_test(test_top_colour_only_on_a_terminal_that_wants_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
