/* Which connection to gmt-schd's metrics port gives way when one more
 * comes (http_metrics.c keeps the connections; this decides). Pure, so
 * that test/unit/test_http_admit.c checks the order of the decision.
 *
 * Any local user can connect to the port. A scraper sends its request as
 * soon as it connects, so connections still sending theirs are the ones
 * that go; and one user reconnecting in a loop must push out only its own
 * connections, never another user's scrape. */
#ifndef GMT_SERVER_HTTP_ADMIT_H
#define GMT_SERVER_HTTP_ADMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the decision needs of one connection. */
typedef struct gmt_http_conn {
  int64_t uid;  /* its owner (sock_diag); -1: not known (not loopback, or gone) */
  bool limited; /* held to the per-user cap: not root nor the daemon's own user
                   (connections whose owner is not known share one cap) */
  bool busy;    /* its answer is being written: kept while anything else can go */
} gmt_http_conn_t;

/* conns[0..n), oldest first, the newest (just accepted) last. Returns the
 * index of the one to close so that no limited user holds more than
 * per_user and no more than max are open, or -1 when all may stay:
 * - a limited user past per_user gives way with its own oldest
 *   connection that is not busy (the newest itself when all are busy);
 * - past max, of the connections not busy, the oldest of the user who
 *   holds the most gives way (the newest when every other is busy). */
int gmt_http_admit(const gmt_http_conn_t *conns, size_t n, size_t max, size_t per_user);

#endif
