"""End-to-end: the three programs talking, and the hook seeing every
allocation and launch on every route into the driver."""
import os
import signal
import subprocess
import time
import unittest

from gmt_e2e import ASAN_PRELOAD, SCHD, GmtTestCase, wait_for


class HookRoutes(GmtTestCase):
    def check_route(self, route):
        self.start_schd()
        self.start_pmgr("a")
        p = self.run_prog("a", "alloc_paths", "--route", route)
        ready = p.expect("READY")
        held, launches = int(ready["bytes"]), int(ready["launches"])
        self.assertGreater(held, 0)
        self.assertGreater(launches, 0)
        proc = self.wait_process("a", p.proc.pid, memory_used=held, launches=launches)
        self.assertTrue(proc["exe"].endswith("alloc_paths"), proc)
        self.assertEqual(self.pod("a")["memory_used"], held)
        p.send()
        freed = p.expect("FREED")
        self.wait_process("a", p.proc.pid, memory_used=int(freed["bytes"]), launches=launches)
        p.send()
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)
        # An exited process is forgotten at once (well within a second or two).
        wait_for(lambda: self.process("a", p.proc.pid) is None, timeout=3, what="exited process to go")
        self.assertEqual(self.pod("a")["memory_used"], 0)

    def test_direct_symbols_are_counted_exactly(self):
        self.check_route("direct")

    def test_dlsym_route_is_counted_exactly(self):
        self.check_route("dlsym")

    def test_cugetprocaddress_route_is_counted_exactly(self):
        self.check_route("procaddr")


class PodsAndProcesses(GmtTestCase):
    def test_two_pods_see_only_their_own_processes(self):
        self.start_schd()
        self.start_pmgr("a")
        self.start_pmgr("b")
        pa = self.run_prog("a", "alloc_paths", "--route", "direct")
        pb = self.run_prog("b", "alloc_paths", "--route", "procaddr")
        ra, rb = pa.expect("READY"), pb.expect("READY")
        self.wait_process("a", pa.proc.pid, memory_used=int(ra["bytes"]))
        self.wait_process("b", pb.proc.pid, memory_used=int(rb["bytes"]))
        self.assertIsNone(self.process("a", pb.proc.pid))
        self.assertIsNone(self.process("b", pa.proc.pid))
        st = self.status()
        self.assertEqual([p["name"] for p in st["pods"]], ["a", "b"])
        self.assertEqual(st["pods"][0]["memory_limit"], 1 << 30)
        self.assertEqual(st["pods"][1]["memory_limit"], 2 << 30)

    def test_killed_process_is_forgotten(self):
        self.start_schd()
        self.start_pmgr("a")
        p = self.run_prog("a", "alloc_paths", "--route", "direct")
        ready = p.expect("READY")
        self.wait_process("a", p.proc.pid, memory_used=int(ready["bytes"]))
        p.proc.kill()
        p.proc.wait(timeout=5)
        t0 = time.monotonic()
        wait_for(lambda: self.process("a", p.proc.pid) is None, timeout=3, what="killed process to go")
        self.assertLess(time.monotonic() - t0, 1.5)
        self.assertEqual(self.pod("a")["memory_used"], 0)

    # ASan's runtime does not reliably start a thread in a child forked from
    # a threaded process (the child's reporter thread stalls); the plain
    # build, which scripts/test.sh also runs, covers this case.
    @unittest.skipIf(ASAN_PRELOAD, "fork of a threaded process under ASan: run in the plain build")
    def test_forked_child_registers_itself(self):
        self.start_schd()
        self.start_pmgr("a")
        p = self.run_prog("a", "fork_child")
        info = p.expect_all(["PARENT", "CHILD"])
        parent, child = info["PARENT"], info["CHILD"]
        self.assertNotEqual(parent["pid"], child["pid"])
        self.wait_process("a", int(parent["pid"]), memory_used=int(parent["bytes"]))
        self.wait_process("a", int(child["pid"]), memory_used=int(child["bytes"]))
        p.send()
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)

    def test_program_without_pod_manager_runs_unhooked_and_says_so_once(self):
        port = 1  # nothing listens on port 1 of loopback
        env = self.env(LD_PRELOAD=self.preload(), GMT_PMGR="tcp://127.0.0.1:%d" % port)
        p = self.run_prog(None, "alloc_paths", "--route", "direct", env=env)
        p.expect("READY")
        p.send()
        p.expect("FREED")
        p.send()
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)
        # One line, and an honest one: nothing limits this process.
        lines = [l for l in err.splitlines() if "limit" in l]
        self.assertEqual(len(lines), 1, err)
        self.assertIn("no pod manager at tcp://127.0.0.1:%d" % port, lines[0])
        self.assertIn("NOT limited", lines[0])
        self.assertIn("GMT_FAIL_CLOSED=1", lines[0])

    def test_program_that_never_touches_cuda_says_nothing(self):
        env = self.env(LD_PRELOAD=self.preload(), GMT_PMGR="tcp://127.0.0.1:1")
        r = subprocess.run(["/bin/sh", "-c", "echo hi"], env=env, capture_output=True, text=True, timeout=10)
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.stdout, "hi\n")
        self.assertEqual(r.stderr, "")


class ForkStress(GmtTestCase):
    # Room in the quota for the chunks that live children have reserved.
    CONFIG = "1\na 0.5 1.0 4Gi\n"
    ROUNDS, FORKS = 20, 50

    # A fork that deadlocks in the hook hangs its round, and the bounded
    # wait fails the test. Plain build only, for the reason given above
    # test_forked_child_registers_itself.
    @unittest.skipIf(ASAN_PRELOAD, "fork of a threaded process under ASan: run in the plain build")
    def test_1000_forks_beside_first_cuda_calls_and_allocations_never_hang(self):
        self.start_schd()
        self.start_pmgr("a")
        p = self.run_prog("a", "fork_stress", "--rounds", str(self.ROUNDS), "--forks", str(self.FORKS))
        rows = p.records(prefixes=("ROUND ",), done="DONE ", timeout=120)
        rounds, done = rows[:-1], rows[-1]
        self.assertEqual(len(rounds), self.ROUNDS, rows)
        self.assertEqual(sum(int(r["forks"]) for r in rounds), 1000, rows)
        # Each child registered, allocated and freed on its own, and exited 42.
        self.assertEqual(sum(int(r["children_ok"]) for r in rounds), 1000, p.stderr())
        for r in rounds:
            self.assertEqual(r["threads_ok"], r["threads"], (r, p.stderr()))
        self.assertEqual(done["failed"], "0", p.stderr())
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)


class DaemonLifecycle(GmtTestCase):
    def test_unknown_pod_name_exits_2_with_clear_error(self):
        self.start_schd()
        t0 = time.monotonic()
        d = self.start_pmgr("nosuchpod", wait=False)
        d.proc.wait(timeout=10)
        self.assertEqual(d.proc.returncode, 2)
        self.assertLess(time.monotonic() - t0, 5)
        out = d.output()
        self.assertIn("nosuchpod", out)
        self.assertIn("listed", out)

    def test_pmgr_gives_up_when_scheduler_never_comes(self):
        d = self.start_pmgr("a", "--wait", "1", wait=False)
        d.proc.wait(timeout=15)
        self.assertEqual(d.proc.returncode, 1)
        self.assertIn("not reachable", d.output())

    def test_scheduler_restart_rebuilds_pods_from_heartbeats(self):
        schd = self.start_schd()
        self.start_pmgr("a")
        p = self.run_prog("a", "alloc_paths", "--route", "direct")
        ready = p.expect("READY")
        self.wait_process("a", p.proc.pid, memory_used=int(ready["bytes"]))
        self.assertEqual(schd.stop(), 0)
        self.daemons.remove(schd)
        # The scheduler is away: the program goes on.
        p.send()
        freed = p.expect("FREED")
        self.start_schd()
        self.wait_process("a", p.proc.pid, memory_used=int(freed["bytes"]))
        p.send()
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)

    def test_sigterm_stops_cleanly_and_removes_socket(self):
        schd = self.start_schd()
        self.assertTrue(os.path.exists(self.schd_ipc))
        self.assertEqual(schd.stop(), 0)
        self.assertFalse(os.path.exists(self.schd_ipc))

    def test_bad_config_refuses_to_start_naming_every_line(self):
        self.write_config("3\na 0.5 0.4 1G\nb 0.1 1.0 12Q\na 0.1 0.2 1G\n")
        d = self.start_schd(wait=False)
        d.proc.wait(timeout=10)
        self.assertEqual(d.proc.returncode, 2)
        out = d.output()
        for line in (2, 3, 4):
            self.assertIn("%s:%d:" % (self.config_path, line), out)

    def test_check_config_says_what_is_wrong_and_starts_nothing(self):
        self.write_config("3\na 0.5 0.4 1G\nb 0.1 1.0 12Q\na 0.1 0.2 1G\n")
        r = subprocess.run([SCHD, "--check-config", self.config_path], capture_output=True,
                           text=True, timeout=10, env=self.env())
        self.assertEqual(r.returncode, 2, r.stderr)
        for line in (2, 3, 4):
            self.assertIn("%s:%d:" % (self.config_path, line), r.stderr)
        self.write_config("2\na 0.5 1.0 1G\nb 0.5 1.0 1G class=latency\n")
        r = subprocess.run([SCHD, "--check-config", self.config_path], capture_output=True,
                           text=True, timeout=10, env=self.env())
        self.assertEqual((r.returncode, r.stdout), (0, "%s: good: 2 pods\n" % self.config_path),
                         r.stderr)
        self.assertFalse(os.path.exists(self.schd_ipc))  # nothing was started

    def test_bad_config_on_reload_keeps_the_old_one(self):
        schd = self.start_schd()
        started = self.status()["host"]["config"]
        self.assertEqual((started["path"], started["pods"], started["last_reload_ok"],
                          started["last_error"]), (self.config_path, 2, True, ""))
        self.assertAlmostEqual(started["last_success_unix"], time.time(), delta=60)
        self.write_config("1\nc 2.0 1.0 1G\n")
        schd.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "%s:2:" % self.config_path in schd.output(), timeout=5, what="reload error")
        self.assertEqual([p["name"] for p in self.status()["pods"]], ["a", "b"])
        # Said where the operator looks, not only in the log.
        failed = self.status()["host"]["config"]
        self.assertFalse(failed["last_reload_ok"])
        self.assertIn("%s:2:" % self.config_path, failed["last_error"])
        self.assertEqual((failed["pods"], failed["last_success_unix"]),
                         (2, started["last_success_unix"]))
        self.assertGreaterEqual(failed["last_reload_unix"], started["last_success_unix"])
        text = self.gmt("status").stdout
        self.assertIn("its last reload FAILED", text)
        self.assertIn("%s:2:" % self.config_path, text)
        self.write_config("1\nc 0.5 1.0 3G\n")
        schd.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: [p["name"] for p in self.status()["pods"]] == ["c"], timeout=5,
                 what="good reload")
        self.assertEqual(self.pod("c")["memory_limit"], 3 << 30)
        good = self.status()["host"]["config"]
        self.assertEqual((good["last_reload_ok"], good["last_error"], good["pods"]), (True, "", 1))
        self.assertGreater(good["last_success_unix"], started["last_success_unix"])
        self.assertNotIn("last reload FAILED", self.gmt("status").stdout)

    def test_config_change_is_picked_up_without_sighup(self):
        self.start_schd()
        self.assertEqual([p["name"] for p in self.status()["pods"]], ["a", "b"])
        t0 = time.monotonic()
        self.write_config("2\na 0.5 1.0 3Gi\nc 0.5 1.0 4Gi\n")
        def changed():
            st = self.status()
            return st if [p["name"] for p in st["pods"]] == ["a", "c"] else None
        st = wait_for(changed, timeout=3, interval=0.02, what="the new config")
        self.assertLess(time.monotonic() - t0, 1.5)
        self.assertEqual(st["pods"][0]["memory_limit"], 3 << 30)
        self.assertEqual(st["pods"][1]["memory_limit"], 4 << 30)

    def test_broken_config_without_sighup_keeps_the_old_one(self):
        schd = self.start_schd()
        t0 = time.monotonic()
        self.write_config("1\nc 2.0 1.0 1G\n")
        wait_for(lambda: "%s:2:" % self.config_path in schd.output(), timeout=3, interval=0.02,
                 what="reload error")
        self.assertLess(time.monotonic() - t0, 1.5)
        self.assertEqual([p["name"] for p in self.status()["pods"]], ["a", "b"])
        # Logged once: the broken file is not re-read every second.
        time.sleep(1.3)
        self.assertEqual(schd.output().count("%s:2:" % self.config_path), 1, schd.output())

    def test_status_without_scheduler_is_a_clear_error(self):
        r = self.gmt("status")
        self.assertEqual(r.returncode, 1)
        self.assertIn(self.schd_url, r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
