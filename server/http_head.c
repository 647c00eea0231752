/* The request line of an HTTP/1.x request (see http_head.h). */
#include "http_head.h"

#include <string.h>

/* Where the head ends (just past its blank line) in buf[0..n), or 0.
 * Lines may end in CRLF or a bare LF, as RFC 9112 lets a server accept. */
static size_t head_end(const char *buf, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    if (buf[i] != '\n')
      continue;
    if (i + 1 < n && buf[i + 1] == '\n')
      return i + 2;
    if (i + 2 < n && buf[i + 1] == '\r' && buf[i + 2] == '\n')
      return i + 3;
  }
  return 0;
}

static bool is_token_char(char c)
{
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* METHOD SP TARGET SP HTTP/1.x, in line[0..n) (no line end). */
static int request_line(const char *line, size_t n, const char *path, gmt_http_head_t *h)
{
  size_t m = 0;
  while (m < n && is_token_char(line[m]))
    m++;
  if (m == 0 || m == n || line[m] != ' ')
    return 400;
  const char *target = line + m + 1;
  const char *sp = memchr(target, ' ', n - m - 1);
  if (!sp || sp == target)
    return 400;
  size_t tlen = (size_t)(sp - target);
  const char *version = sp + 1;
  size_t vlen = n - (size_t)(version - line);
  if (vlen != 8 || memcmp(version, "HTTP/", 5) != 0 || version[6] != '.' || version[5] < '0' ||
      version[5] > '9' || version[7] < '0' || version[7] > '9')
    return 400;
  if (version[5] != '1')
    return 505;
  for (size_t i = 0; i < tlen; i++)
    if ((unsigned char)target[i] <= ' ' || (unsigned char)target[i] >= 0x7f)
      return 400;
  bool get = m == 3 && memcmp(line, "GET", 3) == 0;
  h->head = m == 4 && memcmp(line, "HEAD", 4) == 0;
  if (!get && !h->head)
    return 405;
  const char *q = memchr(target, '?', tlen);
  size_t plen = q ? (size_t)(q - target) : tlen;
  if (plen != strlen(path) || memcmp(target, path, plen) != 0)
    return 404;
  return 200;
}

int gmt_http_head_parse(const char *buf, size_t n, const char *path, gmt_http_head_t *h)
{
  memset(h, 0, sizeof *h);
  size_t end = head_end(buf, n < GMT_HTTP_HEAD_MAX ? n : GMT_HTTP_HEAD_MAX);
  if (!end) {
    if (n < GMT_HTTP_HEAD_MAX)
      return 0;
    h->status = 431;
    return 1;
  }
  h->len = end;
  /* Blank lines before the request line are to be ignored (RFC 9112). */
  size_t at = 0;
  while (at < end && (buf[at] == '\r' || buf[at] == '\n'))
    at++;
  const char *nl = memchr(buf + at, '\n', end - at);
  size_t llen = nl ? (size_t)(nl - (buf + at)) : 0;
  if (llen && buf[at + llen - 1] == '\r')
    llen--;
  h->status = llen ? request_line(buf + at, llen, path, h) : 400;
  return 1;
}

const char *gmt_http_reason(int status)
{
  switch (status) {
  case 200: return "OK";
  case 400: return "Bad Request";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 408: return "Request Timeout";
  case 431: return "Request Header Fields Too Large";
  case 500: return "Internal Server Error";
  case 503: return "Service Unavailable";
  case 505: return "HTTP Version Not Supported";
  default: return "Error";
  }
}
