/* gmt-webhook's HTTPS server: nng's TLS streams, read and answered here
 * with bounds on everything a client holds (server.c). */
#ifndef GMT_WEBHOOK_SERVER_H
#define GMT_WEBHOOK_SERVER_H

#include <stddef.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "review.h"

/* At most this many connections at once (each may buffer a whole body). */
#define GMT_WEBHOOK_MAX_CONNS 32
/* By default a client has this long to send its whole request, and then
 * as long again to take the answer (--timeout). The API server's own
 * timeoutSeconds is 10 s by default, at most 30 s. */
#define GMT_WEBHOOK_TIMEOUT_MS 10000

typedef struct gmt_webhook_server gmt_webhook_server_t;

/* Serves POST /mutate and GET /healthz on url ("tls+tcp://HOST:PORT")
 * with tls, giving a client timeout_ms to send its request and as long to
 * take the answer: 0 with *out, or an nng error (logged by the caller).
 * o and tls must outlive the server. */
int gmt_webhook_server_start(gmt_webhook_server_t **out, const char *url, nng_tls_config *tls,
                             const gmt_webhook_opts_t *o, size_t max_body, int timeout_ms);

/* Stops accepting, cuts every connection and frees the server, waiting at
 * most a few seconds for connections to let go. */
void gmt_webhook_server_stop(gmt_webhook_server_t *s);

#endif
