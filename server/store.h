/* The scheduler's state on disk (SQLite, STATE_DIR/gmt.db): which pods have
 * registered and which processes they ran, so that an operator (and later a
 * restarted scheduler) can see what happened. */
#ifndef GMT_SERVER_STORE_H
#define GMT_SERVER_STORE_H

#include <stdint.h>

#include "config.h"

#define GMT_STORE_SCHEMA_VERSION 1
#define GMT_DEFAULT_STATE_DIR "/var/lib/gmt"

typedef struct gmt_store gmt_store_t;

/* Creates dir (0700) when missing and opens dir/gmt.db (0600),
 * creating or checking its schema. A database that SQLite finds corrupt
 * (or not a database) is moved aside as gmt.db.corrupt-TIMESTAMP, logged
 * as an error, and a fresh one is started. On failure returns a negative code and, when errbuf
 * is not NULL, says what failed in it. */
int gmt_store_open(gmt_store_t **st, const char *dir, char *errbuf, size_t errlen);
void gmt_store_close(gmt_store_t *st);

/* Times are wall-clock milliseconds since the epoch. Each returns 0 or a
 * negative code; failures are also logged, since callers go on anyway. */
int gmt_store_pod_registered(gmt_store_t *st, const gmt_pod_config_t *pod, int64_t now_ms);
/* A reload changed a pod's shares; a pod never registered has no row. */
int gmt_store_pod_config(gmt_store_t *st, const gmt_pod_config_t *pod);
int gmt_store_pod_seen(gmt_store_t *st, const char *pod, int64_t now_ms);
/* Idempotent: a process already recorded as running is left as it is. */
int gmt_store_process_started(gmt_store_t *st, const char *pod, uint32_t pid, const char *exe,
                              int64_t now_ms);
int gmt_store_process_ended(gmt_store_t *st, const char *pod, uint32_t pid, int64_t now_ms);

/* Ended processes are kept for a week, and at most this many: older ones
 * are pruned at open and then at most once an hour. */
#define GMT_STORE_KEEP_ENDED_MS (7LL * 24 * 3600 * 1000)
#define GMT_STORE_KEEP_ENDED_ROWS 100000
#define GMT_STORE_PRUNE_EVERY_MS (3600LL * 1000)

/* Deletes ended processes that ended before now_ms - keep_ms, then all but
 * the keep_rows that ended last. Returns how many it deleted. */
int gmt_store_prune(gmt_store_t *st, int64_t now_ms, int64_t keep_ms, int64_t keep_rows);

/* Writes between these share one transaction; they nest. */
void gmt_store_batch_begin(gmt_store_t *st);
void gmt_store_batch_end(gmt_store_t *st);

/* Wall-clock now, for the functions above. */
int64_t gmt_store_now_ms(void);

#endif
