/* The request head of gmt-schd's metrics server (server/http_head.c):
 * what is served, what each malformed or unserved request is answered,
 * and that a head is never read past its bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "http_head.h"

/* The status a whole head gets (it must be whole). */
static int status_of(const char *req, gmt_http_head_t *h)
{
  assert_int_equal(gmt_http_head_parse(req, strlen(req), "/metrics", h), 1);
  return h->status;
}

static void test_served(void **state)
{
  (void)state;
  gmt_http_head_t h;
  const char *get = "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n";
  assert_int_equal(status_of(get, &h), 200);
  assert_false(h.head);
  assert_int_equal(h.len, strlen(get));
  assert_int_equal(status_of("HEAD /metrics HTTP/1.0\r\n\r\n", &h), 200);
  assert_true(h.head);
  assert_int_equal(status_of("GET /metrics?name[]=up HTTP/1.1\r\n\r\n", &h), 200);
  /* Bare LF line ends, and blank lines before the request line. */
  assert_int_equal(status_of("GET /metrics HTTP/1.1\nHost: x\n\n", &h), 200);
  assert_int_equal(status_of("\r\nGET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &h), 200);
  /* What follows the head (a body, the next request) is not the head's. */
  const char *two = "GET /metrics HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n";
  assert_int_equal(status_of(two, &h), 200);
  assert_int_equal(h.len, strlen("GET /metrics HTTP/1.1\r\n\r\n"));
}

static void test_not_served(void **state)
{
  (void)state;
  gmt_http_head_t h;
  static const struct {
    const char *req;
    int status;
  } cases[] = {
      {"GET / HTTP/1.1\r\n\r\n", 404},
      {"GET /metric HTTP/1.1\r\n\r\n", 404},
      {"GET /metrics/x HTTP/1.1\r\n\r\n", 404},
      {"GET /metricsx HTTP/1.1\r\n\r\n", 404},
      {"GET http://host/metrics HTTP/1.1\r\n\r\n", 404},
      {"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\n", 405},
      {"get /metrics HTTP/1.1\r\n\r\n", 405},
      {"DELETE /metrics HTTP/1.1\r\n\r\n", 405},
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
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int got = status_of(cases[i].req, &h);
    if (got != cases[i].status)
      fail_msg("%zu: \"%s\": got %d, want %d", i, cases[i].req, got, cases[i].status);
  }
}

static void test_incomplete_and_too_long(void **state)
{
  (void)state;
  gmt_http_head_t h;
  const char *part = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
  assert_int_equal(gmt_http_head_parse(part, strlen(part), "/metrics", &h), 0);
  assert_int_equal(gmt_http_head_parse("", 0, "/metrics", &h), 0);
  /* A head that never ends is 431 at the bound, not read past it: the
   * buffer is exactly the bound, with no byte after it to read. */
  char *big = malloc(GMT_HTTP_HEAD_MAX);
  assert_non_null(big);
  memset(big, 'a', GMT_HTTP_HEAD_MAX);
  memcpy(big, "GET /metrics HTTP/1.1\r\nX: ", 26);
  assert_int_equal(gmt_http_head_parse(big, GMT_HTTP_HEAD_MAX - 1, "/metrics", &h), 0);
  assert_int_equal(gmt_http_head_parse(big, GMT_HTTP_HEAD_MAX, "/metrics", &h), 1);
  assert_int_equal(h.status, 431);
  /* Its blank line just inside the bound: whole. */
  memcpy(big + GMT_HTTP_HEAD_MAX - 4, "\r\n\r\n", 4);
  assert_int_equal(gmt_http_head_parse(big, GMT_HTTP_HEAD_MAX, "/metrics", &h), 1);
  assert_int_equal(h.status, 200);
  free(big);
}

static void test_reasons(void **state)
{
  (void)state;
  assert_string_equal(gmt_http_reason(200), "OK");
  assert_string_equal(gmt_http_reason(404), "Not Found");
  assert_string_equal(gmt_http_reason(405), "Method Not Allowed");
  assert_string_equal(gmt_http_reason(431), "Request Header Fields Too Large");
  assert_string_equal(gmt_http_reason(503), "Service Unavailable");
  assert_string_equal(gmt_http_reason(299), "Error");
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_served),
      cmocka_unit_test(test_not_served),
      cmocka_unit_test(test_incomplete_and_too_long),
      cmocka_unit_test(test_reasons),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
