/* `gmt top`'s cells (top_glyphs.h). Bars are ASCII on every terminal, so
 * that a capture, a pipe or a terminal without colour reads the same as
 * a coloured one; only the sparkline's heights need more glyphs than
 * ASCII has, and fall back to ASCII where the locale is not UTF-8. */
#include "top_glyphs.h"

#include <math.h>
#include <string.h>
#include <strings.h>

static void cells_clear(gmt_top_cells_t *c)
{
  c->text[0] = '\0';
  c->n = 0;
}

/* One cell of glyph g (one UTF-8 character). */
static void cells_put(gmt_top_cells_t *c, const char *g, unsigned char color)
{
  size_t len = strlen(c->text), gl = strlen(g);
  if (c->n >= GMT_TOP_CELLS_MAX || len + gl >= sizeof c->text)
    return;
  memcpy(c->text + len, g, gl + 1);
  c->color[c->n++] = color;
}

static int clamp_width(int width)
{
  return width < 0 ? 0 : width > GMT_TOP_CELLS_MAX ? GMT_TOP_CELLS_MAX : width;
}

void gmt_top_cells_text(gmt_top_cells_t *c, const char *s, int width, bool right,
                        unsigned char color)
{
  width = clamp_width(width);
  size_t len = s ? strlen(s) : 0;
  int shown = len > (size_t)width ? width : (int)len;
  bool cut = len > (size_t)width && width > 0;
  int pad = width - shown;
  char *p = c->text;
  if (right)
    for (int i = 0; i < pad; i++)
      *p++ = ' ';
  for (int i = 0; i < shown; i++) {
    unsigned char ch = (unsigned char)s[i];
    *p++ = cut && i == shown - 1 ? '~' : ch < 0x20 || ch >= 0x7f ? '?' : (char)ch;
  }
  if (!right)
    for (int i = 0; i < pad; i++)
      *p++ = ' ';
  *p = '\0';
  memset(c->color, color, (size_t)width);
  c->n = width;
}

/* Cells of inner for x of full: rounded, but never 0 for x above 0. */
static int bar_cells(double x, double full, int inner)
{
  if (!(x > 0) || !(full > 0))
    return 0;
  double f = x / full * inner;
  int n = f >= inner ? inner : (int)lround(f);
  return n < 1 ? 1 : n;
}

void gmt_top_bar(gmt_top_cells_t *c, int width, double used, double entitled, double full,
                 unsigned char used_color)
{
  width = clamp_width(width);
  cells_clear(c);
  if (width < 3) {
    gmt_top_cells_text(c, "", width, false, GMT_TOP_C_NONE);
    return;
  }
  int inner = width - 2;
  int u = bar_cells(used, full, inner), e = bar_cells(entitled, full, inner);
  cells_put(c, "[", GMT_TOP_C_NONE);
  for (int i = 0; i < inner; i++) {
    if (i < u && i < e)
      cells_put(c, "|", used_color);
    else if (i < u)
      cells_put(c, "+", GMT_TOP_C_WARN);
    else if (i < e)
      cells_put(c, ".", GMT_TOP_C_DIM);
    else
      cells_put(c, " ", GMT_TOP_C_NONE);
  }
  cells_put(c, "]", GMT_TOP_C_NONE);
}

void gmt_top_share_bar(gmt_top_cells_t *c, int width, double share, double request)
{
  gmt_top_bar(c, width, isnan(share) ? 0 : share, request, 1.0, GMT_TOP_C_GOOD);
}

unsigned char gmt_top_memory_color(uint64_t used, uint64_t quota)
{
  /* Integer thresholds: exact at any size. */
  if (quota && used >= quota - quota / 10)
    return GMT_TOP_C_BAD;
  if (quota && used >= quota - quota / 4)
    return GMT_TOP_C_WARN;
  return GMT_TOP_C_GOOD;
}

void gmt_top_memory_bar(gmt_top_cells_t *c, int width, uint64_t used, uint64_t quota)
{
  gmt_top_bar(c, width, (double)used, (double)quota, (double)quota,
              gmt_top_memory_color(used, quota));
}

void gmt_top_spark(gmt_top_cells_t *c, int width, const double *v, size_t n, double full, bool utf8)
{
  static const char *const blocks[8] = {"\xe2\x96\x81", "\xe2\x96\x82", "\xe2\x96\x83",
                                        "\xe2\x96\x84", "\xe2\x96\x85", "\xe2\x96\x86",
                                        "\xe2\x96\x87", "\xe2\x96\x88"};
  static const char ascii[] = "_.-=+*%#";
  width = clamp_width(width);
  cells_clear(c);
  size_t shown = n < (size_t)width ? n : (size_t)width;
  for (size_t i = shown; i < (size_t)width; i++)
    cells_put(c, " ", GMT_TOP_C_NONE);
  for (size_t i = n - shown; i < n; i++) {
    double f = full > 0 && v[i] > 0 ? v[i] / full : 0;
    int h = f >= 1 ? 7 : (int)lround(f * 7);
    char a[2] = {ascii[h], '\0'};
    cells_put(c, utf8 ? blocks[h] : a, GMT_TOP_C_NONE);
  }
}

bool gmt_top_use_color(bool tty, const char *term, const char *no_color)
{
  if (!tty || !term || !*term || !strcmp(term, "dumb"))
    return false;
  return !no_color || !*no_color;
}

bool gmt_top_use_utf8(const char *codeset)
{
  return codeset && (!strcasecmp(codeset, "UTF-8") || !strcasecmp(codeset, "UTF8"));
}
