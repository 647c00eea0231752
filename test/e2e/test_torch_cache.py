"""End-to-end: PyTorch's cached blocks are given back before a move out
(issue 12, item 4; docs/tiers.md, "PyTorch's cache"). A Python job in a swap
pod holds a live allocation and a cached one (pyprogs/torch_cache_job.py:
the driver API through ctypes, and a stand-in torch module whose
torch.cuda.empty_cache() frees the cached one, as PyTorch's caching
allocator does). When another pod needs room, the hook asks Python for
torch.cuda.empty_cache() first: the cached bytes are freed, not moved, and
what is left moves only if it must. Python runs only with the GIL: a job
holding it does not hold up the move, which goes on after the bound."""
import os
import sys
import time

from gmt_e2e import GmtTestCase, wait_for
from test_swap_jobs import MIB, SWAP_JOB

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pyprogs", "torch_cache_job.py")
CARD = 100 * MIB


class CacheJob(GmtTestCase):
    """A torch_cache_job in pod a (40 MiB live, 40 cached) on a 100 MiB card."""
    CONFIG = "2\na 0.5 1.0 1Gi mode=swap idle-out=0\nb 0.5 1.0 1Gi mode=swap idle-out=0\n"

    def start(self, *flags, **env):
        # Pressure off (--tier-trigger 1): a is asked for b's shortfall
        # only, not down to the stop threshold.
        self.start_schd("--gpu-capacity", "0=%d" % CARD, "--tier-trigger", "1", *flags)
        self.start_pmgr("a")
        self.start_pmgr("b")
        env = self.hook_env("a", GMT_FAKE_MEM=str(CARD), GMT_HOOK_DEBUG="1", **env)
        pa = self.run_prog("a", sys.executable, JOB, "40", "40", env=env)
        pa.expect("READY", timeout=60)
        return pa

    def tiers(self, pid):
        proc = self.process("a", pid) or {}
        return proc.get("tiers"), proc.get("swap_outs", 0)

    def b_needs(self, mib):
        env = self.hook_env("b", GMT_FAKE_MEM=str(CARD))
        pb = self.run_prog("b", SWAP_JOB, "--mib", str(mib), env=env)
        t0 = time.monotonic()
        pb.expect("READY", timeout=60)
        return pb, time.monotonic() - t0

    def finish(self, *progs):
        errs = []
        for p in progs:
            p.send("exit")
            rc, err = p.finish()
            self.assertEqual(rc, 0, err[-3000:])
            errs.append(err)
        return errs

    def check(self, p, want):
        p.send("check")
        while True:
            line = p.lines.get(timeout=60)
            self.assertIsNotNone(line, p.stderr()[-3000:])
            if line.startswith(("OK", "BAD", "CUDAFAIL")):
                self.assertEqual(line, want, p.stderr()[-3000:])
                return


class TorchCache(CacheJob):
    def test_cached_blocks_are_freed_not_moved(self):
        pa = self.start()
        # b's 50 MiB leave a 50: a's 80 must go down to 50. Its 40 cached
        # are released, and its 40 live then fit: nothing moves.
        pb, _ = self.b_needs(50)
        pa.expect("EMPTIED", timeout=30)
        wait_for(lambda: self.tiers(pa.proc.pid)[0] == {"gpu": 40 * MIB, "host": 0, "disk": 0},
                 timeout=10, what="a's live 40 MiB on the GPU, its cache gone")
        self.assertEqual(self.tiers(pa.proc.pid)[1], 0)  # no move out
        self.check(pa, "OK %d" % (40 * MIB))
        err = self.finish(pa, pb)[0]
        self.assertIn("PyTorch's cache: torch.cuda.empty_cache() ran", err)

    def test_turned_off_the_cache_moves_with_the_rest(self):
        pa = self.start(GMT_TORCH_EMPTY_CACHE="0")
        pb, _ = self.b_needs(50)
        wait_for(lambda: (self.tiers(pa.proc.pid)[0] or {}).get("host") == 40 * MIB,
                 timeout=10, what="a's oldest 40 MiB moved out")
        self.check(pa, "OK %d" % (40 * MIB))
        err = self.finish(pa, pb)[0]
        self.assertNotIn("PyTorch's cache", err)

    def test_a_job_holding_the_gil_does_not_hold_up_the_move(self):
        pa = self.start(GMT_TORCH_RELEASE_MS="200")
        pa.send("hold 4")
        pa.expect("HOLDING", timeout=10)
        pb, waited = self.b_needs(50)
        # The release waits for the GIL; the move does not: b got its room
        # long before a let the GIL go, a's oldest 40 MiB moved out.
        self.assertLess(waited, 3.0)
        wait_for(lambda: (self.tiers(pa.proc.pid)[0] or {}).get("host") == 40 * MIB,
                 timeout=2, what="a's oldest 40 MiB moved out while it held the GIL")
        # Once a lets go, the release that waited runs.
        pa.expect("HELD", timeout=10)
        pa.expect("EMPTIED", timeout=10)
        self.check(pa, "OK %d" % (40 * MIB))
        err = self.finish(pa, pb)[0]
        self.assertIn("PyTorch's cache not released within 200 ms", err)


class LateRelease(CacheJob):
    # a may use a quarter of a 4 s window: past it, its next launch waits
    # for the token.
    CONFIG = "2\na 0.25 0.25 1Gi mode=swap idle-out=0\nb 0.5 1.0 1Gi mode=swap idle-out=0\n"

    def test_a_release_late_in_the_processs_turn_is_left(self):
        """A release that gets the GIL only once the process holds the
        token is not run: its main thread held the GIL while it waited for
        its turn (PyTorch launches with the GIL held), the move went on
        without the release, and by now the memory is coming back. On an
        H200 a transformer job's empty_cache got the GIL as its turn began
        and freed 20 MiB segments for 1.5 s, most of them brought back a
        moment before."""
        pa = self.start("--window-ms", "4000", GMT_TORCH_RELEASE_MS="200")
        # 2.5 s of kernels: a's next launch waits about 1.5 s, the GIL held.
        pa.send("launch 2500000")
        pa.expect("LAUNCHED", timeout=30)
        pa.send("launch 1000")
        pa.expect("LAUNCHING", timeout=10)
        # b's 50 MiB leave a 50: a is asked to move out while it waits,
        # its release cannot have the GIL, and its oldest 40 MiB (live)
        # move out.
        pb, _ = self.b_needs(50)
        pa.expect("LAUNCHED", timeout=30)
        wait_for(lambda: "left (late, in this process's turn)" in pa.stderr(), timeout=10,
                 what="a's late release left; stderr: %s" % pa.stderr()[-3000:])
        lines = []
        pa.send("check")
        while not lines or not lines[-1].startswith(("OK", "BAD", "CUDAFAIL")):
            line = pa.lines.get(timeout=60)
            self.assertIsNotNone(line, pa.stderr()[-3000:])
            lines.append(line)
        self.assertEqual(lines, ["OK %d" % (40 * MIB)], pa.stderr()[-3000:])
        err = self.finish(pa, pb)[0]
        self.assertIn("PyTorch's cache not released within 200 ms", err)


class WakeCut(CacheJob):
    """A move out for a pod that waits for the GPU now leaves PyTorch's
    cache release out: on an H200 an idle inference pod's wake waited for
    a training job's empty_cache, whose frees (8 ms a 256 MiB block) took
    longer than copying those blocks out would have."""
    CONFIG = "2\na 0.5 1.0 1Gi mode=swap idle-out=0\nb 0.5 1.0 1Gi mode=swap idle-out=2\n"

    def test_a_move_out_after_a_cut_moves_the_cache_with_the_rest(self):
        # Grants of 3 s: a's still runs when b wakes (one whose quota is
        # spent drains, and is not cut).
        self.start_schd("--gpu-capacity", "0=%d" % CARD, "--tier-trigger", "1",
                        "--base-quota-ms", "3000")
        self.start_pmgr("a")
        self.start_pmgr("b")
        # b runs, then goes idle holding 50 MiB.
        envb = self.hook_env("b", GMT_FAKE_MEM=str(CARD))
        pb = self.run_prog("b", SWAP_JOB, "--mib", "50", "--kernel-us", "2000", env=envb)
        pb.expect("READY", timeout=60)
        self.check(pb, "OK %d" % (50 * MIB))
        # a's 80 MiB (40 live, 40 cached) come once b's idle-out has passed
        # and b moved out.
        env = self.hook_env("a", GMT_FAKE_MEM=str(CARD), GMT_HOOK_DEBUG="1")
        pa = self.run_prog("a", sys.executable, JOB, "40", "40", env=env)
        pa.expect("READY", timeout=60)
        self.assertEqual((self.process("b", pb.proc.pid) or {}).get("tiers", {}).get("gpu"), 0)
        # a holds the GPU with a 1.5 s kernel; b wakes: a's grant is cut
        # short and a moves out for b's 50 MiB.
        pa.send("launch 1500000")
        pa.expect("LAUNCHING", timeout=10)
        time.sleep(0.3)
        self.check(pb, "OK %d" % (50 * MIB))
        pa.expect("LAUNCHED", timeout=30)
        wait_for(lambda: (self.tiers(pa.proc.pid)[0] or {}).get("host", 0) > 0, timeout=10,
                 what="a moved out for b")
        self.check(pa, "OK %d" % (40 * MIB))
        err = self.finish(pa, pb)[0]
        self.assertIn("cut short: PyTorch's cache moves with the rest", err)
        self.assertNotIn("torch.cuda.empty_cache() ran", err)
