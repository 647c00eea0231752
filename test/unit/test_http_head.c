/* The head of an HTTP/1.x request (proto/util/http_head.c), as gmt-schd's
 * /metrics and gmt-webhook read it: the request line, the body's length,
 * every malformed head's answer, and never a byte read past the bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gmt_http_head.h"

/* The head of a whole request (it must be whole). */
static gmt_http_head_t parse(const char *req)
{
  gmt_http_head_t h;
  assert_int_equal(gmt_http_head_parse(req, strlen(req), &h), 1);
  return h;
}

static void test_request_line(void **state)
{
  (void)state;
  const char *get = "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n";
  gmt_http_head_t h = parse(get);
  assert_int_equal(h.status, 0);
  assert_int_equal(h.method, GMT_HTTP_GET);
  assert_true(gmt_http_path_is(&h, "/metrics"));
  assert_false(gmt_http_path_is(&h, "/metric"));
  assert_false(gmt_http_path_is(&h, "/metrics/"));
  assert_int_equal(h.content_length, -1);
  assert_int_equal(h.len, strlen(get));
  h = parse("HEAD /metrics HTTP/1.0\r\n\r\n");
  assert_int_equal(h.method, GMT_HTTP_HEAD);
  h = parse("POST /mutate?timeout=10s HTTP/1.1\r\nContent-Length: 12\r\n\r\n{\"a\": true}\n");
  assert_int_equal(h.status, 0);
  assert_int_equal(h.method, GMT_HTTP_POST);
  assert_true(gmt_http_path_is(&h, "/mutate"));
  assert_int_equal(h.content_length, 12);
  assert_int_equal(parse("DELETE /x HTTP/1.1\r\n\r\n").method, GMT_HTTP_OTHER);
  assert_int_equal(parse("get /x HTTP/1.1\r\n\r\n").method, GMT_HTTP_OTHER);
  /* Bare LF line ends, and blank lines before the request line. */
  assert_int_equal(parse("GET /metrics HTTP/1.1\nHost: x\n\n").status, 0);
  h = parse("\r\nGET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  assert_int_equal(h.status, 0);
  assert_true(gmt_http_path_is(&h, "/metrics"));
  /* What follows the head (a body, the next request) is not the head's. */
  h = parse("GET /metrics HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n");
  assert_int_equal(h.len, strlen("GET /metrics HTTP/1.1\r\n\r\n"));
}

static void test_body_length(void **state)
{
  (void)state;
  assert_int_equal(parse("POST /m HTTP/1.1\r\ncontent-length:0\r\n\r\n").content_length, 0);
  assert_int_equal(parse("POST /m HTTP/1.1\r\nCONTENT-LENGTH: \t3145728 \r\n\r\n").content_length,
                   3145728);
  /* The same length twice is one length; two that disagree are refused. */
  assert_int_equal(
      parse("POST /m HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n").content_length,
      5);
  assert_int_equal(
      parse("POST /m HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n").status, 400);
  assert_int_equal(parse("POST /m HTTP/1.1\r\nContent-Length: -1\r\n\r\n").status, 400);
  assert_int_equal(parse("POST /m HTTP/1.1\r\nContent-Length: 1e3\r\n\r\n").status, 400);
  assert_int_equal(parse("POST /m HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n").status, 400);
  assert_int_equal(parse("POST /m HTTP/1.1\r\nContent-Length:\r\n\r\n").status, 400);
  assert_int_equal(parse("POST /m HTTP/1.1\r\nContent-Length: 9999999999999999999\r\n\r\n").status,
                   400);
  /* Only Content-Length bodies are read. */
  assert_int_equal(parse("POST /m HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").status, 501);
}

static void test_malformed(void **state)
{
  (void)state;
  static const struct {
    const char *req;
    int status;
  } cases[] = {
      {"GET /metrics HTTP/2.0\r\n\r\n", 505},
      {"GET /metrics HTTP/1.1 \r\n\r\n", 400},
      {"GET /metrics\r\n\r\n", 400},
      {"GET  /metrics HTTP/1.1\r\n\r\n", 400},
      {"GET /metrics HTTP/1\r\n\r\n", 400},
      {"GET /metrics FTP/1.1\r\n\r\n", 400},
      {"G(T /metrics HTTP/1.1\r\n\r\n", 400},
      {"GET /met\x01rics HTTP/1.1\r\n\r\n", 400},
      {"GET /met\x80rics HTTP/1.1\r\n\r\n", 400},
      {"\r\n\r\n", 400},
      {" GET /metrics HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost x\r\n\r\n", 400},             /* no colon */
      {"GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400},           /* space before it */
      {"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400}, /* an obsolete fold */
      {"GET / HTTP/1.1\r\nX: a\x01z\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\n: x\r\n\r\n", 400},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    gmt_http_head_t h = parse(cases[i].req);
    if (h.status != cases[i].status)
      fail_msg("%zu: \"%s\": got %d, want %d", i, cases[i].req, h.status, cases[i].status);
  }
}

static void test_incomplete_and_too_long(void **state)
{
  (void)state;
  gmt_http_head_t h;
  const char *part = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
  assert_int_equal(gmt_http_head_parse(part, strlen(part), &h), 0);
  assert_int_equal(gmt_http_head_parse("", 0, &h), 0);
  /* A head that never ends is 431 at the bound, not read past it: the
   * buffer is exactly the bound, with no byte after it to read. */
  char *big = malloc(GMT_HTTP_HEAD_MAX);
  assert_non_null(big);
  memset(big, 'a', GMT_HTTP_HEAD_MAX);
  memcpy(big, "GET /metrics HTTP/1.1\r\nX: ", 26);
  assert_int_equal(gmt_http_head_parse(big, GMT_HTTP_HEAD_MAX - 1, &h), 0);
  assert_int_equal(gmt_http_head_parse(big, GMT_HTTP_HEAD_MAX, &h), 1);
  assert_int_equal(h.status, 431);
  /* Its blank line just inside the bound: whole. */
  memcpy(big + GMT_HTTP_HEAD_MAX - 4, "\r\n\r\n", 4);
  assert_int_equal(gmt_http_head_parse(big, GMT_HTTP_HEAD_MAX, &h), 1);
  assert_int_equal(h.status, 0);
  assert_int_equal(h.len, GMT_HTTP_HEAD_MAX);
  free(big);
}

static void test_reasons(void **state)
{
  (void)state;
  assert_string_equal(gmt_http_reason(200), "OK");
  assert_string_equal(gmt_http_reason(404), "Not Found");
  assert_string_equal(gmt_http_reason(405), "Method Not Allowed");
  assert_string_equal(gmt_http_reason(411), "Length Required");
  assert_string_equal(gmt_http_reason(413), "Content Too Large");
  assert_string_equal(gmt_http_reason(431), "Request Header Fields Too Large");
  assert_string_equal(gmt_http_reason(503), "Service Unavailable");
  assert_string_equal(gmt_http_reason(299), "Error");
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_request_line), cmocka_unit_test(test_body_length),
      cmocka_unit_test(test_malformed),    cmocka_unit_test(test_incomplete_and_too_long),
      cmocka_unit_test(test_reasons),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
