/* The bell (proto/util/bell.c): a bell is sealed so that nobody can shrink
 * it under a mapping, and a memfd that is not is refused; rings take the
 * later time, a hush stops only the ring it names; the socket beside an
 * ipc socket hands out the fd, replaces a stale socket file and refuses to
 * take a live one's place. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "gmt_bell.h"

static void test_a_bell_is_sealed_and_maps(void **state)
{
  (void)state;
  int fd = gmt_bell_create();
  assert_true(fd >= 0);
  assert_true(fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK);
  /* Whoever holds it may write it, not shrink it. */
  assert_int_equal(ftruncate(fd, 0), -1);
  assert_int_equal(errno, EPERM);
  gmt_bell_t *b = gmt_bell_map(fd);
  assert_non_null(b);
  assert_int_equal(b->slots, GMT_BELL_SLOTS);
  assert_true(gmt_bell_until(b, 0) <= 0);
  munmap(b, sizeof *b);
  close(fd);
}

static void test_an_unsealed_or_foreign_memfd_is_refused(void **state)
{
  (void)state;
  int fd = memfd_create("not-a-bell", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, sizeof(gmt_bell_t)), 0);
  errno = 0;
  assert_null(gmt_bell_map(fd)); /* could shrink: a SIGBUS waiting to happen */
  assert_int_equal(errno, EPERM);
  assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  errno = 0;
  assert_null(gmt_bell_map(fd)); /* sealed, but no bell's header */
  assert_int_equal(errno, EPROTO);
  close(fd);
}

static void test_rings_take_the_later_time_and_a_hush_only_its_own(void **state)
{
  (void)state;
  int fd = gmt_bell_create();
  gmt_bell_t *b = gmt_bell_map(fd);
  assert_non_null(b);
  assert_int_equal(gmt_bell_ring(b, 3, 1000), 1000);
  assert_int_equal(gmt_bell_ring(b, 3, 900), 1000); /* an earlier ring does not cut it */
  assert_int_equal(gmt_bell_until(b, 3), 1000);
  assert_int_equal(gmt_bell_until(b, 2), 0); /* slots are apart */
  /* Someone else rang longer since: a hush of the old ring is ignored. */
  assert_int_equal(gmt_bell_ring(b, 3, 2000), 2000);
  gmt_bell_hush(b, 3, 1000, 500);
  assert_int_equal(gmt_bell_until(b, 3), 2000);
  /* Its own ring stops at now. */
  gmt_bell_hush(b, 3, 2000, 1500);
  assert_int_equal(gmt_bell_until(b, 3), 1500);
  assert_int_equal(atomic_load(&b->slot[3].rings), 2);
  munmap(b, sizeof *b);
  close(fd);
}

/* A stay keeps a batch launch waiting only if its kernel would outlast
 * what is left of it; a ring keeps every batch launch waiting. */
static void test_a_stay_holds_only_kernels_longer_than_its_rest(void **state)
{
  (void)state;
  int fd = gmt_bell_create();
  gmt_bell_t *b = gmt_bell_map(fd);
  assert_non_null(b);
  assert_int_equal(gmt_bell_wait_until(b, 1, 100, 5000), 100); /* quiet: go */
  gmt_bell_stay(b, 1, 1000);
  gmt_bell_stay(b, 1, 800); /* an earlier stay does not cut it */
  assert_int_equal(gmt_bell_wait_until(b, 1, 100, 5000), 1000);  /* 5 us kernel, 0.9 left */
  assert_int_equal(gmt_bell_wait_until(b, 1, 100, 0), 1000);     /* not known: wait */
  assert_int_equal(gmt_bell_wait_until(b, 1, 100, 500), 100);    /* shorter than the rest: go */
  assert_int_equal(gmt_bell_wait_until(b, 1, 700, 500), 1000);   /* longer than the rest now */
  assert_int_equal(gmt_bell_wait_until(b, 1, 1000, 5000), 1000); /* the stay is over */
  assert_int_equal(gmt_bell_wait_until(b, 2, 100, 5000), 100);   /* slots are apart */
  /* A ring holds every kernel, however short, past any stay. */
  gmt_bell_ring(b, 1, 3000);
  assert_int_equal(gmt_bell_wait_until(b, 1, 100, 1), 3000);
  assert_int_equal(atomic_load(&b->slot[1].rings), 1); /* a stay is not a ring */
  munmap(b, sizeof *b);
  close(fd);
}

static void test_the_socket_path_is_beside_an_ipc_socket(void **state)
{
  (void)state;
  char p[128];
  assert_int_equal(gmt_bell_path("ipc:///run/gmt/schd.sock", p, sizeof p), 0);
  assert_string_equal(p, "/run/gmt/schd.sock.bell");
  assert_int_equal(gmt_bell_path("/tmp/x.sock", p, sizeof p), 0);
  assert_string_equal(p, "/tmp/x.sock.bell");
  assert_int_equal(gmt_bell_path("tcp://127.0.0.1:50052", p, sizeof p), -EINVAL);
  assert_int_equal(gmt_bell_path("ipc://relative", p, sizeof p), -EINVAL);
  char longurl[200];
  snprintf(longurl, sizeof longurl, "ipc:///%0150d", 0);
  assert_int_equal(gmt_bell_path(longurl, p, sizeof p), -EINVAL); /* past sun_path */
}

static int g_served;
static int give(void *arg)
{
  g_served++;
  return dup(*(int *)arg);
}

static int none(void *arg)
{
  (void)arg;
  return -ENOENT;
}

static void test_the_socket_hands_out_the_bell(void **state)
{
  (void)state;
  char dir[] = "/tmp/gmt-bell-XXXXXX", path[64];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/s.bell", dir);
  int bell = gmt_bell_create();
  /* A stale socket file (a daemon that died) is replaced. */
  int stale = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  assert_int_equal(bind(stale, (struct sockaddr *)&a, sizeof a), 0);
  close(stale);
  gmt_bell_server_t *srv = NULL;
  assert_int_equal(gmt_bell_serve(&srv, path, -1, give, &bell), 0);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0660);
  /* A live one is not taken over. */
  gmt_bell_server_t *second = NULL;
  assert_int_equal(gmt_bell_serve(&second, path, -1, give, &bell), -EADDRINUSE);

  int fd = gmt_bell_fetch(path);
  assert_true(fd >= 0);
  gmt_bell_t *mine = gmt_bell_map(bell), *got = gmt_bell_map(fd);
  assert_non_null(got);
  gmt_bell_ring(mine, 5, 4242); /* the same memory */
  assert_int_equal(gmt_bell_until(got, 5), 4242);
  assert_true(g_served >= 1); /* (the second serve's probe of the live socket was one) */
  close(fd);
  munmap(mine, sizeof *mine);
  munmap(got, sizeof *got);

  gmt_bell_serve_stop(srv);
  assert_int_equal(access(path, F_OK), -1); /* removed */
  assert_true(gmt_bell_fetch(path) < 0);

  /* A server with no bell to give closes the connection: the asker hears so. */
  assert_int_equal(gmt_bell_serve(&srv, path, -1, none, NULL), 0);
  assert_int_equal(gmt_bell_fetch(path), -ENOENT);
  gmt_bell_serve_stop(srv);
  close(bell);
  rmdir(dir);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_bell_is_sealed_and_maps),
      cmocka_unit_test(test_an_unsealed_or_foreign_memfd_is_refused),
      cmocka_unit_test(test_rings_take_the_later_time_and_a_hush_only_its_own),
      cmocka_unit_test(test_a_stay_holds_only_kernels_longer_than_its_rest),
      cmocka_unit_test(test_the_socket_path_is_beside_an_ipc_socket),
      cmocka_unit_test(test_the_socket_hands_out_the_bell),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
