/* The bounded pre-scan of a review's JSON (scan.h). Pure: no I/O, no
 * allocation; one pass over the body with a fixed stack of
 * GMT_WEBHOOK_JSON_DEPTH frames.
 *
 * It tokenizes strict JSON only as far as counting needs: strings (with
 * their escapes, so that a quote inside one does not end it), numbers,
 * literals and the structural bytes. It does not check the grammar (a
 * missing colon, a trailing comma): json-c, in strict mode, refuses those
 * afterwards. What it must get right is every value json-c would build,
 * and it does, because outside strings it admits only bytes that strict
 * JSON admits there: a comment or a single-quoted string, which json-c's
 * default mode would parse, cannot hide values from it. */
#include "scan.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* What json-c 0.16 allocates, from above (glibc, 64-bit; measured per
 * value over 100,000 of each: an empty object 792, an array 152, a member
 * 129 beside its value, a string 80 + its length, a number 104 with its
 * text kept, true 72, null none). */
#define COST_OBJECT 800
#define COST_MEMBER 144
#define COST_ARRAY 160
#define COST_ELEMENT 16
#define COST_STRING 96
#define COST_NUMBER 112
#define COST_LITERAL 112
#define COST_NULL 16

typedef struct frame {
  char type; /* '{' or '[' */
  bool want_key;
  size_t count;    /* members or elements so far */
  const char *key; /* an object's current member */
  size_t key_len;
} frame_t;

typedef struct scanner {
  const char *s;
  size_t len, i;
  int depth; /* frames in use */
  frame_t st[GMT_WEBHOOK_JSON_DEPTH];
  size_t longest; /* the longest string or number: json-c's buffer for it */
  gmt_webhook_scan_t *out;
  char *why;
  size_t size;
} scanner_t;

static int fail(scanner_t *sc, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(scanner_t *sc, int rc, const char *fmt, ...)
{
  if (sc->why && sc->size) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sc->why, sc->size, fmt, ap);
    va_end(ap);
  }
  return rc;
}

/* Where the value of frame n is (frame k's key or index names where in it
 * frame k + 1 is), as "request.object.spec.containers" (keys shortened
 * and their odd bytes shown as '?'), or "the document". */
static void where(const scanner_t *sc, int n, char *out, size_t size)
{
  size_t o = 0;
  out[0] = '\0';
  for (int k = 0; k < n && o + 1 < size; k++) {
    const frame_t *f = &sc->st[k];
    char part[64];
    if (f->type == '[') {
      snprintf(part, sizeof part, "[%zu]", f->count ? f->count - 1 : 0);
    } else {
      size_t m = f->key_len < 40 ? f->key_len : 40, p = 0;
      if (k > 0)
        part[p++] = '.';
      for (size_t j = 0; j < m; j++) {
        unsigned char c = (unsigned char)f->key[j];
        part[p++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
      }
      if (m < f->key_len)
        p += (size_t)snprintf(part + p, sizeof part - p, "...");
      part[p] = '\0';
    }
    o += (size_t)snprintf(out + o, size - o, "%s", part);
  }
  if (!out[0])
    snprintf(out, size, "the document");
}

static int add_cost(scanner_t *sc, size_t bytes)
{
  gmt_webhook_scan_t *out = sc->out;
  out->tree_bytes += bytes;
  if (out->tree_bytes + 2 * sc->longest > GMT_WEBHOOK_TREE_MAX)
    return fail(sc, -E2BIG,
                "the JSON would take more than %u MiB parsed (%zu values so far; gmt-webhook "
                "parses at most %u MiB)",
                GMT_WEBHOOK_TREE_MAX >> 20, out->nodes, GMT_WEBHOOK_TREE_MAX >> 20);
  return 0;
}

/* A value starts in the current frame: counted there and in the whole. */
static int value_starts(scanner_t *sc)
{
  gmt_webhook_scan_t *out = sc->out;
  if (++out->nodes > GMT_WEBHOOK_JSON_NODES)
    return fail(sc, -E2BIG, "the JSON holds more than %d values (gmt-webhook parses at most %d)",
                GMT_WEBHOOK_JSON_NODES, GMT_WEBHOOK_JSON_NODES);
  if (sc->depth > 0) {
    frame_t *f = &sc->st[sc->depth - 1];
    if (f->type == '[') {
      if (++f->count > GMT_WEBHOOK_JSON_ELEMENTS) {
        char at[512];
        where(sc, sc->depth - 1, at, sizeof at);
        return fail(sc, -E2BIG, "%s holds more than %d elements (gmt-webhook reads at most %d)", at,
                    GMT_WEBHOOK_JSON_ELEMENTS, GMT_WEBHOOK_JSON_ELEMENTS);
      }
      return add_cost(sc, COST_ELEMENT);
    }
    f->want_key = false; /* a member's value; the next string after ',' is a key */
  }
  return 0;
}

static bool is(const char *p, size_t n, const char *word)
{
  return n == strlen(word) && memcmp(p, word, n) == 0;
}

/* A string value at depth 1 or 2 that a review's answer needs. */
static void remember(scanner_t *sc, const char *p, size_t n, bool escaped)
{
  gmt_webhook_scan_t *out = sc->out;
  if (escaped || sc->st[0].type != '{')
    return;
  if (sc->depth == 1) {
    if (is(sc->st[0].key, sc->st[0].key_len, "apiVersion")) {
      out->api = p;
      out->api_len = n;
    } else if (is(sc->st[0].key, sc->st[0].key_len, "kind")) {
      out->kind = p;
      out->kind_len = n;
    }
  } else if (sc->depth == 2 && sc->st[1].type == '{' &&
             is(sc->st[0].key, sc->st[0].key_len, "request") &&
             is(sc->st[1].key, sc->st[1].key_len, "uid")) {
    out->uid = p;
    out->uid_len = n;
  }
}

/* The string whose opening quote is at sc->i: where its text starts and
 * how long it is, sc->i moved past the closing quote. One pass, byte by
 * byte: a search for the next quote per escape would be quadratic in a
 * string of many escapes. -EINVAL when the body ends inside it. */
static int string(scanner_t *sc, const char **start, size_t *n, bool *escaped)
{
  const char *s = sc->s;
  *escaped = false;
  for (size_t i = sc->i + 1; i < sc->len; i++) {
    if (s[i] == '\\') {
      *escaped = true;
      i++; /* the escaped byte, whatever it is */
    } else if (s[i] == '"') {
      *start = s + sc->i + 1;
      *n = i - sc->i - 1;
      sc->i = i + 1;
      return 0;
    }
  }
  return fail(sc, -EINVAL, "the body ends inside a string");
}

int gmt_webhook_scan(const char *body, size_t len, gmt_webhook_scan_t *out, char *why, size_t size)
{
  memset(out, 0, sizeof *out);
  if (why && size)
    why[0] = '\0';
  scanner_t sc = {.s = body, .len = len, .out = out, .why = why, .size = size};
  int rc = 0;
  while (rc == 0 && sc.i < len) {
    unsigned char c = (unsigned char)body[sc.i];
    frame_t *top = sc.depth ? &sc.st[sc.depth - 1] : NULL;
    switch (c) {
    case ' ':
    case '\t':
    case '\r':
    case '\n': sc.i++; break;
    case '{':
    case '[':
      if ((rc = value_starts(&sc)) < 0)
        break;
      if (sc.depth == GMT_WEBHOOK_JSON_DEPTH) {
        char at[512];
        where(&sc, sc.depth, at, sizeof at);
        rc = fail(&sc, -E2BIG, "%s nests deeper than %d (gmt-webhook reads at most %d)", at,
                  GMT_WEBHOOK_JSON_DEPTH, GMT_WEBHOOK_JSON_DEPTH);
        break;
      }
      sc.st[sc.depth++] = (frame_t){.type = (char)c, .want_key = c == '{'};
      if (sc.depth > out->depth)
        out->depth = sc.depth;
      rc = add_cost(&sc, c == '{' ? COST_OBJECT : COST_ARRAY);
      sc.i++;
      break;
    case '}':
    case ']':
      if (!top || top->type != (c == '}' ? '{' : '['))
        return fail(&sc, -EINVAL, "a '%c' at byte %zu closes nothing open", c, sc.i);
      sc.depth--;
      sc.i++;
      break;
    case ':': sc.i++; break;
    case ',':
      if (top && top->type == '{')
        top->want_key = true;
      sc.i++;
      break;
    case '"': {
      const char *p = NULL;
      size_t n = 0;
      bool escaped;
      if ((rc = string(&sc, &p, &n, &escaped)) < 0)
        break;
      if (n > sc.longest)
        sc.longest = n;
      if (top && top->type == '{' && top->want_key) {
        if (++top->count > GMT_WEBHOOK_JSON_ELEMENTS) {
          char at[512];
          where(&sc, sc.depth - 1, at, sizeof at);
          rc = fail(&sc, -E2BIG, "%s holds more than %d members (gmt-webhook reads at most %d)", at,
                    GMT_WEBHOOK_JSON_ELEMENTS, GMT_WEBHOOK_JSON_ELEMENTS);
          break;
        }
        top->key = p;
        top->key_len = n;
        top->want_key = false;
        rc = add_cost(&sc, COST_MEMBER + n);
        break;
      }
      if ((rc = value_starts(&sc)) == 0)
        rc = add_cost(&sc, COST_STRING + n);
      if (rc == 0 && sc.depth > 0)
        remember(&sc, p, n, escaped);
      break;
    }
    default: {
      size_t start = sc.i, cost;
      if (c == '-' || (c >= '0' && c <= '9')) {
        while (sc.i < len && body[sc.i] && strchr("0123456789+-.eE", body[sc.i]))
          sc.i++;
        cost = COST_NUMBER + (sc.i - start);
      } else if (c >= 'a' && c <= 'z') { /* true, false, null: json-c checks the spelling */
        while (sc.i < len && body[sc.i] >= 'a' && body[sc.i] <= 'z')
          sc.i++;
        cost = body[start] == 'n' ? COST_NULL : COST_LITERAL;
      } else {
        return fail(&sc, -EINVAL, "byte 0x%02x at %zu cannot stand there in JSON", c, sc.i);
      }
      if (sc.i - start > sc.longest)
        sc.longest = sc.i - start;
      if ((rc = value_starts(&sc)) == 0)
        rc = add_cost(&sc, cost);
      break;
    }
    }
  }
  return rc;
}
