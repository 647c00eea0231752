/* The scheduler's SQLite store: pod registrations and process lifetimes.
 *
 * Only the loop thread uses it, so one connection with prepared statements
 * is enough. WAL lets an operator read the database (sqlite3 gmt.db) while
 * the daemon writes, and synchronous=NORMAL keeps a heartbeat's write off
 * fsync: losing the last instants of history in a power cut is fine, the
 * pods' next heartbeats tell a restarted scheduler what runs. */
#include "store.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <sqlite3.h>

#include "gmt_error.h"
#include "gmt_log.h"

enum {
  ST_POD_REGISTERED,
  ST_POD_SEEN,
  ST_POD_CONFIG,
  ST_PROC_STARTED,
  ST_PROC_ENDED,
  ST_COUNT,
};

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
    "CREATE INDEX IF NOT EXISTS processes_pod ON processes(pod, started_at);";

struct gmt_store {
  sqlite3 *db;
  char *path;
  sqlite3_stmt *stmt[ST_COUNT];
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
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST) {
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

static int schema_init(gmt_store_t *st, char *errbuf, size_t errlen)
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
  if (sqlite3_column_type(q, 0) == SQLITE_NULL) {
    rc = sqlite3_exec(st->db, "INSERT INTO schema_version(version) VALUES (1)", NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
      say(errbuf, errlen, "state db %s: cannot write schema_version: %s", st->path,
          msg ? msg : sqlite3_errstr(rc));
      goto fail;
    }
  } else {
    sqlite3_int64 v = sqlite3_column_int64(q, 0);
    if (v != GMT_STORE_SCHEMA_VERSION) {
      say(errbuf, errlen, "state db %s: schema version %lld, this gmt-schd knows version %d only",
          st->path, (long long)v, GMT_STORE_SCHEMA_VERSION);
      rc = SQLITE_MISMATCH;
      goto fail;
    }
  }
  sqlite3_finalize(q);
  q = NULL;
  rc = sqlite3_exec(st->db, "COMMIT;", NULL, NULL, &msg);
  if (rc != SQLITE_OK) {
    say(errbuf, errlen, "state db %s: cannot commit schema: %s", st->path,
        msg ? msg : sqlite3_errstr(rc));
    goto fail;
  }
  return 0;

fail:
  sqlite3_free(msg);
  sqlite3_finalize(q);
  sqlite3_exec(st->db, "ROLLBACK;", NULL, NULL, NULL);
  return rc == SQLITE_MISMATCH ? -EPROTO : sql_code(rc);
}

int gmt_store_open(gmt_store_t **out, const char *dir, char *errbuf, size_t errlen)
{
  *out = NULL;
  int rv = mkdir_p(dir);
  if (rv < 0) {
    say(errbuf, errlen, "state dir %s: cannot create: %s", dir, gmt_strerror(rv));
    return rv;
  }
  gmt_store_t *st = calloc(1, sizeof *st);
  if (!st || asprintf(&st->path, "%s/gmt.db", dir) < 0) {
    free(st);
    say(errbuf, errlen, "state db: out of memory");
    return -ENOMEM;
  }

  int rc = sqlite3_open_v2(st->path, &st->db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc != SQLITE_OK) {
    say(errbuf, errlen, "state db %s: cannot open: %s", st->path,
        st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
    rv = sql_code(rc);
    goto fail;
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
    rv = sql_code(rc);
    goto fail;
  }
  if ((rv = schema_init(st, errbuf, errlen)) < 0)
    goto fail;

  for (int i = 0; i < ST_COUNT; i++) {
    rc = sqlite3_prepare_v3(st->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &st->stmt[i], NULL);
    if (rc != SQLITE_OK) {
      say(errbuf, errlen, "state db %s: cannot prepare statement: %s", st->path,
          sqlite3_errmsg(st->db));
      rv = sql_code(rc);
      goto fail;
    }
  }
  *out = st;
  return 0;

fail:
  gmt_store_close(st);
  return rv;
}

void gmt_store_close(gmt_store_t *st)
{
  if (!st)
    return;
  for (int i = 0; i < ST_COUNT; i++)
    sqlite3_finalize(st->stmt[i]);
  if (st->db) {
    int rc = sqlite3_close(st->db);
    if (rc != SQLITE_OK)
      gmt_warn("state db %s: close: %s", st->path, sqlite3_errstr(rc));
  }
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
  return run(st, ST_PROC_ENDED, "record process end");
}

int64_t gmt_store_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
