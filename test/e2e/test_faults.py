"""End-to-end: quotas that hold through daemon faults (issue 10, parts 2
and 3). With gmt-schd down the pod manager grants memory from its count of
the whole pod, not each process the whole quota; a restarted pod manager
learns its pod's processes again from their keepalive reports (an idle one
and one started while it was away); a stopped (SIGSTOP) pod manager does
not hold its processes: within about two seconds they launch ungated and
allocate within the last known quota, and are gated and counted again once
it runs (SIGCONT)."""
import signal
import time

from gmt_e2e import GmtTestCase, build_path, wait_for

MEM_PATHS = build_path("test", "e2e", "memprogs", "mem_paths")
SPIN = build_path("test", "e2e", "tokenprogs", "spin_load")
MIB = 1 << 20
GIB = 1 << 30
OOM = 2  # CUDA_ERROR_OUT_OF_MEMORY


class Faults(GmtTestCase):
    CONFIG = "1\na 0.5 1.0 1Gi\n"

    def mem(self, limit, *args):
        return self.run_prog("a", MEM_PATHS, "alloc", str(limit), *args)

    def reserved(self, pid):
        p = self.process("a", pid)
        return p and p.get("memory_reserved")

    def test_scheduler_down_pod_quota_holds_for_all_its_processes(self):
        schd = self.start_schd()
        self.start_pmgr("a")
        progs = [self.mem(900 * MIB, "--step", str(900 * MIB)) for _ in range(4)]
        for p in progs:
            p.expect("INFO")
            self.wait_process("a", p.proc.pid)
        schd.proc.kill()
        schd.proc.wait(timeout=5)
        t0 = time.monotonic()
        for p in progs:
            p.send()
        filled = [p.expect("FILLED") for p in progs]
        oks = [f["ok"] for f in filled]
        # 4 x 900 MiB in a 1 GiB pod: one fits, the others get OOM.
        self.assertEqual(oks.count("1"), 1, filled)
        self.assertLess(time.monotonic() - t0, 5.0)

    def test_restarted_pod_manager_learns_an_idle_process_again(self):
        self.start_schd()
        pm = self.start_pmgr("a")
        p = self.mem(40 * MIB, "--step", str(8 * MIB))
        p.expect("INFO")
        p.send()
        self.assertEqual(p.expect("FILLED")["ok"], "1")
        wait_for(lambda: self.reserved(p.proc.pid) == 40 * MIB, timeout=5,
                 what="40 MiB in the ledger")
        pm.proc.kill()
        pm.proc.wait(timeout=5)
        wait_for(lambda: self.process("a", p.proc.pid) is None, timeout=8,
                 what="the scheduler to forget the pod's processes")
        t0 = time.monotonic()
        self.start_pmgr("a")
        # The process does nothing: its keepalive report registers it again.
        wait_for(lambda: self.reserved(p.proc.pid) == 40 * MIB, timeout=5,
                 what="the idle process's 40 MiB back in the ledger")
        self.assertLess(time.monotonic() - t0, 5.0)
        p.stop()

    def test_process_started_while_pod_manager_is_down_is_hooked_once_it_returns(self):
        self.start_schd()
        pm = self.start_pmgr("a")
        pm.stop()
        p = self.mem(GIB, "--step", str(256 * MIB), "--over", str(64 * MIB))
        p.expect("INFO")
        self.start_pmgr("a")
        self.wait_process("a", p.proc.pid, timeout=5)
        p.send()
        self.assertEqual(p.expect("FILLED")["ok"], "1")
        self.assertEqual(int(p.expect("OVER")["rc"]), OOM)  # the pod's quota applies
        wait_for(lambda: self.reserved(p.proc.pid) == GIB, timeout=5, what="1 GiB in the ledger")
        p.stop()

    def test_fail_closed_process_waits_for_its_pod_manager_and_gets_its_quota(self):
        # GMT_FAIL_CLOSED: never heard a limit, so its first allocation
        # waits for the pod manager instead of running unlimited.
        self.start_schd()
        pm = self.start_pmgr("a")
        pm.stop()
        env = self.hook_env("a", GMT_FAIL_CLOSED="1", GMT_FAIL_CLOSED_WAIT_MS="15000")
        p = self.run_prog("a", MEM_PATHS, "alloc", str(GIB), "--step", str(256 * MIB), "--over",
                          str(64 * MIB), env=env)
        p.expect("INFO")
        p.send()
        time.sleep(1.0)
        self.assertTrue(p.lines.empty(), "allocated before its pod manager came")
        self.start_pmgr("a")
        self.assertEqual(p.expect("FILLED", timeout=15)["ok"], "1")
        self.assertEqual(int(p.expect("OVER")["rc"]), OOM)  # the pod's quota applies
        self.assertIn("GMT_FAIL_CLOSED is set", p.stderr())
        wait_for(lambda: self.reserved(p.proc.pid) == GIB, timeout=5, what="1 GiB in the ledger")
        p.stop()

    def test_fail_closed_process_fails_allocations_when_no_pod_manager_answers(self):
        self.start_schd()
        pm = self.start_pmgr("a")
        pm.stop()
        env = self.hook_env("a", GMT_FAIL_CLOSED="1", GMT_FAIL_CLOSED_WAIT_MS="700")
        p = self.run_prog("a", MEM_PATHS, "alloc", str(256 * MIB), "--step", str(64 * MIB),
                          env=env)
        p.expect("INFO")
        t0 = time.monotonic()
        p.send()
        f = p.expect("FILLED", timeout=10)
        took = time.monotonic() - t0
        self.assertEqual(f["ok"], "0", f)
        self.assertEqual(int(f["rc"]), OOM, f)
        self.assertGreater(took, 0.6)  # it waited for the pod manager first
        self.assertLess(took, 5.0)
        said = "GMT_FAIL_CLOSED: no pod manager gave this process its pod's memory limit"
        wait_for(lambda: said in p.stderr(), timeout=5, what="the hook to say why")

    def test_fail_closed_process_never_registered_fails_its_launches(self):
        # GMT_FAIL_CLOSED and no pod manager ever answered: a launch fails
        # with CUDA_ERROR_NOT_PERMITTED (800) rather than run outside every
        # share, and the hook says why once.
        self.start_schd()
        pm = self.start_pmgr("a")
        pm.stop()
        env = self.hook_env("a", GMT_FAIL_CLOSED="1", GMT_FAIL_CLOSED_WAIT_MS="500")
        spin = self.run_prog("a", SPIN, "--kernel-us", "1000", "--seconds", "2", env=env)
        rc, err = spin.finish(timeout=30)
        self.assertEqual(rc, 1, err)
        self.assertIn("cuLaunchKernel", err)
        self.assertIn("800", err)
        self.assertIn("GMT_FAIL_CLOSED: no pod manager has registered this process", err)
        # Without GMT_FAIL_CLOSED the same launches run, ungated.
        spin = self.run_prog("a", SPIN, "--kernel-us", "1000", "--seconds", "1",
                             env=self.hook_env("a"))
        rc, err = spin.finish(timeout=30)
        self.assertEqual(rc, 0, err)

    def test_stopped_pod_manager_does_not_hold_launches_or_allocations(self):
        self.start_schd()
        pm = self.start_pmgr("a")
        spin = self.run_prog("a", SPIN, "--kernel-us", "1000", "--seconds", "0")
        spin.expect("READY")
        spin.expect("T")
        m = self.mem(GIB, "--step", str(256 * MIB), "--over", str(64 * MIB))
        m.expect("INFO")
        self.wait_process("a", m.proc.pid)
        pm.proc.send_signal(signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            m.send()
            self.assertEqual(m.expect("FILLED", timeout=10)["ok"], "1")
            took = time.monotonic() - t0
            self.assertLess(took, 3.0)  # not a token or RPC timeout
            # Within the last known quota (1 GiB).
            self.assertEqual(int(m.expect("OVER")["rc"]), OOM)
            # Launches go on: most of 5 s of GPU time, not the rest of a grant.
            start = spin.expect("T")
            while True:
                r = spin.expect("T")
                if float(r["mono_ms"]) - float(start["mono_ms"]) >= 5000:
                    break
            gained = (float(r["busy_us"]) - float(start["busy_us"])) / 1e6
            self.assertGreater(gained, 2.5, (start, r))
        finally:
            pm.proc.send_signal(signal.SIGCONT)
        # Back: gated by tokens again.
        wait_for(lambda: "tokens from the pod manager again" in spin.stderr(), timeout=8,
                 what="the spin job to get tokens again")
        # Its reports reach the pod manager again (what the ledger makes of
        # memory granted while it was stopped: docs/status.md, known limits).
        self.wait_process("a", m.proc.pid, timeout=8, memory_used=GIB)
        spin.stop()
        m.stop()

    def test_memory_taken_while_pod_manager_was_stopped_leaves_the_ledger_once_freed(self):
        # The scheduler forgets the pod while its pod manager is stopped and
        # rebuilds the ledger from the processes' reports once it is back.
        schd = self.start_schd("--pod-timeout", "1000")
        pm = self.start_pmgr("a")
        p = self.mem(64 * MIB, "--step", str(64 * MIB))
        p.expect("INFO")
        self.wait_process("a", p.proc.pid)
        pm.proc.send_signal(signal.SIGSTOP)
        try:
            p.send()
            # Its Reserve gets no answer: granted by the hook itself.
            self.assertEqual(p.expect("FILLED", timeout=10)["ok"], "1")
            p.expect("OVER")
            wait_for(lambda: "pod 'a' disconnected" in schd.output() or None, timeout=5,
                     what="the scheduler to forget the pod")
        finally:
            pm.proc.send_signal(signal.SIGCONT)
        # The ledger holds what the process uses: not the Reserve it gave up
        # on (answered late), not its own grant twice.
        wait_for(lambda: self.reserved(p.proc.pid) == 64 * MIB or None, timeout=8,
                 what="64 MiB in the ledger (holds %r)" % self.reserved(p.proc.pid))
        p.send()
        p.expect("FREED")
        # Freed, none of it stays there (it stayed until the process exited).
        wait_for(lambda: self.reserved(p.proc.pid) == 0 or None, timeout=5,
                 what="nothing in the ledger (holds %r)" % self.reserved(p.proc.pid))
        p.stop()


class Refusals(GmtTestCase):
    """A pod at LIMIT 0 gets no GPU time: the scheduler's refusal is an
    answer, not an outage to run ungated through."""
    CONFIG = "1\na 0.0 0.0 1Gi\n"

    def gained(self, spin, ms):
        start = spin.expect("T")
        while True:
            r = spin.expect("T", timeout=ms / 1000 + 10)
            if float(r["mono_ms"]) - float(start["mono_ms"]) >= ms:
                return (float(r["busy_us"]) - float(start["busy_us"])) / 1e6

    def test_pod_at_limit_zero_waits_until_its_limit_is_raised(self):
        schd = self.start_schd()
        self.start_pmgr("a")
        spin = self.run_prog("a", SPIN, "--kernel-us", "1000", "--seconds", "0")
        spin.expect("READY")
        # Its first launch waits: no kernel runs, so no progress line.
        time.sleep(3)
        self.assertEqual(spin.lines.qsize(), 0, "the job ran at LIMIT 0")
        # The job's stderr says the scheduler's words once: which pod,
        # why, and what to change (issue 28 item 3).
        words = ("pod 'a' gets no GPU time: its LIMIT is 0 in %s; give it a LIMIT above 0 there"
                 % self.config_path)
        wait_for(lambda: words in spin.stderr(), timeout=10,
                 what="the scheduler's words on the job's stderr (has %r)" % spin.stderr())
        self.assertEqual(spin.stderr().count("wait for GPU time"), 1, spin.stderr())
        # gmt-schd logs it (at info level: its log names no level below
        # warnings), once in 10 s for the pod however often it asks (the
        # job asks again every second).
        logged = "gmt-schd: pod 'a' pid "
        wait_for(lambda: logged in schd.output(), timeout=10,
                 what="gmt-schd's log line for the refusal")
        wait_for(lambda: schd.output().count("Token pod 'a' ") >= 3, timeout=10,
                 what="the job to ask again (%d asks)" % schd.output().count("Token pod 'a' "))
        refused = [l for l in schd.output().splitlines()
                   if logged in l and "its LIMIT is 0 in %s" % self.config_path in l]
        self.assertEqual(len(refused), 1, schd.output()[-3000:])
        # Counted under its own why, its words the pod's last refusal.
        st = self.pod("a")
        self.assertGreaterEqual(st["refused_limit"], 3, st)
        self.assertEqual((st["refused_quota"], st["refused_devices"]), (0, 0), st)
        self.assertIn(words, st["last_refusal"])
        self.assertIn("tokens refused for LIMIT 0: ", self.gmt("status").stdout)
        self.assertEqual(spin.stderr().count("wait for GPU time"), 1, spin.stderr())
        self.write_config("1\na 0.5 1.0 1Gi\n")
        schd.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: self.gained(spin, 1000) > 0.5, timeout=15,
                 what="the job to run once its LIMIT is 1")
        spin.stop()

    def test_pod_manager_refusing_alone_says_the_scheduler_is_unreachable(self):
        schd = self.start_schd()
        self.start_pmgr("a")
        spin = self.run_prog("a", SPIN, "--kernel-us", "1000", "--seconds", "0")
        spin.expect("READY")
        wait_for(lambda: "its LIMIT is 0 in" in spin.stderr(), timeout=10,
                 what="the scheduler's refusal on the job's stderr (has %r)" % spin.stderr())
        schd.proc.kill()
        # With gmt-schd gone the pod manager refuses on the LIMIT it last
        # heard: in its own words, said once, not as the scheduler's.
        own = "is unreachable, and the pod's LIMIT as last heard from it is 0"
        wait_for(lambda: own in spin.stderr(), timeout=10,
                 what="the pod manager's own words on the job's stderr (has %r)" % spin.stderr())
        self.assertIn("gmt-pmgr of pod 'a': gmt-schd at ", spin.stderr())
        time.sleep(1.5)
        self.assertEqual(spin.stderr().count(own), 1, spin.stderr())
        self.assertEqual(spin.lines.qsize(), 0, "the job ran at LIMIT 0")
        spin.stop()


if __name__ == "__main__":
    import unittest
    unittest.main()
