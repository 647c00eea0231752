/* gmt-webhook's HTTPS server: nng's TLS streams, read and answered here
 * with bounds on everything a client holds (server.c). */
#ifndef GMT_WEBHOOK_SERVER_H
#define GMT_WEBHOOK_SERVER_H

#include <stddef.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "review.h"

/* At most this many connections at once (each holds at most a request
 * head until its body may be read). */
#define GMT_WEBHOOK_MAX_CONNS 32
/* Bodies held at once when each is as large as --max-body: the bytes of
 * requests being read or reviewed are counted against this many times
 * (--max-body + GMT_HTTP_HEAD_MAX), and a request whose body does not fit
 * waits for room, within its --timeout, then gets 503. */
#define GMT_WEBHOOK_BODIES 4
/* Reviews parsed at once, each on its own thread: each holds a json-c
 * tree of at most GMT_WEBHOOK_TREE_MAX (scan.h) and a patch of at most
 * GMT_WEBHOOK_PATCH_MAX (patch.h). */
#define GMT_WEBHOOK_PARSERS 2
/* By default a client has this long to send its whole request, and then
 * as long again to take the answer (--timeout). The API server's own
 * timeoutSeconds is 10 s by default, at most 30 s. */
#define GMT_WEBHOOK_TIMEOUT_MS 10000

/* What gmt-webhook may hold at once, from above, for --max-body max_body:
 * the process at rest with its connections (GMT_WEBHOOK_BASE), the bodies
 * held, and each parser's tree (GMT_WEBHOOK_TREE_MAX) with its patch and
 * answer (GMT_WEBHOOK_ANSWER). 56 MiB for the default 3 MiB; the
 * manifest's limit is twice that, rounded (docs/kubernetes.md). */
#define GMT_WEBHOOK_BASE (8u << 20)
#define GMT_WEBHOOK_ANSWER (2u << 20)
size_t gmt_webhook_memory_bound(size_t max_body);

typedef struct gmt_webhook_server gmt_webhook_server_t;

/* Serves POST /mutate and GET /healthz on url ("tls+tcp://HOST:PORT")
 * with tls, giving a client timeout_ms to send its request and as long to
 * take the answer: 0 with *out, or an nng error (logged by the caller).
 * o and tls must outlive the server. Its memory, past what nng and TLS
 * take per connection, is bounded by GMT_WEBHOOK_BODIES x (max_body +
 * GMT_HTTP_HEAD_MAX) of bodies and GMT_WEBHOOK_PARSERS parses
 * (docs/kubernetes.md does the sum). */
int gmt_webhook_server_start(gmt_webhook_server_t **out, const char *url, nng_tls_config *tls,
                             const gmt_webhook_opts_t *o, size_t max_body, int timeout_ms);

/* Stops accepting, cuts every connection and frees the server, waiting at
 * most a few seconds for connections to let go. */
void gmt_webhook_server_stop(gmt_webhook_server_t *s);

#endif
