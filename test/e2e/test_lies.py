"""End-to-end: what a pod's process says of itself, and what it asks for,
cannot move the node's budgets past what gmt granted its pod (issue 24,
items 2 and 3; docs/security.md, "What is checked"). The calls are sent as
a hook would, through a real gmt-pmgr, by wire_call reading one request
per line (one process, whose pid the pod manager puts in each call):

- a mode=swap pod's Resident past its quota is refused TOO_BIG, however
  much room the card has, and nobody is asked to move out for it, so a
  strict pod's allocation within its quota still fits;
- a report of every byte pinned counts no more than the pod's part of the
  pinned budget, and other pods' pin advice still works;
- one pod's pins on advice stay within its share of --pinned-limit;
- host copies and spill files a process reports count no more than what
  it reserved, so a report of 2^62 bytes leaves the host and disk tiers
  as they were.

The policies themselves are unit tested (test/unit/test_swap.c,
test_pin_policy.c, test_ledger.c, test_reports.c)."""
import os
import time

from gmt_e2e import GmtTestCase, wait_for
from test_swap import Caller as SwapCaller

MIB = 1 << 20
GIB = 1 << 30
EVERY_BYTE = (1 << 64) - 1


class Caller(SwapCaller):
    """A pod's process: Register, Resident, Reserve, Report and Advise."""

    def advise(self, nbytes, *opts):
        """An Advise naming pid 1 (the pod manager puts ours instead):
        (pin, reason without its prefix, node's pinned use, limit)."""
        a = self.ok(" ".join(["advise", self.pod, "1", str(nbytes)] + list(opts)))
        return a["pin"] == "1", a["reason"][len("PIN_REASON_"):], int(a["used"]), int(a["limit"])

    def report_line(self, pinned, advised, **swap):
        """A Report as the process wants it read: pinned_bytes,
        pinned_advised and the swap fields given."""
        r = self.ok(" ".join(["report 0 %d %d" % (pinned, advised)]
                             + ["%s=%d" % kv for kv in sorted(swap.items())]))
        return r["evict"] == "1", int(r["keep"])


class LiesCase(GmtTestCase):
    def caller(self, pod):
        return Caller(self.node, pod)

    def space(self, tier):
        return next(t for t in self.status()["host"]["tiers"] if t["tier"] == tier)

    def reported(self, pod, pid, **want):
        """Waits until gmt-schd has the process's last report (a marker
        field in want, say swap_outs) and returns the process's status."""
        return self.node.wait_process(pod, pid, **want)


class Resident(LiesCase):
    CONFIG = ("3\n"
              "a 0.4 1.0 1Gi\n"
              "b 0.3 1.0 256Mi mode=swap idle-out=0\n"
              "c 0.3 1.0 1Gi mode=swap idle-out=0\n")

    def test_resident_past_the_pods_quota_is_too_big_and_moves_nobody(self):
        # The node: a card of 2 GiB, no pressure (only requests
        # that wait ask anyone to move).
        schd = self.start_schd("--gpu-capacity", "0=2Gi", "--tier-trigger", "1")
        for pod in "abc":
            self.start_pmgr(pod)
        a, b, c = self.caller("a"), self.caller("b"), self.caller("c")
        # c, idle, has 512 MiB on the card.
        self.assertEqual(c.resident(512 * MIB)[:2], (True, "ROOM"))
        # b's quota is 256 MiB: 1 GiB on the card is refused at once,
        # however much room the card has, and occupies nothing.
        self.assertEqual(b.resident(GIB)[:2], (False, "TOO_BIG"))
        self.assertEqual(self.space("gpu")["reserved"], 512 * MIB)
        # So a strict pod's allocation of its whole quota still fits.
        a.ok("reserve a 1 %d" % GIB)
        self.assertEqual(self.space("gpu")["reserved"], GIB + 512 * MIB)
        # 2 GiB (the whole card) is refused too, and c is asked nothing.
        self.assertEqual(b.resident(2 * GIB)[:2], (False, "TOO_BIG"))
        time.sleep(0.7)  # more than a heartbeat: a target would have come
        self.assertEqual(c.report(swap_gpu=512 * MIB, swap_device=0), (False, 0))
        self.assertEqual(self.space("gpu")["reserved"], GIB + 512 * MIB)
        # Its quota exactly fits; one byte more does not, nor one byte of
        # a second process of the pod (the quota is the pod's).
        self.assertEqual(b.resident(256 * MIB)[:2], (True, "ROOM"))
        self.assertEqual(b.resident(256 * MIB + 1)[:2], (False, "TOO_BIG"))
        b2 = self.caller("b")
        self.assertEqual(b2.resident(1)[:2], (False, "TOO_BIG"))
        # Lowering is always granted, and frees the quota for the other.
        self.assertEqual(b.resident(128 * MIB)[:2], (True, "ROOM"))
        self.assertEqual(b2.resident(128 * MIB)[:2], (True, "ROOM"))
        self.assertEqual(self.space("gpu")["reserved"], GIB + 768 * MIB)
        # Said in the log, naming the pod and its quota, once however often
        # it asks.
        log = schd.output()
        said = [line for line in log.splitlines() if "past its quota" in line]
        self.assertEqual(len(said), 1, log[-3000:])
        self.assertIn("pod 'b' pid %d: 1073741824 bytes (1024.0 MiB) on device 0 refused: past "
                      "its quota of 268435456 bytes (256.0 MiB)" % b.pid, said[0])


class PinnedLies(LiesCase):
    CONFIG = "2\na 0.5 1.0 1Gi pin=adaptive\nb 0.5 1.0 1Gi pin=adaptive\n"

    def host(self):
        return self.status()["host"]

    def test_a_report_of_every_byte_pinned_counts_no_more_than_its_pods_part(self):
        schd = self.start_schd("--pinned-limit", "64Mi")
        self.start_pmgr("a")
        self.start_pmgr("b")
        liar, other = self.caller("a"), self.caller("b")
        self.assertEqual((self.host()["pinned_bytes"], self.host()["pinned_advised"]), (0, 0))
        liar.report_line(EVERY_BYTE, 0, swap_outs=1)
        p = self.reported("a", liar.pid, swap_outs=1)
        # Counted as the most its pod could pin itself, no more: its part
        # of the budget, 64 MiB over the 2 pods that run.
        self.assertEqual(p["pinned_bytes"], 32 * MIB)
        self.assertEqual((self.host()["pinned_bytes"], self.host()["pinned_advised"]),
                         (32 * MIB, 0))
        # The other pod's advice still works, all of its share.
        self.assertEqual(other.advise(32 * MIB, "pays_back"), (True, "PAYS_BACK", 64 * MIB, 64 * MIB))
        self.assertEqual(other.advise(1, "pays_back")[:2], (False, "BUDGET"))
        # The liar's own claim spent its pod's share.
        self.assertEqual(liar.advise(1, "pays_back")[:2], (False, "BUDGET"))
        self.assertIn("pod 'a': pid %d reports %d bytes pinned, 0 of them on advice"
                      % (liar.pid, EVERY_BYTE), schd.output())
        # Saying less is always believed.
        liar.report_line(0, 0, swap_outs=2)
        self.reported("a", liar.pid, swap_outs=2, pinned_bytes=0)
        self.assertEqual(liar.advise(32 * MIB, "pays_back")[:2], (True, "PAYS_BACK"))

    def test_a_forged_pinned_advised_is_taken_in_no_further_than_its_pods_share(self):
        self.start_schd("--pinned-limit", "64Mi")
        self.start_pmgr("a")
        self.start_pmgr("b")
        liar, other = self.caller("a"), self.caller("b")
        # A process that never asked says gmt pinned 2^63 bytes for it.
        liar.report_line(1 << 63, 1 << 63, swap_outs=1)
        self.reported("a", liar.pid, swap_outs=1)
        wait_for(lambda: self.host()["pinned_advised"] > 0 or None, timeout=5,
                 what="the report taken into the pinned ledger")
        self.assertEqual(self.host()["pinned_advised"], 32 * MIB)
        self.assertEqual(self.host()["pinned_bytes"], 32 * MIB)
        self.assertEqual(other.advise(32 * MIB, "pays_back")[:2], (True, "PAYS_BACK"))

    def test_one_pod_cannot_take_the_whole_budget_in_one_request(self):
        self.start_schd("--pinned-limit", "64Mi")
        self.start_pmgr("a")
        self.start_pmgr("b")
        a, b = self.caller("a"), self.caller("b")
        self.assertEqual(a.advise(64 * MIB, "pays_back"), (False, "BUDGET", 0, 64 * MIB))
        # Its share, 64 MiB over the 2 pods that pin, fits exactly.
        self.assertEqual(a.advise(32 * MIB, "pays_back"), (True, "PAYS_BACK", 32 * MIB, 64 * MIB))
        self.assertEqual(a.advise(1, "pays_back")[:2], (False, "BUDGET"))
        self.assertEqual(b.advise(32 * MIB, "pays_back"), (True, "PAYS_BACK", 64 * MIB, 64 * MIB))


    def test_a_pod_that_does_not_run_holds_no_share(self):
        self.start_schd("--pinned-limit", "64Mi")
        self.start_pmgr("a")
        a = self.caller("a")
        # b's pod manager is not running: a, alone, may take it all.
        self.assertEqual(a.advise(64 * MIB, "pays_back"), (True, "PAYS_BACK", 64 * MIB, 64 * MIB))
        a.advise(0, "release=%d" % (64 * MIB))
        # Once b runs, each has half, whatever the other does.
        self.start_pmgr("b")
        b = self.caller("b")
        self.assertEqual(a.advise(32 * MIB + 1, "pays_back")[:2], (False, "BUDGET"))
        self.assertEqual(a.advise(32 * MIB, "pays_back")[:2], (True, "PAYS_BACK"))
        self.assertEqual(b.advise(32 * MIB, "pays_back"), (True, "PAYS_BACK", 64 * MIB, 64 * MIB))


class SwapLies(LiesCase):
    CONFIG = "2\nb 0.5 1.0 256Mi mode=swap idle-out=0\nc 0.5 1.0 1Gi mode=swap idle-out=0\n"

    def test_forged_host_copies_and_spill_files_leave_the_tiers_as_they_were(self):
        spill = os.path.join(self.tmp, "spill")
        os.mkdir(spill)
        schd = self.start_schd("--gpu-capacity", "0=1Gi", "--host-tier", "512Mi",
                               "--disk-tier", spill + ":1Gi")
        self.start_pmgr("b")
        self.start_pmgr("c")
        liar, honest = self.caller("b"), self.caller("c")
        # A process that reserved nothing says it has 2^62 bytes in host
        # memory, as many kept and as many in spill files.
        liar.report_line(0, 0, swap_host=1 << 62, swap_kept=1 << 62, swap_disk=1 << 62,
                         swap_device=0, swap_outs=1)
        p = self.reported("b", liar.pid, swap_outs=1)
        self.assertEqual((p["tiers"]["host"], p["tiers"]["disk"], p["swap_kept"]), (0, 0, 0))
        self.assertEqual((self.space("host")["reserved"], self.space("disk")["reserved"]), (0, 0))
        # What a process reserved is what its copies may be: the honest one
        # is counted as it says.
        honest.ok("reserve c 1 %d" % (300 * MIB))
        honest.report_line(0, 0, swap_host=200 * MIB, swap_kept=50 * MIB, swap_disk=50 * MIB,
                           swap_device=0, swap_outs=1)
        self.reported("c", honest.pid, swap_outs=1)
        self.assertEqual((self.space("host")["reserved"], self.space("disk")["reserved"]),
                         (250 * MIB, 50 * MIB))
        # Past what it reserved, it is counted as what it reserved.
        honest.report_line(0, 0, swap_host=1 << 62, swap_device=0, swap_outs=2)
        p = self.reported("c", honest.pid, swap_outs=2)
        self.assertEqual(p["tiers"]["host"], 300 * MIB)
        self.assertEqual(self.space("host")["reserved"], 300 * MIB)
        self.assertIn("pod 'b': pid %d reports %d bytes in host memory" % (liar.pid, 1 << 62),
                      schd.output())
