/* libFuzzer target: an HTTP body through gmt-webhook's review
 * (deploy/webhook/review.c, patch.c, scan.c), the decoder that faces every
 * client of the webhook. Every answer must be 200 with an AdmissionReview
 * whose response has uid and allowed (and, when allowed with a patch,
 * base64 of a JSON array), or 400 with a reason. And the scan's bound must
 * hold: json-c (strict, as review.c parses) never builds more values, or
 * deeper, than the scan counted for the same bytes; a difference in the
 * grammar they read is how a body could hide a tree from the bound. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "review.h"
#include "scan.h"

static void check_review(const char *body)
{
  json_object *root = json_tokener_parse(body), *resp, *v;
  if (!root || !json_object_object_get_ex(root, "response", &resp) ||
      !json_object_object_get_ex(resp, "uid", &v) || !json_object_is_type(v, json_type_string) ||
      !json_object_object_get_ex(resp, "allowed", &v) || !json_object_is_type(v, json_type_boolean))
    abort();
  if (json_object_object_get_ex(resp, "patch", &v)) {
    const char *b64 = json_object_get_string(v);
    size_t n = strlen(b64);
    if (n == 0 || n % 4 != 0 ||
        strspn(b64, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") != n)
      abort();
  }
  json_object_put(root);
}

/* Values in o and below it, and its depth. */
static size_t values(json_object *o, int depth, int *deepest)
{
  if (depth > *deepest)
    *deepest = depth;
  size_t n = 1;
  if (json_object_is_type(o, json_type_array)) {
    for (size_t i = 0; i < json_object_array_length(o); i++)
      n += values(json_object_array_get_idx(o, i), depth + 1, deepest);
  } else if (json_object_is_type(o, json_type_object)) {
    json_object_object_foreach(o, k, v)
    {
      (void)k;
      n += v ? values(v, depth + 1, deepest) : 1; /* null is a NULL member */
    }
  }
  return n;
}

static void check_scan(const char *body, size_t len)
{
  gmt_webhook_scan_t sc;
  char why[600];
  if (len == 0 || memchr(body, '\0', len) || gmt_webhook_scan(body, len, &sc, why, sizeof why) != 0)
    return;
  json_tokener *tok = json_tokener_new_ex(GMT_WEBHOOK_JSON_DEPTH);
  if (!tok)
    return;
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS);
  json_object *o = json_tokener_parse_ex(tok, body, (int)len);
  if (o && json_tokener_get_error(tok) == json_tokener_success) {
    int deepest = 0;
    /* A scalar at the top is depth 0 in the scan; a container 1. */
    size_t n = values(
        o,
        json_object_is_type(o, json_type_object) || json_object_is_type(o, json_type_array) ? 1 : 0,
        &deepest);
    if (n > sc.nodes || deepest > sc.depth + 1)
      abort();
  }
  json_object_put(o);
  json_tokener_free(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  check_scan((const char *)data, size);
  gmt_webhook_opts_t o;
  gmt_webhook_opts_default(&o);
  gmt_webhook_answer_t a;
  if (gmt_webhook_review((const char *)data, size, &o, &a) < 0)
    return 0; /* out of memory */
  if (a.status == 200)
    check_review(a.body);
  else if (a.status != 400 || strncmp(a.body, "bad AdmissionReview: ", 21) != 0)
    abort();
  free(a.body);
  return 0;
}
