/* AdmissionReview (admission.k8s.io/v1) in, the answer out: pure, so that
 * unit tests cover every answer (test/unit/test_webhook.c); the HTTP
 * server (webhook.c) only moves bytes.
 *
 * A review that is not one (not JSON, not an object, another apiVersion or
 * kind, no request.uid) gets HTTP 400 and a plain-text reason: there is no
 * uid to answer to. One with a uid always gets HTTP 200 and an
 * AdmissionReview whose response echoes the uid: allowed with a JSONPatch
 * (base64, patchType "JSONPatch") for a gmt pod being created, allowed
 * alone for anything else, and allowed=false with status {code 400,
 * message} for a pod that asks for gmt and cannot have it or a request
 * that lacks what a review must hold (Kubernetes shows that message to
 * whoever created the pod). */
#ifndef GMT_WEBHOOK_REVIEW_H
#define GMT_WEBHOOK_REVIEW_H

#include "patch.h"

typedef struct gmt_webhook_answer {
  int status;               /* HTTP status */
  const char *content_type; /* static */
  char *body;               /* malloc'ed, NUL-terminated */
} gmt_webhook_answer_t;

/* 0 and *a filled (free a->body); -ENOMEM. */
int gmt_webhook_review(const char *body, size_t len, const gmt_webhook_opts_t *o,
                       gmt_webhook_answer_t *a);

/* Standard base64 (RFC 4648, with padding) of n bytes: malloc'ed, or NULL. */
char *gmt_base64(const unsigned char *in, size_t n);

#endif
