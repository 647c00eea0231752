/* libFuzzer target: bytes a client sends to gmt-schd's metrics port or
 * gmt-webhook, through the request-head reader (proto/util/http_head.c). The
 * input is copied to a buffer of exactly its size, so that ASan sees a
 * read past it. An answer must be one the servers know how to send; a
 * whole head, and the path in it, must lie inside what was read. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_http_head.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *buf = malloc(size ? size : 1);
  if (!buf)
    return 0;
  memcpy(buf, data, size);
  gmt_http_head_t h;
  int whole = gmt_http_head_parse(buf, size, &h);
  if (whole) {
    static const int known[] = {0, 400, 431, 501, 505};
    int ok = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
      ok |= h.status == known[i];
    if (!ok || (h.status != 431 && (h.len == 0 || h.len > size)))
      abort();
    if (h.status == 431 && size < GMT_HTTP_HEAD_MAX)
      abort();
    if (h.status == 0 && (!h.path || h.path < buf || h.path + h.path_len > buf + h.len))
      abort();
    if (h.status == 0 && h.content_length < -1)
      abort();
  } else if (size >= GMT_HTTP_HEAD_MAX) {
    abort(); /* past the bound it must answer */
  }
  free(buf);
  return 0;
}
