"""End-to-end: mode=swap in the scheduler and the pod manager
(docs/tiers.md, "Swap mode in the scheduler"). Resident and Report calls
are sent as a hook would, through a real gmt-pmgr, by wire_call reading one
request per line (one process, whose pid the pod manager puts in each
call): a raise within the declared GPU space is granted and occupies it;
one past it, while another swap pod's idle process is resident, waits and
that process hears an eviction target in its ReportReply, after which the
raise is granted; strict pods' reservations still occupy the space, swap
pods' do not; status shows the bytes per tier; a process that exits is
reclaimed; a pod manager without its scheduler grants (UNREACHABLE). The
policy itself is unit tested (test/unit/test_swap.c)."""
import os
import queue
import time

from gmt_e2e import BUILD, GmtTestCase, wait_for

WIRE = os.path.join(BUILD, "test", "e2e", "wireprogs", "wire_call")
MIB = 1 << 20
GIB = 1 << 30


class Caller:
    """One process of a pod that sends Register, Resident, Reserve and
    Report to its pod manager, a line each, and reads each reply."""

    def __init__(self, node, pod):
        self.node = node
        self.pod = pod
        self.prog = node.run_prog(pod, WIRE, node.pmgr_urls[pod][0], "-", env=node.env())
        self.pid = self.prog.proc.pid
        self.ok("register %s 0" % pod)
        node.wait_process(pod, self.pid)

    def call(self, line, timeout=10.0):
        self.prog.send(line)
        try:
            reply = self.prog.lines.get(timeout=timeout)
        except queue.Empty:
            reply = None
        if reply is None:
            raise AssertionError("no reply to %r within %.0fs; stderr: %s"
                                 % (line, timeout, self.prog.stderr()))
        return reply

    def ok(self, line):
        reply = self.call(line)
        if not reply.startswith("OK"):
            raise AssertionError("%r: %s" % (line, reply))
        return dict(kv.split("=", 1) for kv in reply.split()[1:] if "=" in kv)

    def resident(self, nbytes, device=0):
        """A Resident naming pid 1 (the pod manager puts ours instead):
        (granted, reason without its prefix, retry_ms, room)."""
        r = self.ok("resident %s 1 %d %d" % (self.pod, device, nbytes))
        return (r["granted"] == "1", r["reason"][len("RESIDENT_REASON_"):], int(r["retry"]),
                int(r["room"]))

    def report(self, **swap):
        """A Report with the swap fields given: (evict, keep_bytes)."""
        r = self.ok(" ".join(["report 0 0 0"] + ["%s=%d" % kv for kv in sorted(swap.items())]))
        return r["evict"] == "1", int(r["keep"])


class SwapCase(GmtTestCase):
    CONFIG = ("3\na 0.5 1.0 1Gi\nb 0.5 1.0 1Gi mode=swap idle-out=0\n"
              "c 0.5 1.0 1Gi mode=swap idle-out=0\n")

    def caller(self, pod):
        return Caller(self.node, pod)

    def gpu_space(self):
        return self.status()["host"]["tiers"][0]

    def wait_gpu_reserved(self, want, timeout=5.0):
        wait_for(lambda: self.gpu_space()["reserved"] == want or None, timeout=timeout,
                 what="the GPU space's reserved to be %d (is %d)"
                 % (want, self.gpu_space()["reserved"]))

    def wait_evict(self, who, want, timeout=5.0, **swap):
        """Reports from who until its reply says (evict, keep) == want."""
        last = None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            last = who.report(**swap)
            if last == want:
                return
            time.sleep(0.05)
        raise AssertionError("pid %d never heard %r (last %r); schd log: %s"
                             % (who.pid, want, last, self.daemons[0].output()[-3000:]))


class Resident(SwapCase):
    def test_raise_within_room_granted_past_it_waits_and_the_idle_pod_is_asked(self):
        # Victims of a request that waits only: no pressure at a full card
        # (test_swap_jobs.SwapPressure has it).
        self.start_schd("--gpu-capacity", "0=1Gi", "--tier-trigger", "1")
        self.start_pmgr("b")
        self.start_pmgr("c")
        b, c = self.caller("b"), self.caller("c")
        self.assertEqual(b.resident(600 * MIB), (True, "ROOM", 0, 424 * MIB))
        # The same total again adds nothing (a total, not a change).
        self.assertEqual(b.resident(600 * MIB), (True, "ROOM", 0, 424 * MIB))
        self.assertEqual(self.gpu_space()["reserved"], 600 * MIB)
        # 600 + 600 do not fit in 1 GiB: c waits, and b (idle, resident)
        # is asked to keep at most 424 MiB; nothing moved yet.
        granted, reason, retry, room = c.resident(600 * MIB)
        self.assertEqual((granted, reason, room), (False, "WAIT", 424 * MIB))
        self.assertTrue(20 <= retry <= 50, retry)
        self.assertEqual(self.gpu_space()["reserved"], 600 * MIB)
        # The target reaches b through its pod manager: its next reports.
        self.wait_evict(b, (True, 424 * MIB), swap_gpu=600 * MIB, swap_device=0)
        # Asking again asks nothing more of b (the target already covers it).
        self.assertEqual(c.resident(600 * MIB)[:2], (False, "WAIT"))
        # b moves out to its target: lowering is granted, and c fits.
        self.assertEqual(b.resident(424 * MIB), (True, "ROOM", 0, 600 * MIB))
        self.assertEqual(c.resident(600 * MIB), (True, "ROOM", 0, 0))
        self.assertEqual(self.gpu_space()["reserved"], GIB)
        # The target is met: b hears no more of it.
        self.wait_evict(b, (False, 0), swap_gpu=424 * MIB, swap_host=176 * MIB, swap_device=0)
        # Its own pod is never a process's victim: c's second process
        # waits, and c's first is not asked.
        c2 = self.caller("c")
        self.assertEqual(c2.resident(1)[:2], (False, "WAIT"))
        time.sleep(0.7)  # more than a heartbeat
        self.assertEqual(c.report(swap_gpu=600 * MIB, swap_device=0)[0], False)

    def test_more_than_the_space_alone_is_too_big(self):
        self.start_schd("--gpu-capacity", "0=1Gi")
        self.start_pmgr("b")
        b = self.caller("b")
        self.assertEqual(b.resident(GIB + 1), (False, "TOO_BIG", 0, GIB))
        self.assertEqual(b.resident(GIB), (True, "ROOM", 0, 0))

    def test_pod_holding_the_token_is_not_asked(self):
        self.start_schd("--gpu-capacity", "0=1Gi")
        self.start_pmgr("b")
        self.start_pmgr("c")
        b, c = self.caller("b"), self.caller("c")
        self.assertEqual(b.resident(800 * MIB)[:2], (True, "ROOM"))
        # b runs: it holds device 0's token (its grant, then its drain, last
        # at least a second unless it gives it back).
        b.ok("token b 1 0")
        wait_for(lambda: self.pod("b").get("holds_token") or None, timeout=5,
                 what="b to hold the token")
        self.assertEqual(c.resident(400 * MIB)[:2], (False, "WAIT"))
        time.sleep(0.7)  # more than a heartbeat: a target would have come
        self.assertEqual(b.report(swap_gpu=800 * MIB, swap_device=0), (False, 0))
        # Once b gives the token back it may be asked.
        b.ok("token b 1 0 release")
        wait_for(lambda: not self.pod("b").get("holds_token") or None, timeout=5,
                 what="b to give the token back")
        self.assertEqual(c.resident(400 * MIB)[:2], (False, "WAIT"))
        self.wait_evict(b, (True, 624 * MIB), swap_gpu=800 * MIB, swap_device=0)

    def test_strict_reservations_occupy_the_space_swap_reservations_do_not(self):
        self.start_schd("--gpu-capacity", "0=1Gi")
        self.start_pmgr("a")
        self.start_pmgr("b")
        a, b = self.caller("a"), self.caller("b")
        a.ok("reserve a 1 %d" % (700 * MIB))
        self.assertEqual(b.resident(300 * MIB), (True, "ROOM", 0, 24 * MIB))
        self.assertEqual(self.gpu_space()["reserved"], 1000 * MIB)
        # a strict reservation past the space is refused, as before...
        reply = a.call("reserve a 1 %d" % (100 * MIB))
        self.assertTrue(reply.startswith("ERROR") and "declared capacity" in reply, reply)
        # ...a swap pod's is checked against its quota only, and does not
        # occupy the space (its resident bytes do).
        b.ok("reserve b 1 %d" % (900 * MIB))
        self.assertEqual(self.pod("b")["memory_reserved"], 900 * MIB)
        self.assertEqual(self.gpu_space()["reserved"], 1000 * MIB)
        reply = b.call("reserve b 1 %d" % (200 * MIB))
        self.assertTrue(reply.startswith("ERROR") and "of its limit" in reply, reply)
        # Strict bytes cannot be moved: b waits, nobody is asked.
        self.assertEqual(b.resident(400 * MIB)[:2], (False, "WAIT"))
        # A strict pod has no resident bytes to tell.
        reply = a.call("resident a 1 0 %d" % MIB)
        self.assertTrue(reply.startswith("ERROR") and "mode=swap" in reply, reply)

    def test_without_a_declared_space_resident_is_granted_no_space(self):
        # The fake card would have a space from NVML: taken away.
        self.start_schd("--gpu-capacity", "0=off")
        self.start_pmgr("b")
        b = self.caller("b")
        self.assertEqual(b.resident(64 * GIB), (True, "NO_SPACE", 0, 0))

    def test_pod_manager_without_its_scheduler_grants_unreachable(self):
        schd = self.start_schd("--gpu-capacity", "0=1Gi")
        self.start_pmgr("b")
        b = self.caller("b")
        schd.stop()
        t0 = time.monotonic()
        self.assertEqual(b.resident(2 * GIB), (True, "UNREACHABLE", 0, 0))
        self.assertLess(time.monotonic() - t0, 2.0)


class Status(SwapCase):
    def test_status_shows_the_tiers_and_exit_reclaims_resident_bytes(self):
        self.start_schd("--gpu-capacity", "0=1Gi")
        self.start_pmgr("a")
        self.start_pmgr("b")
        b1, b2 = self.caller("b"), self.caller("b")
        # Its allocations, reserved as a hook does: what its reports may
        # count in host memory and spill files (test_lies.py).
        b1.ok("reserve b 1 %d" % (501 * MIB))
        self.assertEqual(b1.resident(300 * MIB)[:2], (True, "ROOM"))
        self.assertEqual(b2.resident(100 * MIB)[:2], (True, "ROOM"))
        b1.report(swap_gpu=300 * MIB, swap_host=200 * MIB, swap_disk=MIB, swap_outs=5,
                  swap_ins=3, swap_device=0, swap_kept=50 * MIB)
        b2.report(swap_gpu=100 * MIB, swap_device=0)

        def shown():
            p = self.process("b", b1.pid)
            return p if p and p["tiers"]["host"] == 200 * MIB else None
        p = wait_for(shown, timeout=5, what="b1's report in gmt status")
        self.assertEqual(p["tiers"], {"gpu": 300 * MIB, "host": 200 * MIB, "disk": MIB})
        self.assertEqual((p["swap_outs"], p["swap_ins"], p["swap_kept"]), (5, 3, 50 * MIB))
        wait_for(lambda: self.pod("b")["tiers"]["gpu"] == 400 * MIB or None, timeout=5,
                 what="b's tiers summed")
        self.assertEqual(self.pod("b")["tiers"], {"gpu": 400 * MIB, "host": 200 * MIB,
                                                  "disk": MIB})
        self.assertEqual(self.pod("a")["tiers"], {"gpu": 0, "host": 0, "disk": 0})
        self.assertEqual(self.gpu_space()["reserved"], 400 * MIB)
        r = self.gmt("status")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.pod("b")["swap_kept"], 50 * MIB)
        # The host space holds what was moved out and what is kept.
        host = next(t for t in self.status()["host"]["tiers"] if t["tier"] == "host")
        self.assertEqual(host["reserved"], 250 * MIB)
        self.assertIn("  swap: gpu 400.0 MiB, host 200.0 MiB, disk 1.0 MiB; host copies kept "
                      "50.0 MiB", r.stdout)
        row = next(line.split() for line in r.stdout.splitlines()
                   if line.split()[:1] == [str(b1.pid)])
        # TOKEN WAIT (it launched nothing), then GPU, HOST, DISK, OUT/IN.
        self.assertEqual(row[4:13], ["0.0", "s", "300.0", "MiB", "200.0", "MiB", "1.0", "MiB",
                                     "5/3"])
        # b1 exits: its resident bytes leave the space with it.
        b1.prog.finish()
        self.wait_gpu_reserved(100 * MIB)
