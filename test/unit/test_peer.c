/* Who is calling (proto/peer.c): the kernel's word for a loopback TCP
 * peer's user, a caller's claim to be a process checked against that
 * process's descriptors, the /proc/net/tcp fallback's parsing, which
 * urls count as local, and who a daemon admits. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "gmt_peer.h"

static void test_local_urls(void **state)
{
  (void)state;
  assert_true(gmt_url_is_local("ipc:///run/gmt/schd.sock"));
  assert_true(gmt_url_is_local("tcp://127.0.0.1:50051"));
  assert_true(gmt_url_is_local("tcp://127.1.2.3:50051"));
  assert_true(gmt_url_is_local("tcp://localhost:50051"));
  assert_true(gmt_url_is_local("tcp://[::1]:50051"));
  assert_false(gmt_url_is_local("tcp://0.0.0.0:50051"));
  assert_false(gmt_url_is_local("tcp://10.0.0.1:50051"));
  assert_false(gmt_url_is_local("tcp://127.evil.example:1"));
  assert_false(gmt_url_is_local("tcp://[::]:50051"));
  assert_false(gmt_url_is_local("ws://127.0.0.1:50051"));
  assert_false(gmt_url_is_local("tcp://*:50051"));
}

static void test_proc_net_tcp_line(void **state)
{
  (void)state;
  /* 127.0.0.1:40000 -> 127.0.0.1:50051, uid 1001, inode 98765 */
  const char *text =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
      "timeout inode\n"
      "   0: 0100007F:C383 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 "
      "111 1 0000000000000000 100 0 0 10 0\n"
      "   1: 0100007F:9C40 0100007F:C383 01 00000000:00000000 00:00000000 00000000  1001        0 "
      "98765 1 0000000000000000 20 4 30 10 -1\n";
  uint8_t lo[4] = {127, 0, 0, 1};
  uint32_t uid = 0;
  uint64_t ino = 0;
  assert_int_equal(
      gmt_peer_tcp_parse(text, AF_INET, lo, htons(40000), lo, htons(50051), &uid, &ino), 0);
  assert_int_equal(uid, 1001);
  assert_int_equal(ino, 98765);
  assert_int_equal(
      gmt_peer_tcp_parse(text, AF_INET, lo, htons(40001), lo, htons(50051), &uid, &ino), -ENOENT);
}

/* A loopback connection in this process: its listening socket *l, the
 * connected end *c, and what the kernel says of *c (owner and inode). */
static void loopback_pair(int *l, int *c, uint32_t *uid, uint64_t *ino)
{
  *l = socket(AF_INET, SOCK_STREAM, 0);
  *c = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(*l >= 0 && *c >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  assert_int_equal(bind(*l, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(*l, 1), 0);
  assert_int_equal(getsockname(*l, (struct sockaddr *)&a, &len), 0);
  assert_int_equal(connect(*c, (struct sockaddr *)&a, sizeof a), 0);
  struct sockaddr_in mine;
  len = sizeof mine;
  assert_int_equal(getsockname(*c, (struct sockaddr *)&mine, &len), 0);
  assert_int_equal(gmt_peer_tcp_owner(AF_INET, (const uint8_t *)&mine.sin_addr, mine.sin_port,
                                      (const uint8_t *)&a.sin_addr, a.sin_port, uid, ino),
                   0);
}

/* A real loopback connection in this process: the kernel names our uid
 * and our pid as its owner. */
static void test_loopback_peer_is_this_process(void **state)
{
  (void)state;
  int l, c;
  uint32_t uid = 12345;
  uint64_t ino = 0;
  loopback_pair(&l, &c, &uid, &ino);
  assert_int_equal(uid, geteuid());
  /* Our claim holds: by the descriptor named, by a scan of our own
   * descriptors when none or a wrong one is named. */
  assert_int_equal(gmt_peer_pid_holds(getpid(), (uint32_t)c, ino, uid), 0);
  assert_int_equal(gmt_peer_pid_holds(getpid(), 0, ino, uid), 0);
  assert_int_equal(gmt_peer_pid_holds(getpid(), (uint32_t)l, ino, uid), 0);
  /* Not as another user, and not for a socket we do not hold. */
  assert_int_equal(gmt_peer_pid_holds(getpid(), (uint32_t)c, ino, uid + 1), -EPERM);
  assert_int_equal(gmt_peer_pid_holds(getpid(), (uint32_t)c, ino + 1000000, uid), -ENOENT);
  close(c);
  close(l);
}

/* A claim names a process that does not hold the socket: a child that
 * closed its copy, or any other process, is refused; so is a pid that
 * does not exist. */
static void test_claim_of_another_process_is_refused(void **state)
{
  (void)state;
  int l, c;
  uint32_t uid;
  uint64_t ino;
  loopback_pair(&l, &c, &uid, &ino);
  int go[2], ready[2];
  assert_int_equal(pipe(go), 0);
  assert_int_equal(pipe(ready), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    close(c);
    close(go[1]);
    close(ready[0]);
    close(ready[1]); /* its copy closed: the parent may look */
    char b;
    (void)!read(go[0], &b, 1); /* until the parent has looked */
    _exit(0);
  }
  close(go[0]);
  close(ready[1]);
  char b;
  assert_int_equal(read(ready[0], &b, 1), 0);
  close(ready[0]);
  assert_int_equal(gmt_peer_pid_holds(child, (uint32_t)c, ino, uid), -ENOENT);
  assert_int_equal(gmt_peer_pid_holds(getpid(), (uint32_t)c, ino, uid), 0);
  close(go[1]);
  int st;
  assert_int_equal(waitpid(child, &st, 0), child);
  assert_true(gmt_peer_pid_holds(child, (uint32_t)c, ino, uid) < 0); /* gone */
  assert_int_equal(gmt_peer_pid_holds(0, 0, ino, uid), -EINVAL);
  close(c);
  close(l);
}

static void test_admission(void **state)
{
  (void)state;
  gmt_admit_t a = {0};
  char err[160];
  gmt_peer_t me = {.pid = -1, .uid = geteuid(), .gid = -1};
  gmt_peer_t root = {.pid = -1, .uid = 0, .gid = -1};
  gmt_peer_t other = {.pid = -1, .uid = 4242, .gid = 4343};
  gmt_peer_t unknown = {.pid = -1, .uid = -1, .gid = -1};
  assert_true(gmt_admit_peer(&a, &me));
  assert_true(gmt_admit_peer(&a, &root));
  assert_false(gmt_admit_peer(&a, &other));
  assert_false(gmt_admit_peer(&a, &unknown));
  assert_int_equal(gmt_admit_add_gid(&a, "4343", err, sizeof err), 0);
  assert_true(gmt_admit_peer(&a, &other)); /* its primary group */
  gmt_admit_t b = {0};
  assert_int_equal(gmt_admit_add_uid(&b, "4242", err, sizeof err), 0);
  assert_true(gmt_admit_peer(&b, &other));
  assert_int_equal(gmt_admit_add_uid(&b, "root", err, sizeof err), 0);
  assert_int_equal(b.uids[1], 0);
  assert_int_equal(gmt_admit_add_uid(&b, "no-such-user-gmt", err, sizeof err), -EINVAL);
  assert_non_null(strstr(err, "no such user"));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_local_urls),
      cmocka_unit_test(test_proc_net_tcp_line),
      cmocka_unit_test(test_loopback_peer_is_this_process),
      cmocka_unit_test(test_claim_of_another_process_is_refused),
      cmocka_unit_test(test_admission),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
