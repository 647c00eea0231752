/* libFuzzer target: an HTTP body through gmt-webhook's review
 * (deploy/webhook/review.c, patch.c), the decoder that faces every client
 * of the webhook. Every answer must be 200 with an AdmissionReview whose
 * response has uid and allowed (and, when allowed with a patch, base64 of
 * a JSON array), or 400 with a reason. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "review.h"

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
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
