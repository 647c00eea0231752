/* Pids across PID namespaces (server/nspid.c), on a /proc made of files:
 * each entry's ns/pid link and status NSpid line, as the kernel writes
 * them. */
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

#include "nspid.h"

static char g_root[PATH_MAX];

/* One pid through gmt_nspid_nodes: 0 with *node set, -ESRCH when it was
 * not found, or its error. */
static int gmt_nspid_node(const char *proc, int64_t owner, uint32_t pid, uint32_t *node)
{
  int rc = gmt_nspid_nodes(proc, owner, &pid, node, 1);
  return rc < 0 ? rc : *node ? 0 : -ESRCH;
}

/* /proc/who with ns/pid -> "pid:[ns]" and, when nspid, a status file. */
static void entry(const char *who, unsigned ns, const char *nspid)
{
  char path[PATH_MAX + 64], link[64];
  snprintf(path, sizeof path, "%s/%s", g_root, who);
  assert_int_equal(mkdir(path, 0755), 0);
  snprintf(path, sizeof path, "%s/%s/ns", g_root, who);
  assert_int_equal(mkdir(path, 0755), 0);
  snprintf(path, sizeof path, "%s/%s/ns/pid", g_root, who);
  snprintf(link, sizeof link, "pid:[%u]", ns);
  assert_int_equal(symlink(link, path), 0);
  if (nspid) {
    snprintf(path, sizeof path, "%s/%s/status", g_root, who);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "Name:\tpython3\nTgid:\t1\nNSpid:\t%s\nNSpgid:\t1\n", nspid);
    fclose(f);
  }
}

static int setup(void **state)
{
  (void)state;
  snprintf(g_root, sizeof g_root, "/tmp/gmt-nspid-XXXXXX");
  assert_non_null(mkdtemp(g_root));
  entry("self", 1, NULL);      /* gmt-schd: the node's namespace */
  entry("900", 1, "900");      /* a pod manager beside it */
  entry("901", 1, "901");      /* a process of the node */
  entry("5000", 2, "5000\t1"); /* a pod's pod manager: pid 1 in its pod */
  entry("5001", 2, "5001\t7"); /* the pod's process 7 */
  entry("5002", 2, "5002\t8");
  entry("6001", 3, "6001\t7");    /* another pod's process 7 */
  entry("7000", 4, "7000\t3\t1"); /* a namespace two deep */
  entry("7001", 4, "7001\t4\t7");
  entry("7002", 5, NULL); /* status unreadable */
  entry("net", 1, NULL);  /* not a pid */
  return 0;
}

static int teardown(void **state)
{
  (void)state;
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
  return system(cmd) == 0 ? 0 : -1;
}

static void test_same_namespace_is_the_same_pid(void **state)
{
  (void)state;
  uint32_t node = 0;
  assert_int_equal(gmt_nspid_node(g_root, 900, 901, &node), 0);
  assert_int_equal(node, 901);
  /* Not even looked for: the pod manager's namespace is gmt-schd's. */
  assert_int_equal(gmt_nspid_node(g_root, 900, 123456, &node), 0);
  assert_int_equal(node, 123456);
  /* No pod manager known (a caller without a pid): as reported. */
  assert_int_equal(gmt_nspid_node(g_root, 0, 42, &node), 0);
  assert_int_equal(node, 42);
}

static void test_a_pods_pid_is_found_in_its_namespace_only(void **state)
{
  (void)state;
  uint32_t node = 0;
  assert_int_equal(gmt_nspid_node(g_root, 5000, 7, &node), 0);
  assert_int_equal(node, 5001);
  assert_int_equal(gmt_nspid_node(g_root, 5000, 8, &node), 0);
  assert_int_equal(node, 5002);
  assert_int_equal(gmt_nspid_node(g_root, 5000, 1, &node), 0);
  assert_int_equal(node, 5000);
  /* The other pod's 7 is its own. */
  entry("6000", 3, "6000\t1");
  assert_int_equal(gmt_nspid_node(g_root, 6000, 7, &node), 0);
  assert_int_equal(node, 6001);
  /* Two namespaces deep: the innermost pid is what its pod manager saw. */
  assert_int_equal(gmt_nspid_node(g_root, 7000, 7, &node), 0);
  assert_int_equal(node, 7001);
}

static void test_not_found_names_no_process(void **state)
{
  (void)state;
  uint32_t node = 99;
  /* Pid 901 exists on the node, but not in the pod: never taken for it. */
  assert_int_equal(gmt_nspid_node(g_root, 5000, 901, &node), -ESRCH);
  assert_int_equal(node, 0);
  node = 99;
  assert_int_equal(gmt_nspid_node(g_root, 5000, 9, &node), -ESRCH);
  assert_int_equal(node, 0);
  /* A pod manager that is gone: its namespace cannot be read. */
  node = 99;
  assert_int_equal(gmt_nspid_node(g_root, 5999, 7, &node), -ENOENT);
  assert_int_equal(node, 0);
  /* A namespace whose processes' status cannot be read. */
  node = 99;
  assert_int_equal(gmt_nspid_node(g_root, 7002, 1, &node), -ESRCH);
  assert_int_equal(node, 0);
}

static void test_many_in_one_pass(void **state)
{
  (void)state;
  const uint32_t pids[] = {7, 8, 9, 1, 7};
  uint32_t nodes[5];
  assert_int_equal(gmt_nspid_nodes(g_root, 5000, pids, nodes, 5), 0);
  const uint32_t want[] = {5001, 5002, 0, 5000, 5001};
  assert_memory_equal(nodes, want, sizeof want);
  /* Beside gmt-schd: as reported, nothing looked up. */
  assert_int_equal(gmt_nspid_nodes(g_root, 900, pids, nodes, 5), 0);
  assert_memory_equal(nodes, pids, sizeof pids);
  /* A pod manager gone: none is known. */
  assert_int_equal(gmt_nspid_nodes(g_root, 5999, pids, nodes, 5), -ENOENT);
  const uint32_t none[5] = {0};
  assert_memory_equal(nodes, none, sizeof none);
}

static void test_the_real_proc(void **state)
{
  (void)state;
  uint32_t node = 0;
  /* This process is in its own namespace: its pid is its pid. */
  assert_int_equal(gmt_nspid_node("/proc", getpid(), (uint32_t)getpid(), &node), 0);
  assert_int_equal(node, (uint32_t)getpid());
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_namespace_is_the_same_pid),
      cmocka_unit_test(test_a_pods_pid_is_found_in_its_namespace_only),
      cmocka_unit_test(test_not_found_names_no_process),
      cmocka_unit_test(test_many_in_one_pass),
      cmocka_unit_test(test_the_real_proc),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
