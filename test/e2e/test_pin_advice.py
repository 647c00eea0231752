"""End-to-end: pin advice, the scheduler's and the pod manager's side
(docs/pinning.md). Advise calls are sent as a hook would, through a real
gmt-pmgr, by wire_call reading one request per line (one process, whose
pid the pod manager puts in each call whatever the call names): pin=off
charges nothing; adaptive grants within --pinned-limit exactly (a fit
succeeds, one byte more fails), release gives room back, the pins
processes made themselves shrink the room, an exited process's grants are
reclaimed; profile histories outlive a restart of the scheduler and decide
pin=use; a pod manager without its scheduler answers UNREACHABLE at once."""
import os
import queue
import sqlite3
import subprocess
import time

from gmt_e2e import BUILD, GmtTestCase, wait_for

WIRE = os.path.join(BUILD, "test", "e2e", "wireprogs", "wire_call")
HOST_PINS = os.path.join(BUILD, "test", "e2e", "memprogs", "host_pins")
MIB = 1 << 20
LIB = "/opt/app/lib/libdata.so"


class Caller:
    """One process of a pod that sends Advise (and Register, Report) to its
    pod manager, a line each, and reads each reply."""

    def __init__(self, node, pod, register=True):
        self.node = node
        self.pod = pod
        self.prog = node.run_prog(pod, WIRE, node.pmgr_urls[pod][0], "-", env=node.env())
        self.pid = self.prog.proc.pid
        if register:
            self.ok("register %s 0" % pod)
            node.wait_process(pod, self.pid)

    def call(self, line, timeout=10.0):
        """Sends one request line; returns the reply line."""
        t0 = time.monotonic()
        self.prog.send(line)
        try:
            reply = self.prog.lines.get(timeout=timeout)
        except queue.Empty:
            reply = None
        self.took = time.monotonic() - t0
        if reply is None:
            raise AssertionError("no reply to %r within %.0fs; stderr: %s"
                                 % (line, timeout, self.prog.stderr()))
        return reply

    def ok(self, line):
        reply = self.call(line)
        if not reply.startswith("OK"):
            raise AssertionError("%r: %s" % (line, reply))
        return dict(kv.split("=", 1) for kv in reply.split()[1:] if "=" in kv)

    def advise(self, nbytes, *opts):
        """An Advise naming pid 1 (the pod manager puts ours instead)."""
        a = self.ok(" ".join(["advise", self.pod, "1", str(nbytes)] + list(opts)))
        return a["pin"] == "1", a["reason"][len("PIN_REASON_"):], int(a["used"]), int(a["limit"])

    def finish(self):
        return self.prog.finish()


class PinAdviceCase(GmtTestCase):
    def caller(self, pod, register=True):
        return Caller(self.node, pod, register)

    def host(self):
        return self.status()["host"]

    def advised(self, pod=None, pid=None):
        """pinned_advised of the node, of a pod, or of one of its processes."""
        if pod is None:
            return self.host().get("pinned_advised")
        if pid is None:
            return self.pod(pod).get("pinned_advised")
        p = self.process(pod, pid)
        return p.get("pinned_advised") if p else None

    def wait_advised(self, want, pod=None, pid=None, timeout=5.0):
        wait_for(lambda: self.advised(pod, pid) == want or None, timeout=timeout,
                 what="pinned_advised %s to be %d (is %r)"
                 % ("of the node" if pod is None else "of %s %s" % (pod, pid or ""), want,
                    self.advised(pod, pid)))


class Budget(PinAdviceCase):
    CONFIG = "2\na 0.5 1.0 1Gi pin=adaptive\nb 0.5 1.0 1Gi\n"

    def test_pin_off_answers_off_and_charges_nothing(self):
        self.start_schd("--pinned-limit", "64Mi")
        self.start_pmgr("b")
        c = self.caller("b")
        for opts in ((), ("pays_back",)):
            pin, reason, used, limit = c.advise(48 * MIB, *opts)
            self.assertEqual((pin, reason, used, limit), (False, "OFF", 0, 64 * MIB))
        self.assertEqual(self.advised(), 0)
        self.assertEqual(self.advised("b"), 0)
        self.assertEqual(self.advised("b", c.pid), 0)

    def test_adaptive_grants_exactly_the_budget_and_release_gives_room_back(self):
        self.start_schd("--pinned-limit", "64Mi")
        self.start_pmgr("a")
        c = self.caller("a")
        self.assertEqual(c.advise(48 * MIB, "pays_back"), (True, "PAYS_BACK", 48 * MIB, 64 * MIB))
        self.assertEqual(c.advise(32 * MIB, "pays_back"), (False, "BUDGET", 48 * MIB, 64 * MIB))
        # Its copies have not paid back yet: not pinned, however much room.
        self.assertEqual(c.advise(MIB), (False, "COLD", 48 * MIB, 64 * MIB))
        # What is left fits exactly; one byte more does not.
        self.assertEqual(c.advise(16 * MIB, "pays_back"), (True, "PAYS_BACK", 64 * MIB, 64 * MIB))
        self.assertEqual(c.advise(1, "pays_back"), (False, "BUDGET", 64 * MIB, 64 * MIB))
        # Charged to the caller, not to the pid 1 its calls named.
        self.wait_advised(64 * MIB, "a", c.pid)
        self.assertEqual(self.advised("a"), 64 * MIB)
        self.assertEqual(self.advised(), 64 * MIB)
        self.assertIsNone(self.process("a", 1))
        # The release comes first: the room it frees is this call's.
        self.assertEqual(c.advise(32 * MIB, "pays_back", "release=%d" % (32 * MIB)),
                         (True, "PAYS_BACK", 64 * MIB, 64 * MIB))
        self.assertEqual(c.advise(0, "release=%d" % (40 * MIB)), (False, "OFF", 24 * MIB, 64 * MIB))
        self.assertEqual(c.advise(40 * MIB, "pays_back"), (True, "PAYS_BACK", 64 * MIB, 64 * MIB))
        # Giving back more than it holds frees only what it holds.
        c.advise(0, "release=%d" % (1 << 40))
        self.wait_advised(0)
        self.assertEqual(c.advise(64 * MIB, "pays_back")[:2], (True, "PAYS_BACK"))

    def test_pins_processes_made_themselves_shrink_the_room(self):
        self.start_schd("--pinned-limit", "64Mi")
        self.start_pmgr("a")
        self.start_pmgr("b")
        # A hooked program of the other pod pins 14 MiB itself.
        pins = self.run_prog("b", HOST_PINS)
        pins.expect("PINNED")
        wait_for(lambda: self.host()["pinned_bytes"] == 14 * MIB or None,
                 what="14 MiB pinned by host_pins (have %r)" % self.host())
        c = self.caller("a")
        self.assertEqual(c.advise(50 * MIB + 1, "pays_back")[:2], (False, "BUDGET"))
        self.assertEqual(c.advise(50 * MIB, "pays_back"), (True, "PAYS_BACK", 64 * MIB, 64 * MIB))
        # Its report: 52 MiB pinned, 50 of them on advice (counted once).
        c.ok("report 0 %d %d" % (52 * MIB, 50 * MIB))
        self.node.wait_process("a", c.pid, pinned_bytes=52 * MIB)
        self.assertEqual(c.advise(0, "release=%d" % (4 * MIB)), (False, "OFF", 62 * MIB, 64 * MIB))
        self.assertEqual(c.advise(2 * MIB + 1, "pays_back")[:2], (False, "BUDGET"))
        self.assertEqual(c.advise(2 * MIB, "pays_back"), (True, "PAYS_BACK", 64 * MIB, 64 * MIB))
        # The node counts the 48 MiB on advice now (not the 50 of the last
        # report) and the 2 MiB it pinned itself, at once.
        st = self.status()
        self.assertEqual((st["host"]["pinned_bytes"], st["host"]["pinned_advised"]),
                         (64 * MIB, 48 * MIB))
        self.assertEqual(self.process("a", c.pid)["pinned_bytes"], 50 * MIB)
        # Once host_pins has freed its pins the room is back.
        pins.send()
        pins.expect("FREED")
        wait_for(lambda: self.host()["pinned_bytes"] == 50 * MIB or None,
                 what="host_pins's pins gone (50 MiB pinned on the node)")
        self.assertEqual(c.advise(14 * MIB, "pays_back")[:2], (True, "PAYS_BACK"))
        pins.send()

    def test_grants_of_a_process_that_exits_are_reclaimed(self):
        schd = self.start_schd("--pinned-limit", "64Mi")
        self.start_pmgr("a")
        c = self.caller("a")
        self.assertTrue(c.advise(48 * MIB, "pays_back")[0])
        self.wait_advised(48 * MIB)
        rc, err = c.finish()
        self.assertEqual(rc, 0, err)
        self.wait_advised(0, timeout=3)
        self.assertIn("pinned on advice", schd.output())
        # One that never registered is reclaimed after its grace period.
        r = subprocess.run([WIRE, self.pmgr_urls["a"][0], "advise", "a", "0", str(8 * MIB),
                            "pays_back"], capture_output=True, text=True, timeout=20,
                           env=self.env())
        self.assertTrue(r.stdout.startswith("OK pin=1"), r.stdout + r.stderr)
        self.wait_advised(0, timeout=6)
        self.assertNotIn("ERROR", schd.output())


class Profiles(PinAdviceCase):
    CONFIG = "2\nprof 0.5 1.0 1Gi pin=profile\nuse 0.5 1.0 1Gi pin=use\n"

    def histories(self):
        """Issue 11's run: 2 buffers at one site copied 175 times each way,
        25 at another copied once each way."""
        h = ["history=%s:4096:%d:22:%d:175:175" % (LIB, n, 4 * MIB) for n in range(2)]
        h += ["history=%s:8192:%d:22:%d:1:1" % (LIB, n, 4 * MIB) for n in range(25)]
        return h

    def test_profiles_outlive_a_restart_and_decide_use_mode(self):
        schd = self.start_schd()
        self.start_pmgr("prof")
        self.start_pmgr("use")
        c = self.caller("prof")
        # Histories come with a call that asks nothing; they are kept under
        # the exe the pod manager reports for the caller, not the one named.
        self.assertEqual(c.advise(0, "exe=/forged/name", *self.histories())[:2], (False, "OFF"))
        # pin=profile pins what it is asked to, within the budget.
        self.assertEqual(c.advise(4 * MIB, "site=%s:4096:0:22" % LIB)[:2], (True, "PROFILE"))
        c.finish()

        schd.stop()
        self.start_schd()
        wait_for(lambda: all(p["connected"] for p in self.status()["pods"]),
                 what="both pods back")
        db = sqlite3.connect(os.path.join(self.tmp, "state", "gmt.db"))
        try:
            rows = db.execute("SELECT exe, count(*) FROM pin_profiles GROUP BY exe").fetchall()
        finally:
            db.close()
        self.assertEqual(rows, [("wire_call", 27)])

        u = self.caller("use")
        want = {(4096, 0): "HOT", (4096, 1): "HOT", (8192, 0): "COLD", (8192, 24): "COLD",
                (8192, 25): "UNPROFILED", (12288, 0): "UNPROFILED"}
        for (off, nth), reason in want.items():
            pin, got, _, _ = u.advise(4 * MIB, "site=%s:%d:%d:22" % (LIB, off, nth))
            self.assertEqual((pin, got), (reason == "HOT", reason), (off, nth))
        # Another size class of a hot site is another buffer: unknown.
        self.assertEqual(u.advise(4 * MIB, "site=%s:4096:0:23" % LIB)[:2], (False, "UNPROFILED"))
        # A caller the pod manager does not list: the exe it names counts,
        # and nothing was recorded under the forged one.
        r = subprocess.run([WIRE, self.pmgr_urls["use"][0], "advise", "use", "0", str(MIB),
                            "exe=/forged/name", "site=%s:4096:0:22" % LIB],
                           capture_output=True, text=True, timeout=20, env=self.env())
        self.assertIn("reason=PIN_REASON_UNPROFILED", r.stdout, r.stderr)
        self.wait_advised(2 * 4 * MIB, "use")


class NoScheduler(PinAdviceCase):
    CONFIG = "1\na 0.5 1.0 1Gi pin=adaptive\n"

    def test_pod_manager_without_scheduler_answers_unreachable(self):
        schd = self.start_schd()
        self.start_pmgr("a")
        c = self.caller("a")
        self.assertTrue(c.advise(MIB, "pays_back")[0])
        schd.stop()
        # Before the pod manager has noticed (the forwarded call times out)
        # and after (answered at once): never a pin without the ledger.
        for _ in range(3):
            pin, reason, _, _ = c.advise(MIB, "pays_back", "release=%d" % MIB)
            self.assertEqual((pin, reason), (False, "UNREACHABLE"))
            self.assertLess(c.took, 2.0)
        wait_for(lambda: "scheduler unreachable" in self.daemons[1].output() or None,
                 what="the pod manager to see the outage")
        c.advise(MIB, "pays_back")
        self.assertLess(c.took, 0.5)
