/* AdmissionReview v1 in, the answer out (review.h). Pure: no I/O. */
#include "review.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scan.h"

#define REVIEW_API "admission.k8s.io/v1"
#define REVIEW_KIND "AdmissionReview"

char *gmt_base64(const unsigned char *in, size_t n)
{
  static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  char *out = malloc((n + 2) / 3 * 4 + 1);
  if (!out)
    return NULL;
  size_t o = 0, i = 0;
  for (; i + 2 < n; i += 3) {
    unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];
    out[o++] = tab[v >> 18 & 63];
    out[o++] = tab[v >> 12 & 63];
    out[o++] = tab[v >> 6 & 63];
    out[o++] = tab[v & 63];
  }
  if (i < n) {
    unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0);
    out[o++] = tab[v >> 18 & 63];
    out[o++] = tab[v >> 12 & 63];
    out[o++] = i + 1 < n ? tab[v >> 6 & 63] : '=';
    out[o++] = '=';
  }
  out[o] = '\0';
  return out;
}

static int plain(gmt_webhook_answer_t *a, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int plain(gmt_webhook_answer_t *a, int status, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int n = vasprintf(&a->body, fmt, ap);
  va_end(ap);
  if (n < 0) {
    a->body = NULL;
    return -ENOMEM;
  }
  a->status = status;
  a->content_type = "text/plain; charset=utf-8";
  return 0;
}

static json_object *member(json_object *o, const char *key, json_type type)
{
  json_object *v = NULL;
  if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, type))
    return NULL;
  return v;
}

/* The AdmissionReview answering uid: response {uid, allowed, ...}. patch
 * (taken) is put as base64; message, if any, refuses with it. */
static int reviewed(gmt_webhook_answer_t *a, const char *uid, json_object *patch,
                    const char *message)
{
  json_object *root = json_object_new_object(), *resp = json_object_new_object();
  int rc = -ENOMEM;
  if (!root || !resp)
    goto cleanup;
  json_object_object_add(root, "apiVersion", json_object_new_string(REVIEW_API));
  json_object_object_add(root, "kind", json_object_new_string(REVIEW_KIND));
  json_object_object_add(resp, "uid", json_object_new_string(uid));
  json_object_object_add(resp, "allowed", json_object_new_boolean(message == NULL));
  if (message) {
    json_object *st = json_object_new_object();
    if (!st)
      goto cleanup;
    json_object_object_add(st, "code", json_object_new_int(400));
    json_object_object_add(st, "message", json_object_new_string(message));
    json_object_object_add(resp, "status", st);
  } else if (patch) {
    const char *ops = json_object_to_json_string_ext(patch, JSON_C_TO_STRING_PLAIN |
                                                                JSON_C_TO_STRING_NOSLASHESCAPE);
    char *b64 = ops ? gmt_base64((const unsigned char *)ops, strlen(ops)) : NULL;
    if (!b64)
      goto cleanup;
    json_object_object_add(resp, "patchType", json_object_new_string("JSONPatch"));
    json_object_object_add(resp, "patch", json_object_new_string(b64));
    free(b64);
  }
  json_object_object_add(root, "response", resp);
  resp = NULL;
  const char *text =
      json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
  if (!text || !(a->body = strdup(text)))
    goto cleanup;
  a->status = 200;
  a->content_type = "application/json";
  rc = 0;
cleanup:
  json_object_put(resp);
  json_object_put(root);
  json_object_put(patch);
  return rc;
}

static bool span_is(const char *p, size_t n, const char *text)
{
  return p && n == strlen(text) && memcmp(p, text, n) == 0;
}

/* A body past a limit of the scan: refused in a review when the scan saw
 * its apiVersion, kind and uid before it stopped (the API server sends
 * them first), so that the pod is refused with the reason whatever the
 * webhook's failurePolicy; else HTTP 400. */
static int too_big(gmt_webhook_answer_t *a, const gmt_webhook_scan_t *sc, const char *why)
{
  if (!span_is(sc->api, sc->api_len, REVIEW_API) || !span_is(sc->kind, sc->kind_len, REVIEW_KIND) ||
      !sc->uid || sc->uid_len == 0)
    return plain(a, 400, "bad AdmissionReview: too large: %s\n", why);
  char *uid = strndup(sc->uid, sc->uid_len), *msg = NULL;
  int rc = -ENOMEM;
  if (uid && asprintf(&msg, "gmt-webhook: the review is too large: %s", why) >= 0)
    rc = reviewed(a, uid, NULL, msg);
  free(uid);
  free(msg);
  return rc;
}

int gmt_webhook_review(const char *body, size_t len, const gmt_webhook_opts_t *o,
                       gmt_webhook_answer_t *a)
{
  a->body = NULL;
  if (len == 0)
    return plain(a, 400, "bad AdmissionReview: the request has no body\n");
  if (memchr(body, '\0', len))
    return plain(a, 400, "bad AdmissionReview: the body holds a NUL byte\n");
  /* Nothing is built before the scan has bounded what the parse would
   * take (scan.h). */
  gmt_webhook_scan_t sc;
  char why[600];
  int src = gmt_webhook_scan(body, len, &sc, why, sizeof why);
  if (src == -EINVAL)
    return plain(a, 400, "bad AdmissionReview: not JSON (%s)\n", why);
  if (src < 0)
    return too_big(a, &sc, why);
  json_tokener *tok = json_tokener_new_ex(GMT_WEBHOOK_JSON_DEPTH);
  if (!tok)
    return -ENOMEM;
  /* Strict: the grammar the scan counted by (no comments, no single
   * quotes). What follows the value is checked below. */
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS);
  json_object *root = json_tokener_parse_ex(tok, body, (int)(len > 0x7fffffff ? 0x7fffffff : len));
  enum json_tokener_error jerr = json_tokener_get_error(tok);
  size_t used = json_tokener_get_parse_end(tok);
  json_tokener_free(tok);
  int rc;
  if (!root || jerr != json_tokener_success) {
    json_object_put(root);
    return plain(a, 400, "bad AdmissionReview: not JSON (%s)\n",
                 json_tokener_error_desc(
                     jerr == json_tokener_continue ? json_tokener_error_parse_eof : jerr));
  }
  for (; used < len; used++)
    if (!strchr(" \t\r\n", body[used])) {
      rc = plain(a, 400, "bad AdmissionReview: more than one JSON value in the body\n");
      goto cleanup;
    }
  if (!json_object_is_type(root, json_type_object)) {
    rc = plain(a, 400, "bad AdmissionReview: the body is not a JSON object\n");
    goto cleanup;
  }
  json_object *api = member(root, "apiVersion", json_type_string);
  json_object *kind = member(root, "kind", json_type_string);
  if (!api || strcmp(json_object_get_string(api), REVIEW_API) != 0) {
    rc = plain(a, 400, "bad AdmissionReview: apiVersion is not \"%s\" (only v1 is served)\n",
               REVIEW_API);
    goto cleanup;
  }
  if (!kind || strcmp(json_object_get_string(kind), REVIEW_KIND) != 0) {
    rc = plain(a, 400, "bad AdmissionReview: kind is not \"%s\"\n", REVIEW_KIND);
    goto cleanup;
  }
  json_object *req = member(root, "request", json_type_object);
  if (!req) {
    rc = plain(a, 400, "bad AdmissionReview: no request object\n");
    goto cleanup;
  }
  json_object *juid = member(req, "uid", json_type_string);
  const char *uid = juid ? json_object_get_string(juid) : "";
  if (!*uid) {
    rc = plain(a, 400, "bad AdmissionReview: request.uid is missing or empty\n");
    goto cleanup;
  }

  /* From here on the uid is known: every answer is a review. */
  json_object *rkind = member(member(req, "kind", json_type_object), "kind", json_type_string);
  json_object *rop = member(req, "operation", json_type_string);
  if (!rkind || !rop) {
    rc = reviewed(a, uid, NULL,
                  "bad AdmissionReview: request.kind.kind or request.operation is missing");
    goto cleanup;
  }
  if (strcmp(json_object_get_string(rkind), "Pod") != 0 ||
      strcmp(json_object_get_string(rop), "CREATE") != 0) {
    rc = reviewed(a, uid, NULL, NULL); /* not a pod being created: not gmt's business */
    goto cleanup;
  }
  json_object *pod = member(req, "object", json_type_object);
  if (!pod) {
    rc = reviewed(a, uid, NULL, "bad AdmissionReview: request.object (the Pod) is missing");
    goto cleanup;
  }
  json_object *patch = NULL;
  int prc = gmt_webhook_patch(pod, o, &patch, why, sizeof why);
  if (prc == -ENOMEM)
    rc = -ENOMEM;
  else if (prc < 0) {
    char msg[sizeof why + 8];
    snprintf(msg, sizeof msg, "gmt: %s", why);
    rc = reviewed(a, uid, NULL, msg);
  } else
    rc = reviewed(a, uid, patch, NULL);
cleanup:
  json_object_put(root);
  return rc;
}
