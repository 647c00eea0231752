/* The head of an HTTP/1.x request, as gmt-schd's metrics server reads it
 * (http_metrics.c): only the request line counts. Pure, so that it is
 * unit-tested and fuzzed alone. */
#ifndef GMT_SERVER_HTTP_HEAD_H
#define GMT_SERVER_HTTP_HEAD_H

#include <stdbool.h>
#include <stddef.h>

/* The most a request head may take; past it the answer is 431. */
#define GMT_HTTP_HEAD_MAX 8192

typedef struct gmt_http_head {
  bool head;  /* HEAD: the answer has no body */
  int status; /* 200, or the error to answer: 400, 404, 405, 431, 505 */
  size_t len; /* bytes of buf the head took, up to its blank line */
} gmt_http_head_t;

/* Reads buf[0..n): 1 and *h when the head is whole (its blank line seen),
 * 0 when more is needed, or 1 with h->status 431 when n reaches
 * GMT_HTTP_HEAD_MAX without a blank line. path is the one resource served
 * (a query string after it is ignored); GET and HEAD are served, any other
 * method is 405. */
int gmt_http_head_parse(const char *buf, size_t n, const char *path, gmt_http_head_t *h);

/* "Not Found" for 404, and so on; "Error" for a code it does not know. */
const char *gmt_http_reason(int status);

#endif
