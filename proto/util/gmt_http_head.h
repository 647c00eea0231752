/* The head of an HTTP/1.x request, as gmt's own small servers read it
 * (gmt-schd's /metrics, server/http_metrics.c; gmt-webhook,
 * deploy/webhook/webhook.c): the request line and the headers that say
 * how long the body is. Pure and libc only (libgmthttp), so that it is
 * unit-tested and fuzzed alone. */
#ifndef GMT_HTTP_HEAD_H
#define GMT_HTTP_HEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most a request head may take; past it the answer is 431. */
#define GMT_HTTP_HEAD_MAX 8192

typedef enum { GMT_HTTP_GET, GMT_HTTP_HEAD, GMT_HTTP_POST, GMT_HTTP_OTHER } gmt_http_method_t;

typedef struct gmt_http_head {
  /* 0: a request to serve; else what to answer: 400 (malformed), 431
   * (head too long), 501 (a Transfer-Encoding: only Content-Length
   * bodies are read), 505 (not HTTP/1.x). */
  int status;
  gmt_http_method_t method;
  const char *path; /* in the buffer: the target up to a '?' */
  size_t path_len;
  int64_t content_length; /* -1: no Content-Length */
  size_t len;             /* the head's bytes, its blank line included */
} gmt_http_head_t;

/* Reads buf[0..n): 1 with *h when the head is whole (its blank line
 * seen), 0 when more is needed, 1 with status 431 once n reaches
 * GMT_HTTP_HEAD_MAX without a blank line. Lines may end in CRLF or LF. */
int gmt_http_head_parse(const char *buf, size_t n, gmt_http_head_t *h);

/* Whether the request's path is path exactly (a query string aside). */
bool gmt_http_path_is(const gmt_http_head_t *h, const char *path);

/* "Not Found" for 404, and so on; "Error" for a code it does not know. */
const char *gmt_http_reason(int status);

#endif
