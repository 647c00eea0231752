"""End-to-end: mode=um (issue 12, docs/tiers.md, "Unified memory"). A um
pod's cuMemAlloc is the driver's managed memory; when the scheduler asks it
to make room it prefetches its allocations to the host, and before its next
kernel, copy or memset it prefetches them back, with the scheduler's leave,
as mode=swap moves its copies. The fake driver charges managed memory to
its card only while it is there, so two pods that take turns on a declared
card of 100 MiB (--gpu-capacity) with 70 MiB each must really have moved:
the fake card's log shows each prefetch and where the bytes went. And
managed memory never passes the card's free memory, counting what other
processes have off the card (it comes back): such an allocation fails with
CUDA_ERROR_OUT_OF_MEMORY and says why."""
import re

from gmt_e2e import wait_for
from test_swap_jobs import MIB, SWAP_JOB, SwapJobs


class TwoUmPods(SwapJobs):
    CONFIG = "2\na 0.5 1.0 1Gi mode=um idle-out=0\nb 0.5 1.0 1Gi mode=um idle-out=0\n"
    HOST_COPIES = 0  # the driver's managed memory moves, not a copy

    def test_two_um_jobs_take_turns_on_the_declared_card(self):
        held, rounds = 70 * MIB, 3
        # The card has room for both (managed memory may not pass it); the
        # space declared for it, for one.
        errs = self.alternate(held, 100 * MIB, rounds, "--kernel-us", "2000",
                              fake_mem=200 * MIB)
        if not self.fake:
            return
        for pod, err, outs, ins in (("a", errs[0], rounds + 1, rounds),
                                    ("b", errs[1], rounds, rounds)):
            # Every move was a whole allocation's prefetch, and the fake
            # card let the bytes go (host) or took them back (device).
            self.assertEqual(len(re.findall(r"prefetch %d bytes at \S+ to host -1: host" % held,
                                            err)), outs, "%s: %s" % (pod, err[-3000:]))
            self.assertEqual(len(re.findall(r"prefetch %d bytes at \S+ to device 0: device" % held,
                                            err)), ins, "%s: %s" % (pod, err[-3000:]))
            self.assertIn("cuMemAllocManaged -> 0", err)

    def test_managed_memory_never_passes_the_card(self):
        card = 100 * MIB
        self.start_schd()
        self.start_pmgr("a")
        self.start_pmgr("b")
        # a's 70 MiB go to the host (the test knob moves them out 1 s after
        # their last move in: past the job's fill, so that no report from
        # a move out during the fill says "host" while the fill's next copy
        # brings them back): the card is empty again, but they come back
        # with a.
        pa = self.job("a", 70 * MIB, card, GMT_SWAP_TEST_EVICT_MS="1000")
        wait_for(lambda: self.tiers("a", pa.proc.pid)[0] == {"gpu": 0, "host": 70 * MIB,
                                                              "disk": 0},
                 timeout=10, what="a's managed memory on the host")
        # 70 more would make 140 MiB of managed memory on a 100 MiB card.
        env = self.hook_env("b", GMT_FAKE_MEM=str(card), GMT_FAKE_LOG="1")
        pb = self.run_prog("b", SWAP_JOB, "--mib", "70", env=env)
        pb.expect("CUDAFAIL cuMemAlloc_v2(&d[p], bytes / pieces) CUDA_ERROR_OUT_OF_MEMORY",
                  timeout=30)
        rc, err = pb.finish()
        self.assertEqual(rc, 1, err[-3000:])
        self.assertIn("it would pass the card's free memory", err)
        self.assertNotIn("cuMemAllocManaged", err)  # refused before the driver was asked
        # 20 MiB fit beside a's 70.
        pb = self.job("b", 20 * MIB, card)
        pb.send("check")
        self.assertEqual(self.result(pb), "OK %d" % (20 * MIB))
        pa.send("check")
        self.assertEqual(self.result(pa), "OK %d" % (70 * MIB))
        for p in (pa, pb):
            p.send("exit")
            rc, err = p.finish()
            self.assertEqual(rc, 0, err[-3000:])
