"""End-to-end: the tracer tells gmt's pins from the program's own (issue
11). Pin advice (hook/pin/pin.c) registers a program's hot malloc'd buffers
itself and calls gmt_trace_pinned() in libgmthook.so after each of its
registrations and unregistrations; the tracer probes that marker and marks
the buffer pinned_by_gmt. Pod a runs with pin=adaptive under the real
daemons and the fake libcuda.so.1; memprogs/pin_buffers makes 2 hot
buffers (50 round trips each) and 5 cold ones (1 each), of which gmt pins
exactly the 2 hot ones; memprogs/host_pins pins memory itself.

Both programs, given `gate`, say READY once the driver is up and wait for
a line before they allocate, so that the tracer is attached first; then
they hold their buffers until the next line. Needs root (BPF); no GPU.
Like test_pinning.py, skipped under the ASan build, whose runtime owns
malloc so that the hook tracks (and pins) nothing. Every wait is bounded."""
import json
import os
import signal
import unittest

from gmt_e2e import (ASAN_PRELOAD, BUILD, GMT, GmtTestCase, tracer_missing, unless_runnable,
                     wait_for)
import test_pinning as pins
from test_trace import Tracer

# The programs and the CI workload, as test_pinning.py runs them
# (imported as a module, so that its test cases are not collected here).
PIN_BUFFERS, HOST_PINS, MIB = pins.PIN_BUFFERS, pins.HOST_PINS, pins.MIB
SIZE_MIB, HOT, HOT_TRIPS, COLD, COLD_TRIPS = (pins.SIZE_MIB, pins.HOT, pins.HOT_TRIPS, pins.COLD,
                                              pins.COLD_TRIPS)


@unittest.skipIf(ASAN_PRELOAD, "under ASan the ASan runtime owns malloc: no buffer is tracked")
@unless_runnable(tracer_missing("the tracer"))
class TracePins(GmtTestCase):
    CONFIG = "1\na 0.5 1.0 1Gi pin=adaptive\n"

    def setUp(self):
        super().setUp()
        self.start_schd("--pinned-limit", "1Gi")
        self.start_pmgr("a")

    def gated(self, prog, *args):
        """Starts prog in pod a; returns it and its pid once it waits at READY."""
        p = self.run_prog("a", prog, *args)
        pid = int(p.expect("READY")["pid"])
        self.assertEqual(pid, p.proc.pid)
        return p, pid

    def pin_buffers(self, *extra):
        return self.gated(PIN_BUFFERS, str(SIZE_MIB), str(HOT), str(HOT_TRIPS), str(COLD),
                          str(COLD_TRIPS), "gate", *extra)

    def start_tracer(self, pid, out):
        t = Tracer([GMT, "trace", "-v", "-p", str(pid), "-o", out], self.env())
        self.progs.append(t)  # stopped with the node, whatever happens
        t.wait_attached()
        self.assertIn("gmt's hook: 1 file probed", t.stderr())
        return t

    def stop_tracer(self, t, out):
        """Stops t while the traced program still holds its buffers; returns its dump."""
        t.proc.send_signal(signal.SIGINT)
        rc, _, err = t.finish()
        self.assertEqual(rc, 0, err)
        with open(out) as f:
            return json.load(f)

    @staticmethod
    def copied_host(allocs, pid):
        """pid's host buffers that copies touched: pin_buffers' 7."""
        return [a for a in allocs if a["pid"] == pid and a["kind"] != "device"
                and a["h2d_count"] > 0]

    def test_gmt_trace_marks_exactly_the_hot_buffers_gmt_pinned(self):
        p, pid = self.pin_buffers()
        out = os.path.join(self.tmp, "pins.json")
        t = self.start_tracer(pid, out)
        p.send()
        got = p.expect("PINNED", timeout=60)
        self.assertEqual((int(got["hot"]), int(got["cold"])), (HOT, 0))
        dump = self.stop_tracer(t, out)
        self.finish_freed(p)

        host = self.copied_host(dump["allocations"], pid)
        self.assertEqual(sorted(a["h2d_count"] for a in host), [1] * COLD + [HOT_TRIPS] * HOT, host)
        for a in host:
            hot = a["h2d_count"] == HOT_TRIPS
            self.assertEqual(a["pinned_by_gmt"], hot, a)
            self.assertEqual(a["registered"], hot, a)  # gmt's pins are pins all the same
            self.assertTrue(a["active"], a)
            self.assertGreaterEqual(a["size"], SIZE_MIB * MIB, a)
        self.assertEqual(sum(a["pinned_by_gmt"] for a in dump["allocations"]), HOT)

        # The text summary says so on each buffer's line and in the count.
        r = self.gmt("trace", "--load", out, "-k", "10")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("(%d pinned by gmt)" % HOT, r.stdout)
        hottest = r.stdout.split("hottest")[1].split("coldest")[0]
        marked = [l for l in hottest.splitlines() if "(pinned by gmt)" in l]
        self.assertEqual(len(marked), HOT, hottest)
        for l in marked:
            self.assertEqual(l.split()[6:8], [str(HOT_TRIPS)] * 2, l)  # H2D, D2H (SIZE is 2 words)

        # So does a Chrome trace made from the dump, in the buffers' args.
        ct = os.path.join(self.tmp, "pins.trace.json")
        r = self.gmt("trace", "--load", out, "-o", ct)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(ct) as f:
            events = json.load(f)["traceEvents"]
        self.assertEqual(sum(e.get("args", {}).get("pinned_by_gmt", False) for e in events), HOT)

    def test_the_programs_own_pins_are_not_marked(self):
        p, pid = self.gated(HOST_PINS, "gate")
        out = os.path.join(self.tmp, "own.json")
        t = self.start_tracer(pid, out)
        p.send()
        p.expect("PINNED")
        dump = self.stop_tracer(t, out)
        self.finish_freed(p)
        pinned = [a for a in dump["allocations"] if a["pid"] == pid and a["kind"] == "host_pinned"]
        self.assertEqual(sorted(a["size"] for a in pinned), [2 * MIB, 4 * MIB, 8 * MIB], pinned)
        for a in pinned:
            self.assertFalse(a["pinned_by_gmt"], a)
            self.assertTrue(a["registered"] or a["origin"] == "call", a)

    def test_a_buffer_the_program_registers_itself_is_its_own_again(self):
        """pin_buffers register: the program registers (and unregisters) the
        first hot buffer itself after gmt pinned it; gmt lets go of it first.
        That one is no longer gmt's; the other hot one still is."""
        p, pid = self.pin_buffers("register")
        out = os.path.join(self.tmp, "reg.json")
        t = self.start_tracer(pid, out)
        p.send()
        self.assertEqual(int(p.expect("PINNED", timeout=60)["hot"]), HOT)
        p.expect("REGISTERED")
        dump = self.stop_tracer(t, out)
        self.finish_freed(p)
        host = {a["h2d_count"]: a for a in self.copied_host(dump["allocations"], pid)
                if a["h2d_count"] > 1}
        self.assertEqual(sorted(host), [HOT_TRIPS, HOT_TRIPS + 1], host)  # its own round trip
        first, second = host[HOT_TRIPS + 1], host[HOT_TRIPS]
        self.assertFalse(first["pinned_by_gmt"], first)
        self.assertFalse(first["registered"], first)
        pins = [e["type"] for e in first["events"] if e["type"] in ("pin", "unpin")]
        self.assertEqual(pins, ["pin", "unpin", "pin", "unpin"], first)  # gmt's, then its own
        self.assertTrue(second["pinned_by_gmt"] and second["registered"], second)

    def test_the_schedulers_tracer_marks_them_too(self):
        p, pid = self.pin_buffers()

        def spots():
            r = self.gmt("trace", "--pod", "a", "--json", "-k", "20")
            self.assertEqual(r.returncode, 0, r.stderr)
            return json.loads(r.stdout)

        def probed():
            procs = {x["pid"]: x for x in spots()["processes"]}
            return procs.get(pid, {}).get("probed")
        wait_for(probed, timeout=15, what="gmt-schd to trace pid %d with its libcuda probed" % pid)
        p.send()
        self.assertEqual(int(p.expect("PINNED", timeout=60)["hot"]), HOT)

        def settled():
            s = spots()
            marked = [a for a in s["hot"] if a["pinned_by_gmt"]]
            return s if s["copies"]["h2d_count"] >= HOT * HOT_TRIPS + COLD and \
                len(marked) >= HOT else None
        s = wait_for(settled, timeout=10, what="the pins to reach gmt-schd")
        host = self.copied_host(s["hot"], pid)
        self.assertEqual(len(host), HOT + COLD, host)
        for a in host:
            self.assertEqual(a["pinned_by_gmt"], a["h2d_count"] == HOT_TRIPS, a)
        r = self.gmt("trace", "--pod", "a", "-k", "20")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split("coldest")[0].count("(pinned by gmt)"), HOT, r.stdout)
        self.finish_freed(p)


if __name__ == "__main__":
    unittest.main()
