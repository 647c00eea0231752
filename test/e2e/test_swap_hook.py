"""End-to-end: mode=swap in the hook, one pod, without the scheduler's
evictions (docs/tiers.md, "Swap mode in the process"). A swap pod's
cuMemAlloc_v2 and cuMemAllocPitch_v2 are backed by the driver's virtual
memory (the fake driver's log shows cuMemCreate and cuMemMap, and no
cuMemAlloc_v2) and read back byte for byte; the quota holds as in strict
mode; cuMemFree gives the memory and the quota back; a strict pod
allocates as before. The test knob GMT_SWAP_TEST_EVICT_MS moves the
allocation out to host memory without a scheduler, so that the way back
(before a copy, a memset, a launch) is checked byte for byte too."""
import os
import re

from gmt_e2e import BUILD, GmtTestCase, wait_for

SWAP_JOB = os.path.join(BUILD, "test", "e2e", "memprogs", "swap_job")
MIB = 1 << 20


def calls(stderr, name):
    """How many successful calls of name the fake driver logged."""
    return len(re.findall(r"fakecuda\[\d+\]: %s -> 0\b" % re.escape(name), stderr))


class SwapHookCase(GmtTestCase):
    CONFIG = "2\nsw 0.5 1.0 256Mi mode=swap\nst 0.5 1.0 256Mi\n"

    def job(self, pod, *args, **env):
        e = self.hook_env(pod, GMT_FAKE_LOG="1", GMT_HOOK_DEBUG="1")
        e.update(env)
        return self.run_prog(pod, SWAP_JOB, *args, env=e)

    def ok(self, p, want_bytes):
        p.send("check")
        got = self.next_result(p)
        self.assertEqual(got, "OK %d" % want_bytes, p.stderr()[-3000:])

    def next_result(self, p):
        """The next OK/BAD/CUDAFAIL line of p."""
        while True:
            line = p.lines.get(timeout=30)
            if line is None:
                self.fail("swap_job ended; stderr: " + p.stderr()[-3000:])
            if line.startswith(("OK", "BAD", "CUDAFAIL")):
                return line

    def exit_clean(self, p):
        p.send("exit")
        rc, err = p.finish()
        self.assertEqual(rc, 0, err[-3000:])
        return err


class SwapAllocation(SwapHookCase):
    def test_swap_alloc_is_vmm_backed_exact_and_freed(self):
        self.start_schd()
        self.start_pmgr("sw")
        p = self.job("sw", "--mib", "64")
        ready = p.expect("READY")
        self.assertEqual(int(ready["bytes"]), 64 * MIB)
        self.ok(p, 64 * MIB)
        p.send("memset 0xa5a5a5a5")
        p.expect("SET")
        self.ok(p, 64 * MIB)
        self.wait_process("sw", p.proc.pid, memory_used=64 * MIB)
        err = p.stderr()
        self.assertIn("mode swap", err)
        self.assertEqual(calls(err, "cuMemCreate"), 1, err[-3000:])
        self.assertEqual(calls(err, "cuMemMap"), 1)
        self.assertEqual(calls(err, "cuMemSetAccess"), 1)
        self.assertEqual(calls(err, "cuMemAlloc_v2"), 0)
        p.send("free")
        p.expect("FREED")
        self.wait_process("sw", p.proc.pid, memory_used=0)
        err = self.exit_clean(p)
        self.assertEqual(calls(err, "cuMemUnmap"), 1)
        self.assertEqual(calls(err, "cuMemRelease"), 1)
        self.assertEqual(calls(err, "cuMemAddressFree"), 1)

    def test_swap_pitch_alloc_is_vmm_backed_and_exact(self):
        self.start_schd()
        self.start_pmgr("sw")
        p = self.job("sw", "--mib", "8", "--pitch")
        ready = p.expect("READY")
        pitch = int(ready["pitch"])
        self.assertEqual(pitch, MIB)  # 1 MiB - 100, rounded up to 512
        self.assertEqual(int(ready["bytes"]), 8 * MIB)
        self.ok(p, 8 * MIB)
        self.wait_process("sw", p.proc.pid, memory_used=8 * MIB)
        self.assertEqual(calls(p.stderr(), "cuMemCreate"), 1)
        p.send("free")
        p.expect("FREED")
        self.wait_process("sw", p.proc.pid, memory_used=0)
        self.exit_clean(p)

    def test_swap_alloc_over_the_quota_fails_as_in_strict_mode(self):
        self.start_schd()
        self.start_pmgr("sw")
        p = self.job("sw", "--mib", "257")
        self.assertEqual(self.next_result(p),
                         "CUDAFAIL cuMemAlloc_v2(&d[p], bytes / pieces) CUDA_ERROR_OUT_OF_MEMORY")
        rc, err = p.finish()
        self.assertEqual(rc, 1)
        self.assertEqual(calls(err, "cuMemCreate"), 0)

    def test_strict_pod_allocates_as_before(self):
        self.start_schd()
        self.start_pmgr("st")
        p = self.job("st", "--mib", "64")
        p.expect("READY")
        self.ok(p, 64 * MIB)
        self.wait_process("st", p.proc.pid, memory_used=64 * MIB)
        err = p.stderr()
        self.assertEqual(calls(err, "cuMemAlloc_v2"), 1)
        self.assertEqual(calls(err, "cuMemCreate"), 0)
        p.send("free")
        p.expect("FREED")
        self.wait_process("st", p.proc.pid, memory_used=0)
        self.exit_clean(p)


class SwapOutAndBack(SwapHookCase):
    """GMT_SWAP_TEST_EVICT_MS: the hook moves everything out after that
    many ms without an allocation or a restore."""

    def outs(self, p):
        return len(re.findall(r"moved 1 allocations \(\d+ bytes\) off the GPU", p.stderr()))

    def ins(self, p):
        return len(re.findall(r"brought \d+ bytes back to device 0", p.stderr()))

    def wait_out(self, p):
        """Waits until the allocation is out (moved out more often than back)."""
        wait_for(lambda: self.outs(p) > self.ins(p) or None, timeout=10,
                 what="a move out; stderr: %s" % p.stderr()[-2000:])

    def test_evicted_allocation_comes_back_byte_exact_before_copy_memset_and_launch(self):
        self.start_schd()
        self.start_pmgr("sw")
        p = self.job("sw", "--mib", "48", "--kernel-us", "200", GMT_SWAP_TEST_EVICT_MS="300")
        p.expect("READY")
        # (The program's own fill may have brought it back once already.)
        for step in ("check", "memset", "check"):
            with self.subTest(step=step):
                self.wait_out(p)
                err = p.stderr()
                created, released = calls(err, "cuMemCreate"), calls(err, "cuMemRelease")
                self.assertEqual(created, released, "out: every physical allocation released")
                ins = self.ins(p)
                mark = len(err)
                self.assertEqual(calls(err, "cuMemAddressFree"), 0)  # the address stays
                if step == "memset":
                    p.send("memset 0x01020304")
                    p.expect("SET")
                else:
                    # A kernel is launched first: the launch gate brings it back.
                    self.ok(p, 48 * MIB)
                    step_err = p.stderr()[mark:]
                    self.assertLess(step_err.find("brought "),
                                    step_err.find("cuLaunchKernel -> 0"), step_err[-3000:])
                    self.assertGreaterEqual(step_err.find("brought "), 0)
                # Brought back by the first call that touched it (on a loaded
                # machine the knob may move it out again between the launch
                # and the copy of one check: then the copy brings it back).
                self.assertGreater(self.ins(p), ins, p.stderr()[-3000:])
                self.assertGreater(calls(p.stderr(), "cuMemCreate"), created)
        self.ok(p, 48 * MIB)
        # The quota is unchanged by the moves.
        self.wait_process("sw", p.proc.pid, memory_used=48 * MIB)
        # A free of memory that is out: its host copy and address go.
        self.wait_out(p)
        p.send("free")
        p.expect("FREED")
        self.wait_process("sw", p.proc.pid, memory_used=0)
        err = self.exit_clean(p)
        self.assertEqual(calls(err, "cuMemAddressFree"), 1)
        self.assertEqual(calls(err, "cuMemCreate"), calls(err, "cuMemRelease"))


if __name__ == "__main__":
    import unittest
    unittest.main()
