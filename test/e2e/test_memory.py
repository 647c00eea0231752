"""End-to-end: hard memory quotas. Each allocation path is held exactly at
the pod's GPU_MEM (an allocation that fits exactly succeeds, one byte more
fails with CUDA_ERROR_OUT_OF_MEMORY), processes of one pod share the quota,
a killed process's reservations come back within a second, limits reload
without a restart, and cuMemGetInfo shows the pod's view."""
import os
import signal
import time

from gmt_e2e import BUILD, GmtTestCase, wait_for

MEM_PATHS = os.path.join(BUILD, "test", "e2e", "memprogs", "mem_paths")
HOST_PINS = os.path.join(BUILD, "test", "e2e", "memprogs", "host_pins")
MIB = 1 << 20
GIB = 1 << 30
OOM = 2  # CUDA_ERROR_OUT_OF_MEMORY

# Paths whose smallest allocation is one byte, and those with a granularity.
BYTE_PATHS = ["alloc", "alloc_v1", "pitch", "pitch_v1", "managed", "async", "pool", "array",
              "array2d", "mipmap"]
GRANULAR_PATHS = {"vmm": 2 * MIB}


class MemoryCase(GmtTestCase):
    def mem(self, pod, path, limit, *args, env=None):
        return self.run_prog(pod, MEM_PATHS, path, str(limit), *args, env=env)

    def reserved(self, pod, pid=None):
        """The ledger's bytes for the pod (or one of its processes)."""
        p = self.pod(pod)
        if pid is None:
            return p.get("memory_reserved")
        for pr in p.get("processes", []):
            if pr["pid"] == pid:
                return pr.get("memory_reserved")
        return None

    def wait_reserved(self, pod, want, pid=None, timeout=5.0):
        return wait_for(lambda: self.reserved(pod, pid) == want or None, timeout=timeout,
                        what="pod %s%s to hold %d bytes in the ledger (holds %r)"
                        % (pod, "" if pid is None else " pid %d" % pid, want,
                           self.reserved(pod, pid)))

    def reload(self, text, pod=None, want_limit=None):
        self.write_config(text)
        self.daemons[0].proc.send_signal(signal.SIGHUP)
        if pod:
            wait_for(lambda: self.pod(pod).get("memory_limit") == want_limit,
                     what="pod %s to get limit %s" % (pod, want_limit))


class ExactLimitOnEveryPath(MemoryCase):
    CONFIG = "1\na 0.5 1.0 8Mi\n"
    LIMIT = 8 * MIB

    def check_path(self, path, over):
        p = self.mem("a", path, self.LIMIT, "--step", str(2 * MIB), "--over", str(over))
        info = p.expect("INFO")
        self.assertEqual(int(info["total"]), self.LIMIT, info)
        self.assertEqual(int(info["free"]), self.LIMIT, info)
        p.send()
        filled = p.expect("FILLED")
        self.assertEqual(filled["ok"], "1", filled)
        self.assertEqual(int(filled["bytes"]), self.LIMIT)
        over_line = p.expect("OVER")
        self.assertEqual(int(over_line["rc"]), OOM, over_line)
        at_limit = p.expect("INFO")
        self.assertEqual(int(at_limit["free"]), 0, at_limit)
        self.assertEqual(int(at_limit["total"]), self.LIMIT, at_limit)
        self.wait_reserved("a", self.LIMIT, pid=p.proc.pid)
        p.send()
        p.expect("FREED")
        # Idle slack goes back within about 100 ms of the last free.
        self.wait_reserved("a", 0, pid=p.proc.pid, timeout=3)
        self.wait_process("a", p.proc.pid, memory_used=0)
        p.send()
        p.expect("LOOPED")
        p.send()
        p.expect("TRIMMED")
        p.send()
        rc, err = p.finish()
        # Why it failed, on the job's stderr, once: the pod's quota.
        self.assertEqual(err.count("an allocation fails with out of memory: pod 'a' holds"), 1,
                         err)
        self.assertEqual(rc, 0, err)
        wait_for(lambda: self.process("a", p.proc.pid) is None, timeout=3, what="exit to land")
        self.assertEqual(self.reserved("a"), 0)

    def test_every_path_fits_exactly_and_fails_one_byte_over(self):
        self.start_schd()
        self.start_pmgr("a")
        for path in BYTE_PATHS:
            with self.subTest(path=path):
                self.check_path(path, 1)
        for path, granule in GRANULAR_PATHS.items():
            with self.subTest(path=path):
                self.check_path(path, granule)


class AsyncPools(MemoryCase):
    CONFIG = "1\na 0.5 1.0 64Mi\n"

    def check_loops(self, path):
        p = self.mem("a", path, 16 * MIB, "--step", str(MIB), "--loops", "1000")
        p.expect("INFO")
        p.send()
        self.assertEqual(p.expect("FILLED")["ok"], "1")
        self.assertEqual(int(p.expect("OVER")["rc"]), 0)  # 16 MiB + 1 fits in 64 MiB
        p.send()
        p.expect("FREED")
        p.send()
        looped = p.expect("LOOPED")
        pool = int(looped["pool"])
        # The pool keeps one block cached: that is charged, once, however
        # many times it was reused; nothing else is left after the idle
        # slack goes back.
        self.assertGreaterEqual(pool, MIB)
        self.assertLess(pool, 2 * MIB)
        self.wait_reserved("a", pool, pid=p.proc.pid)
        proc = self.wait_process("a", p.proc.pid, memory_used=0)
        self.assertEqual(proc["allocs"], proc["frees"])
        self.assertGreaterEqual(proc["allocs"], 1000)
        p.send()
        self.assertEqual(int(p.expect("TRIMMED")["pool"]), 0)
        self.wait_reserved("a", 0, pid=p.proc.pid)
        p.send()
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)

    def test_async_alloc_free_1000x_neither_leaks_nor_double_counts(self):
        self.start_schd()
        self.start_pmgr("a")
        self.check_loops("async")

    def test_pool_alloc_free_1000x_neither_leaks_nor_double_counts(self):
        self.start_schd()
        self.start_pmgr("a")
        self.check_loops("pool")


class SharedQuota(MemoryCase):
    CONFIG = "2\na 0.5 1.0 96Mi\nb 0.5 1.0 16Gi\n"

    def test_two_processes_of_one_pod_share_one_quota(self):
        self.start_schd()
        self.start_pmgr("a")
        # The first holds 40 MiB and cannot get 64 MiB more (104 > 96).
        p1 = self.mem("a", "alloc", 40 * MIB, "--step", str(8 * MIB), "--over", str(64 * MIB))
        p1.expect("INFO")
        p1.send()
        self.assertEqual(p1.expect("FILLED")["ok"], "1")
        self.assertEqual(int(p1.expect("OVER")["rc"]), OOM)
        p1.expect("INFO")
        # Its idle slack goes back, so the other process can have the rest:
        # until then the exact-limit rule holds for the pod's ledger total.
        self.wait_reserved("a", 40 * MIB, pid=p1.proc.pid, timeout=3)
        p2 = self.mem("a", "alloc", 56 * MIB, "--step", str(8 * MIB), "--over", "1")
        info = p2.expect("INFO")
        self.assertEqual(int(info["total"]), 96 * MIB)
        self.assertEqual(int(info["free"]), 56 * MIB)
        p2.send()
        self.assertEqual(p2.expect("FILLED")["ok"], "1")
        self.assertEqual(int(p2.expect("OVER")["rc"]), OOM)
        self.assertEqual(int(p2.expect("INFO")["free"]), 0)
        self.wait_reserved("a", 96 * MIB)
        # The first frees: its bytes come back to the pod within ~100 ms.
        p1.send()
        p1.expect("FREED")
        self.wait_reserved("a", 56 * MIB, timeout=3)
        for p in (p1, p2):
            p.send(), p.send(), p.send()
            rc, err = p.finish()
            self.assertEqual(rc, 0, err)

    def test_killed_process_reservations_are_reclaimed_within_a_second(self):
        self.start_schd()
        self.start_pmgr("a")
        p = self.mem("a", "alloc", 96 * MIB, "--step", str(32 * MIB))
        p.expect("INFO")
        p.send()
        self.assertEqual(p.expect("FILLED")["ok"], "1")
        p.expect("OVER")
        self.wait_reserved("a", 96 * MIB)
        t0 = time.monotonic()
        os.kill(p.proc.pid, signal.SIGKILL)
        self.wait_reserved("a", 0, timeout=1.0)
        took = time.monotonic() - t0
        self.assertLess(took, 1.0)
        self.assertIn("reclaimed", self.daemons[0].output())

    def test_restarted_scheduler_rebuilds_the_ledger_from_reports(self):
        schd = self.start_schd()
        self.start_pmgr("a")
        p = self.mem("a", "alloc", 40 * MIB, "--step", str(8 * MIB), "--over", str(64 * MIB))
        p.expect("INFO")
        p.send()
        self.assertEqual(p.expect("FILLED")["ok"], "1")
        p.expect("OVER")
        self.wait_reserved("a", 40 * MIB, timeout=3)
        self.assertEqual(schd.stop(), 0)
        self.daemons.remove(schd)
        self.start_schd()
        # The process's report says what it holds; the new ledger takes it
        # and enforces the quota with it.
        self.wait_reserved("a", 40 * MIB, pid=p.proc.pid, timeout=5)
        q = self.mem("a", "alloc", 56 * MIB, "--step", str(8 * MIB), "--over", "1")
        q.expect("INFO")
        q.send()
        self.assertEqual(q.expect("FILLED")["ok"], "1")
        self.assertEqual(int(q.expect("OVER")["rc"]), OOM)
        for x in (p, q):
            x.stop()

    def test_without_pod_manager_allocations_keep_to_the_last_known_limit(self):
        self.start_schd()
        pm = self.start_pmgr("a")
        p = self.mem("a", "alloc", 40 * MIB, "--step", str(8 * MIB), "--over", str(64 * MIB))
        p.expect("INFO")
        pm.proc.kill()
        pm.proc.wait(timeout=5)
        t0 = time.monotonic()
        p.send()
        self.assertEqual(p.expect("FILLED")["ok"], "1")
        self.assertEqual(int(p.expect("OVER")["rc"]), OOM)  # 104 MiB > 96 MiB
        self.assertLess(time.monotonic() - t0, 5.0)  # no hang
        p.send()
        p.expect("FREED")
        self.assertEqual(p.stderr().count("memory ledger unreachable"), 1, p.stderr())
        p.stop()

    def test_memgetinfo_shows_quota_or_physical_whichever_is_less(self):
        self.start_schd()
        self.start_pmgr("a")
        self.start_pmgr("b")
        a = self.mem("a", "alloc", 32 * MIB, "--step", str(32 * MIB))
        info = a.expect("INFO")
        self.assertEqual(int(info["total"]), 96 * MIB)
        self.assertEqual(int(info["free"]), 96 * MIB)
        self.assertEqual(int(info["total1"]), 96 * MIB)
        a.send()
        a.expect("FILLED")
        a.expect("OVER")
        held = a.expect("INFO")
        self.assertEqual(int(held["total"]), 96 * MIB)
        self.assertEqual(int(held["free"]), 64 * MIB)
        # Quota above the device (16 GiB on 8 GiB): the device's numbers.
        b = self.mem("b", "alloc", 32 * MIB, "--step", str(32 * MIB))
        binfo = b.expect("INFO")
        self.assertEqual(int(binfo["total"]), 8 * GIB)
        self.assertLessEqual(int(binfo["free"]), 8 * GIB - 32 * MIB)  # a's 32 MiB is in use
        self.assertEqual(int(binfo["total1"]), 0xFFFFFFFF)  # v1 saturates at 4 GiB
        # Without the hook: the driver's numbers.
        u = self.run_prog("a", MEM_PATHS, "alloc", str(MIB), env=self.prog_env())
        uinfo = u.expect("INFO")
        self.assertEqual(int(uinfo["total"]), 8 * GIB)
        for p in (a, b, u):
            p.stop()


class HotReload(MemoryCase):
    CONFIG = "1\na 0.5 1.0 64Mi\n"

    def test_reloaded_limits_apply_to_the_next_allocation(self):
        self.start_schd()
        self.start_pmgr("a")
        # Lower: 16 MiB fit exactly, one byte more no longer does.
        p = self.mem("a", "alloc", 16 * MIB, "--step", str(16 * MIB), "--over", "1")
        p.expect("INFO")
        self.reload("1\na 0.5 1.0 16Mi\n", "a", 16 * MIB)
        p.send()
        self.assertEqual(p.expect("FILLED")["ok"], "1")
        self.assertEqual(int(p.expect("OVER")["rc"]), OOM)
        self.assertEqual(int(p.expect("INFO")["total"]), 16 * MIB)
        p.send()
        p.expect("FREED")
        self.wait_reserved("a", 0, timeout=3)  # its idle slack went back
        # Higher: 48 MiB now fit, where 16 MiB was the limit.
        self.reload("1\na 0.5 1.0 48Mi\n", "a", 48 * MIB)
        q = self.mem("a", "alloc", 48 * MIB, "--step", str(8 * MIB), "--over", "1")
        self.assertEqual(int(q.expect("INFO")["total"]), 48 * MIB)
        q.send()
        self.assertEqual(q.expect("FILLED")["ok"], "1")
        self.assertEqual(int(q.expect("OVER")["rc"]), OOM)
        for x in (p, q):
            x.stop()

    def test_mode_reaches_status_and_the_pod_manager(self):
        """mode= (issue 12) travels with the pod's config: gmt status shows
        it, and a reload that changes it reaches the pod manager."""
        self.write_config("1\na 0.5 1.0 64Mi mode=swap idle-out=0\n")
        self.start_schd()
        pmgr = self.start_pmgr("a")
        wait_for(lambda: self.pod("a").get("mode") == "swap", what="pod a with mode swap")
        self.reload("1\na 0.5 1.0 64Mi mode=um idle-out=0\n")
        wait_for(lambda: self.pod("a").get("mode") == "um", what="pod a with mode um")
        wait_for(lambda: "mode swap -> um" in pmgr.output() or None, timeout=10,
                 what="the pod manager to log the new mode")

    def test_broken_config_on_reload_keeps_the_old_limits(self):
        self.start_schd()
        self.start_pmgr("a")
        p = self.mem("a", "alloc", 64 * MIB, "--step", str(16 * MIB), "--over", "1")
        p.expect("INFO")
        self.write_config("1\na 0.5 1.0 lots\n")
        self.daemons[0].proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "not reloaded" in self.daemons[0].output(), what="the reload to fail")
        self.assertIn("resource-config.txt:2", self.daemons[0].output())
        self.assertEqual(self.pod("a")["memory_limit"], 64 * MIB)
        p.send()
        self.assertEqual(p.expect("FILLED")["ok"], "1")
        self.assertEqual(int(p.expect("OVER")["rc"]), OOM)
        p.stop()


class SlackOfOtherProcesses(MemoryCase):
    """Processes reserve in 32 MiB chunks and keep the rest as slack: a
    Reserve that the pod's live allocations leave room for waits at the
    pod manager while the others give their slack back, instead of failing
    (issue 24: 256 processes of 8 MiB in a 1 GiB pod got 45-93 allocations
    where 128 fit)."""
    CONFIG = "1\na 0.5 1.0 160Mi\n"
    N = 24  # of 8 MiB each: exactly 20 fit

    def burst(self, timeout=20):
        """N processes allocate 8 MiB at once; returns them with their FILLED."""
        progs = [self.mem("a", "alloc", 8 * MIB, "--step", str(8 * MIB), "--over", str(200 * MIB))
                 for _ in range(self.N)]
        for p in progs:
            p.expect("INFO", timeout=timeout)
        for p in progs:
            p.send()
        return [(p, p.expect("FILLED", timeout=timeout)) for p in progs]

    def check_exactly_twenty(self, filled):
        oks = [p for p, f in filled if f["ok"] == "1"]
        failed = [f for p, f in filled if f["ok"] != "1"]
        self.assertEqual(len(oks), 20, [f for _, f in filled])
        self.assertEqual([int(f["rc"]) for f in failed], [OOM] * 4, failed)
        for p in oks:
            # 200 MiB is past the limit whatever anyone gives back.
            self.assertEqual(int(p.expect("OVER")["rc"]), OOM)
        return oks

    def test_processes_fill_the_quota_exactly_while_others_hold_slack(self):
        self.start_schd()
        self.start_pmgr("a")
        t0 = time.monotonic()
        oks = self.check_exactly_twenty(self.burst())
        wait_for(lambda: self.pod("a").get("memory_used") == 160 * MIB or None, timeout=5,
                 what="the pod to use 160 MiB (uses %r)" % self.pod("a").get("memory_used"))
        # The slack went back: the ledger holds the allocations to the byte.
        self.wait_reserved("a", 160 * MIB, timeout=3)
        self.assertLess(time.monotonic() - t0, 15)
        # Full: a byte more fails, and at once (the live allocations leave
        # no room: nothing to wait for).
        q = self.mem("a", "alloc", 1, "--step", "1")
        q.expect("INFO")
        t1 = time.monotonic()
        q.send()
        f = q.expect("FILLED")
        took = time.monotonic() - t1
        self.assertEqual((f["ok"], int(f["rc"])), ("0", OOM), f)
        self.assertLess(took, 0.8)  # a hold lasts up to 1 s
        # One frees: its 8 MiB fit another process at once.
        oks[0].send()
        oks[0].expect("FREED")
        r = self.mem("a", "alloc", 8 * MIB, "--step", str(8 * MIB), "--over", "1")
        r.expect("INFO")
        r.send()
        self.assertEqual(r.expect("FILLED")["ok"], "1")
        self.assertEqual(int(r.expect("OVER")["rc"]), OOM)
        self.wait_reserved("a", 160 * MIB, timeout=3)

    def test_with_the_scheduler_down_the_pod_managers_count_fills_the_quota_exactly(self):
        schd = self.start_schd()
        pm = self.start_pmgr("a")
        progs = [self.mem("a", "alloc", 8 * MIB, "--step", str(8 * MIB), "--over", str(200 * MIB))
                 for _ in range(self.N)]
        for p in progs:
            p.expect("INFO")
        schd.proc.kill()
        schd.proc.wait(timeout=5)
        wait_for(lambda: "scheduler unreachable" in pm.output() or None, timeout=5,
                 what="the pod manager to count the pod itself")
        for p in progs:
            p.send()
        self.check_exactly_twenty([(p, p.expect("FILLED")) for p in progs])

    def test_reserve_past_the_limit_is_refused_at_once_while_slack_is_held(self):
        self.start_schd()
        self.start_pmgr("a")
        # 152 MiB in 8 MiB steps from 32 MiB chunks: 160 reserved, 8 of it
        # slack while it has not idled.
        p = self.mem("a", "alloc", 152 * MIB, "--step", str(8 * MIB), "--over", str(200 * MIB))
        p.expect("INFO")
        p.send()
        self.assertEqual(p.expect("FILLED")["ok"], "1")
        # 16 MiB: the live 152 MiB leave 8; refused without waiting for the
        # slack, which could not make room for it.
        q = self.mem("a", "alloc", 16 * MIB, "--step", str(16 * MIB))
        q.expect("INFO")
        t0 = time.monotonic()
        q.send()
        f = q.expect("FILLED")
        took = time.monotonic() - t0
        self.assertEqual((f["ok"], int(f["rc"])), ("0", OOM), f)
        self.assertLess(took, 0.8)
        self.wait_reserved("a", 152 * MIB, timeout=3)


class PinnedHostMemory(MemoryCase):
    """Page-locked host memory a job holds (cuMemAllocHost, cuMemHostAlloc,
    cuMemHostRegister) shows per process, per pod and for the node, beside
    the node's budget, and goes back to 0 when freed."""
    CONFIG = "1\na 0.5 1.0 1Gi\n"

    def pinned(self, pid):
        st = self.status()
        pod = next(p for p in st["pods"] if p["name"] == "a")
        proc = next((q for q in pod["processes"] if q["pid"] == pid), {})
        return proc.get("pinned_bytes"), pod.get("pinned_bytes"), st["host"]["pinned_bytes"]

    def test_pinned_bytes_per_process_pod_and_node(self):
        self.start_schd("--pinned-limit", "3Gi")
        self.start_pmgr("a")
        p = self.run_prog("a", HOST_PINS)
        want = int(p.expect("PINNED")["bytes"])
        self.assertEqual(want, 14 * MIB)
        wait_for(lambda: self.pinned(p.proc.pid) == (want, want, want) or None,
                 what="14 MiB pinned in status (have %r)" % (self.pinned(p.proc.pid),))
        self.assertEqual(self.status()["host"]["pinned_limit"], 3 * GIB)
        self.assertEqual(self.reserved("a", p.proc.pid), 0)  # not device memory
        p.send()
        p.expect("FREED")
        wait_for(lambda: self.pinned(p.proc.pid) == (0, 0, 0) or None,
                 what="nothing pinned after the frees (have %r)" % (self.pinned(p.proc.pid),))
        p.send()
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)
