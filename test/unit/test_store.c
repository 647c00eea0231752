/* server/store.c: ended processes are pruned, a corrupt database is set
 * aside, the state is private, an older schema is upgraded, and pin
 * profiles add up runs within their bounds. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "store.h"

#define DAY_MS (24LL * 3600 * 1000)

typedef struct {
  char dir[64];
  char db[PATH_MAX];
  gmt_store_t *st;
} fixture_t;

static int setup(void **state)
{
  fixture_t *f = calloc(1, sizeof *f);
  if (!f)
    return -1;
  strcpy(f->dir, "/tmp/gmt-test-store-XXXXXX");
  if (!mkdtemp(f->dir)) {
    free(f);
    return -1;
  }
  snprintf(f->db, sizeof f->db, "%s/state/gmt.db", f->dir);
  *state = f;
  return 0;
}

static int teardown(void **state)
{
  fixture_t *f = *state;
  char cmd[PATH_MAX + 16];
  gmt_store_close(f->st);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
  if (system(cmd) != 0)
    fprintf(stderr, "cannot remove %s\n", f->dir);
  free(f);
  return 0;
}

static void open_store(fixture_t *f)
{
  char dir[PATH_MAX], err[256] = "";
  snprintf(dir, sizeof dir, "%s/state", f->dir);
  int rc = gmt_store_open(&f->st, dir, err, sizeof err);
  if (rc < 0)
    fail_msg("open: %s", err);
}

/* Rows in processes, counted through a second connection. */
static int count_rows(fixture_t *f, const char *where)
{
  sqlite3 *db;
  sqlite3_stmt *q;
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM processes WHERE %s", where);
  assert_int_equal(sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(q), SQLITE_ROW);
  int n = sqlite3_column_int(q, 0);
  sqlite3_finalize(q);
  sqlite3_close(db);
  return n;
}

static void test_prune_drops_old_then_the_most_beyond_the_bound(void **state)
{
  fixture_t *f = *state;
  open_store(f);
  int64_t now = gmt_store_now_ms();
  /* 10 ended 8 days ago, 10 ended in the last hours, 1 still running. */
  for (uint32_t pid = 1; pid <= 20; pid++) {
    int64_t t = pid <= 10 ? now - 8 * DAY_MS : now - (int64_t)(21 - pid) * 3600 * 1000;
    assert_int_equal(gmt_store_process_started(f->st, "a", pid, "x", t - 1000), 0);
    assert_int_equal(gmt_store_process_ended(f->st, "a", pid, t), 0);
  }
  assert_int_equal(gmt_store_process_started(f->st, "a", 99, "x", now - 30 * DAY_MS), 0);
  assert_int_equal(count_rows(f, "1"), 21);

  assert_int_equal(gmt_store_prune(f->st, now, GMT_STORE_KEEP_ENDED_MS, 1000), 10);
  assert_int_equal(count_rows(f, "ended_at IS NOT NULL"), 10);
  /* Keep the 4 that ended last (pids 17..20); never a running one. */
  assert_int_equal(gmt_store_prune(f->st, now, GMT_STORE_KEEP_ENDED_MS, 4), 6);
  assert_int_equal(count_rows(f, "ended_at IS NOT NULL"), 4);
  assert_int_equal(count_rows(f, "ended_at IS NOT NULL AND pid >= 17"), 4);
  assert_int_equal(count_rows(f, "ended_at IS NULL AND pid = 99"), 1);
}

/* Processes that ended long ago go at the next open, too. */
static void test_open_prunes(void **state)
{
  fixture_t *f = *state;
  open_store(f);
  int64_t old = gmt_store_now_ms() - 30 * DAY_MS;
  assert_int_equal(gmt_store_process_started(f->st, "a", 7, "x", old), 0);
  assert_int_equal(gmt_store_process_ended(f->st, "a", 7, old + 1), 0);
  assert_int_equal(count_rows(f, "1"), 1);
  gmt_store_close(f->st);
  f->st = NULL;
  open_store(f);
  assert_int_equal(count_rows(f, "1"), 0);
}

static int count_aside(fixture_t *f)
{
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/state", f->dir);
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    n += strncmp(e->d_name, "gmt.db.corrupt-", 15) == 0 && !strchr(e->d_name + 15, '-');
  closedir(d);
  return n;
}

static void test_corrupt_database_is_set_aside(void **state)
{
  fixture_t *f = *state;
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/state", f->dir);
  assert_int_equal(mkdir(dir, 0700), 0);
  FILE *fp = fopen(f->db, "w");
  assert_non_null(fp);
  for (int i = 0; i < 200; i++)
    fputs("not a database at all. ", fp);
  fclose(fp);

  open_store(f);
  assert_int_equal(count_aside(f), 1);
  assert_int_equal(gmt_store_process_started(f->st, "a", 1, "x", gmt_store_now_ms()), 0);
  assert_int_equal(count_rows(f, "1"), 1);
}

/* A database whose pages are damaged (a valid header) is set aside too. */
static void test_damaged_pages_are_set_aside(void **state)
{
  fixture_t *f = *state;
  open_store(f);
  for (uint32_t pid = 1; pid <= 200; pid++)
    gmt_store_process_started(f->st, "a-pod-with-a-long-name", pid, "some/long/exe/path", 1);
  gmt_store_close(f->st);
  f->st = NULL;
  /* Checkpointed on close: scribble over everything past the header. */
  FILE *fp = fopen(f->db, "r+");
  assert_non_null(fp);
  assert_int_equal(fseek(fp, 100, SEEK_SET), 0);
  for (int i = 0; i < 8192; i++)
    fputc(0xA5, fp);
  fclose(fp);

  open_store(f);
  assert_int_equal(count_aside(f), 1);
  assert_int_equal(count_rows(f, "1"), 0);
}

static void test_state_dir_and_database_are_private(void **state)
{
  fixture_t *f = *state;
  char dir[PATH_MAX];
  struct stat st;
  open_store(f);
  snprintf(dir, sizeof dir, "%s/state", f->dir);
  assert_int_equal(stat(dir, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  assert_int_equal(stat(f->db, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
}

/* Runs sql on the database through a second connection. */
static void exec_sql(fixture_t *f, const char *sql)
{
  sqlite3 *db;
  assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
  char *msg = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
  if (rc != SQLITE_OK)
    fail_msg("%s: %s", sql, msg ? msg : "?");
  sqlite3_close(db);
}

static int64_t one_number(fixture_t *f, const char *sql)
{
  sqlite3 *db;
  sqlite3_stmt *q;
  assert_int_equal(sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(q), SQLITE_ROW);
  int64_t v = sqlite3_column_int64(q, 0);
  sqlite3_finalize(q);
  sqlite3_close(db);
  return v;
}

/* A file written by the first gmt-schd (schema 1) keeps its history and
 * gains the pin profiles. */
static void test_version_1_database_is_upgraded(void **state)
{
  fixture_t *f = *state;
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/state", f->dir);
  assert_int_equal(mkdir(dir, 0700), 0);
  exec_sql(f, "CREATE TABLE schema_version(version INTEGER NOT NULL);"
              "INSERT INTO schema_version VALUES (1);"
              "CREATE TABLE pods(name TEXT PRIMARY KEY, request REAL NOT NULL,"
              " limit_share REAL NOT NULL, memory_limit INTEGER NOT NULL,"
              " registered_at INTEGER NOT NULL, last_seen INTEGER NOT NULL);"
              "CREATE TABLE processes(id INTEGER PRIMARY KEY, pod TEXT NOT NULL,"
              " pid INTEGER NOT NULL, exe TEXT NOT NULL, started_at INTEGER NOT NULL,"
              " ended_at INTEGER);"
              "INSERT INTO processes(pod, pid, exe, started_at) VALUES ('a', 7, '/bin/x', 1);");
  open_store(f);
  assert_int_equal(one_number(f, "SELECT max(version) FROM schema_version"), 2);
  assert_int_equal(one_number(f, "SELECT count(*) FROM schema_version"), 1);
  assert_int_equal(count_rows(f, "pid = 7"), 1);
  gmt_store_profile_row_t h = {.module = "/lib/x.so", .offset = 16, .size = 4096};
  size_t added = 0;
  assert_int_equal(gmt_store_profile_add(f->st, "/bin/x", &h, 1, 5, &added), 0);
  assert_int_equal(added, 1);
}

static void test_newer_schema_is_refused_and_left_alone(void **state)
{
  fixture_t *f = *state;
  char dir[PATH_MAX], err[256] = "";
  snprintf(dir, sizeof dir, "%s/state", f->dir);
  assert_int_equal(mkdir(dir, 0700), 0);
  exec_sql(f, "CREATE TABLE schema_version(version INTEGER NOT NULL);"
              "INSERT INTO schema_version VALUES (3);");
  assert_int_equal(gmt_store_open(&f->st, dir, err, sizeof err), -EPROTO);
  assert_non_null(strstr(err, "schema version 3"));
  assert_int_equal(one_number(f, "SELECT max(version) FROM schema_version"), 3);
  assert_int_equal(one_number(f, "SELECT count(*) FROM sqlite_master WHERE name = 'pin_profiles'"),
                   0);
}

typedef struct {
  int n;
  gmt_store_profile_row_t last;
  char module[64];
} rows_t;

static int on_row(void *arg, const gmt_store_profile_row_t *row)
{
  rows_t *r = arg;
  r->n++;
  r->last = *row;
  snprintf(r->module, sizeof r->module, "%s", row->module);
  r->last.module = r->module;
  return 0;
}

/* A site seen again adds the run to its sums; another exe is another
 * profile. */
static void test_profile_adds_runs_of_a_site_and_keeps_exes_apart(void **state)
{
  fixture_t *f = *state;
  open_store(f);
  gmt_store_profile_row_t h = {.module = "/lib/libx.so",
                               .offset = 0x8000000000001234ull, /* the top bit too */
                               .nth = 3,
                               .size_class = 22,
                               .size = 4 << 20,
                               .h2d_copies = 175,
                               .d2h_copies = 175,
                               .h2d_bytes = 175ull << 22,
                               .d2h_bytes = 175ull << 22,
                               .lifetime_ms = 1500};
  size_t added = 0;
  assert_int_equal(gmt_store_profile_add(f->st, "/bin/train", &h, 1, 100, &added), 0);
  assert_int_equal(added, 1);
  h.lifetime_ms = NAN; /* from a process: not a number is taken as 0 */
  assert_int_equal(gmt_store_profile_add(f->st, "/bin/train", &h, 1, 200, &added), 0);
  assert_int_equal(gmt_store_profile_add(f->st, "/bin/other", &h, 1, 300, &added), 0);

  rows_t r = {0};
  assert_int_equal(gmt_store_profile_each(f->st, "/bin/train", on_row, &r), 0);
  assert_int_equal(r.n, 1);
  assert_string_equal(r.last.module, "/lib/libx.so");
  assert_true(r.last.offset == 0x8000000000001234ull);
  assert_int_equal(r.last.nth, 3);
  assert_int_equal(r.last.size_class, 22);
  assert_int_equal(r.last.runs, 2);
  assert_int_equal(r.last.size, 8 << 20);
  assert_int_equal(r.last.h2d_copies, 350);
  assert_int_equal(r.last.d2h_bytes, 350ull << 22);
  assert_true(r.last.lifetime_ms == 1500);
  assert_int_equal(r.last.updated_ms, 200);
  /* Sums stop at what SQLite holds instead of turning into REAL. */
  h.h2d_bytes = UINT64_MAX;
  assert_int_equal(gmt_store_profile_add(f->st, "/bin/train", &h, 1, 400, &added), 0);
  assert_int_equal(gmt_store_profile_add(f->st, "/bin/train", &h, 1, 400, &added), 0);
  r.n = 0;
  assert_int_equal(gmt_store_profile_each(f->st, "/bin/train", on_row, &r), 0);
  assert_true(r.last.h2d_bytes == INT64_MAX);
  /* Nothing to key a profile by. */
  assert_int_equal(gmt_store_profile_add(f->st, "", &h, 1, 400, &added), -EINVAL);
  assert_int_equal(gmt_store_profile_add(f->st, NULL, &h, 1, 400, &added), -EINVAL);
}

static void test_profile_holds_at_most_its_bound_of_buffers_per_exe(void **state)
{
  fixture_t *f = *state;
  open_store(f);
  size_t n = GMT_STORE_PROFILE_ROWS + 10;
  gmt_store_profile_row_t *h = calloc(n, sizeof *h);
  assert_non_null(h);
  for (size_t i = 0; i < n; i++)
    h[i] = (gmt_store_profile_row_t){.module = "m", .offset = i, .size = 1, .h2d_bytes = 1};
  size_t added = 0;
  assert_int_equal(gmt_store_profile_add(f->st, "/bin/big", h, n, 1, &added), 0);
  assert_int_equal(added, GMT_STORE_PROFILE_ROWS);
  /* Full: a buffer it holds still adds up, a new one does not. */
  h[1].offset = 1;
  h[0].offset = n + 100;
  assert_int_equal(gmt_store_profile_add(f->st, "/bin/big", h, 2, 2, &added), 0);
  assert_int_equal(added, 1);
  assert_int_equal(one_number(f, "SELECT count(*) FROM pin_profiles WHERE exe = '/bin/big'"),
                   GMT_STORE_PROFILE_ROWS);
  assert_int_equal(one_number(f, "SELECT runs FROM pin_profiles WHERE site_offset = 1"), 2);
  /* Another exe has its own bound; a module path too long is skipped. */
  char *longpath = malloc(GMT_STORE_PROFILE_PATH_MAX + 2);
  assert_non_null(longpath);
  memset(longpath, 'x', GMT_STORE_PROFILE_PATH_MAX + 1);
  longpath[GMT_STORE_PROFILE_PATH_MAX + 1] = '\0';
  h[0].module = longpath;
  assert_int_equal(gmt_store_profile_add(f->st, "/bin/small", h, 2, 2, &added), 0);
  assert_int_equal(added, 1);
  free(longpath);
  free(h);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
      T(test_prune_drops_old_then_the_most_beyond_the_bound),
      T(test_open_prunes),
      T(test_corrupt_database_is_set_aside),
      T(test_damaged_pages_are_set_aside),
      T(test_state_dir_and_database_are_private),
      T(test_version_1_database_is_upgraded),
      T(test_newer_schema_is_refused_and_left_alone),
      T(test_profile_adds_runs_of_a_site_and_keeps_exes_apart),
      T(test_profile_holds_at_most_its_bound_of_buffers_per_exe),
#undef T
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
