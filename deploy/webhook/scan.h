/* A bounded look at a review's JSON before json-c builds anything
 * (scan.c). json-c parses a document whole into a tree that costs far more
 * than its text: an empty object "{}" (2 bytes) takes about 790 bytes, so
 * a 3 MB body of them took 761 MiB in gmt-webhook. The scan reads the body
 * once, with no allocation, and refuses it past any of the limits below;
 * review.c parses only what it let through, with json-c in strict mode so
 * that both read the same grammar (no comments, no single quotes).
 *
 * The limits are far above any real Pod's review (a few hundred to a few
 * thousand values, a few dozen containers) and keep one parse in a bounded
 * amount of memory: GMT_WEBHOOK_TREE_MAX of json-c's tree, estimated from
 * above by what json-c 0.16 allocates per value (measured: test_webhook.c
 * checks the estimate against a real parse). */
#ifndef GMT_WEBHOOK_SCAN_H
#define GMT_WEBHOOK_SCAN_H

#include <stdbool.h>
#include <stddef.h>

#define GMT_WEBHOOK_JSON_DEPTH 64        /* nesting; json_tokener's own limit too */
#define GMT_WEBHOOK_JSON_ELEMENTS 4096   /* in one array, or members of one object */
#define GMT_WEBHOOK_JSON_NODES 65536     /* values in the whole body */
#define GMT_WEBHOOK_TREE_MAX (16u << 20) /* json-c's tree, estimated */

typedef struct gmt_webhook_scan {
  size_t nodes;      /* values seen (objects, arrays, strings, numbers, literals) */
  size_t tree_bytes; /* what json-c would allocate for them, from above */
  int depth;         /* the deepest nesting seen */
  /* The review's top-level apiVersion and kind and its request.uid, as
   * sent (not NUL-terminated), when seen before the scan stopped and
   * holding no escape; else NULL. The API server sends them first, so a
   * review refused for its size can still be answered as a review. */
  const char *api, *kind, *uid;
  size_t api_len, kind_len, uid_len;
} gmt_webhook_scan_t;

/* Scans body[0..len): 0 when it is within every limit (it may still be bad
 * JSON: json-c says so then); -E2BIG past a limit, with why naming it and
 * where in the document (e.g. "request.object.spec.containers holds more
 * than 4096 elements"); -EINVAL at a byte that no JSON value holds where
 * it stands. *out says what was seen up to where the scan stopped. */
int gmt_webhook_scan(const char *body, size_t len, gmt_webhook_scan_t *out, char *why, size_t size);

#endif
