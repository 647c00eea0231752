/* server/store.c: ended processes are pruned, a corrupt database is set
 * aside, the state is private. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
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

int main(void)
{
  const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
      T(test_prune_drops_old_then_the_most_beyond_the_bound),
      T(test_open_prunes),
      T(test_corrupt_database_is_set_aside),
      T(test_damaged_pages_are_set_aside),
      T(test_state_dir_and_database_are_private),
#undef T
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
