/* An HTTP/1.x request head (see gmt_http_head.h). */
#include "gmt_http_head.h"

#include <string.h>

/* Where the head ends (just past its blank line) in buf[0..n), or 0. */
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

static bool span_is(const char *s, size_t n, const char *word)
{
  return n == strlen(word) && memcmp(s, word, n) == 0;
}

static bool span_is_nocase(const char *s, size_t n, const char *word)
{
  if (n != strlen(word))
    return false;
  for (size_t i = 0; i < n; i++) {
    char a = s[i], b = word[i];
    if (a >= 'A' && a <= 'Z')
      a = (char)(a - 'A' + 'a');
    if (a != b)
      return false;
  }
  return true;
}

/* METHOD SP TARGET SP HTTP/1.x in line[0..n): 0, or the error. */
static int request_line(const char *line, size_t n, gmt_http_head_t *h)
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
  h->method = span_is(line, m, "GET")    ? GMT_HTTP_GET
              : span_is(line, m, "HEAD") ? GMT_HTTP_HEAD
              : span_is(line, m, "POST") ? GMT_HTTP_POST
                                         : GMT_HTTP_OTHER;
  const char *q = memchr(target, '?', tlen);
  h->path = target;
  h->path_len = q ? (size_t)(q - target) : tlen;
  return 0;
}

/* Content-Length's value (digits alone): 0, or 400. */
static int content_length(const char *v, size_t n, gmt_http_head_t *h)
{
  if (n == 0 || n > 18)
    return 400;
  int64_t x = 0;
  for (size_t i = 0; i < n; i++) {
    if (v[i] < '0' || v[i] > '9')
      return 400;
    x = x * 10 + (v[i] - '0');
  }
  if (h->content_length >= 0 && h->content_length != x)
    return 400; /* two that disagree: a smuggling attempt */
  h->content_length = x;
  return 0;
}

/* One header line, line[0..n): 0, or the error. */
static int header(const char *line, size_t n, gmt_http_head_t *h)
{
  size_t k = 0;
  while (k < n && is_token_char(line[k]))
    k++;
  if (k == 0 || k == n || line[k] != ':')
    return 400; /* no name, a space before the colon, or an obsolete fold */
  const char *v = line + k + 1;
  size_t vn = n - k - 1;
  while (vn && (*v == ' ' || *v == '\t'))
    v++, vn--;
  while (vn && (v[vn - 1] == ' ' || v[vn - 1] == '\t'))
    vn--;
  for (size_t i = 0; i < vn; i++)
    if ((v[i] < ' ' && v[i] != '\t') || v[i] == 0x7f)
      return 400;
  if (span_is_nocase(line, k, "content-length"))
    return content_length(v, vn, h);
  if (span_is_nocase(line, k, "transfer-encoding"))
    return 501;
  return 0;
}

int gmt_http_head_parse(const char *buf, size_t n, gmt_http_head_t *h)
{
  memset(h, 0, sizeof *h);
  h->content_length = -1;
  h->method = GMT_HTTP_OTHER;
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
  bool first = true;
  while (at < end && h->status == 0) {
    const char *nl = memchr(buf + at, '\n', end - at);
    size_t llen = nl ? (size_t)(nl - (buf + at)) : end - at;
    size_t next = at + llen + 1;
    if (llen && buf[at + llen - 1] == '\r')
      llen--;
    if (llen == 0)
      break; /* the blank line */
    h->status = first ? request_line(buf + at, llen, h) : header(buf + at, llen, h);
    first = false;
    at = next;
  }
  if (first && h->status == 0)
    h->status = 400; /* no request line */
  return 1;
}

bool gmt_http_path_is(const gmt_http_head_t *h, const char *path)
{
  return h->path && span_is(h->path, h->path_len, path);
}

const char *gmt_http_reason(int status)
{
  switch (status) {
  case 200: return "OK";
  case 400: return "Bad Request";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 408: return "Request Timeout";
  case 411: return "Length Required";
  case 413: return "Content Too Large";
  case 431: return "Request Header Fields Too Large";
  case 500: return "Internal Server Error";
  case 501: return "Not Implemented";
  case 503: return "Service Unavailable";
  case 505: return "HTTP Version Not Supported";
  default: return "Error";
  }
}
