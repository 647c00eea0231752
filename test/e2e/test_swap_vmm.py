"""End-to-end: a mode=swap program's own virtual memory moves (issue 26
item 3, docs/tiers.md "The program's own VMM memory"). vmm_job maps three
cuMemCreate handles as PyTorch's expandable segments would, one of them
at two addresses and one only in part, and fills every byte of each. The
scheduler's target (a second pod's allocation on a card that holds one of
them) or the test knob GMT_SWAP_TEST_EVICT_MS moves them to host memory:
the fake card refuses any byte past its size, so the other pod's bytes fit
only once the first's are out, and every read-back compares every byte,
the part nothing mapped included. The program's handle values keep
working after a move (unmap, map again, retain, properties, release); a
handle it exported stays on the GPU and says so once; stream-ordered
memory says once why it does not move."""
import os
import re

from gmt_e2e import BUILD, GmtTestCase, wait_for

VMM_JOB = os.path.join(BUILD, "test", "e2e", "memprogs", "vmm_job")
SWAP_JOB = os.path.join(BUILD, "test", "e2e", "memprogs", "swap_job")
MIB = 1 << 20
HELD = 64 * MIB  # vmm_job's three handles
READ = 72 * MIB  # what its check reads: h1 twice, half of h2


def calls(stderr, name):
    """How many successful calls of name the fake driver logged."""
    return len(re.findall(r"fakecuda\[\d+\]: %s -> 0\b" % re.escape(name), stderr))


class SwapVmm(GmtTestCase):
    CONFIG = "2\na 0.5 1.0 256Mi mode=swap idle-out=0\nb 0.5 1.0 256Mi mode=swap idle-out=0\n"

    def vmm_job(self, pod, *args, **env):
        e = self.hook_env(pod, GMT_FAKE_LOG="1", GMT_HOOK_DEBUG="1")
        e.update(env)
        p = self.run_prog(pod, VMM_JOB, *args, env=e)
        ready = p.expect("READY", timeout=30)
        self.assertEqual(int(ready["bytes"]), HELD)
        return p

    def answer(self, p, cmd, prefixes=("OK", "BAD", "CUDAFAIL")):
        """Sends cmd; the next line of p that starts with one of prefixes."""
        p.send(cmd)
        return self.next_line(p, cmd, prefixes)

    def next_line(self, p, cmd, prefixes):
        while True:
            line = p.lines.get(timeout=30)
            if line is None:
                self.fail("%s ended; stderr: %s%s" % (cmd, p.stderr()[-3000:], self.logs()))
            if line.startswith(prefixes + ("CUDAFAIL",)):
                return line

    def logs(self):
        return "".join("\n%s: %s" % (d.name, d.output()[-2000:]) for d in self.daemons)

    def tiers(self, pod, pid):
        proc = self.process(pod, pid) or {}
        return proc.get("tiers")

    def wait_tiers(self, pod, p, gpu, host):
        wait_for(lambda: self.tiers(pod, p.proc.pid) == {"gpu": gpu, "host": host, "disk": 0},
                 timeout=15, what="%s: %d on the GPU, %d in host memory; stderr: %s" % (
                     pod, gpu, host, p.stderr()[-2000:]))

    def gpu_space(self):
        space = self.status()["host"]["tiers"][0]
        self.assertEqual((space["tier"], space["index"]), ("gpu", 0))
        return space

    CARD = 100 * MIB  # one pod's 64 MiB, not both

    def a_then_b(self, **b_env):
        """a's vmm_job checks alone on a card of CARD bytes; then b's 64 MiB
        (swap_job, with b_env) fit only once a's own memory is out: (pa,
        pb), a's handles out."""
        self.start_schd("--gpu-capacity", "0=%d" % self.CARD)
        self.start_pmgr("a")
        self.start_pmgr("b")
        pa = self.vmm_job("a", "--kernel-us", "2000", GMT_FAKE_MEM=str(self.CARD))
        self.assertEqual(self.answer(pa, "check"), "OK %d" % READ)
        self.wait_tiers("a", pa, HELD, 0)
        self.assertEqual(self.gpu_space()["reserved"], HELD)
        pb = self.run_prog("b", SWAP_JOB, "--mib", "64", "--kernel-us", "2000",
                           env=self.hook_env("b", GMT_FAKE_MEM=str(self.CARD), **b_env))
        pb.expect("READY", timeout=30)
        self.wait_tiers("a", pa, 0, HELD)
        return pa, pb

    def exit_clean(self, p):
        p.send("exit")
        rc, err = p.finish()
        self.assertEqual(rc, 0, err[-3000:])
        return err


class MovedByTheScheduler(SwapVmm):
    def test_own_memory_moves_out_for_another_pod_and_back_bit_for_bit(self):
        pa, pb = self.a_then_b(GMT_FAKE_LOG="1")
        card = self.CARD
        err = pa.stderr()
        # (In steps: as much as b's shortfall at each of its asks.)
        self.assertGreaterEqual(
            len(re.findall(r"moved \d+ allocations \(\d+ bytes\) off the GPU", err)), 1)
        self.assertLessEqual(self.gpu_space()["reserved"], card)
        # Out: each handle's memory was released, its addresses kept.
        self.assertEqual(calls(err, "cuMemAddressFree"), 0)
        # a's next kernel brings them back (b, idle, moves out), as the
        # program left them: every byte, at every address.
        self.assertEqual(self.answer(pa, "check"), "OK %d" % READ, pa.stderr()[-3000:])
        self.wait_tiers("a", pa, HELD, 0)
        self.wait_tiers("b", pb, 0, HELD)
        # The half of h2 that nothing mapped came back too.
        self.assertEqual(self.answer(pa, "whole"), "OK %d" % (16 * MIB))
        proc = self.process("a", pa.proc.pid)
        self.assertEqual((proc.get("swap_outs", 0), proc.get("swap_ins", 0)), (3, 3))
        self.assertEqual(self.answer(pb, "check"), "OK %d" % HELD)
        self.wait_tiers("a", pa, 0, HELD)
        self.assertEqual(self.answer(pa, "release", ("RELEASED",)), "RELEASED")
        self.wait_tiers("a", pa, 0, 0)
        self.wait_process("a", pa.proc.pid, memory_used=0)
        err = self.exit_clean(pa)
        # Every physical allocation, the program's and those of its moves,
        # was released.
        self.assertEqual(calls(err, "cuMemCreate"), calls(err, "cuMemRelease"), err[-3000:])
        self.exit_clean(pb)


class ReleasedWhileOut(SwapVmm):
    def test_handles_out_are_released_without_coming_back(self):
        """A program that lets go of handles that are out (PyTorch's
        empty_cache, which the hook asks for before a move out) neither
        waits for the token nor brings them back first. Through the swap
        gate, the expandable transformer pair at 2.0x an H200 asked to
        hold 19 GB on an 11.8 GiB card as its turn began: its moved-out
        cache coming back only to be released."""
        pa, pb = self.a_then_b()
        # b runs (it holds the token) while a releases everything.
        pb.send("spin 1500")
        self.assertEqual(self.answer(pa, "release", ("RELEASED",)), "RELEASED")
        self.wait_tiers("a", pa, 0, 0)
        self.wait_process("a", pa.proc.pid, memory_used=0)
        self.assertTrue(self.next_line(pb, "spin", ("SPUN",)).startswith("SPUN"))
        self.assertEqual(self.process("a", pa.proc.pid).get("swap_ins", 0), 0, self.logs())
        self.assertEqual(self.process("b", pb.proc.pid).get("swap_outs", 0), 0, self.logs())
        err = self.exit_clean(pa)
        # Released while out: no Resident to lower, each handle's host
        # copy freed (the hook's exit line, GMT_HOOK_DEBUG).
        self.assertRegex(err, r"frees: 0 Resident lowerings [\d.]+ ms, 3 host copies freed "
                              r"[\d.]+ ms, the driver's releases [\d.]+ ms")
        self.assertNotIn("memory to come back", err)
        self.assertEqual(re.findall(r"brought \d+ bytes back", err), [], err[-3000:])
        self.assertEqual(calls(err, "cuMemCreate"), calls(err, "cuMemRelease"), err[-3000:])
        self.assertEqual(self.answer(pb, "check"), "OK %d" % HELD)
        self.exit_clean(pb)


class AfterAMove(SwapVmm):
    """GMT_SWAP_TEST_EVICT_MS: the hook moves everything out after that
    many ms without an allocation or a restore."""

    def test_handles_unmap_remap_retain_and_release_after_a_move(self):
        self.start_schd()
        self.start_pmgr("a")
        # Its new copies faulted in ahead by two threads (off by default).
        p = self.vmm_job("a", GMT_SWAP_TEST_EVICT_MS="300", GMT_SWAP_FAULT_AHEAD="2")
        self.wait_tiers("a", p, 0, HELD)
        wait_for(lambda: self.gpu_space()["reserved"] == 0, timeout=10, what="nothing resident")
        # A handle made while the others are out gets a value of its own,
        # though the driver may hand back one a move released.
        self.assertEqual(self.answer(p, "more", ("MORE",)), "MORE distinct=1")
        self.wait_tiers("a", p, 0, HELD + 2 * MIB)
        # Unmapped and mapped again by the program: its handle still works.
        self.assertEqual(self.answer(p, "remap"), "OK %d" % (32 * MIB))
        self.assertEqual(self.gpu_space()["reserved"], HELD + 2 * MIB)  # in: remap brought it
        self.wait_tiers("a", p, 0, HELD + 2 * MIB)
        self.assertEqual(self.answer(p, "retain", ("RETAINED",)), "RETAINED same=1")
        self.assertEqual(self.answer(p, "props", ("PROPS",)), "PROPS dev=0 types=0")
        self.wait_tiers("a", p, 0, HELD + 2 * MIB)
        self.assertEqual(self.answer(p, "check"), "OK %d" % (READ + 2 * MIB))
        self.assertEqual(self.answer(p, "whole"), "OK %d" % (16 * MIB))
        self.wait_tiers("a", p, 0, HELD + 2 * MIB)
        # Released while out: the memory, the host copies and the charge go.
        self.assertEqual(self.answer(p, "release", ("RELEASED",)), "RELEASED")
        self.wait_tiers("a", p, 0, 0)
        self.wait_process("a", p.proc.pid, memory_used=0)
        wait_for(lambda: self.gpu_space()["reserved"] == 0, timeout=10, what="nothing resident")
        err = self.exit_clean(p)
        # The first move out made a new copy of each handle, faulted in
        # ahead of it (faultahead.c, GMT_SWAP_FAULT_AHEAD=2); later ones
        # reuse the kept copies.
        ahead = re.findall(r"of its new host copies (\d+) were faulted in ahead: [\d.]+ ms waited "
                           r"for, [\d.]+ ms registering; (\d+) went unused", err)
        self.assertEqual(ahead[:1], [("3", "0")], err[-3000:])
        steps = re.findall(r"its steps: (\d+) with a copy ready [\d.]+ ms \(Resident [\d.]+ ms\), "
                           r"(\d+) with a new copy [\d.]+ ms \(Resident [\d.]+ ms\)", err)
        self.assertEqual(steps[:1], [("0", "3")], err[-3000:])
        self.assertGreater(len(re.findall(r"brought \d+ bytes back", err)), 2, err[-3000:])
        self.assertEqual(calls(err, "cuMemCreate"), calls(err, "cuMemRelease"), err[-3000:])

    def test_an_exported_handle_stays_and_is_said_once(self):
        self.start_schd()
        self.start_pmgr("a")
        p = self.vmm_job("a", "--fd", GMT_SWAP_TEST_EVICT_MS="300")
        # Asking for a handle type is not exporting: these move as the others.
        self.wait_tiers("a", p, 0, HELD)
        self.assertEqual(self.answer(p, "export 0", ("EXPORTED",)), "EXPORTED")
        self.assertEqual(self.answer(p, "export 1", ("EXPORTED",)), "EXPORTED")
        # h0 and h1 stay, counted on the GPU; h2 moves out again.
        self.wait_tiers("a", p, 48 * MIB, 16 * MIB)
        # The space hears the move out by the hook's Resident call, which
        # may come after the report that wait_tiers read.
        wait_for(lambda: self.gpu_space()["reserved"] == 48 * MIB, timeout=10,
                 what="48 MiB resident in the GPU space")
        self.assertEqual(self.answer(p, "check"), "OK %d" % READ)
        self.wait_tiers("a", p, 48 * MIB, 16 * MIB)
        self.assertEqual(self.answer(p, "props", ("PROPS",)), "PROPS dev=0 types=1")
        err = self.exit_clean(p)
        said = re.findall(r"gmt\[\d+\]: the program exported \d+ bytes", err)
        self.assertEqual(len(said), 1, err[-3000:])

    def test_stream_ordered_memory_says_once_why_it_stays(self):
        self.start_schd()
        self.start_pmgr("a")
        p = self.vmm_job("a")
        for _ in range(2):
            self.assertEqual(self.answer(p, "async", ("ASYNC",)), "ASYNC")
        err = self.exit_clean(p)
        said = re.findall(r"gmt\[\d+\]: stream-ordered memory \(cuMemAllocAsync", err)
        self.assertEqual(len(said), 1, err[-3000:])

    def test_a_strict_pod_program_maps_as_before(self):
        self.write_config("2\na 0.5 1.0 256Mi\nb 0.5 1.0 256Mi mode=swap idle-out=0\n")
        self.start_schd()
        self.start_pmgr("a")
        p = self.vmm_job("a", GMT_SWAP_TEST_EVICT_MS="300")
        self.assertEqual(self.answer(p, "more", ("MORE",)), "MORE distinct=1")
        self.assertEqual(self.answer(p, "check"), "OK %d" % (READ + 2 * MIB))
        self.wait_process("a", p.proc.pid, memory_used=HELD + 2 * MIB)
        self.assertEqual(self.answer(p, "release", ("RELEASED",)), "RELEASED")
        err = self.exit_clean(p)
        self.assertNotIn("off the GPU", err)
        # Only the program's own physical allocations: no move made any.
        self.assertEqual(calls(err, "cuMemCreate"), 4)


if __name__ == "__main__":
    import unittest
    unittest.main()
