"""End-to-end: the tracer records gmt's moves, with their bytes and how
long they took (issue 12, item 5). In mode=swap and mode=um the hook moves
whole allocations off the GPU and back (hook/swap/swap.c) and calls
gmt_trace_moved() in libgmthook.so after each; the tracer probes that
marker and puts a move_out or move_in event, with its bytes and duration,
in the moved allocation's history, and counts them there.

One pod runs memprogs/swap_job under the real daemons and the fake
libcuda.so.1, with the test knob GMT_SWAP_TEST_EVICT_MS moving its
allocation out whenever it has been idle a while; a check brings it back.
The job waits at GATE (after cuInit) until `gmt trace` is attached, so the
allocation itself is traced. The hook's debug log says each move too
("moved 1 allocations (B bytes) off the GPU in X ms", "brought B bytes
back"): the trace must hold exactly as many moves, none longer than the
hook's own timing of it. Needs root (BPF); no GPU. Every wait is bounded."""
import json
import os
import re
import signal
import unittest

from gmt_e2e import GMT, GmtTestCase, tracer_missing, unless_runnable, wait_for
from test_swap_hook import SWAP_JOB
from test_trace import Tracer

MIB = 1 << 20
HELD = 16 * MIB
OUT_RE = r"moved 1 allocations \((\d+) bytes\) off the GPU in ([0-9.]+) ms"
IN_RE = r"brought (\d+) bytes back to device 0 in ([0-9.]+) ms"


@unless_runnable(tracer_missing("the tracer"))
class TraceMoves(GmtTestCase):
    CONFIG = "2\nsw 0.5 1.0 256Mi mode=swap idle-out=0\num 0.5 1.0 256Mi mode=um idle-out=0\n"

    def check(self, p):
        p.send("check")
        while True:
            line = p.lines.get(timeout=30)
            if line is None:
                self.fail("swap_job ended; stderr: " + p.stderr()[-3000:])
            if line.startswith(("OK", "BAD", "CUDAFAIL")):
                self.assertEqual(line, "OK %d" % HELD, p.stderr()[-3000:])
                return

    @staticmethod
    def logged(p, pattern):
        """(bytes, ms) of each move the hook logged."""
        return [(int(b), float(ms)) for b, ms in re.findall(pattern, p.stderr())]

    def wait_out(self, p):
        """Waits until the allocation is out (moved out more often than back)."""
        wait_for(lambda: len(self.logged(p, OUT_RE)) > len(self.logged(p, IN_RE)) or None,
                 timeout=10, what="a move out; stderr: %s" % p.stderr()[-2000:])

    def traced_moves(self, pod):
        """Runs a job in pod under `gmt trace` through two moves out and one
        back; returns (its dump, its allocation's address, the hook's logged
        moves out and in, the dump's path)."""
        self.start_schd()
        self.start_pmgr(pod)
        env = self.hook_env(pod, GMT_FAKE_LOG="1", GMT_HOOK_DEBUG="1",
                            GMT_SWAP_TEST_EVICT_MS="300")
        p = self.run_prog(pod, SWAP_JOB, "--mib", str(HELD // MIB), "--gate", env=env)
        pid = int(p.expect("GATE")["pid"])
        out = os.path.join(self.tmp, "moves-%s.json" % pod)
        t = Tracer([GMT, "trace", "-v", "-p", str(pid), "-o", out], self.env())
        self.progs.append(t)  # stopped with the node, whatever happens
        t.wait_attached()
        self.assertIn("gmt's hook: 1 file probed", t.stderr())
        p.send()
        ptr = int(p.expect("READY")["ptr"], 16)
        self.wait_out(p)
        self.check(p)  # brings it back
        self.wait_out(p)
        t.proc.send_signal(signal.SIGINT)
        rc, _, err = t.finish()
        self.assertEqual(rc, 0, err)
        outs, ins = self.logged(p, OUT_RE), self.logged(p, IN_RE)
        p.send("exit")
        rc, _ = p.finish()
        self.assertEqual(rc, 0)
        self.assertGreaterEqual(len(outs), 2)
        self.assertGreaterEqual(len(ins), 1)
        with open(out) as f:
            dump = json.load(f)
        mine = [a for a in dump["allocations"] if a["pid"] == pid and a["address"] == ptr]
        return mine, outs, ins, out

    def assert_moves(self, allocs, outs, ins):
        """The histories hold exactly the moves the hook logged: bytes,
        a positive duration no longer than the hook's timing, counters."""
        for kind, logged in (("out", outs), ("in", ins)):
            evs = [e for a in allocs for e in a["events"] if e["type"] == "move_" + kind]
            self.assertEqual(len(evs), len(logged), (kind, logged, allocs))
            for e in evs:
                self.assertEqual(e["bytes"], HELD, e)
                self.assertGreater(e.get("dur_ns", 0), 0, e)
            # Each move is timed inside the hook's timing of its whole
            # batch (one allocation here), logged to the microsecond.
            self.assertLessEqual(sum(e["dur_ns"] for e in evs),
                                 sum(ms for _, ms in logged) * 1e6 + 1000 * len(evs))
            self.assertEqual(sum(a["moves_" + kind] for a in allocs), len(evs))
            self.assertEqual(sum(a["moves_%s_bytes" % kind] for a in allocs), HELD * len(evs))
            self.assertEqual(sum(a["moves_%s_ns" % kind] for a in allocs),
                             sum(e["dur_ns"] for e in evs))

    def assert_summary(self, out, outs, ins):
        """`gmt trace --load` says the moves and their bandwidth; so does a
        Chrome trace made from the dump."""
        r = self.gmt("trace", "--load", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        m = re.search(r"moves by gmt \(mode=swap, mode=um\): off the GPU (\d+) \(([0-9.]+) MiB, "
                      r"([0-9.]+) GB/s\), back (\d+) \(([0-9.]+) MiB, ([0-9.]+) GB/s\)", r.stdout)
        self.assertIsNotNone(m, r.stdout)
        self.assertEqual((int(m.group(1)), int(m.group(4))), (len(outs), len(ins)), r.stdout)
        self.assertEqual(float(m.group(2)), len(outs) * HELD / MIB)
        self.assertEqual(float(m.group(5)), len(ins) * HELD / MIB)
        self.assertGreater(float(m.group(3)), 0)
        self.assertGreater(float(m.group(6)), 0)
        moved = r.stdout.split("moved most by gmt")[1]
        self.assertIn("(moved by gmt: off the GPU", moved)
        ct = os.path.join(self.tmp, "moves.trace.json")
        r = self.gmt("trace", "--load", out, "-o", ct)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(ct) as f:
            events = json.load(f)["traceEvents"]
        slices = [e for e in events if e.get("cat") == "move"]
        self.assertEqual(len(slices), len(outs) + len(ins))
        for e in slices:
            self.assertGreater(e["dur"], 0, e)
            self.assertGreater(e["args"]["gbps"], 0, e)

    def test_swap_moves_are_in_the_history_with_bytes_and_duration(self):
        allocs, outs, ins, out = self.traced_moves("sw")
        # mode=swap unmaps what it moved out and maps it again to bring it
        # back: each stay on the GPU is a history of its own (origin map),
        # ended by the move out, begun by the move in.
        self.assertEqual(len(allocs), len(ins) + 1, allocs)
        for a in allocs:
            self.assertEqual((a["kind"], a["origin"]), ("device", "map"), a)
            types = [e["type"] for e in a["events"]]
            self.assertLessEqual(a["moves_out"], 1, a)
            self.assertLessEqual(a["moves_in"], 1, a)
            if a["moves_out"]:
                # the move's own copy to the host, its unmap, then the move
                self.assertEqual(types[-3:], ["d2h", "free", "move_out"], a)
                self.assertFalse(a["active"], a)
            if a["moves_in"]:
                self.assertEqual(types[:3], ["alloc", "h2d", "move_in"], a)
        self.assert_moves(allocs, outs, ins)
        self.assert_summary(out, outs, ins)

    def test_um_moves_are_in_the_history_with_bytes_and_duration(self):
        allocs, outs, ins, out = self.traced_moves("um")
        # mode=um prefetches the managed allocation: one history throughout
        self.assertEqual(len(allocs), 1, allocs)
        a = allocs[0]
        self.assertEqual(a["kind"], "managed", a)
        self.assertTrue(a["active"], a)
        moves = [e["type"] for e in a["events"] if e["type"].startswith("move_")]
        self.assertEqual(moves[:3], ["move_out", "move_in", "move_out"], a)
        types = [e["type"] for e in a["events"]]
        for i, t in enumerate(types):
            if t.startswith("move_"):
                self.assertEqual(types[i - 1], "prefetch", a)  # the move's own prefetch
        self.assert_moves(allocs, outs, ins)
        self.assert_summary(out, outs, ins)


if __name__ == "__main__":
    unittest.main()
