"""End-to-end: GPU time tokens. Real gmt-schd and gmt-pmgr, programs
launching the fake driver's "spin" kernels. As on a GPU a launch only
queues its kernel: the device runs kernels one at a time across every
process, and a program counts a kernel's time (busy_us) once a synchronize
has seen it done, so the GPU time a program got is exactly its kernels'
total time and contention is real. A pod's share = busy time gained / wall
time over the measured interval, after a warm-up of about one window.

What the policy guarantees is each pod's part of the GPU time used
(its share / the sum of shares) and that the GPU stays busy; the tests
assert those with a margin for a loaded two-core machine, and leave tight
ratios to bench/fairness.py on a GPU."""
import os
import signal
import time
import unittest

import gmt_e2e  # noqa: E402
from gmt_e2e import GmtTestCase, Node, build_path, fake_uuid, wait_for

SPIN = build_path("test", "e2e", "tokenprogs", "spin_load")
WINDOW_MS = 2000  # short, so that shares converge within a 20 s test
# With the default 250 ms only 8 grants fit a 2 s window, too coarse for a
# 0.3 share (the policy settles on 1 grant in 3); 100 ms gives 20.
BASE_QUOTA_MS = 100
WARMUP_MS = 2000


def progress(prog, timeout=60.0):
    """Reads the program's T and DONE lines until DONE: [(t_ms, busy_us, mono_ms)]."""
    return [(float(r["t_ms"]), float(r["busy_us"]), float(r["mono_ms"]))
            for r in prog.records(timeout=timeout)]


def share(rows, start_ms=WARMUP_MS, end_ms=None):
    """GPU time share over [start_ms, end_ms] of the program's own clock."""
    first = next(r for r in rows if r[0] >= start_ms)
    inside = [r for r in rows if end_ms is None or r[0] <= end_ms]
    last = inside[-1]
    return (last[1] - first[1]) / 1000.0 / (last[0] - first[0])


def jain(xs):
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


class Tokens(GmtTestCase):
    def start(self, *pods, schd_args=()):
        self.start_schd("--window-ms", str(WINDOW_MS), "--base-quota-ms", str(BASE_QUOTA_MS),
                        *schd_args)
        for p in pods:
            self.start_pmgr(p)

    def spin(self, pod, *args, seconds=None):
        argv = list(args)
        if seconds is not None:
            argv += ["--seconds", str(seconds)]
        p = self.run_prog(pod, SPIN, *argv)
        p.expect("READY")
        return p

    def run_together(self, pods, seconds, args=None):
        """Runs one spin_load per pod at once (args: per pod, extra flags)."""
        args = args or [()] * len(pods)
        progs = [self.spin(p, *a, seconds=seconds) for p, a in zip(pods, args)]
        rows = [progress(p, timeout=seconds + 30) for p in progs]
        for p in progs:
            rc, err = p.finish()
            self.assertEqual(rc, 0, err)
        return rows

    def logs(self):
        return "".join("\n%s: %s" % (d.name, d.output()[-1500:]) for d in self.daemons)

    def check_parts(self, sa, sb, what, want=0.3, delta=0.03):
        """Pod a's part of the GPU time used is want (its REQUEST against
        b's), and the GPU stayed busy."""
        part = sa / (sa + sb)
        print("\n%s: shares a=%.3f b=%.3f busy=%.3f a's part=%.3f" % (what, sa, sb, sa + sb, part))
        self.assertAlmostEqual(part, want, delta=delta, msg=self.logs())
        self.assertGreaterEqual(sa + sb, 0.9, self.logs())


class Shares(Tokens):
    CONFIG = "2\na 0.3 1.0 1Gi\nb 0.7 1.0 2Gi\n"

    def test_two_busy_pods_get_their_request_shares(self):
        self.start("a", "b")
        ra, rb = self.run_together(["a", "b"], 22)
        self.check_parts(share(ra), share(rb), "one kernel per step")

    def test_two_processes_of_one_pod_share_its_token(self):
        # Pod a's two processes together get a's share, not twice it.
        self.start("a", "b")
        progs = [self.spin("a", seconds=12), self.spin("a", seconds=12), self.spin("b", seconds=12)]
        rows = [progress(p, timeout=40) for p in progs]
        sa = share(rows[0]) + share(rows[1])
        self.check_parts(sa, share(rows[2]), "a in two processes", delta=0.05)


class Waits(Tokens):
    """Why a job waits: each process's time waiting for a token, and the
    wait going on now, in status, /metrics and `gmt status`."""
    CONFIG = "2\na 0.3 1.0 1Gi\nb 0.7 1.0 2Gi\n"

    def test_status_says_how_long_each_process_waited_for_tokens(self):
        self.start("a", "b")
        pa, pb = self.spin("a", seconds=8), self.spin("b", seconds=8)
        pid_a = pa.proc.pid
        t0 = time.monotonic()
        # Some report finds a's launch waiting (it waits about 0.7 of the time).
        now = wait_for(lambda: (self.process("a", pid_a) or {}).get("token_waiting_us") or None,
                       timeout=6, interval=0.05, what="a wait going on now")
        self.assertLess(now, 3e6)  # a wait of a grant or two, not since the start
        time.sleep(max(0, 5 - (time.monotonic() - t0)))
        st = self.status()
        elapsed = time.monotonic() - t0
        waited = {p["name"]: p["processes"][0]["token_wait_us"] / 1e6 for p in st["pods"]}
        print("\nwaited for tokens over %.1f s: a %.2f s, b %.2f s" % (elapsed, waited["a"],
                                                                     waited["b"]))
        # At 0.3 / 0.7 a waits about 0.7 of the time and b about 0.3: so
        # much more for a, and neither most of the run nor none of it.
        self.assertGreater(waited["a"], 0.4 * elapsed, self.logs())
        self.assertLess(waited["b"], 0.6 * elapsed, self.logs())
        self.assertGreater(waited["a"], waited["b"], self.logs())
        self.assertEqual(st["pods"][0]["token_wait_us"], st["pods"][0]["processes"][0]["token_wait_us"])
        text = self.gmt("status").stdout
        self.assertIn("TOKEN WAIT", text)
        self.assertRegex(text, r"\n  waited for tokens \d+\.\d s", text)
        # Both below their LIMIT of 1.0: none of it was for a LIMIT.
        self.assertEqual([p["limit_wait_us"] for p in st["pods"]], [0, 0])
        for p in (pa, pb):
            rc, err = p.finish()
            self.assertEqual(rc, 0, err)


class LimitWaits(Tokens):
    """A pod alone at LIMIT 0.3 waits for its LIMIT, not for other pods."""
    CONFIG = "1\na 0.3 0.3 1Gi\n"

    def test_status_says_how_long_a_pod_was_held_back_at_its_limit(self):
        self.start("a")
        p = self.spin("a", seconds=9)
        time.sleep(7)
        st = self.status()
        a = st["pods"][0]
        waited, limited = a["token_wait_us"] / 1e6, a["limit_wait_us"] / 1e6
        print("\nalone at LIMIT 0.3: waited %.2f s, of it held back at the LIMIT %.2f s"
              % (waited, limited))
        # About 0.7 of the 7 s past its first window is spent at the LIMIT.
        self.assertGreater(limited, 2.0, self.logs())
        # Part of its waits (the reports it sums lag by up to a second).
        self.assertLessEqual(limited, waited + 1.5, self.logs())
        # Said in gmt status and gmt top, beside the pod.
        said = r"waited for tokens [\d.]+ s(, now [\d.]+ s)?; held back at its LIMIT [\d.]+ s"
        self.assertRegex(self.gmt("status").stdout, said)
        top = self.gmt("top", "-n", "1").stdout
        self.assertRegex(top, r"\n    " + said, top)
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)


class Queued(Tokens):
    """Jobs that queue work and then wait for it, as training steps do."""
    CONFIG = "2\na 0.3 1.0 1Gi\nb 0.7 1.0 2Gi\n"

    def test_jobs_that_queue_ten_kernels_then_wait_get_their_shares(self):
        # 10 x 3 ms queued, then a synchronize: 30 ms of work per step, most
        # of it run while the process waits (the old idle rule gave the
        # token back there, and the pods took turns whatever their shares).
        self.start("a", "b")
        q = ("--queue", "10", "--kernel-us", "3000")
        ra, rb = self.run_together(["a", "b"], 22, args=[q, q])
        self.check_parts(share(ra), share(rb), "10 x 3 ms per step")

    def test_long_steps_beside_short_kernels_get_their_share(self):
        # a: 200 ms steps (67 x 3 ms, then a synchronize); b: one 1 ms
        # kernel per synchronize.
        self.start("a", "b")
        ra, rb = self.run_together(["a", "b"], 22, args=[
            ("--queue", "67", "--kernel-us", "3000"), ("--kernel-us", "1000")])
        self.check_parts(share(ra), share(rb), "200 ms steps (a) beside 1 ms kernels (b)")


class Equal(Tokens):
    CONFIG = "3\na 0.33 1.0 1Gi\nb 0.33 1.0 1Gi\nc 0.33 1.0 1Gi\n"

    def test_three_equal_pods_are_fair(self):
        self.start("a", "b", "c")
        # 5 ms kernels: with 2 ms ones the fake driver's cost per kernel,
        # three programs on two cores, took the sum to 0.87 in one loaded run.
        k = ("--kernel-us", "5000")
        rows = self.run_together(["a", "b", "c"], 12, args=[k, k, k])
        shares = [share(r) for r in rows]
        print("\nshares %s jain=%.4f" % (["%.3f" % s for s in shares], jain(shares)))
        self.assertGreaterEqual(jain(shares), 0.98)
        self.assertGreater(sum(shares), 0.9)

    def test_three_equal_pods_that_queue_work_are_fair(self):
        self.start("a", "b", "c")
        q = ("--queue", "10", "--kernel-us", "3000")
        rows = self.run_together(["a", "b", "c"], 12, args=[q, q, q])
        shares = [share(r) for r in rows]
        print("\nqueued: shares %s jain=%.4f" % (["%.3f" % s for s in shares], jain(shares)))
        self.assertGreaterEqual(jain(shares), 0.98)
        self.assertGreater(sum(shares), 0.9)


class Mixed(Tokens):
    """Three pods whose jobs queue work differently (issue 25): a share is
    what a user measures, each job's progress beside the others relative
    to its progress alone, normalized over the pods."""
    CONFIG = "3\na 0.2 1.0 1Gi\nb 0.3 1.0 1Gi\nc 0.5 1.0 1Gi\n"
    JOBS = (("a", ("--queue", "10", "--kernel-us", "2000")),   # 20 ms steps, then a synchronize
            ("b", ("--queue", "3", "--kernel-us", "1000")),    # 3 ms bursts
            ("c", ("--kernel-us", "200", "--cpu-us", "300")))  # small kernels, the CPU between

    def test_three_kinds_of_job_progress_by_their_requests(self):
        self.start("a", "b", "c")
        alone = [share(self.run_together([pod], 5, args=[job])[0], start_ms=1000)
                 for pod, job in self.JOBS]
        rows = self.run_together([p for p, _ in self.JOBS], 16, args=[j for _, j in self.JOBS])
        progress = [share(r) / s for r, s in zip(rows, alone)]
        parts = [p / sum(progress) for p in progress]
        print("\nalone %s; progress %s; normalized %s" % (
            ["%.3f" % s for s in alone], ["%.3f" % p for p in progress],
            ["%.3f" % p for p in parts]))
        # The benchmark holds these to 3 points on a GPU; a loaded two-core
        # machine gets a margin.
        for (pod, _), part, want in zip(self.JOBS, parts, (0.2, 0.3, 0.5)):
            self.assertAlmostEqual(part, want, delta=0.05, msg="pod %s%s" % (pod, self.logs()))
        # The GPU is not left idle between grants: the pods progress about
        # as much together as one alone.
        self.assertGreater(sum(progress), 0.85, self.logs())


class Limit(Tokens):
    CONFIG = "2\na 0.5 0.5 1Gi\nb 0.5 1.0 1Gi\n"

    def test_one_pod_alone_gets_its_limit(self):
        self.start("a")
        # 10 ms kernels, as in IdlePeer: the fake driver's cost per kernel
        # (with 2 ms ones one CI run saw 0.469) weighs a fifth as much.
        (ra,) = self.run_together(["a"], 10, args=[("--kernel-us", "10000")])
        sa = share(ra)
        print("\nshare a=%.3f (limit 0.5, alone)" % sa)
        self.assertAlmostEqual(sa, 0.5, delta=0.05)

    def test_scheduler_gone_pod_keeps_running_within_its_limit(self):
        self.start("a")
        schd = self.daemons[0]
        p = self.spin("a", seconds=12)
        time.sleep(3)
        schd.stop(signal.SIGKILL)
        killed_at = time.monotonic()
        rows = progress(p, timeout=40)
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)
        # The program never stalls: progress at every 500 ms line after the
        # outage is noticed (the pod manager's heartbeat: about 1.5 s).
        after = [r for r in rows if r[0] >= 3000]
        stalls = [(b[0], b[1] - a[1]) for a, b in zip(after, after[1:]) if b[1] == a[1]]
        self.assertLessEqual(len(stalls), 4, "stalled: %s%s" % (stalls, self.logs()))
        s = share(rows, start_ms=6000)
        print("\nshare a=%.3f after the scheduler died (limit 0.5)" % s)
        self.assertGreater(s, 0.35)
        self.assertLess(s, 0.55)
        self.assertLess(time.monotonic() - killed_at, 30)


class TwoGpus(Tokens):
    """Two pods on two GPUs of one node, each shown its own by
    CUDA_VISIBLE_DEVICES (as `gmt run` and launchers do), so each calls its
    GPU device 0: tokens are per node device, so each gets its whole GPU,
    not a part of one token (before the hook named devices by the node's
    numbers, they got 0.30 and 0.69)."""
    CONFIG = "2\na 0.3 1.0 1Gi\nb 0.7 1.0 1Gi\n"

    def run_two(self, gpus):
        self.start("a", "b")
        progs = []
        for pod, gpu in zip("ab", gpus):
            env = self.hook_env(pod, GMT_FAKE_DEVICES="2", CUDA_VISIBLE_DEVICES=gpu)
            p = self.run_prog(pod, SPIN, "--kernel-us", "10000", "--seconds", "8", env=env)
            p.expect("READY")
            progs.append(p)
        rows = [progress(p, timeout=60) for p in progs]
        for p in progs:
            rc, err = p.finish()
            self.assertEqual(rc, 0, err)
        sa, sb = share(rows[0]), share(rows[1])
        print("\ntwo GPUs (%s): shares a=%.3f b=%.3f" % (",".join(gpus), sa, sb))
        self.assertGreater(sa, 0.85, self.logs())
        self.assertGreater(sb, 0.85, self.logs())

    def test_pods_on_two_gpus_each_get_their_gpu(self):
        self.run_two(("0", "1"))

    def test_gpus_named_by_uuid_each_get_their_gpu(self):
        """CUDA_VISIBLE_DEVICES with UUIDs (as containers and `gmt run` name
        GPUs): nothing in the index list to go by; the hook names each GPU
        by its bus id and the scheduler, seeing both through NVML, says
        which of the node's it is (Devices)."""
        self.node.base_env["GMT_FAKE_DEVICES"] = "2"
        self.run_two(tuple(fake_uuid(i) for i in (0, 1)))
        self.assertRegex(self.daemons[0].output(), r"Devices: 1 bus id from pid \d+", self.logs())


class IdlePeer(Tokens):
    CONFIG = "2\na 0.5 1.0 1Gi\nb 0.5 1.0 1Gi\n"

    def test_busy_pod_beside_idle_one_keeps_the_gpu(self):
        self.start("a", "b")
        # 10 ms kernels: the fake driver's cost per kernel, which a loaded
        # machine varies from one window to the next, weighs a fifth of
        # what it does with 2 ms ones.
        busy = [("--kernel-us", "10000")]
        (alone,) = self.run_together(["a"], 6, args=busy)
        s_alone = share(alone, start_ms=1000)
        # b's process launches a burst now and then and idles in between:
        # it gives the token back as soon as it goes idle.
        idle = self.spin("b", "--burst-ms", "5", "--gap-ms", "100000")
        pa = self.spin("a", *busy[0], "--seconds", "6")
        # Past one window (2 s) after b's burst, b's part of the window is
        # what an idle pod takes from a busy one: nothing.
        time.sleep(4)
        a_share, b_share = (self.pod(n).get("gpu_time_share") for n in "ab")
        beside = progress(pa, timeout=40)
        rc, err = pa.finish()
        self.assertEqual(rc, 0, err)
        s_beside = share(beside, start_ms=1000)
        rc, err = idle.finish()
        self.assertEqual(rc, 0, err)
        print("\nshare a alone=%.3f beside an idle pod=%.3f ratio=%.3f; gmt status: a %s b %s"
              % (s_alone, s_beside, s_beside / s_alone, a_share, b_share))
        self.assertGreater(s_alone, 0.9)
        self.assertGreater(a_share, 0.8, self.logs())
        self.assertEqual(b_share, 0, self.logs())
        # a is not held to its request (0.5); the margin is for the fake
        # driver's cost per kernel, which a loaded two-core machine varies
        # between the two runs (one CI run saw 0.926).
        self.assertGreaterEqual(s_beside / s_alone, 0.85)

    def test_killed_pod_manager_does_not_stop_the_other_pod(self):
        self.start("a", "b")
        pa, pb = self.spin("a", seconds=8), self.spin("b", seconds=8)
        # Kill a's pod manager while a holds the token.
        wait_for(lambda: self.pod("a").get("holds_token"), timeout=10, interval=0.01,
                 what="pod a to hold the token")
        pmgr_a = [d for d in self.daemons if d.name == "pmgr-a"][0]
        pmgr_a.stop(signal.SIGKILL)
        killed = time.monotonic()
        rb = progress(pb, timeout=40)
        progress(pa, timeout=40)
        # b's own clock at the kill.
        t_kill = rb[-1][0] - (rb[-1][2] - killed * 1000.0)
        after = [r for r in rb if r[0] >= t_kill]
        gained = [r for r in after if r[1] > after[0][1]]
        self.assertTrue(gained, "b made no progress after a's pod manager died%s" % self.logs())
        self.assertLess(gained[0][0] - t_kill, 1500,
                        "b waited %.0f ms%s" % (gained[0][0] - t_kill, self.logs()))
        # a's process runs on, ungated: the two share the device.
        self.assertGreater(share(rb, start_ms=t_kill + 1000), 0.3)



class ThreadNames(Tokens):
    CONFIG = "1\na 1.0 1.0 1Gi\n"

    def test_the_hooks_threads_are_named(self):
        # What top -H, ps and perf show: gmt's threads apart from the job's.
        self.start("a")
        p = self.spin("a", seconds=3)
        names = set()
        task = "/proc/%d/task" % p.proc.pid
        for _ in range(200):  # the idle and watch threads start at the first grant
            for t in os.listdir(task):
                try:
                    with open("%s/%s/comm" % (task, t)) as f:
                        names.add(f.read().strip())
                except OSError:
                    pass  # a thread that ended meanwhile
            if {"gmt-report", "gmt-idle", "gmt-watch"} <= names:
                break
            time.sleep(0.01)
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)
        self.assertLessEqual({"gmt-report", "gmt-idle", "gmt-watch"}, names)


class ComeBack(Tokens):
    """A pod that idles between requests gets the token back soon after it
    launches again: the busy pod's grant is cut short (TokenWatch), so the
    request waits for the busy pod's queued work, not its whole grant."""
    CONFIG = "3\ntrain 0.5 1.0 1Gi\nserve 0.5 1.0 1Gi\nfast 0.3 1.0 1Gi class=latency\n"

    def requests_beside_training(self, pod, queue=4, schd_args=()):
        # Grants of 1 s: without the cut a request would wait up to that.
        self.start("train", pod, schd_args=("--base-quota-ms", "1000") + schd_args)
        # queue x 2 ms queued, then a synchronize.
        train = self.spin("train", "--queue", str(queue), "--kernel-us", "2000", seconds=10)
        time.sleep(1)
        # A 1 ms request every 80 ms of idleness: it goes idle (20 ms) and
        # gives the token back between requests. Its hook says what it does.
        env = dict(self.hook_env(pod), GMT_HOOK_DEBUG="1")
        serve = self.run_prog(pod, SPIN, "--every-ms", "80", "--kernel-us", "1000", "--seconds",
                              "8", env=env)
        serve.expect("READY")
        (done,) = [r for r in serve.records() if "lat_p90_ms" in r]
        rows = progress(train, timeout=40)
        rc, serve_err = serve.finish()
        self.assertEqual(rc, 0, serve_err)
        rc, err = train.finish()
        self.assertEqual(rc, 0, err)
        ahead = serve_err.count("launching ahead of the next grant")
        self.serve_err = serve_err
        cuts = self.daemons[0].output().count("the grant is cut short")
        p50, p90, worst = (float(done[k]) for k in ("lat_p50_ms", "lat_p90_ms", "lat_max_ms"))
        busy = share(rows, start_ms=2000, end_ms=8000)
        print("\n%s: %s requests, latency p50 %.1f p90 %.1f max %.1f ms; %d grants cut short; "
              "%d launched ahead; training's share %.3f"
              % (pod, done["requests"], p50, p90, worst, cuts, ahead, busy))
        return p50, p90, cuts, ahead, busy

    def test_an_idle_pod_that_launches_again_cuts_the_grant_short(self):
        p50, p90, cuts, ahead, busy = self.requests_beside_training("serve")
        self.assertGreater(cuts, 10, self.logs())
        self.assertEqual(ahead, 0, "a batch pod launched ahead of its grant")
        # Waiting out a 1 s grant would put the median near 500 ms; the
        # request waits for 8 ms of queued kernels and a few round trips
        # (margin for a loaded two-core machine).
        self.assertLess(p50, 100, self.logs())
        self.assertLess(p90, 250, self.logs())
        # Training keeps the GPU the requests leave (a ~25% duty cycle).
        self.assertGreater(busy, 0.5, self.logs())

    def test_a_latency_pod_waits_only_for_what_runs(self):
        # fast is class=latency: it goes first whenever it has work, and
        # while it is there the batch pod keeps at most 500 us of its
        # kernels queued (here one 2 ms kernel) instead of a 100 ms step.
        # Without the bound a request would wait for half a step or more.
        p50, p90, cuts, ahead, busy = self.requests_beside_training(
            "fast", queue=50, schd_args=("--latency-idle-ms", "0.5"))
        # Its grants go back as gmt-schd was told.
        self.assertIn("idle after 500 us", self.serve_err)
        # The training's process does not heed the bell here (its pod
        # manager is on tcp://, beside which there is none): so the latency
        # pod cuts the training's grant rather than going beside it.
        besides = self.daemons[0].output().count("beside pod")
        self.assertEqual(besides, 0, self.logs())
        self.assertGreater(cuts, 10, self.logs())
        # Its requests after an idle spell launch at once while the hook
        # asks for the grant (TokenReply.ahead_us).
        self.assertGreater(ahead, 10, self.logs())
        # (Measured with the bound: p50 6 ms, p90 6.4; without it: 25 and
        # 39. Launching ahead took p50 from 4.3 to 2.4 ms.)
        self.assertLess(p50, 15, self.logs())
        self.assertLess(p90, 25, self.logs())
        # The latency pod is idle most of the time: training keeps the GPU.
        self.assertGreater(busy, 0.5, self.logs())

    def test_a_latency_pod_whose_pod_manager_dies_keeps_serving(self):
        # Its requests launch ahead of their grants (TokenReply.ahead_us):
        # with the pod manager gone mid-run, the request in flight and
        # those after it must still complete, ungated, not wait on an
        # answer that never comes.
        self.start("train", "fast", schd_args=("--base-quota-ms", "1000"))
        train = self.spin("train", "--queue", "4", "--kernel-us", "2000", seconds=9)
        time.sleep(1)
        serve = self.spin("fast", "--every-ms", "80", "--kernel-us", "1000", seconds=6)
        time.sleep(2)
        [d for d in self.daemons if d.name == "pmgr-fast"][0].stop(signal.SIGKILL)
        (done,) = [r for r in serve.records(timeout=40) if "lat_p90_ms" in r]
        rc, err = serve.finish()
        self.assertEqual(rc, 0, err)
        rc, err2 = train.finish()
        self.assertEqual(rc, 0, err2)
        worst = float(done["lat_max_ms"])
        print("\nfast after its pod manager died: %s requests, worst %.1f ms"
              % (done["requests"], worst))
        # About 70 requests of 1 ms every 80 ms in 6 s; noticing the outage
        # may cost one of them about a second.
        self.assertGreater(int(done["requests"]), 40, err)
        self.assertLess(worst, 3000, err)

class Bell(Tokens):
    """The bell: a latency process's launches stop a batch pod's launches on
    the same GPU at once, through memory every hooked process shares,
    rather than through the daemons (about 1 ms each way on a GPU machine).
    The batch process says in status how long the bell held it."""
    CONFIG = "2\ntrain 0.5 1.0 1Gi\nfast 0.5 1.0 1Gi class=latency\n"

    def hooked(self, pod, off):
        """As deployed: the pod manager reaches gmt-schd on its ipc socket
        and the process its pod manager on its own, beside which each
        hands out the bell. off: GMT_BELL names a socket with no bell
        behind it, so the process goes without."""
        env = self.hook_env(pod, GMT_HOOK_DEBUG="1",
                            GMT_PMGR="ipc://" + os.path.join(self.tmp, "run", "pmgr-%s.sock" % pod))
        if off:
            env["GMT_BELL"] = os.path.join(self.tmp, "no-bell")
        return env

    def served_beside_training(self, bell=True, serve_args=("--kernel-us", "500"), serve_env=None, train_env=None):
        self.start_schd("--window-ms", str(WINDOW_MS), "--base-quota-ms", "1000")
        for p in ("train", "fast"):
            self.start_pmgr(p, "--schd", "ipc://" + self.schd_ipc)
        tenv = self.hooked("train", not bell)
        tenv.update(train_env or {})
        train = self.run_prog("train", SPIN, "--queue", "50", "--kernel-us", "2000",
                              "--seconds", "8", env=tenv)
        train.expect("READY")
        time.sleep(1)
        env = self.hooked("fast", not bell)
        env.update(serve_env or {})
        serve = self.run_prog("fast", SPIN, "--every-ms", "40", "--seconds", "5", *serve_args,
                              env=env)
        serve.expect("READY")
        (done,) = [r for r in serve.records(timeout=40) if "lat_p90_ms" in r]
        # The training's processes report every few hundred ms.
        time.sleep(1)
        proc = self.process("train", train.proc.pid)
        waited = proc["bell_wait_us"]
        rc, serve_err = serve.finish()
        self.assertEqual(rc, 0, serve_err)
        rc, train_err = train.finish()
        self.assertEqual(rc, 0, train_err)
        p50, p90 = float(done["lat_p50_ms"]), float(done["lat_p90_ms"])
        print("\nbell %s: %s requests, p50 %.1f p90 %.1f ms; training held by the bell %.3f s"
              % ("on" if bell else "off", done["requests"], p50, p90, waited / 1e6))
        return p50, p90, waited, serve_err, train_err

    def test_a_latency_process_holds_batch_launches_through_the_bell(self):
        p50, p90, waited, serve_err, train_err = self.served_beside_training()
        self.assertTrue("bell from" in serve_err and "bell from" in train_err,
                        "a process found no bell: " + self.logs())
        # About 120 requests of 0.5 ms, each launched ahead of its grant:
        # the training stops at its next launch until the request's work is
        # done (it launches one 2 ms kernel at a time, so it tries about
        # once in each request's kernel).
        self.assertGreater(waited, 1e3, self.logs())
        self.assertLess(waited, 3e6, self.logs())
        # Both heed the bell: the latency pod is granted beside the
        # training's grant rather than cutting it.
        self.assertGreater(self.daemons[0].output().count("beside pod"), 10, self.logs())
        self.assertLess(p50, 15, self.logs())
        self.assertLess(p90, 25, self.logs())

    def test_queued_requests_are_served_together(self):
        """Requests that come together are served one after the other with
        no training kernel between them: after a request that came back
        quickly the bell rings on a little (GMT_BELL_STAY_US)."""
        # The server's own work between requests (Python's, on a GPU) leaves
        # the training a gap to launch in.
        at_once = ("--at-once", "5", "--kernel-us", "300", "--cpu-us", "150")
        stays = {}
        for stay in ("0", None):
            p50, p90, waited, _, _ = self.served_beside_training(
                serve_args=at_once, serve_env={"GMT_BELL_STAY_US": stay} if stay else None)
            stays[stay] = p90
            self.node.stop()
            self.node = Node(self.CONFIG, fake=self.FAKE)
        # Five requests of 0.3 ms at once beside 2 ms training kernels: the
        # last waits for the kernel running when they came and the four
        # before it (about 3.5 ms), or, with no stay, for a training kernel
        # before each (about 11 ms).
        print("queued requests: p90 %.1f ms with the stay, %.1f without" % (stays[None], stays["0"]))
        self.assertLess(stays[None], 0.7 * stays["0"], self.logs())

    def test_without_the_bell_nothing_is_held_by_it(self):
        p50, p90, waited, serve_err, train_err = self.served_beside_training(bell=False)
        self.assertFalse("bell from" in serve_err + train_err, "a process found a bell")
        self.assertTrue("no bell at" in train_err, "the training did not look for one")
        self.assertEqual(waited, 0, self.logs())


def wakes(pid, thread):
    """The voluntary context switches of pid's thread so named so far."""
    return sum(v for name, v, _ in gmt_e2e.thread_switches(pid).values() if name == thread)


class Alone(Tokens):
    """A busy pod with the GPU to itself gets long grants (each grant's end
    stalls it for its queued work and a round trip); a pod that comes then
    cuts the long grant short instead of waiting it out."""
    CONFIG = "2\na 0.5 1.0 1Gi\nb 0.5 1.0 1Gi\n"

    def test_a_pod_alone_gets_long_grants_that_a_newcomer_cuts_short(self):
        self.start("a", "b")
        schd = self.daemons[0]
        train = self.spin("a", "--queue", "4", "--kernel-us", "2000", seconds=10)
        # The first grant is the base quota (its watch has not come yet);
        # the next, watched and alone, lasts the 2 s window, and so does the
        # one after it: its watch must not be lost in the answer to the
        # last one's (the pod manager once merged them).
        wait_for(lambda: schd.output().count("grant to pod 'a' for 2000.0 ms") >= 2 or None,
                 timeout=10, what="two 2 s grants to the pod alone" + self.logs())
        # Its grants say it is alone (TokenReply.alone): its idle thread
        # looks every 50 ms while it launches, not every 5 ms (20 times a
        # second, not 200; margin for a loaded machine). Its watch waits
        # for the 2 s grant's end, looking for the pod manager's give-up
        # every 500 ms (twice a second; at 50 ms, 20 times).
        pid = train.proc.pid
        before = wakes(pid, "gmt-idle"), wakes(pid, "gmt-watch")
        time.sleep(1)
        idle, watch = wakes(pid, "gmt-idle") - before[0], wakes(pid, "gmt-watch") - before[1]
        print("\nalone: the idle thread woke %d times in 1 s, the watch %d" % (idle, watch))
        self.assertLess(idle, 60, self.logs())
        self.assertLess(watch, 8, self.logs())
        serve = self.spin("b", "--every-ms", "80", "--kernel-us", "1000", seconds=3)
        (done,) = [r for r in serve.records(timeout=30) if "lat_p90_ms" in r]
        for p in (serve, train):
            rc, err = p.finish()
            self.assertEqual(rc, 0, err)
        worst = float(done["lat_max_ms"])
        print("\nbeside a pod alone: %s requests, worst %.1f ms" % (done["requests"], worst))
        out = schd.output()
        self.assertIn("the grant is cut short", out)
        # Waiting out the 2 s grant would take a second on average; b
        # waits for a's 8 ms of queued kernels and a few round trips.
        self.assertLess(worst, 1000, self.logs())
        # With b in the window a's grants are the base quota again.
        after = out[out.index("the grant is cut short"):]
        self.assertIn("grant to pod 'a' for %.1f ms" % BASE_QUOTA_MS, after)


if __name__ == "__main__":
    unittest.main()
