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

/* Creates dir (mode 0755) when missing and opens dir/gmt.db, creating or
 * checking its schema. On failure returns a negative code and, when errbuf
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

/* Wall-clock now, for the functions above. */
int64_t gmt_store_now_ms(void);

#endif
