"""End-to-end: mode=swap as a user runs it (issue 12, docs/tiers.md). Two
swap pods each hold 700 MiB on a card of 1 GiB (the fake driver's, and
gmt-schd's --gpu-capacity; the test with kernels scales both by 1/10, as
this machine's first touch of memory costs about 3 ms per MiB and every
move touches fresh memory): they cannot both be on it, so each time one
reads back what it wrote the other's allocation must have moved out to host
memory, asked by the scheduler through its pod manager, and come back at
the same address before its next copy or kernel. Every read-back compares
every byte; the fake card refuses any byte past 1 GiB, so a move that came
too late would be a CUDA error, not a pass."""
import os
import re
import time
import unittest

from gmt_e2e import ASAN_PRELOAD, BUILD, GmtTestCase, wait_for

SWAP_JOB = os.path.join(BUILD, "test", "e2e", "memprogs", "swap_job")
DEV_ALLOC = os.path.join(BUILD, "test", "e2e", "memprogs", "dev_alloc")
MIB = 1 << 20


def cpu_s(pid, seconds):
    """CPU seconds (user and system) process pid used over the next seconds."""
    import time

    def used():
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    before = used()
    time.sleep(seconds)
    return used() - before


STAMP = re.compile(r"^gmt\[\d+\] ([\d.]+): (.*)$")


def grants_and_pins(err):
    """From a job's GMT_HOOK_DEBUG=2 stderr: its grants (start, end; inf
    when it still held one) and its pins ahead (begun, registration begun,
    ended), in seconds. What holds the driver is the registration, at the
    end, after the pages were faulted in: the gap is kept there (a pin
    begun just before a grant registered in it once: a loaded CI machine
    saw one 7 ms after another)."""
    grants, start, pins = [], None, []
    for line in err.splitlines():
        m = STAMP.match(line)
        if not m:
            continue
        t, what = float(m.group(1)), m.group(2)
        if re.match(r"device 0: token for ", what):
            start = t
        elif start is not None and re.search(r"letting the token go|quota spent", what):
            grants.append((start, t))
            start = None
        pin = re.match(r"prepared a host copy of \d+ bytes for \S+ in ([\d.]+) ms "
                       r"\(([\d.]+) ms in the driver\)", what)
        if pin:
            pins.append((t - float(pin.group(1)) / 1e3, t - float(pin.group(2)) / 1e3, t))
    if start is not None:
        grants.append((start, float("inf")))
    return grants, pins


def paced_registrations(test, pod, grants, pins):
    """Asserts that each registration begun in a grant came at least 5x the
    one before's time after it (the rule is 9x); how many there were.
    Within 2 ms of a grant's start the pin and the grant race (the check
    and the grant's line)."""
    n = 0
    for (_, r0, e0), (_, r1, _) in zip(pins, pins[1:]):
        if any(g0 + 0.002 < r1 < g1 - 0.002 for g0, g1 in grants):
            n += 1
            test.assertGreaterEqual(
                r1 - e0, 5 * (e0 - r0),
                "%s: a registration began %.1f ms after one of %.1f ms, while running"
                % (pod, (r1 - e0) * 1e3, (e0 - r0) * 1e3))
    return n


class SwapJobs(GmtTestCase):
    """Two swap pods' jobs: what the tests below share."""
    CONFIG = "2\na 0.5 1.0 1Gi mode=swap idle-out=0\nb 0.5 1.0 1Gi mode=swap idle-out=0\n"
    # Pinned host copies each job registers over all its moves (mode=swap
    # keeps the one it came back from for its next move out).
    HOST_COPIES = 1

    def job(self, pod, held, card, *args, **env):
        env = self.hook_env(pod, GMT_FAKE_MEM=str(card), GMT_FAKE_LOG="1", **env)
        p = self.run_prog(pod, SWAP_JOB, "--mib", str(held // MIB), *args, env=env)
        ready = p.expect("READY", timeout=60)
        self.assertEqual(int(ready["bytes"]), held)
        return p

    def ran_alone(self, held, card, *flags):
        """gmt-schd on a declared card of card bytes (with flags), both pod
        managers, and a's job of held bytes, which checks once alone; its
        Prog."""
        self.start_schd("--gpu-capacity", "0=%d" % card, *flags)
        self.start_pmgr("a")
        self.start_pmgr("b")
        pa = self.job("a", held, card, "--kernel-us", "2000")
        pa.send("check")
        self.assertEqual(self.result(pa), "OK %d" % held, pa.stderr()[-3000:])
        return pa

    def result(self, p):
        """The next OK/BAD/CUDAFAIL line of p."""
        while True:
            line = p.lines.get(timeout=60)
            if line is None:
                self.fail("swap_job ended; stderr: %s%s" % (p.stderr()[-3000:], self.logs()))
            if line.startswith(("OK", "BAD", "CUDAFAIL")):
                return line

    def exit_jobs(self, *procs):
        """Tells each job to exit, one after the other; each must exit 0.
        Their stderr, in order."""
        errs = []
        for p in procs:
            p.send("exit")
            rc, err = p.finish()
            self.assertEqual(rc, 0, err[-3000:])
            errs.append(err)
        return errs

    def grow(self, pod, nbytes, card):
        """A second process of pod allocates nbytes and holds them (dev_alloc):
        the pod grows. Its Prog, for end_grow."""
        env = self.hook_env(pod, GMT_FAKE_MEM=str(card))
        p = self.run_prog(pod, DEV_ALLOC, "0:%d" % nbytes, env=env)
        self.assertEqual(p.expect("ALLOC", timeout=30)["rc"], "0", p.stderr()[-3000:])
        p.expect("READY", timeout=30)
        return p

    def end_grow(self, p):
        p.send("exit")  # frees at one line, exits at the next
        p.send("exit")
        self.assertEqual(p.finish()[0], 0)

    # gmt-schd's line for a turn to grow in: pod, ms, what it holds.
    GROW = re.compile(r"pod '(\w)' is granted a turn of (\d+) ms to grow in \(it holds "
                      r"([\d.]+) MiB")

    def grow_turns(self):
        """Each turn to grow in gmt-schd granted so far: (pod, ms, MiB held)."""
        return self.GROW.findall(self.daemons[0].output())

    def logs(self):
        return "".join("\n%s: %s" % (d.name, d.output()[-2000:]) for d in self.daemons)

    def tiers(self, pod, pid):
        proc = self.process(pod, pid) or {}
        return proc.get("tiers"), proc.get("swap_outs", 0), proc.get("swap_ins", 0)

    def alternate(self, held, card, rounds, *args, fake_mem=None):
        """a and b take turns reading back what they wrote, rounds times,
        on a declared card of card bytes (the fake one: fake_mem, default
        the same); the stderr of each job, after it exited."""
        self.start_schd("--gpu-capacity", "0=%d" % card)
        self.start_pmgr("a")
        self.start_pmgr("b")
        pa = self.job("a", held, fake_mem or card, *args)
        # b's bytes fit only once a's have moved out.
        pb = self.job("b", held, fake_mem or card, *args)
        wait_for(lambda: self.tiers("a", pa.proc.pid)[0] == {"gpu": 0, "host": held, "disk": 0},
                 timeout=10, what="a's allocation in host memory")
        for _ in range(rounds):
            for p in (pa, pb):
                p.send("check")
                self.assertEqual(self.result(p), "OK %d" % held, p.stderr()[-3000:])
        # b checked last: its bytes are on the card, a's in host memory.
        wait_for(lambda: self.tiers("a", pa.proc.pid)[0] == {"gpu": 0, "host": held, "disk": 0}
                 and self.tiers("b", pb.proc.pid)[0] == {"gpu": held, "host": 0, "disk": 0},
                 timeout=10, what="a out, b in")
        # Each check but b's first brought its allocation back, and each
        # check of the other moved it out.
        _, outs_a, ins_a = self.tiers("a", pa.proc.pid)
        _, outs_b, ins_b = self.tiers("b", pb.proc.pid)
        self.assertEqual((outs_a, ins_a), (rounds + 1, rounds))
        self.assertEqual((outs_b, ins_b), (rounds, rounds))
        space = self.status()["host"]["tiers"][0]
        self.assertEqual((space["tier"], space["index"]), ("gpu", 0))
        self.assertLessEqual(space["reserved"], space["capacity"])
        errs = self.exit_jobs(pa, pb)
        for err in errs:
            # Each moved out into the host copy it came back from (kept
            # for GMT_SWAP_KEEP_MS): one registration, not one a move
            # (counted in the fake driver's log).
            if self.fake:
                self.assertEqual(
                    len(re.findall(r"fakecuda\[\d+\]: cuMemHostRegister_v2 -> 0\b", err)),
                    self.HOST_COPIES)
        return errs


class TwoSwapPods(SwapJobs):
    # Each move touches 700 MiB of fresh memory, about 45 s in all on this
    # machine, twice the time under ASan: the plain build runs it (and the
    # GPU machine, test/gpu/check_swap.py); ASan runs the 70 MiB ones.
    @unittest.skipIf(ASAN_PRELOAD, "700 MiB moves: the plain build runs this one")
    def test_two_copying_jobs_get_their_bytes_back(self):
        self.alternate(700 * MIB, 1 << 30, 2)

    def test_two_jobs_launching_kernels_get_their_bytes_back(self):
        # A kernel before each read-back: each pod takes the GPU time token
        # in turn, and the one without it is the one asked to move out.
        self.alternate(70 * MIB, 100 * MIB, 3, "--kernel-us", "2000")


class OverlappedTurns(SwapJobs):
    """A job that holds its memory as several allocations comes back
    allocation by allocation while the other still moves out: each one
    the other has moved out lowers its Resident at once, and the restore is
    granted in part as soon as its smallest allocation fits (docs/tiers.md,
    "Swap mode in the scheduler"). Bytes stay exact."""

    def test_pieces_come_back_in_part_as_the_other_moves_out(self):
        held, card = 80 * MIB, 100 * MIB
        self.start_schd("--gpu-capacity", "0=%d" % card, "--tier-trigger", "1")
        self.start_pmgr("a")
        self.start_pmgr("b")
        pa = self.job("a", held, card, "--pieces", "8")
        pb = self.job("b", held, card, "--pieces", "8")
        for _ in range(2):
            for p in (pa, pb):
                p.send("check")
                self.assertEqual(self.result(p), "OK %d" % held, p.stderr()[-3000:])
        schd = self.daemons[0].output()
        self.assertRegex(schd, r"of %d bytes granted, the rest as the others move out" % held,
                         schd[-3000:])
        self.exit_jobs(pa, pb)


class TwoBusySwapPods(SwapJobs):
    """Both jobs check over and over at once, each with a kernel before
    its read-back: they must take turns on the card. The one that waits for
    room holds its pod's token while it waits, so the scheduler may ask the
    other, which does not run then, to move out (a waiter that gave its
    token back while the other kept launching got one check in 15 s)."""

    def busy(self, seconds, base_quota_ms, *flags, held=None, card=100 * MIB, pieces=0, **env):
        """Both jobs check for seconds at once (held: each pod's bytes,
        default 70 MiB each); their jobs and results."""
        import threading
        import time
        held = held or {"a": 70 * MIB, "b": 70 * MIB}
        self.start_schd("--gpu-capacity", "0=%d" % card, "--base-quota-ms", str(base_quota_ms),
                        "--min-quota-ms", str(base_quota_ms), *flags)
        self.start_pmgr("a")
        self.start_pmgr("b")
        more = ("--pieces", str(pieces)) if pieces else ()
        jobs = {pod: self.job(pod, held[pod], card, "--kernel-us", "20000", *more, **env)
                for pod in "ab"}
        done = {pod: [] for pod in "ab"}
        stop = time.monotonic() + seconds

        def loop(pod):
            p = jobs[pod]
            while time.monotonic() < stop:
                p.send("check")
                done[pod].append(self.result(p))
                if done[pod][-1] != "OK %d" % held[pod]:
                    return

        threads = [threading.Thread(target=loop, args=(pod,)) for pod in "ab"]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        for pod, p in jobs.items():
            self.assertTrue(done[pod] and all(r == "OK %d" % held[pod] for r in done[pod]),
                            "%s: %s\n%s" % (pod, done[pod][-3:], p.stderr()[-3000:]))
        return jobs, done

    def stop_jobs(self, jobs):
        return dict(zip(jobs, self.exit_jobs(*jobs.values())))

    def test_both_busy_jobs_take_turns(self):
        # Turns as short as their moves (--swap-move-share 0.5): many of them.
        jobs, done = self.busy(10, 300, "--swap-move-share", "0.5")
        for pod, p in jobs.items():
            _, outs, ins = self.tiers(pod, p.proc.pid)
            # Turns, not one job alone: each came back to the card again
            # and again, and did several checks.
            self.assertGreaterEqual(ins, 3, "%s: %d checks, moved in %d times" %
                                    (pod, len(done[pod]), ins))
            self.assertGreaterEqual(len(done[pod]), 3)
        self.stop_jobs(jobs)


class StartingTurn(SwapJobs):
    """A job starting whose quota does not fit on the card beside what is
    there: until it has had a turn to grow in a pod may grow to its
    quota, so its first grant is a turn to grow in, costed by what it
    holds, not a plain grant (gmt_swap_turn_start). On an H200 three AdamW
    jobs otherwise spent their first second in 100 ms grants, each pushing
    the others out as it grew. (With both jobs started before either ran,
    the second's allocation pushed the first out, and which asked first
    decided whether either was planned a turn to grow in or both turns to
    bring bytes back: so the first runs alone here.)"""
    def test_a_job_starting_is_planned_a_turn_to_grow(self):
        held, card = 70 * MIB, 100 * MIB
        pa = self.ran_alone(held, card, "--swap-move-share", "0.5")
        grown = self.grow_turns()
        # Costed by what it holds (its 70 MiB, on the card), not by its
        # 1Gi quota: a turn as long as moving 70 MiB twice allows.
        self.assertEqual([(pod, float(mib) * MIB) for pod, _, mib in grown], [("a", held)],
                         self.logs())
        self.assertGreater(int(grown[0][1]), 0)
        # b's job then comes and both take turns, bytes intact.
        pb = self.job("b", held, card, "--kernel-us", "2000")
        for p in (pa, pb, pa):
            p.send("check")
            self.assertEqual(self.result(p), "OK %d" % held, p.stderr()[-3000:])
        self.exit_jobs(pa, pb)


class ChurnInTurn(SwapJobs):
    """A process that frees (or allocates) in its swap turn, launching
    nothing, is busy: its turn does not go back after the turn's idle time
    (250 ms). On an H200 PyTorch released 4.5 GiB of cached pages
    (expandable segments, asked by the hook before a move out) in 0.47 s
    as a transformer job's turn began, and the turn, 540 ms of moves in,
    went to the other job."""

    def test_allocating_and_freeing_keeps_the_turn(self):
        # And 16 pieces of 2 MiB to free. The card is big enough that its
        # 92 MiB stay below the trigger (85%): past it, a's buffer could be
        # moved out between its allocations (it holds no token), and its
        # turn would be priced at the 32 MiB left.
        held, card = 60 * MIB, 200 * MIB
        # A's turn to grow in: its 60 MiB at the default rate and a share
        # of 0.01, about 1.5 s.
        self.start_schd("--gpu-capacity", "0=%d" % card, "--swap-move-share", "0.01")
        self.start_pmgr("a")
        pa = self.job("a", held, card, "--kernel-us", "1000")
        pa.send("churn 800")
        self.assertEqual(pa.expect("CHURNED", timeout=30)["frees"], "16", pa.stderr()[-3000:])
        out = self.daemons[0].output()
        self.assertEqual([int(ms) > 1000 for pod, ms, _ in self.grow_turns()], [True], out[-3000:])
        # One grant for both launches, 0.8 s apart.
        self.assertEqual(len(re.findall(r"grant to pod 'a'", out)), 1, out[-3000:])
        self.exit_jobs(pa)


class RivalsGrowth(SwapJobs):
    """Two jobs whose bytes fit on the card side by side but whose quotas
    do not: a pod planned a turn counts what its rivals (the swap pods
    that wait for the token, hold it, or ran within the last second) will
    grow to, their quota until their peak is known (their grants ran
    GMT_SWAP_GROWN_MS without it rising), so a job asking just
    after the other grew in its grant is planned a turn to grow in, though
    its own quota fits beside what the other holds now. Neither job ever
    moves. On an H200, once the first of three AdamW jobs had finished,
    the other two each fitted beside what the card held: both came back,
    grew and pushed each other out for 1.3 s before one was planned a
    turn."""
    CONFIG = "2\na 0.5 1.0 60Mi mode=swap idle-out=0\nb 0.5 1.0 60Mi mode=swap idle-out=0\n"

    def test_a_rivals_quota_counts_until_its_peak_is_known(self):
        card = 100 * MIB
        # Grants of 3 s: b's spin and its growth are in one grant.
        self.start_schd("--gpu-capacity", "0=%d" % card, "--swap-move-share", "0.5",
                        "--base-quota-ms", "3000", "--min-quota-ms", "3000")
        self.start_pmgr("a")
        self.start_pmgr("b")
        pa = self.job("a", 20 * MIB, card, "--kernel-us", "1000")
        pb = self.job("b", 20 * MIB, card, "--kernel-us", "1000")
        pb.send("spin 1500")
        schd = self.daemons[0]
        wait_for(lambda: re.search(r"grant to pod 'b'", schd.output()), timeout=10,
                 what="b's grant")
        pd = self.grow("b", 10 * MIB, card)  # b grows in its grant
        pb.expect("SPUN", timeout=30)
        self.assertEqual(self.grow_turns(), [], "b's quota fitted beside a")
        # a asks as b's grant ends: a's 40 MiB more fits beside the 50 the
        # card holds, not beside b's 30 more too. Its 800 ms spin without
        # growing makes its peak known (GMT_SWAP_GROWN_MS), so that b's
        # 30 MiB more fit beside it after.
        pa.send("spin 800")
        pa.expect("SPUN", timeout=30)
        for p in (pb, pa):
            p.send("check")
            self.assertEqual(self.result(p), "OK %d" % (20 * MIB), p.stderr()[-3000:])
        self.assertEqual([pod for pod, _, _ in self.grow_turns()], ["a"], self.logs())
        for pod, p in (("a", pa), ("b", pb)):
            self.assertEqual(self.tiers(pod, p.proc.pid)[1:], (0, 0), pod)
        self.end_grow(pd)
        self.exit_jobs(pa, pb)


class GrowsInItsGrant(SwapJobs):
    """A pod's peak is known only once its grants have run
    GMT_SWAP_GROWN_MS (ended) without it rising: a pod that grows in its
    grant is planned a turn to grow in again at its next one. On an H200
    a transformer job, marked grown at a 199 ms turn to grow in from 40
    MiB, read a peak of 682 MiB of its 10.75 GiB: it was planned no turn
    as it came back and grew through the other job's memory, whose next
    step took 15.5 s."""

    def test_a_pod_that_grew_in_its_grant_is_planned_to_grow_again(self):
        card = 100 * MIB
        self.start_schd("--gpu-capacity", "0=%d" % card, "--base-quota-ms", "500",
                        "--min-quota-ms", "500", "--swap-move-share", "0.5")
        self.start_pmgr("a")
        pa = self.job("a", 10 * MIB, card, "--kernel-us", "1000")
        pa.send("spin 400")
        wait_for(lambda: self.grow_turns(), timeout=10,
                 what="a's first turn to grow in (its 1Gi quota never fits the card)")
        pd = self.grow("a", 30 * MIB, card)  # in that grant
        pa.expect("SPUN", timeout=30)
        grown_before = len(self.grow_turns())
        time.sleep(0.6)  # past the grant it grew in
        for _ in range(2):
            pa.send("check")
            self.assertEqual(self.result(pa), "OK %d" % (10 * MIB), pa.stderr()[-3000:])
        turns = self.grow_turns()
        # Planned a turn to grow in after it grew: its peak was not known.
        self.assertGreater(len(turns), grown_before, self.logs())
        self.end_grow(pd)
        self.exit_jobs(pa)


class NextJobTurn(SwapJobs):
    """A pod's peak and its turn to grow in are its processes': once they
    are gone, the pod's next job may grow to its quota again and is
    planned a turn to grow in as the first was (a flag that outlived the
    job left the next one planned from a peak of nothing)."""

    def test_a_pods_next_job_is_planned_a_turn_to_grow_in_again(self):
        held, card = 30 * MIB, 100 * MIB
        self.start_schd("--gpu-capacity", "0=%d" % card)
        self.start_pmgr("a")
        self.start_pmgr("b")
        pb = self.job("b", held, card)
        for _ in range(2):
            pa = self.job("a", held, card, "--kernel-us", "1000")
            pa.send("check")
            self.assertEqual(self.result(pa), "OK %d" % held, pa.stderr()[-3000:])
            self.exit_jobs(pa)
            wait_for(lambda: not self.pod("a").get("processes"), timeout=10,
                     what="pod a without processes")
        grown = [t for t in self.grow_turns() if t[0] == "a"]
        # Its 1Gi quota never fits on the 100 MiB card beside b's 30 MiB.
        self.assertEqual(len(grown), 2, self.logs())
        self.exit_jobs(pb)


class PinsPaced(TwoBusySwapPods):
    """A process pins host copies ahead (a contested card) freely while it
    holds no token, and while it holds one holds the driver at most a
    tenth of the time: a registration holds the driver, and on an H200 two
    AdamW jobs pinning 128 MiB copies back to back while they ran stalled
    30-45 ms a pin, 1.5-2 s in each one's first step. The fake driver holds its lock across a
    registration as the real one does; pins are made slow here (2 s/GiB,
    20 ms for each of a job's seven 10 MiB pieces) so that pins made back
    to back while the job ran would show."""
    test_both_busy_jobs_take_turns = None  # TwoBusySwapPods' own

    def test_pins_while_running_leave_nine_tenths_of_the_time(self):
        # Turns as short as their moves (share 0.5), so that there are many
        # grants in 6 s whatever the fake's copies cost (under ASan a
        # switch of 140 MiB takes 0.6 s: a 0.1 share would plan 5 s turns).
        jobs, done = self.busy(6, 300, "--swap-move-share", "0.5", GMT_HOOK_DEBUG="2",
                               GMT_FAKE_REGISTER_MS_PER_GIB="2000", pieces=7)
        errs = self.stop_jobs(jobs)
        running_pins = 0
        for pod, err in errs.items():
            grants, pins = grants_and_pins(err)
            running_pins += paced_registrations(self, pod, grants, pins)
            self.assertGreater(len(grants), 2, "%s: %d grants" % (pod, len(grants)))
            self.assertGreater(len(pins), 1, "%s: %d pins: the test saw nothing" % (pod, len(pins)))
        print("\nregistrations while running, after another: %d" % running_pins)


class PinsPacedInATurn(SwapJobs):
    """While a job runs a long turn on a contested card it pins its host
    copies ahead (none kept: GMT_SWAP_KEEP_MS=0), and each registration
    comes at least 9x its own time after the one before: the gap is kept
    at the registration, after the pages were faulted in."""

    def test_registrations_in_a_turn_keep_their_gap(self):
        held, card = 70 * MIB, 100 * MIB
        self.start_schd("--gpu-capacity", "0=%d" % card)
        self.start_pmgr("a")
        self.start_pmgr("b")
        pa = self.job("a", held, card, "--kernel-us", "2000", "--pieces", "7",
                      GMT_HOOK_DEBUG="2", GMT_FAKE_REGISTER_MS_PER_GIB="2000", GMT_SWAP_KEEP_MS="0")
        pb = self.job("b", held, card, "--kernel-us", "2000")
        pb.send("check")
        self.assertEqual(self.result(pb), "OK %d" % held, pb.stderr()[-3000:])
        pa.send("spin 3000")
        pa.expect("SPUN", timeout=30)
        err = self.exit_jobs(pa, pb)[0]
        grants, pins = grants_and_pins(err)
        n = paced_registrations(self, "a", grants, pins)
        print("\nregistrations in a's turn, after another: %d" % n)
        self.assertGreaterEqual(n, 2, err[-3000:])


class TurnsFollowBytes(TwoBusySwapPods):
    """gmt-schd plans each swap pod's turn from the bytes it moves, in at
    the card's measured rate and out at the pod's own (docs/tiers.md,
    "The turn's length"): b holds 4x a's bytes, the card fits neither
    beside the other, so b's turns move 4x the bytes and are planned
    longer (4x at the same rates), moving is the share asked of each turn,
    and no pod's memory moves more than once a turn."""

    def test_a_pod_with_four_times_the_bytes_gets_four_times_the_turn(self):
        held = {"a": 8 * MIB, "b": 32 * MIB}
        # 100 ms quanta alone; the turns are the moves' x 3 (share 0.25).
        jobs, done = self.busy(8, 100, "--swap-move-share", "0.25", held=held, card=36 * MIB,
                               GMT_HOOK_DEBUG="1")
        st = self.status()
        turns = {}
        for pod in st["pods"]:
            dev = pod["devices"][0]
            turns[pod["name"]] = dev
            # Contested: each turn moves its bytes in and out again.
            self.assertEqual(dev["turn_moves_bytes"], 2 * held[pod["name"]], dev)
            self.assertGreater(dev["swap_turns"], 0, dev)
            self.assertAlmostEqual(dev["turn_ms"], 3 * dev["turn_cost_ms"], delta=0.01, msg=dev)
        gpu = st["host"]["tiers"][0]
        self.assertEqual(gpu["tier"], "gpu")
        self.assertGreater(gpu["switches"], 0, gpu)
        self.assertGreater(gpu["last_switch_ms"], 0, gpu)
        self.assertGreater(gpu["move_rate"], 0, gpu)
        # The cost is the bytes in at the card's rate and the bytes out
        # again at the pod's own rate out (4 GB/s until one is measured):
        # 4x the bytes, 4x the cost at the same rates (the plans may be
        # from different decisions, so compare each's cost with the rates
        # in status).
        for pod, dev in turns.items():
            self.assertGreater(dev["turn_cost_ms"], 0, dev)
            half = dev["turn_moves_bytes"] / 2
            want = (half / gpu["move_rate"] + half / (dev["out_rate"] or 4e9)) * 1000
            self.assertAlmostEqual(dev["turn_cost_ms"], want, delta=0.5 * want, msg=(pod, dev, gpu))
            # Each moved out at the other's turns: its rate out is measured
            # from its reports (the fake driver's: about 1 GB/s).
            self.assertGreater(dev["out_rate"], 0, (pod, dev))
        # No pod's memory moved more than once a turn: in only at its own
        # turns, out only at the other's (the first time before any).
        for pod, other in (("a", "b"), ("b", "a")):
            _, outs, ins = self.tiers(pod, jobs[pod].proc.pid)
            self.assertGreater(ins, 0)
            self.assertLessEqual(ins, turns[pod]["swap_turns"], (pod, turns))
            self.assertLessEqual(outs, turns[other]["swap_turns"] + 1, (pod, turns))
        text = self.gmt("status").stdout
        self.assertIn("turns on GPU 0:", text)
        self.assertIn("swap turns' switches move", text)
        errs = self.stop_jobs(jobs)
        # The grants the hooks got carried the turns gmt-schd planned: each
        # hook's longest is at least its pod's last plan in status. (Each
        # pod's rate out is its own, measured as the run goes, so b's 4x
        # the bytes give 4x the turn only at the same rates: the plans'
        # bytes and costs are checked against the rates above. Compared
        # across pods from the hooks' logs, b's longest was 1.75x a's in
        # one run of five.)
        for pod, err in errs.items():
            got = [int(m) for m in re.findall(r"device 0: token for [\d.]+ ms .*swap turn (\d+) ms",
                                              err)]
            self.assertTrue(got and max(got) > 0, "%s: %s" % (pod, err[-3000:]))
            self.assertGreaterEqual(max(got), int(turns[pod]["turn_ms"]), (pod, got, turns[pod]))


class FreedTurn(SwapJobs):
    """A job that frees its memory in its turn and stays (a finished job
    that has not exited) gives the token back as soon as it is quiet, not
    after the turn's long quiet (GMT_BUSY_TURN_IDLE_NS, 250 ms): little
    would move. On an H200 each finished AdamW job held the GPU idle 250 ms
    before the next one's turn. And the switch that follows, with room
    free, is timed until its bytes are on the card."""

    def test_a_job_that_freed_its_memory_gives_its_turn_back(self):
        held, card = 70 * MIB, 100 * MIB
        # Long turns: moving at most 1% of one.
        self.start_schd("--gpu-capacity", "0=%d" % card, "--swap-move-share", "0.01")
        self.start_pmgr("a")
        self.start_pmgr("b")
        # Copies at 2 GB/s: a switch cannot move faster than that.
        pa = self.job("a", held, card, "--kernel-us", "20000", GMT_HOOK_DEBUG="1",
                      GMT_FAKE_PINNED_GBPS="2")
        pb = self.job("b", held, card, "--kernel-us", "20000", GMT_FAKE_PINNED_GBPS="2")
        wait_for(lambda: self.tiers("a", pa.proc.pid)[0] == {"gpu": 0, "host": held, "disk": 0},
                 timeout=10, what="a's allocation in host memory")
        # a's turn brings it back; it frees at once after its last launch
        # (no read-back between: a copy is no launch, and a slow one would
        # count as quiet).
        pa.send("spin 100")
        pa.send("free")
        pa.expect("SPUN", timeout=60)
        pa.expect("FREED", timeout=30)
        pb.send("check")  # b waits for a's token, then for room
        self.assertEqual(self.result(pb), "OK %d" % held, pb.stderr()[-3000:])
        # The card's switches are timed until the bytes are on the card,
        # not until room was claimed for them: b's came back with room free
        # (a had freed), and a Resident is granted before the copy in (a
        # switch of 5.2 GiB with room free "took" 10 ms on an H200).
        gpu = self.status()["host"]["tiers"][0]
        self.assertEqual(gpu["tier"], "gpu")
        self.assertGreaterEqual(gpu["switches"], 2, gpu)
        # b's switch, the last: its 70 MiB in at 2 GB/s take 37 ms at least.
        self.assertGreaterEqual(gpu["last_switch_ms"], held / 2e9 * 1e3, gpu)
        self.assertLessEqual(gpu["move_rate"], 2.2e9, gpu)
        for p in (pa, pb):
            p.send("exit")
        rc, err = pa.finish()
        self.assertEqual(rc, 0, err[-3000:])
        rc, _ = pb.finish()
        self.assertEqual(rc, 0)
        turns = [int(t) for t in re.findall(r"device 0: token for [\d.]+ ms .*swap turn (\d+) ms", err)]
        self.assertTrue(turns and max(turns) >= 1000, "a's turns: %s\n%s" % (turns, err[-3000:]))
        unused = [float(u) for u in re.findall(r"idle: token given back \(ok\), overuse [\d.]+ ms, "
                                               r"unused ([\d.]+) ms", err)]
        self.assertTrue(unused, err[-3000:])
        # The last grant ended once a was quiet with its memory freed: the
        # batch rule's 5 ms and a tick or two, not the turn's 250 ms.
        self.assertLess(unused[-1], 200, "a held its freed turn: %s\n%s" % (unused, err[-3000:]))
        print("\nfreed turn given back after %.1f ms unused" % unused[-1])


class WaitInTurn(SwapJobs):
    """A process that waits in its swap turn for room on the card is busy
    while it waits: the turn's quiet (GMT_BUSY_TURN_IDLE_NS, 250 ms)
    counts from the wait's end, not from the grant or the last launch
    before it. On an H200 an AdamW job's allocation waited 300 ms for room
    in its turn, and the job gave the turn away before its first launch:
    the other pod came back, and this one moved out again. Here the wait is
    an allocation's that touches nothing after it (dev_alloc): a copy or
    launch right after would end the quiet by itself."""

    def test_a_wait_for_room_in_a_turn_is_not_its_quiet(self):
        held, card = 70 * MIB, 100 * MIB
        # Long turns (moving at most 1% of one): 3.6 s for b's 140 MiB.
        self.start_schd("--gpu-capacity", "0=%d" % card, "--swap-move-share", "0.01")
        self.start_pmgr("a")
        self.start_pmgr("b")
        pb = self.job("b", held, card)
        # a's copies at 0.15 GB/s: its 70 MiB move out takes 0.5 s.
        pa = self.job("a", held, card, GMT_FAKE_PINNED_GBPS="0.15")
        wait_for(lambda: self.tiers("b", pb.proc.pid)[0] == {"gpu": 0, "host": held, "disk": 0},
                 timeout=10, what="b's allocation in host memory")
        # c, a second process of b, allocates 40 MiB: b has memory off
        # the card, so the token c takes to wait for room is a turn, and
        # the room is a's, moving out.
        env = self.hook_env("b", GMT_FAKE_MEM=str(card), GMT_HOOK_DEBUG="2")
        pc = self.run_prog("b", DEV_ALLOC, "0:%d" % (40 * MIB), env=env)
        alloc = pc.expect("ALLOC", timeout=30)
        self.assertEqual(alloc["rc"], "0", pc.stderr()[-3000:])
        pc.expect("READY", timeout=30)
        wait_for(lambda: "letting the token go" in pc.stderr(), timeout=10,
                 what="c's token given back")
        for p in (pc, pc, pa, pb):  # c frees at one line, exits at the next
            p.send("exit")
        rc, err = pc.finish()
        self.assertEqual(rc, 0, err[-3000:])
        for p in (pa, pb):
            rc, _ = p.finish()
            self.assertEqual(rc, 0)
        grants, got, given = [], None, None
        for text in err.splitlines():
            m = STAMP.match(text)
            if not m:
                continue
            t, what = float(m.group(1)), m.group(2)
            turn = re.match(r"device 0: token for [\d.]+ ms .*swap turn (\d+) ms", what)
            if turn:
                grants.append((t, int(turn.group(1))))
            # c's room, granted: the wait's end.
            if re.match(r"resident %d bytes on device 0: granted" % (40 * MIB), what) and not got:
                got = t
            if re.match(r"device 0 \w+: letting the token go", what) and given is None:
                given = (t, what)
        # The scenario: c waited for room in a turn, long past its quiet.
        self.assertTrue(grants and grants[0][1] >= 1000, "c's grants: %s\n%s"
                        % (grants, err[-3000:]))
        self.assertTrue(got and given, err[-3000:])
        self.assertGreaterEqual(got - grants[0][0], 0.3, err[-3000:])
        kept_ms = (given[0] - got) * 1e3
        print("\nwaited %.0f ms in its turn, then kept it %.0f ms (%s)"
              % ((got - grants[0][0]) * 1e3, kept_ms, given[1]))
        # Quiet since the wait's end: the turn's 250 ms, less a tick or
        # two. Counted from the grant, c let it go at its first look
        # after the wait (~10 ms), and would not have had it for its
        # first launch.
        self.assertTrue(given[1].startswith("device 0 idle"), given)
        self.assertGreater(kept_ms, 200, err[-3000:])


class MoveInTurn(SwapJobs):
    """A process granted its token while it moves memory out is busy until
    the move ends: its launch waits behind the move, and the token's idle
    thread does not take that wait for quiet. On an H200 an AdamW job
    asked to move out (past the card's trigger) was granted a 7.3 s turn
    as the move began and gave it back as idle 0.17 s in; the other pod
    took the card and the job's first step waited for it. The move itself
    stops at the grant (the rest would come back at once): a transformer
    job granted its turn as a 9.2 GB move out began moved it all out in
    0.89 s, then back in 0.30 s."""

    def test_a_grant_during_a_move_out_is_kept_through_it(self):
        card = 100 * MIB
        # b's grants last 1.5 s, so that a waits for one while it moves.
        self.start_schd("--gpu-capacity", "0=%d" % card, "--base-quota-ms", "1500",
                        "--min-quota-ms", "1500")
        self.start_pmgr("a")
        self.start_pmgr("b")
        # a's memory is 8 allocations, each registered as it moves out (no
        # copies prepared ahead), at 300 s/GiB: each of the 4 it is asked
        # to move out takes 1.8 s, longer than b's grant (which began
        # before the move), and its other calls get the driver between two
        # registrations (a copy would hold the stream throughout).
        pa = self.job("a", 48 * MIB, card, "--kernel-us", "1000", "--pieces", "8",
                      GMT_FAKE_REGISTER_MS_PER_GIB="300000", GMT_SWAP_PREPARE="0",
                      GMT_HOOK_DEBUG="2")
        pb = self.job("b", 30 * MIB, card, "--kernel-us", "1000")
        pb.send("spin 2500")
        wait_for(lambda: re.search(r"token device 0: grant to pod 'b'", self.daemons[0].output()),
                 timeout=10, what="b's grant")
        pa.send("check")  # a waits for b's grant to end
        # b's second job takes the card to 90%, past its trigger: a, not
        # running, is asked to move out, and b's grant ends as it moves.
        pc = self.job("b", 10 * MIB, card)
        self.assertEqual(self.result(pa), "OK %d" % (48 * MIB), pa.stderr()[-3000:])
        pb.expect("SPUN", timeout=30)
        err = self.exit_jobs(pa, pb, pc)[0]
        granted = moved = given = None
        for text in err.splitlines():
            m = STAMP.match(text)
            if not m:
                continue
            t, what = float(m.group(1)), m.group(2)
            if granted is None and re.match(r"device 0: token for ", what):
                granted = t
            out = re.match(r"moved \d+ allocations \(\d+ bytes\) off the GPU in ([\d.]+) ms", what)
            if out and moved is None:
                moved = (t - float(out.group(1)) / 1e3, t)
            if granted is not None and given is None and "letting the token go" in what:
                given = (t, what)
        # The scenario: a's token was granted while its move ran.
        self.assertTrue(granted and moved and moved[0] < granted < moved[1],
                        "grant %s, move %s\n%s" % (granted, moved, err[-3000:]))
        # Kept through the move (an idle release came 20-30 ms in).
        self.assertTrue(given and given[0] > moved[1], "%s, move ended %.3f\n%s"
                        % (given, moved[1], err[-3000:]))
        # And the move stopped at the next allocation: what was left would
        # have come back at a's next launch. (a's grant comes within b's
        # 1.5 s, in the move's first allocation; at 80 s/GiB it came in the
        # last one once on a loaded machine, and nothing was left.)
        left = re.findall(r"granted the token while moving out: (\d+) allocations left", err)
        self.assertTrue(left and int(left[0]) > 0, err[-3000:])


class SwapPressure(SwapJobs):
    """Past the card's trigger (85% of its capacity), idle swap processes
    move out down to its stop threshold (65%) though every request fits:
    the room is there before the next one needs it (cuCascade's downgrade
    thresholds). Below the trigger nothing moves."""

    def test_past_the_trigger_idle_jobs_move_out(self):
        import time
        card = 100 * MIB
        self.start_schd("--gpu-capacity", "0=%d" % card)
        self.start_pmgr("a")
        self.start_pmgr("b")
        pa = self.job("a", 50 * MIB, card)
        pb = self.job("b", 30 * MIB, card)  # 80%: below the trigger
        time.sleep(1)
        self.assertEqual(self.tiers("a", pa.proc.pid)[0], {"gpu": 50 * MIB, "host": 0, "disk": 0})
        self.assertEqual(self.tiers("b", pb.proc.pid)[0], {"gpu": 30 * MIB, "host": 0, "disk": 0})
        # A second allocation of b takes the card to 90%: the idle one with
        # the most moves out (its one allocation: all of it).
        pc = self.job("b", 10 * MIB, card)
        wait_for(lambda: self.tiers("a", pa.proc.pid)[0] == {"gpu": 0, "host": 50 * MIB, "disk": 0},
                 timeout=10, what="a moved out past the trigger")
        self.assertEqual(self.tiers("b", pb.proc.pid)[0]["gpu"], 30 * MIB)
        self.assertIn("past its trigger", self.daemons[0].output())
        # It comes back whole when it runs again.
        pa.send("check")
        self.assertEqual(self.result(pa), "OK %d" % (50 * MIB), pa.stderr()[-3000:])
        self.exit_jobs(pa, pb, pc)


class IdleOut(SwapJobs):
    """idle-out= (issue 26, item 2; docs/tiers.md "Idle pods"): a swap pod
    that does not wait for the GPU keeps its memory on the card until it
    has run nothing for its idle-out, then moves out for a pod that needs
    the room, and comes back whole at its next launch; off keeps it."""
    CONFIG = ("2\na 0.5 1.0 1Gi mode=swap idle-out=2\n"
              "b 0.5 1.0 1Gi mode=swap idle-out=0\n")
    HELD = 70 * MIB
    CARD = 100 * MIB

    def start(self):
        import time
        pa = self.ran_alone(self.HELD, self.CARD)  # its last grant ends about now
        return pa, time.monotonic()

    def test_an_idle_pod_moves_out_after_its_idle_out_and_back_at_its_launch(self):
        import time
        pa, ran = self.start()
        # b needs the room at once; a, idle, keeps it for 2 s.
        env = self.hook_env("b", GMT_FAKE_MEM=str(self.CARD), GMT_FAKE_LOG="1")
        pb = self.run_prog("b", SWAP_JOB, "--mib", str(self.HELD // MIB), "--kernel-us", "2000",
                           env=env)
        pb.expect("READY", timeout=30)
        waited = time.monotonic() - ran
        self.assertGreaterEqual(waited, 1.8, "a moved out %.2f s after it ran" % waited)
        self.assertLess(waited, 15)
        self.assertEqual(self.tiers("a", pa.proc.pid)[0], {"gpu": 0, "host": self.HELD, "disk": 0})
        # a launches again: its bytes come back whole, and b (idle-out=0,
        # not waiting) moves out for them.
        woke = time.monotonic()
        pa.send("check")
        self.assertEqual(self.result(pa), "OK %d" % self.HELD, pa.stderr()[-3000:])
        print("\nidle-out: a moved out %.2f s after it ran; woke in %.3f s"
              % (waited, time.monotonic() - woke))
        self.assertEqual(self.tiers("a", pa.proc.pid)[0], {"gpu": self.HELD, "host": 0, "disk": 0})
        wait_for(lambda: self.tiers("b", pb.proc.pid)[0]["gpu"] == 0, timeout=10,
                 what="b moved out for a")
        self.assertEqual(self.pod("a")["idle_out_ms"], 2000)
        self.assertIn("idle-out 2 s", self.gmt("status").stdout)
        self.exit_jobs(pa, pb)

    def test_a_waking_pod_cuts_a_turn_short(self):
        """A pod moved out while idle does not wait for another's turn at
        its next launch: on an H200 an 8 GiB inference pod waited 5.6 s
        for a training job's 10 s turn to grow in."""
        import time
        card, held = 400 * MIB, 300 * MIB
        # b's turn to grow in, costed by its 300 MiB at the default rate
        # and a share of 0.01: about 7.8 s.
        pa = self.ran_alone(held, card, "--swap-move-share", "0.01")
        pb = self.job("b", held, card, "--kernel-us", "2000")  # after a's idle-out
        self.assertEqual(self.tiers("a", pa.proc.pid)[0], {"gpu": 0, "host": held, "disk": 0})
        pb.send("spin 6000")
        wait_for(lambda: [t for t in self.grow_turns() if t[0] == "b" and int(t[1]) > 5000],
                 timeout=10, what="b's turn to grow in")
        time.sleep(0.5)
        woke = time.monotonic()
        pa.send("check")
        self.assertEqual(self.result(pa), "OK %d" % held, pa.stderr()[-3000:])
        took = time.monotonic() - woke
        print("\nidle-out: a woke in %.3f s within b's turn" % took)
        self.assertLess(took, 3.0, self.logs())
        self.assertRegex(self.daemons[0].output(),
                         r"pod 'a' \(batch, waking, usage [\d.]+ ms\) asks while pod 'b'")
        pb.expect("SPUN", timeout=30)
        pb.send("check")
        self.assertEqual(self.result(pb), "OK %d" % held, pb.stderr()[-3000:])
        self.exit_jobs(pa, pb)

    def test_the_holder_keeps_little_queued_while_a_pod_may_wake(self):
        """While a pod moved out idle may wake, the pod holding the GPU
        keeps at most --wake-queue-ms of work queued (20 ms here), so the
        waking pod does not wait for a deep queue: on an H200 a training
        job's queued step was a third of an 8 GiB pod's wake. Here b queues
        50 kernels of 40 ms (2 s) between its synchronizes. b keeps the
        default idle-out, as a training job does: cut short, it is asked
        to move out at a's first request, not once it asks again."""
        import time
        self.write_config("2\na 0.5 1.0 1Gi mode=swap idle-out=2\nb 0.5 1.0 1Gi mode=swap\n")
        pa, _ = self.start()
        pb = self.job("b", self.HELD, self.CARD, "--kernel-us", "40000", GMT_HOOK_DEBUG="1")
        wait_for(lambda: self.tiers("a", pa.proc.pid)[0]["gpu"] == 0, timeout=15,
                 what="a moved out")
        pb.send("spin 60000 50")
        # b's next grant after a went idle and out bounds its queue.
        wait_for(lambda: "queue bound 20000 us" in pb.stderr(), timeout=10,
                 what="b granted with its queue bounded")
        time.sleep(1.0)
        woke = time.monotonic()
        pa.send("check")
        self.assertEqual(self.result(pa), "OK %d" % self.HELD, pa.stderr()[-3000:])
        took = time.monotonic() - woke
        print("\nidle-out: a woke in %.3f s beside b's 40 ms kernels" % took)
        # Unbounded, a waits for what b has queued (up to 2 s) before b
        # moves out; bounded, for one kernel. With --wake-queue-ms off and
        # a woken halfway through b's queue: 1.3 s; bounded 0.4-0.5 s
        # (ASan build, 2 cores).
        self.assertLess(took, 0.9, self.logs())
        log = self.daemons[0].output()
        after_cut = log[log.index("asks while pod 'b'"):]
        first = re.search(r"swap: pod 'a' pid \d+ [^\n]*", after_cut).group(0)
        self.assertIn("asked to move out", first, self.logs())
        pb.proc.kill()  # its spin runs a minute
        self.exit_jobs(pa)

    def test_off_keeps_an_idle_pods_memory_on_the_card(self):
        self.write_config("2\na 0.5 1.0 1Gi mode=swap idle-out=off\n"
                          "b 0.5 1.0 1Gi mode=swap idle-out=0\n")
        pa, _ = self.start()
        self.assertEqual(self.pod("a")["idle_out_ms"], -1)
        # b waits its bound (3 s here) for room that never comes.
        env = self.hook_env("b", GMT_FAKE_MEM=str(self.CARD), GMT_SWAP_WAIT_MS="3000")
        pb = self.run_prog("b", SWAP_JOB, "--mib", str(self.HELD // MIB), env=env)
        line = pb.expect("CUDAFAIL", timeout=30)
        self.assertIsNotNone(line)
        self.assertEqual(self.tiers("a", pa.proc.pid)[0], {"gpu": self.HELD, "host": 0, "disk": 0})
        pa.send("check")
        self.assertEqual(self.result(pa), "OK %d" % self.HELD, pa.stderr()[-3000:])
        self.exit_jobs(pa)


class DiskSpill(SwapJobs):
    """With the host space too small for what must move (--host-tier), it
    goes to a spill file in the disk tier's folder (--disk-tier): an
    unlinked file, so the folder stays empty and a killed job leaves
    nothing; the bytes come back exact. With the disk tier too small as
    well, nothing moves: the data stays where it was, the job that moved
    nothing says why, and the one that waited for room fails after its
    bound with CUDA_ERROR_OUT_OF_MEMORY."""

    def spill_dir(self):
        d = os.path.join(self.node.tmp, "spill")
        os.mkdir(d)
        return d

    def test_moved_out_past_the_host_space_into_a_spill_file(self):
        held, card = 70 * MIB, 100 * MIB
        spill = self.spill_dir()
        self.start_schd("--gpu-capacity", "0=%d" % card, "--host-tier", "10Mi",
                        "--disk-tier", spill)
        self.start_pmgr("a")
        self.start_pmgr("b")
        pa = self.job("a", held, card)
        pb = self.job("b", held, card)  # a moves out: to the disk
        wait_for(lambda: self.tiers("a", pa.proc.pid)[0] == {"gpu": 0, "host": 0, "disk": held},
                 timeout=10, what="a's allocation in a spill file")
        disk = next(t for t in self.status()["host"]["tiers"] if t["tier"] == "disk")
        self.assertEqual(disk["reserved"], held)
        self.assertEqual(os.listdir(spill), [])  # unlinked: gone with the job
        for p in (pa, pb, pa):
            p.send("check")
            self.assertEqual(self.result(p), "OK %d" % held, p.stderr()[-3000:])
        wait_for(lambda: self.tiers("b", pb.proc.pid)[0]["disk"] == held, timeout=10,
                 what="b's allocation in a spill file")
        self.exit_jobs(pa, pb)

    def test_without_tier_flags_host_memory_is_not_bounded(self):
        # The host space defaults to the pinned budget (here 10 MiB): it
        # bounds swap's copies only when --host-tier or --disk-tier says so.
        held, card = 70 * MIB, 100 * MIB
        self.start_schd("--gpu-capacity", "0=%d" % card, "--pinned-limit", "10Mi")
        self.start_pmgr("a")
        self.start_pmgr("b")
        pa = self.job("a", held, card)
        pb = self.job("b", held, card)
        wait_for(lambda: self.tiers("a", pa.proc.pid)[0] == {"gpu": 0, "host": held, "disk": 0},
                 timeout=10, what="a's allocation in host memory")
        # b, on the contested card now, prepares its own copy (its swap_kept):
        # it counts in the host space too, and is not bounded either.
        wait_for(lambda: self.process("b", pb.proc.pid)["swap_kept"] == held, timeout=10,
                 what="b's copy prepared")
        status = self.status()
        host = next(t for t in status["host"]["tiers"] if t["tier"] == "host")
        self.assertEqual((host["capacity"], host["reserved"]), (10 * MIB, 2 * held))
        self.exit_jobs(pa, pb)

    def test_no_room_on_host_or_disk_moves_nothing(self):
        held, card = 70 * MIB, 100 * MIB
        spill = self.spill_dir()
        self.start_schd("--gpu-capacity", "0=%d" % card, "--host-tier", "10Mi",
                        "--disk-tier", spill + ":20Mi")
        self.start_pmgr("a")
        self.start_pmgr("b")
        pa = self.job("a", held, card)
        env = self.hook_env("b", GMT_FAKE_MEM=str(card), GMT_SWAP_WAIT_MS="3000")
        pb = self.run_prog("b", SWAP_JOB, "--mib", "70", env=env)
        line = self.result(pb)  # its allocation, after GMT_SWAP_WAIT_MS
        self.assertTrue(line.startswith("CUDAFAIL cuMemAlloc"), line)
        self.assertIn("CUDA_ERROR_OUT_OF_MEMORY", line)
        rc, _ = pb.finish()
        self.assertEqual(rc, 1)
        self.assertEqual(self.tiers("a", pa.proc.pid)[0], {"gpu": held, "host": 0, "disk": 0})
        self.assertIn("the disk tier for 20971520; it stays on the GPU", pa.stderr())
        pa.send("check")
        self.assertEqual(self.result(pa), "OK %d" % held, pa.stderr()[-3000:])
        self.exit_jobs(pa)


class KilledSwapJob(SwapJobs):
    """A process killed with its memory on the card, or moved out, loses
    only its own: the other's bytes come back exact, its room on the card
    is given back (the fake card refuses any byte past its size), and
    nothing of it stays counted."""

    def test_a_killed_job_gives_its_room_back(self):
        held, card = 70 * MIB, 100 * MIB
        self.start_schd("--gpu-capacity", "0=%d" % card)
        self.start_pmgr("a")
        self.start_pmgr("b")
        pa = self.job("a", held, card)
        pb = self.job("b", held, card)  # a moved out for it
        wait_for(lambda: self.tiers("a", pa.proc.pid)[0] == {"gpu": 0, "host": held, "disk": 0},
                 timeout=10, what="a's allocation in host memory")
        # b dies holding the card: a comes back once b is gone.
        pb.stop()
        pa.send("check")
        self.assertEqual(self.result(pa), "OK %d" % held, pa.stderr()[-3000:])
        wait_for(lambda: self.process("b", pb.proc.pid) is None, timeout=10,
                 what="b's process forgotten")
        wait_for(lambda: self.status()["host"]["tiers"][0]["reserved"]
                 == self.tiers("a", pa.proc.pid)[0]["gpu"] > 0, timeout=10,
                 what="the card's space to count a alone")
        # A new b moves a out again; then a dies while out: b is untouched.
        pb2 = self.job("b", held, card)
        wait_for(lambda: self.tiers("a", pa.proc.pid)[0]["host"] == held, timeout=10,
                 what="a moved out again")
        pa.stop()
        pb2.send("check")
        self.assertEqual(self.result(pb2), "OK %d" % held, pb2.stderr()[-3000:])
        wait_for(lambda: self.process("a", pa.proc.pid) is None, timeout=10,
                 what="a's process forgotten")
        wait_for(lambda: self.status()["host"]["tiers"][0]["reserved"]
                 == self.tiers("b", pb2.proc.pid)[0]["gpu"], timeout=10,
                 what="the card's space to count b alone")
        self.exit_jobs(pb2)


class PreparedCopies(SwapJobs):
    """A card whose pods' quotas together pass it, once occupied past its
    stop threshold (65%), is contested: its swap processes pin host copies
    ahead of their first move out, so that move only copies (docs/tiers.md,
    "Prepared host copies"). Where every pod's quota fits, or with
    GMT_SWAP_PREPARE=0, nothing is pinned ahead."""
    HELD, CARD = 70 * MIB, 100 * MIB
    NEW_COPIES = re.compile(r"moved 1 allocations \(%d bytes\) off the GPU in [\d.]+ ms "
                            r"\(keep \d+, (\d) new host copies\)" % HELD)

    def kept(self, pod, pid):
        return (self.process(pod, pid) or {}).get("swap_kept", 0)

    def first_move_out(self, **env):
        """a holds HELD, then b comes: a's stderr once b made it move out,
        and whether a had its copy ready before b came."""
        import time
        self.start_schd("--gpu-capacity", "0=%d" % self.CARD)
        self.start_pmgr("a")
        self.start_pmgr("b")
        pa = self.job("a", self.HELD, self.CARD, GMT_HOOK_DEBUG="1", **env)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and self.kept("a", pa.proc.pid) != self.HELD:
            time.sleep(0.05)
        ready = self.kept("a", pa.proc.pid) == self.HELD
        # Its preparing thread then waits, not spins: a's CPU over a second
        # of nothing to do (a timed wait on the wrong clock once returned
        # at once and burned a core).
        self.idle_cpu_s = cpu_s(pa.proc.pid, 1.0)
        pb = self.job("b", self.HELD, self.CARD)
        wait_for(lambda: self.tiers("a", pa.proc.pid)[0] == {"gpu": 0, "host": self.HELD,
                                                             "disk": 0},
                 timeout=10, what="a's allocation in host memory")
        self.assertEqual(self.kept("a", pa.proc.pid), 0)  # the copy holds what moved
        pa.send("check")
        self.assertEqual(self.result(pa), "OK %d" % self.HELD, pa.stderr()[-3000:])
        return self.exit_jobs(pa, pb)[0], ready

    def test_a_contested_card_has_the_copy_ready_before_the_first_move_out(self):
        err, ready = self.first_move_out()
        self.assertTrue(ready, "a's copy not prepared within 3 s: %s%s" % (err[-3000:],
                                                                          self.logs()))
        self.assertLess(self.idle_cpu_s, 0.3, "a busy while contested and idle")
        self.assertRegex(err, r"prepared a host copy of %d bytes" % self.HELD)
        self.assertEqual(self.NEW_COPIES.findall(err)[:1], ["0"], err[-3000:])
        # One registration in all: the prepared copy took the move out.
        self.assertEqual(
            len(re.findall(r"fakecuda\[\d+\]: cuMemHostRegister_v2 -> 0\b", err)), 1)

    def test_the_copys_pages_are_faulted_in_before_the_driver_registers_them(self):
        # The fake charges a registration FAULT ms a GiB for pages not yet
        # in memory, as the H200's driver took 171-252 ms a GiB while it
        # held its lock (docs/BENCHMARKS.md, issue 26's fourth session):
        # here 70 MiB would hold it 684 ms. Faulted in first, the
        # registration costs the base 46 ms a GiB: about 3 ms.
        fault = 10000
        err, ready = self.first_move_out(GMT_FAKE_FAULT_MS_PER_GIB=str(fault))
        self.assertTrue(ready, err[-3000:])
        found = re.findall(r"prepared a host copy of %d bytes for 0x[0-9a-f]+ in ([\d.]+) ms "
                           r"\(([\d.]+) ms in the driver\)" % self.HELD, err)
        self.assertTrue(found, err[-3000:])
        driver_ms = float(found[0][1])
        self.assertLess(driver_ms, fault * self.HELD / 2**30 / 4, err[-3000:])

    def test_with_prepare_off_the_first_move_out_pins_its_own(self):
        err, ready = self.first_move_out(GMT_SWAP_PREPARE="0")
        self.assertFalse(ready)
        self.assertNotIn("prepared a host copy", err)
        self.assertEqual(self.NEW_COPIES.findall(err)[:1], ["1"], err[-3000:])


class NothingPreparedWhereEveryPodFits(SwapJobs):
    # 80 + 20 MiB of quota on a card of 100: the pods can never need turns.
    CONFIG = "2\na 0.5 1.0 80Mi mode=swap idle-out=0\nb 0.5 1.0 20Mi mode=swap idle-out=0\n"

    def test_no_copy_is_pinned_ahead(self):
        import time
        held, card = 70 * MIB, 100 * MIB  # past the stop threshold
        self.start_schd("--gpu-capacity", "0=%d" % card)
        self.start_pmgr("a")
        self.start_pmgr("b")
        pa = self.job("a", held, card, GMT_HOOK_DEBUG="1")
        time.sleep(1.5)  # some 75 heartbeats
        self.assertEqual(self.process("a", pa.proc.pid).get("swap_kept", 0), 0)
        err, = self.exit_jobs(pa)
        self.assertNotIn("prepared a host copy", err)

    def test_jobs_that_fit_together_never_move(self):
        # 70 + 18 MiB on a card of 100: past its trigger (85%), but both
        # quotas fit at once, so nobody can ever need the room: the idle
        # one stays (issue 26; the thresholds moved it out before).
        import time
        card = 100 * MIB
        self.start_schd("--gpu-capacity", "0=%d" % card)
        self.start_pmgr("a")
        self.start_pmgr("b")
        pa = self.job("a", 70 * MIB, card)
        pb = self.job("b", 18 * MIB, card)
        for _ in range(3):
            pb.send("check")  # b runs; a is idle
            self.assertEqual(self.result(pb), "OK %d" % (18 * MIB), pb.stderr()[-3000:])
            time.sleep(0.3)
        for pod, p, held in (("a", pa, 70 * MIB), ("b", pb, 18 * MIB)):
            tiers, outs, ins = self.tiers(pod, p.proc.pid)
            self.assertEqual((tiers["gpu"], outs, ins), (held, 0, 0), self.logs())
        self.assertNotIn("past its trigger", self.daemons[0].output())
        self.exit_jobs(pa, pb)


class TwoStrictPods(GmtTestCase):
    """The same two jobs in strict mode: the second is refused."""
    CONFIG = "2\na 0.5 1.0 1Gi\nb 0.5 1.0 1Gi\n"

    def test_the_second_strict_job_gets_out_of_memory(self):
        self.start_schd("--gpu-capacity", "0=1Gi")
        self.start_pmgr("a")
        self.start_pmgr("b")
        env = {pod: self.hook_env(pod, GMT_FAKE_MEM="1Gi") for pod in "ab"}
        pa = self.run_prog("a", SWAP_JOB, "--mib", "700", env=env["a"])
        pa.expect("READY", timeout=60)
        pb = self.run_prog("b", SWAP_JOB, "--mib", "700", env=env["b"])
        line = self.result(pb)
        self.assertTrue(line.startswith("CUDAFAIL") and line.endswith("CUDA_ERROR_OUT_OF_MEMORY"),
                        line)
        rc, _ = pb.finish()
        self.assertEqual(rc, 1)
        pa.send("check")
        self.assertEqual(self.result(pa), "OK %d" % (700 * MIB))
        self.exit_jobs(pa)

    result = SwapJobs.result
    logs = SwapJobs.logs
    exit_jobs = SwapJobs.exit_jobs
