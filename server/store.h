/* The scheduler's state on disk (SQLite, STATE_DIR/gmt.db): which pods have
 * registered and which processes they ran, so that an operator (and later a
 * restarted scheduler) can see what happened, and the pin profiles: what
 * each program's host buffers did in the runs recorded (pin=profile), from
 * which pin=use learns which are hot. */
#ifndef GMT_SERVER_STORE_H
#define GMT_SERVER_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* 2 added pin_profiles; a version 1 file is upgraded at open. */
#define GMT_STORE_SCHEMA_VERSION 2
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

/* ---- pin profiles ---- */

/* One buffer's row: where it was allocated (module, offset, nth,
 * size_class: PinSite) and what it did. In a history being added, one run's
 * numbers; in a row read back, the sums over the runs recorded (runs of
 * them; size too, so that (h2d_bytes + d2h_bytes) / size is its reuse over
 * them all). module points into the caller's (add) or the store's (each)
 * memory. */
typedef struct {
  const char *module;
  uint64_t offset;
  uint32_t nth;
  uint32_t size_class;
  uint64_t size;
  uint64_t h2d_copies, d2h_copies;
  uint64_t h2d_bytes, d2h_bytes;
  double lifetime_ms;
  uint64_t runs;
  int64_t updated_ms; /* wall clock of the last run added */
} gmt_store_profile_row_t;

/* A profile holds at most this many buffers per executable: a history of a
 * buffer it does not hold yet is skipped beyond that (one that it holds is
 * still added to). */
#define GMT_STORE_PROFILE_ROWS 65536
/* Longer executable or module paths are not recorded. */
#define GMT_STORE_PROFILE_PATH_MAX 4096

/* Adds n histories to exe's profile, one transaction: a site it holds
 * gets the run added to its sums, a new one a row (while the executable
 * has fewer than GMT_STORE_PROFILE_ROWS). *added (may be NULL) is how many
 * were recorded; the others were skipped (logged at debug level). 0 or a
 * negative code; -EINVAL for an empty or too long exe. */
int gmt_store_profile_add(gmt_store_t *st, const char *exe, const gmt_store_profile_row_t *h,
                          size_t n, int64_t now_ms, size_t *added);

/* Calls fn with each row of exe's profile (rows sorted by module); a
 * non-zero return from fn stops the walk and is returned. row and its
 * module live only during the call. 0 or a negative code. */
typedef int (*gmt_store_profile_fn)(void *arg, const gmt_store_profile_row_t *row);
int gmt_store_profile_each(gmt_store_t *st, const char *exe, gmt_store_profile_fn fn, void *arg);

/* Writes between these share one transaction; they nest. */
void gmt_store_batch_begin(gmt_store_t *st);
void gmt_store_batch_end(gmt_store_t *st);

/* Wall-clock now, for the functions above. */
int64_t gmt_store_now_ms(void);

#endif
