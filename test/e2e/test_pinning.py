"""Pin advice end to end, the hook's side (issue 11): malloc'd buffers of a
program under the hook, copied hot or cold on the fake driver, pinned or
not by the pod's pin= mode; what the driver holds page-locked is read by
the program itself (cuMemHostGetFlags), what gmt holds from `gmt status`.

The hook tracks buffers only where it owns malloc: under the ASan build the
ASan runtime does, so these run in the plain build (scripts/test.sh runs
the end-to-end tests in both)."""
import os
import sqlite3
import unittest

from gmt_e2e import ASAN_PRELOAD, BUILD, GmtTestCase, wait_for

PIN_BUFFERS = os.path.join(BUILD, "test", "e2e", "memprogs", "pin_buffers")
HOST_PINS = os.path.join(BUILD, "test", "e2e", "memprogs", "host_pins")
WORKLOAD = os.path.join(BUILD, "bench", "pin_workload")
MIB = 1 << 20
SIZE_MIB = 8

# The CI workload: 2 hot buffers with 50 + 50 copies, 5 cold with
# 1 + 1 (a round trip is one copy each way).
HOT, HOT_TRIPS, COLD, COLD_TRIPS = 2, 50, 5, 1


@unittest.skipIf(ASAN_PRELOAD, "under ASan the ASan runtime owns malloc: no buffer is tracked")
class PinAdvice(GmtTestCase):
    CONFIG = ("4\n"
              "off 0.2 1.0 1Gi\n"
              "adaptive 0.2 1.0 1Gi pin=adaptive\n"
              "profile 0.2 1.0 1Gi pin=profile\n"
              "use 0.2 1.0 1Gi pin=use\n")

    def start(self, *pods, limit="1Gi"):
        self.start_schd("--pinned-limit", limit)
        for pod in pods:
            self.start_pmgr(pod)

    def workload(self, pod, *extra, hot=HOT, cold=COLD):
        p = self.run_prog(pod, PIN_BUFFERS, str(SIZE_MIB), str(hot), str(HOT_TRIPS), str(cold),
                          str(COLD_TRIPS), *extra)
        got = p.expect("PINNED", timeout=60)
        self.last_which = got["which"]
        return p, int(got["hot"]), int(got["cold"])

    def pinned(self, pod, pid):
        """(pinned_bytes, pinned_advised) of the process, and the node's."""
        st = self.status()
        proc = self.process(pod, pid) or {}
        host = st.get("host", {})
        return (proc.get("pinned_bytes"), proc.get("pinned_advised"),
                host.get("pinned_bytes"), host.get("pinned_advised"))

    def wait_pinned(self, pod, pid, want):
        return wait_for(lambda: self.pinned(pod, pid) == want or None, timeout=10,
                        what="pinned %r for pid %d (have %r)" % (want, pid, self.pinned(pod, pid)))

    def finish(self, p, pod):
        p.send()
        p.expect("FREED")
        self.wait_pinned(pod, p.proc.pid, (0, 0, 0, 0))
        p.send()
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)

    def test_adaptive_pins_exactly_the_hot_buffers(self):
        self.start("adaptive")
        p, hot, cold = self.workload("adaptive")
        self.assertEqual((hot, cold), (HOT, 0))
        want = HOT * SIZE_MIB * MIB
        self.wait_pinned("adaptive", p.proc.pid, (want, want, want, want))
        self.finish(p, "adaptive")

    def test_adaptive_gives_idle_pins_back(self):
        """A buffer adaptive pinned goes back to pageable once it has not
        been copied for a while (GMT_PIN_IDLE_MS), budget short or not,
        and its bytes go back to the node's ledger."""
        self.start("adaptive")
        p = self.run_prog("adaptive", PIN_BUFFERS, str(SIZE_MIB), str(HOT), str(HOT_TRIPS),
                          str(COLD), str(COLD_TRIPS),
                          env=self.hook_env("adaptive", GMT_PIN_IDLE_MS="500"))
        got = p.expect("PINNED", timeout=60)
        self.assertEqual((int(got["hot"]), int(got["cold"])), (HOT, 0))
        self.wait_pinned("adaptive", p.proc.pid, (0, 0, 0, 0))
        self.finish(p, "adaptive")

    def test_adaptive_with_async_copies(self):
        self.start("adaptive")
        p, hot, cold = self.workload("adaptive", "async")
        self.assertEqual((hot, cold), (HOT, 0))
        self.finish(p, "adaptive")

    def test_off_pins_nothing(self):
        self.start("off")
        p, hot, cold = self.workload("off")
        self.assertEqual((hot, cold), (0, 0))
        self.wait_pinned("off", p.proc.pid, (0, 0, 0, 0))
        self.finish(p, "off")

    def test_budget_runs_out(self):
        """12 MiB of budget: one 8 MiB hot buffer is pinned, the other
        stays pageable, and the program's bytes are right either way."""
        self.start("adaptive", limit="12Mi")
        p, hot, cold = self.workload("adaptive")
        self.assertEqual((hot, cold), (1, 0))
        want = SIZE_MIB * MIB
        self.wait_pinned("adaptive", p.proc.pid, (want, want, want, want))
        self.finish(p, "adaptive")

    def test_budget_short_unpins_a_cold_buffer(self):
        """Room for one 8 MiB buffer: the first hot buffer is pinned, goes
        cold (no copy for over a second) while the second heats up, and
        is unpinned to make room for it."""
        self.start("adaptive", limit="12Mi")
        p, hot, cold = self.workload("adaptive", "phases")
        self.assertEqual((hot, cold), (1, 0))
        self.assertEqual(self.last_which, "1")  # the second buffer, the hot one now
        want = SIZE_MIB * MIB
        self.wait_pinned("adaptive", p.proc.pid, (want, want, want, want))
        self.finish(p, "adaptive")

    def test_realloc_and_free_unregister_first(self):
        """Buffers gmt registered are grown with realloc (their bytes kept)
        and freed: nothing stays pinned."""
        self.start("adaptive")
        p, hot, _ = self.workload("adaptive", "realloc")
        self.assertEqual(hot, HOT)
        self.finish(p, "adaptive")

    def test_program_registers_a_buffer_gmt_pinned(self):
        """The program's own cuMemHostRegister of a buffer gmt registered
        succeeds as it would without gmt."""
        self.start("adaptive")
        p, hot, _ = self.workload("adaptive", "register")
        self.assertEqual(hot, HOT)
        p.expect("REGISTERED")
        self.finish(p, "adaptive")

    def test_c_api_buffers(self):
        """Buffers from gmt_host_alloc (gmt/alloc.h) are advised as
        malloc'd ones are, and work without the hook as plain memory."""
        self.start("adaptive")
        p, hot, cold = self.workload("adaptive", "api")
        self.assertEqual((hot, cold), (HOT, 0))
        self.finish(p, "adaptive")
        q = self.run_prog("adaptive", PIN_BUFFERS, "2", "1", "3", "1", "1", "api",
                          env=self.prog_env())
        self.assertEqual(int(q.expect("PINNED", timeout=60)["hot"]), 0)
        q.send()
        q.expect("FREED")
        q.send()
        rc, err = q.finish()
        self.assertEqual(rc, 0, err)

    def test_programs_pinned_memory_stays_pinned(self):
        """What a program allocates pinned (cuMemAllocHost, cuMemHostAlloc
        with flags, its own cuMemHostRegister) stays pinned in every mode:
        with unified addressing its kernels may read it directly, whatever
        the flags say, so gmt never hands out pageable memory for it."""
        self.start("profile", "use", "adaptive")
        for pod in ("profile", "use", "adaptive"):
            # The pool keeps its freed blocks 300 ms (test_pin_pool.py).
            p = self.run_prog(pod, HOST_PINS, env=self.hook_env(pod, GMT_PIN_POOL_IDLE_MS="300"))
            want = int(p.expect("PINNED")["bytes"])
            self.assertEqual(want, 14 * MIB)
            self.wait_pinned(pod, p.proc.pid, (want, 0, want, 0))
            self.finish(p, pod)

    def test_profile_then_use(self):
        """A profile run pins every buffer it transfers and records them;
        a run of the same program in use mode pins only the hot ones."""
        self.start("profile", "use")
        p, hot, cold = self.workload("profile")
        self.assertEqual((hot, cold), (HOT, COLD))
        self.finish(p, "profile")
        q, hot, cold = self.workload("use")
        self.assertEqual((hot, cold), (HOT, 0))
        self.finish(q, "use")

    @unittest.skipUnless(os.path.exists(WORKLOAD), "bench/pin_workload not built")
    def test_every_profile_run_is_recorded(self):
        """A profile run that frees its buffers and exits at once still
        records every buffer: the histories may be in flight on the hook's
        reporter thread at exit, which must not cut them off (before the
        fix, 1-3 runs of 8 lost all their histories in each of 3 tries).
        Each run adds one to every buffer's count of runs in the store."""
        self.start("profile")
        runs, nbuf = 8, 27
        for _ in range(runs):
            p = self.run_prog("profile", WORKLOAD, "--size", str(4 * MIB))
            rc, err = p.finish(timeout=60)
            self.assertEqual(rc, 0, err)
        db = sqlite3.connect(os.path.join(self.tmp, "state", "gmt.db"))
        try:
            got = db.execute("SELECT nth, runs FROM pin_profiles WHERE exe = ? ORDER BY nth",
                             (os.path.realpath(WORKLOAD),)).fetchall()
        finally:
            db.close()
        self.assertEqual(got, [(nth, runs) for nth in range(nbuf)])

    def test_use_without_a_profile_pins_nothing(self):
        self.start("use")
        p, hot, cold = self.workload("use")
        self.assertEqual((hot, cold), (0, 0))
        self.finish(p, "use")


if __name__ == "__main__":
    unittest.main()
