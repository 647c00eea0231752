/* The scheduler's SQLite store: pod registrations, process lifetimes and
 * pin profiles.
 *
 * Only the loop thread uses it, so one connection with prepared statements
 * is enough. WAL lets an operator read the database (sqlite3 gmt.db) while
 * the daemon writes, and synchronous=NORMAL keeps a heartbeat's write off
 * fsync: losing the last instants of history in a power cut is fine, the
 * pods' next heartbeats tell a restarted scheduler what runs. */
#include "store.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "gmt_error.h"
#include "gmt_log.h"

enum {
  ST_POD_REGISTERED,
  ST_POD_SEEN,
  ST_POD_CONFIG,
  ST_PROC_STARTED,
  ST_PROC_ENDED,
  ST_PRUNE_OLD,
  ST_PRUNE_MANY,
  ST_PROFILE_COUNT,
  ST_PROFILE_UPDATE,
  ST_PROFILE_INSERT,
  ST_PROFILE_EACH,
  ST_COUNT,
};

#define MAXI "9223372036854775807"

static const char *const stmt_sql[ST_COUNT] = {
    [ST_POD_REGISTERED] =
        "INSERT INTO pods(name, request, limit_share, memory_limit, registered_at, last_seen)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?5)"
        " ON CONFLICT(name) DO UPDATE SET request = excluded.request,"
        " limit_share = excluded.limit_share, memory_limit = excluded.memory_limit,"
        " registered_at = excluded.registered_at, last_seen = excluded.last_seen",
    [ST_POD_SEEN] = "UPDATE pods SET last_seen = ?2 WHERE name = ?1",
    [ST_POD_CONFIG] = "UPDATE pods SET request = ?2, limit_share = ?3, memory_limit = ?4"
                      " WHERE name = ?1",
    [ST_PROC_STARTED] = "INSERT OR IGNORE INTO processes(pod, pid, exe, started_at)"
                        " VALUES (?1, ?2, ?3, ?4)",
    [ST_PROC_ENDED] = "UPDATE processes SET ended_at = ?3"
                      " WHERE pod = ?1 AND pid = ?2 AND ended_at IS NULL",
    [ST_PRUNE_OLD] = "DELETE FROM processes WHERE ended_at IS NOT NULL AND ended_at < ?1",
    [ST_PRUNE_MANY] = "DELETE FROM processes WHERE id IN (SELECT id FROM processes"
                      " WHERE ended_at IS NOT NULL ORDER BY ended_at DESC, id DESC"
                      " LIMIT -1 OFFSET ?1)",
    /* A profile's columns are sums over its runs (clamped to what an
     * SQLite integer holds: past it an addition would turn to REAL). */
    [ST_PROFILE_COUNT] = "SELECT count(*) FROM pin_profiles WHERE exe = ?1",
    [ST_PROFILE_UPDATE] =
        "UPDATE pin_profiles SET size = min(size + ?6, " MAXI "),"
        " h2d_copies = min(h2d_copies + ?7, " MAXI "), d2h_copies = min(d2h_copies + ?8, " MAXI "),"
        " h2d_bytes = min(h2d_bytes + ?9, " MAXI "), d2h_bytes = min(d2h_bytes + ?10, " MAXI "),"
        " lifetime_ms = lifetime_ms + ?11, runs = min(runs + 1, " MAXI "), updated_at = ?12"
        " WHERE exe = ?1 AND module = ?2 AND site_offset = ?3 AND nth = ?4 AND size_class = ?5",
    [ST_PROFILE_INSERT] =
        "INSERT INTO pin_profiles(exe, module, site_offset, nth, size_class, size, h2d_copies,"
        " d2h_copies, h2d_bytes, d2h_bytes, lifetime_ms, runs, updated_at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 1, ?12)",
    [ST_PROFILE_EACH] = "SELECT module, site_offset, nth, size_class, size, h2d_copies,"
                        " d2h_copies, h2d_bytes, d2h_bytes, lifetime_ms, runs, updated_at"
                        " FROM pin_profiles WHERE exe = ?1 ORDER BY module",
};

/* A process row is live while ended_at is NULL; the partial unique index
 * lets "INSERT OR IGNORE" record a process once however many heartbeats
 * (or scheduler restarts) list it, while a reused pid later gets a new row. */
static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS pods("
    " name TEXT PRIMARY KEY,"
    " request REAL NOT NULL,"
    " limit_share REAL NOT NULL,"
    " memory_limit INTEGER NOT NULL,"
    " registered_at INTEGER NOT NULL,"
    " last_seen INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS processes("
    " id INTEGER PRIMARY KEY,"
    " pod TEXT NOT NULL,"
    " pid INTEGER NOT NULL,"
    " exe TEXT NOT NULL,"
    " started_at INTEGER NOT NULL,"
    " ended_at INTEGER);"
    "CREATE UNIQUE INDEX IF NOT EXISTS processes_live ON processes(pod, pid)"
    " WHERE ended_at IS NULL;"
    "CREATE INDEX IF NOT EXISTS processes_pod ON processes(pod, started_at);"
    "CREATE INDEX IF NOT EXISTS processes_ended ON processes(ended_at)"
    " WHERE ended_at IS NOT NULL;"
    /* Version 2. One row per buffer of a program, keyed as the hook names
     * it from one run to the next (PinSite). site_offset holds the
     * offset's 64 bits as SQLite's signed integer. */
    "CREATE TABLE IF NOT EXISTS pin_profiles("
    " exe TEXT NOT NULL,"
    " module TEXT NOT NULL,"
    " site_offset INTEGER NOT NULL,"
    " nth INTEGER NOT NULL,"
    " size_class INTEGER NOT NULL,"
    " size INTEGER NOT NULL,"
    " h2d_copies INTEGER NOT NULL,"
    " d2h_copies INTEGER NOT NULL,"
    " h2d_bytes INTEGER NOT NULL,"
    " d2h_bytes INTEGER NOT NULL,"
    " lifetime_ms REAL NOT NULL,"
    " runs INTEGER NOT NULL,"
    " updated_at INTEGER NOT NULL,"
    " PRIMARY KEY(exe, module, site_offset, nth, size_class)) WITHOUT ROWID;";

struct gmt_store {
  sqlite3 *db;
  char *path;
  sqlite3_stmt *stmt[ST_COUNT];
  int64_t pruned_at_ms; /* wall clock of the last prune */
  int in_batch;
};

static void say(char *errbuf, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(char *errbuf, size_t errlen, const char *fmt, ...)
{
  if (!errbuf || !errlen)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(errbuf, errlen, fmt, ap);
  va_end(ap);
}

static int mkdir_p(const char *dir)
{
  char *p, *tmp = strdup(dir);
  if (!tmp)
    return -ENOMEM;
  for (p = tmp + 1;; p++) {
    if (*p != '/' && *p != '\0')
      continue;
    char c = *p;
    *p = '\0';
    /* Only the daemon's user reads its history. */
    if (mkdir(tmp, c == '\0' ? 0700 : 0755) < 0 && errno != EEXIST) {
      int err = errno;
      free(tmp);
      return -err;
    }
    if (c == '\0')
      break;
    *p = c;
  }
  free(tmp);
  struct stat st;
  if (stat(dir, &st) < 0)
    return -errno;
  if (!S_ISDIR(st.st_mode))
    return -ENOTDIR;
  return 0;
}

static int sql_code(int rc)
{
  switch (rc & 0xff) {
  case SQLITE_NOMEM: return -ENOMEM;
  case SQLITE_BUSY:
  case SQLITE_LOCKED: return -EBUSY;
  case SQLITE_PERM:
  case SQLITE_AUTH:
  case SQLITE_READONLY: return -EACCES;
  case SQLITE_CANTOPEN: return -ENOENT;
  case SQLITE_FULL: return -ENOSPC;
  default: return -EIO;
  }
}

static int schema_init(gmt_store_t *st, int *sqlrc, char *errbuf, size_t errlen)
{
  char *msg = NULL;
  sqlite3_stmt *q = NULL;
  int rc = sqlite3_exec(st->db, "BEGIN IMMEDIATE;", NULL, NULL, &msg);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(st->db, schema_sql, NULL, NULL, &msg);
  if (rc != SQLITE_OK) {
    say(errbuf, errlen, "state db %s: cannot create tables: %s", st->path,
        msg ? msg : sqlite3_errstr(rc));
    goto fail;
  }
  rc = sqlite3_prepare_v2(st->db, "SELECT max(version) FROM schema_version", -1, &q, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_step(q);
  if (rc != SQLITE_ROW) {
    say(errbuf, errlen, "state db %s: cannot read schema_version: %s", st->path,
        sqlite3_errmsg(st->db));
    goto fail;
  }
  sqlite3_int64 v = sqlite3_column_type(q, 0) == SQLITE_NULL ? 0 : sqlite3_column_int64(q, 0);
  sqlite3_finalize(q);
  q = NULL;
  if (v < 0 || v > GMT_STORE_SCHEMA_VERSION) {
    say(errbuf, errlen, "state db %s: schema version %lld, this gmt-schd knows version %d only",
        st->path, (long long)v, GMT_STORE_SCHEMA_VERSION);
    rc = SQLITE_MISMATCH;
    goto fail;
  }
  /* Every version so far only added tables, which schema_sql has just
   * made where they were missing: a fresh file (no version) or an older
   * one is upgraded by saying which version it is now. */
  if (v < GMT_STORE_SCHEMA_VERSION) {
    char sql[128];
    snprintf(sql, sizeof sql,
             "DELETE FROM schema_version; INSERT INTO schema_version(version) VALUES (%d)",
             GMT_STORE_SCHEMA_VERSION);
    rc = sqlite3_exec(st->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
      say(errbuf, errlen, "state db %s: cannot write schema_version: %s", st->path,
          msg ? msg : sqlite3_errstr(rc));
      goto fail;
    }
    if (v)
      gmt_info("state db %s: schema upgraded from version %lld to %d", st->path, (long long)v,
               GMT_STORE_SCHEMA_VERSION);
  }
  rc = sqlite3_exec(st->db, "COMMIT;", NULL, NULL, &msg);
  if (rc != SQLITE_OK) {
    say(errbuf, errlen, "state db %s: cannot commit schema: %s", st->path,
        msg ? msg : sqlite3_errstr(rc));
    goto fail;
  }
  return 0;

fail:
  *sqlrc = rc == SQLITE_MISMATCH ? rc : sqlite3_extended_errcode(st->db);
  if (*sqlrc == SQLITE_OK)
    *sqlrc = rc;
  sqlite3_free(msg);
  sqlite3_finalize(q);
  sqlite3_exec(st->db, "ROLLBACK;", NULL, NULL, NULL);
  return rc == SQLITE_MISMATCH ? -EPROTO : sql_code(rc);
}

/* SQLite's codes for a file that is damaged or is not a database. */
static bool is_corrupt(int rc)
{
  return (rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB;
}

/* Opens st->path. On failure, *sqlrc is the SQLite code that caused it. */
static int open_db(gmt_store_t *st, int *sqlrc, char *errbuf, size_t errlen)
{
  int rv;
  /* The database holds who ran what: the daemon's user only (0600). */
  mode_t old = umask(077);
  int rc = sqlite3_open_v2(st->path, &st->db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
  umask(old);
  *sqlrc = rc;
  if (rc != SQLITE_OK) {
    say(errbuf, errlen, "state db %s: cannot open: %s", st->path,
        st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
    return sql_code(rc);
  }
  sqlite3_busy_timeout(st->db, 1000);
  char *msg = NULL;
  /* journal_mode answers with a row; exec runs it all the same. A file
   * that is not a database fails here first. */
  rc =
      sqlite3_exec(st->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", NULL, NULL, &msg);
  if (rc != SQLITE_OK) {
    say(errbuf, errlen, "state db %s: cannot open: %s", st->path, msg ? msg : sqlite3_errstr(rc));
    sqlite3_free(msg);
    *sqlrc = rc;
    return sql_code(rc);
  }
  if ((rv = schema_init(st, sqlrc, errbuf, errlen)) < 0)
    return rv;
  /* A file made before this version may be wider open. */
  if (chmod(st->path, 0600) < 0)
    gmt_warn("state db %s: cannot make it private (0600): %s", st->path, strerror(errno));

  for (int i = 0; i < ST_COUNT; i++) {
    rc = sqlite3_prepare_v3(st->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &st->stmt[i], NULL);
    if (rc != SQLITE_OK) {
      say(errbuf, errlen, "state db %s: cannot prepare statement: %s", st->path,
          sqlite3_errmsg(st->db));
      *sqlrc = rc;
      return sql_code(rc);
    }
  }
  return 0;
}

static void close_db(gmt_store_t *st)
{
  for (int i = 0; i < ST_COUNT; i++) {
    sqlite3_finalize(st->stmt[i]);
    st->stmt[i] = NULL;
  }
  if (st->db) {
    int rc = sqlite3_close(st->db);
    if (rc != SQLITE_OK)
      gmt_warn("state db %s: close: %s", st->path, sqlite3_errstr(rc));
  }
  st->db = NULL;
}

/* Moves a damaged database (and its WAL and shared-memory files) aside as
 * PATH.corrupt-TIMESTAMP, so that the daemon can start afresh and the old
 * history is kept for whoever wants to look at it. */
static int set_aside(const char *path, char *errbuf, size_t errlen)
{
  char stamp[32], *to = NULL;
  time_t now = time(NULL);
  struct tm tm;
  strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%S", gmtime_r(&now, &tm));
  static const char *const sfx[] = {"", "-wal", "-shm"};
  for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
    char *from = NULL;
    if (asprintf(&from, "%s%s", path, sfx[i]) < 0 ||
        asprintf(&to, "%s.corrupt-%s%s", path, stamp, sfx[i]) < 0) {
      free(from);
      say(errbuf, errlen, "state db %s: out of memory", path);
      return -ENOMEM;
    }
    int bad = rename(from, to) < 0 && errno != ENOENT;
    int err = errno;
    if (!bad && i == 0)
      gmt_error("state db %s is corrupt: moved aside to %s; starting with an empty history", path,
                to);
    free(from);
    free(to);
    to = NULL;
    if (bad) {
      say(errbuf, errlen, "state db %s is corrupt and cannot be moved aside: %s", path,
          strerror(err));
      return -err;
    }
  }
  return 0;
}

int gmt_store_open(gmt_store_t **out, const char *dir, char *errbuf, size_t errlen)
{
  *out = NULL;
  int rv = mkdir_p(dir);
  if (rv < 0) {
    say(errbuf, errlen, "state dir %s: cannot create: %s", dir, gmt_strerror(rv));
    return rv;
  }
  /* A folder we made is 0700; one that was there is the operator's, so it
   * is not changed, only reported when others may look in. But gmt.db and
   * its journals have names anyone can foresee, and SQLite makes them
   * without O_EXCL: in a folder another user may write (sticky or not),
   * they could put a journal of their own or a link there first. */
  struct stat ds;
  if (stat(dir, &ds) < 0) {
    rv = -errno;
    say(errbuf, errlen, "state dir %s: %s", dir, gmt_strerror(rv));
    return rv;
  }
  uid_t me = geteuid();
  if ((ds.st_mode & (S_IWGRP | S_IWOTH)) || (ds.st_uid != me && ds.st_uid != 0)) {
    char who[64];
    if (ds.st_mode & (S_IWGRP | S_IWOTH))
      snprintf(who, sizeof who, "is writable by %s (mode %04o)",
               ds.st_mode & S_IWOTH ? "others" : "its group", (unsigned)(ds.st_mode & 07777));
    else
      snprintf(who, sizeof who, "belongs to uid %u", (unsigned)ds.st_uid);
    say(errbuf, errlen,
        "state dir %s %s: another user could plant gmt.db or its journal there; give gmt-schd "
        "a folder of its own (--state-dir; 0700, owned by uid %u)",
        dir, who, (unsigned)me);
    return -EPERM;
  }
  if (ds.st_mode & 077)
    gmt_warn("state dir %s is mode %03o: others may read the history; 0700 is advised", dir,
             (unsigned)(ds.st_mode & 0777));
  gmt_store_t *st = calloc(1, sizeof *st);
  if (!st || asprintf(&st->path, "%s/gmt.db", dir) < 0) {
    free(st);
    say(errbuf, errlen, "state db: out of memory");
    return -ENOMEM;
  }
  int sqlrc = SQLITE_OK;
  rv = open_db(st, &sqlrc, errbuf, errlen);
  if (rv < 0 && is_corrupt(sqlrc)) {
    gmt_error("%s", errbuf && errlen ? errbuf : "state db is corrupt");
    close_db(st);
    if ((rv = set_aside(st->path, errbuf, errlen)) == 0)
      rv = open_db(st, &sqlrc, errbuf, errlen);
  }
  if (rv < 0) {
    gmt_store_close(st);
    return rv;
  }
  gmt_store_prune(st, gmt_store_now_ms(), GMT_STORE_KEEP_ENDED_MS, GMT_STORE_KEEP_ENDED_ROWS);
  *out = st;
  return 0;
}

void gmt_store_close(gmt_store_t *st)
{
  if (!st)
    return;
  close_db(st);
  free(st->path);
  free(st);
}

/* Runs a bound statement to its end; logs a failure with what it was for. */
static int run(gmt_store_t *st, int which, const char *what)
{
  sqlite3_stmt *s = st->stmt[which];
  int rc = sqlite3_step(s);
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  if (rc == SQLITE_DONE)
    return 0;
  gmt_warn("state db %s: %s: %s", st->path, what, sqlite3_errmsg(st->db));
  return sql_code(rc);
}

/* SQLite integers are signed; a limit past 2^63 is stored clamped. */
static sqlite3_int64 clamp64(uint64_t v)
{
  return v > INT64_MAX ? INT64_MAX : (sqlite3_int64)v;
}

int gmt_store_pod_registered(gmt_store_t *st, const gmt_pod_config_t *pod, int64_t now_ms)
{
  if (!st)
    return 0;
  sqlite3_stmt *s = st->stmt[ST_POD_REGISTERED];
  sqlite3_bind_text(s, 1, pod->name, -1, SQLITE_STATIC);
  sqlite3_bind_double(s, 2, pod->request);
  sqlite3_bind_double(s, 3, pod->limit);
  sqlite3_bind_int64(s, 4, clamp64(pod->memory_limit));
  sqlite3_bind_int64(s, 5, now_ms);
  return run(st, ST_POD_REGISTERED, "record pod registration");
}

int gmt_store_pod_config(gmt_store_t *st, const gmt_pod_config_t *pod)
{
  if (!st)
    return 0;
  sqlite3_stmt *s = st->stmt[ST_POD_CONFIG];
  sqlite3_bind_text(s, 1, pod->name, -1, SQLITE_STATIC);
  sqlite3_bind_double(s, 2, pod->request);
  sqlite3_bind_double(s, 3, pod->limit);
  sqlite3_bind_int64(s, 4, clamp64(pod->memory_limit));
  return run(st, ST_POD_CONFIG, "record pod config");
}

int gmt_store_pod_seen(gmt_store_t *st, const char *pod, int64_t now_ms)
{
  if (!st)
    return 0;
  sqlite3_stmt *s = st->stmt[ST_POD_SEEN];
  sqlite3_bind_text(s, 1, pod, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 2, now_ms);
  return run(st, ST_POD_SEEN, "record pod heartbeat");
}

int gmt_store_process_started(gmt_store_t *st, const char *pod, uint32_t pid, const char *exe,
                              int64_t now_ms)
{
  if (!st)
    return 0;
  sqlite3_stmt *s = st->stmt[ST_PROC_STARTED];
  sqlite3_bind_text(s, 1, pod, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 2, pid);
  sqlite3_bind_text(s, 3, exe ? exe : "", -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 4, now_ms);
  return run(st, ST_PROC_STARTED, "record process start");
}

int gmt_store_process_ended(gmt_store_t *st, const char *pod, uint32_t pid, int64_t now_ms)
{
  if (!st)
    return 0;
  sqlite3_stmt *s = st->stmt[ST_PROC_ENDED];
  sqlite3_bind_text(s, 1, pod, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 2, pid);
  sqlite3_bind_int64(s, 3, now_ms);
  int rv = run(st, ST_PROC_ENDED, "record process end");
  /* Ended rows are what grows: trim them now and then, not per row. */
  if (now_ms - st->pruned_at_ms >= GMT_STORE_PRUNE_EVERY_MS)
    gmt_store_prune(st, now_ms, GMT_STORE_KEEP_ENDED_MS, GMT_STORE_KEEP_ENDED_ROWS);
  return rv;
}

int gmt_store_prune(gmt_store_t *st, int64_t now_ms, int64_t keep_ms, int64_t keep_rows)
{
  if (!st)
    return 0;
  st->pruned_at_ms = now_ms;
  sqlite3_bind_int64(st->stmt[ST_PRUNE_OLD], 1, now_ms - keep_ms);
  int rv = run(st, ST_PRUNE_OLD, "prune old processes");
  if (rv < 0)
    return rv;
  int n = sqlite3_changes(st->db);
  sqlite3_bind_int64(st->stmt[ST_PRUNE_MANY], 1, keep_rows);
  if ((rv = run(st, ST_PRUNE_MANY, "prune processes beyond the most kept")) < 0)
    return rv;
  n += sqlite3_changes(st->db);
  if (n > 0)
    gmt_info("state db %s: pruned %d ended process%s", st->path, n, n == 1 ? "" : "es");
  return n;
}

/* ---- pin profiles ---- */

/* A profile's key column holds the offset's bits: a cast both ways, so
 * that every offset is its own key. */
static sqlite3_int64 offset_bits(uint64_t v)
{
  sqlite3_int64 out;
  memcpy(&out, &v, sizeof out);
  return out;
}

/* The numbers come from a process: a lifetime that is no number is 0. */
static double lifetime_of(double ms)
{
  return isfinite(ms) && ms > 0 ? ms : 0;
}

static void bind_history(sqlite3_stmt *s, const char *exe, const gmt_store_profile_row_t *h,
                         int64_t now_ms)
{
  sqlite3_bind_text(s, 1, exe, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 2, h->module, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 3, offset_bits(h->offset));
  sqlite3_bind_int64(s, 4, h->nth);
  sqlite3_bind_int64(s, 5, h->size_class);
  sqlite3_bind_int64(s, 6, clamp64(h->size));
  sqlite3_bind_int64(s, 7, clamp64(h->h2d_copies));
  sqlite3_bind_int64(s, 8, clamp64(h->d2h_copies));
  sqlite3_bind_int64(s, 9, clamp64(h->h2d_bytes));
  sqlite3_bind_int64(s, 10, clamp64(h->d2h_bytes));
  sqlite3_bind_double(s, 11, lifetime_of(h->lifetime_ms));
  sqlite3_bind_int64(s, 12, now_ms);
}

static bool path_ok(const char *p, bool empty_ok)
{
  if (!p)
    return false;
  size_t n = strnlen(p, GMT_STORE_PROFILE_PATH_MAX + 1);
  return n <= GMT_STORE_PROFILE_PATH_MAX && (empty_ok || n > 0);
}

/* How many rows exe's profile holds; negative on failure. */
static int64_t profile_rows(gmt_store_t *st, const char *exe)
{
  sqlite3_stmt *s = st->stmt[ST_PROFILE_COUNT];
  sqlite3_bind_text(s, 1, exe, -1, SQLITE_STATIC);
  int rc = sqlite3_step(s);
  int64_t n = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  if (n < 0) {
    gmt_warn("state db %s: count a pin profile: %s", st->path, sqlite3_errmsg(st->db));
    return sql_code(rc);
  }
  return n;
}

int gmt_store_profile_add(gmt_store_t *st, const char *exe, const gmt_store_profile_row_t *h,
                          size_t n, int64_t now_ms, size_t *added)
{
  size_t done = 0, too_long = 0, full = 0;
  if (added)
    *added = 0;
  if (!st)
    return 0;
  if (!path_ok(exe, false))
    return -EINVAL;
  gmt_store_batch_begin(st);
  int64_t rows = profile_rows(st, exe);
  int rv = rows < 0 ? (int)rows : 0;
  for (size_t i = 0; i < n && rv == 0; i++) {
    if (!path_ok(h[i].module, true)) {
      too_long++;
      continue;
    }
    bind_history(st->stmt[ST_PROFILE_UPDATE], exe, &h[i], now_ms);
    if ((rv = run(st, ST_PROFILE_UPDATE, "add to a pin profile")) < 0)
      break;
    if (sqlite3_changes(st->db) > 0) {
      done++;
      continue;
    }
    /* A buffer it does not hold yet: a row of its own, within the bound. */
    if (rows >= GMT_STORE_PROFILE_ROWS) {
      full++;
      continue;
    }
    bind_history(st->stmt[ST_PROFILE_INSERT], exe, &h[i], now_ms);
    if ((rv = run(st, ST_PROFILE_INSERT, "add a buffer to a pin profile")) < 0)
      break;
    rows++;
    done++;
  }
  gmt_store_batch_end(st);
  if (too_long)
    gmt_debug("pin profile of %s: %zu histories with a module path over %d bytes skipped", exe,
              too_long, GMT_STORE_PROFILE_PATH_MAX);
  if (full)
    gmt_debug("pin profile of %s holds %d buffers, the most: %zu new ones skipped", exe,
              GMT_STORE_PROFILE_ROWS, full);
  if (added)
    *added = done;
  return rv;
}

int gmt_store_profile_each(gmt_store_t *st, const char *exe, gmt_store_profile_fn fn, void *arg)
{
  if (!st)
    return 0;
  sqlite3_stmt *s = st->stmt[ST_PROFILE_EACH];
  sqlite3_bind_text(s, 1, exe, -1, SQLITE_STATIC);
  int rc, rv = 0;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    const unsigned char *module = sqlite3_column_text(s, 0);
    sqlite3_int64 off = sqlite3_column_int64(s, 1);
    gmt_store_profile_row_t row = {
        .module = module ? (const char *)module : "",
        .nth = (uint32_t)sqlite3_column_int64(s, 2),
        .size_class = (uint32_t)sqlite3_column_int64(s, 3),
        .size = (uint64_t)sqlite3_column_int64(s, 4),
        .h2d_copies = (uint64_t)sqlite3_column_int64(s, 5),
        .d2h_copies = (uint64_t)sqlite3_column_int64(s, 6),
        .h2d_bytes = (uint64_t)sqlite3_column_int64(s, 7),
        .d2h_bytes = (uint64_t)sqlite3_column_int64(s, 8),
        .lifetime_ms = sqlite3_column_double(s, 9),
        .runs = (uint64_t)sqlite3_column_int64(s, 10),
        .updated_ms = sqlite3_column_int64(s, 11),
    };
    memcpy(&row.offset, &off, sizeof row.offset);
    if ((rv = fn(arg, &row)) != 0)
      break;
  }
  if (rv == 0 && rc != SQLITE_DONE) {
    gmt_warn("state db %s: read a pin profile: %s", st->path, sqlite3_errmsg(st->db));
    rv = sql_code(rc);
  }
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  return rv;
}

/* One transaction for many writes: a heartbeat's processes cost one
 * commit, not one each. */
void gmt_store_batch_begin(gmt_store_t *st)
{
  if (!st || st->in_batch++)
    return;
  char *msg = NULL;
  if (sqlite3_exec(st->db, "BEGIN;", NULL, NULL, &msg) != SQLITE_OK)
    gmt_warn("state db %s: begin: %s", st->path, msg ? msg : "?");
  sqlite3_free(msg);
}

void gmt_store_batch_end(gmt_store_t *st)
{
  if (!st || --st->in_batch)
    return;
  char *msg = NULL;
  if (!sqlite3_get_autocommit(st->db) &&
      sqlite3_exec(st->db, "COMMIT;", NULL, NULL, &msg) != SQLITE_OK) {
    gmt_warn("state db %s: commit: %s", st->path, msg ? msg : "?");
    sqlite3_exec(st->db, "ROLLBACK;", NULL, NULL, NULL);
  }
  sqlite3_free(msg);
}

int64_t gmt_store_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
