"""End-to-end: Pick, gmt-schd's best-GPU selection (docs/devices.md,
"Picking a GPU"), on a fake machine of two GPUs of 8 GiB. Memory held on a
GPU by another process, and a GPU another process keeps busy (its probe
delay: GMT_FAKE_MEMSET_WAITS makes the fake's memsets wait for the kernel
running there, as a GPU's time slicing does), steer the pick; the cache is
reused within its interval and refreshed after max-cache-request Picks; a
pod confined by devices= gets only those; Pick works through a pod
manager; gmt status shows the GPUs. Every Pick is sent by pick_call."""
import json
import os
import subprocess
import sys
import time
import unittest

from gmt_e2e import BUILD, GMT, PROGS, GmtTestCase, wait_for

PICK_CALL = os.path.join(BUILD, "test", "e2e", "wireprogs", "pick_call")
SHOW = os.path.join(PROGS, "show_devices")
SPIN = os.path.join(BUILD, "test", "e2e", "tokenprogs", "spin_load")
GIB = 1 << 30
EBUSY, EINVAL, ENOSPC = 16, 22, 28


def uuid(dev):
    """The fake driver's UUID of its device dev (test/fakecuda/machine.c)."""
    return "GPU-fa4ec0da-0000-0000-0000-0000000000%02x" % dev


class Pick(GmtTestCase):
    CONFIG = "2\na 0.5 1.0 2Gi devices=1\nb 0.5 1.0 2Gi\n"

    def setUp(self):
        super().setUp()
        self.node.base_env.update({"GMT_FAKE_DEVICES": "2", "GMT_FAKE_MEMSET_WAITS": "1"})
        for k in ("CUDA_VISIBLE_DEVICES", "GMT_AUTO_DEVICE", "GMT_PMGR", "GMT_PROBE"):
            self.node.base_env.pop(k, None)

    # ---- helpers ----

    def settings(self, text):
        path = os.path.join(self.tmp, "gmt.ini")
        with open(path, "w") as f:
            f.write(text)
        return path

    def start(self, settings="", *extra, env=None):
        """gmt-schd with its own settings file (not the machine's)."""
        args = ["--settings", self.settings(settings)] + list(extra)
        if env:
            self.node.base_env.update(env)
        return self.start_schd(*args)

    def pick(self, url=None, pod=None, count=None, nbytes=None, timeout=30):
        argv = [PICK_CALL, url or self.schd_url]
        if pod is not None:
            argv += ["--pod", pod]
        if count is not None:
            argv += ["--count", str(count)]
        if nbytes is not None:
            argv += ["--bytes", str(nbytes)]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=self.env())
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return json.loads(r.stdout)

    def picked(self, **kw):
        rep = self.pick(**kw)
        self.assertTrue(rep["ok"], "%s\n%s" % (rep, self.logs()))
        return rep

    def hold(self, dev, nbytes):
        """Another process, outside gmt, holding nbytes on GPU dev."""
        p = self.run_prog(None, SHOW, "--hold", str(nbytes),
                          env=self.prog_env(CUDA_VISIBLE_DEVICES=str(dev)))
        p.expect("HELD")
        return p

    def busy(self, dev):
        """Another process, outside gmt, keeping GPU dev busy with 20 ms kernels."""
        p = self.run_prog(None, SPIN, "--kernel-us", "20000", "--seconds", "0",
                          env=self.prog_env(CUDA_VISIBLE_DEVICES=str(dev)))
        p.expect("READY")
        wait_for(lambda: self.gpu(dev)["utilization"] == 1.0, what="GPU %d busy" % dev)
        return p

    def gpu(self, dev):
        for d in self.status()["devices"]:
            if d["index"] == dev:
                return d
        raise AssertionError("no GPU %d in gmt status" % dev)

    def scored(self, rep, dev):
        for d in rep["scored"]:
            if d["index"] == dev:
                return d
        raise AssertionError("GPU %d not scored: %s" % (dev, rep))

    def logs(self):
        return "".join("\n%s log:\n%s" % (d.name, d.output()[-3000:]) for d in self.daemons)

    def probes(self):
        """How many times gmt-schd ran gmt-probe (its log says so at info level)."""
        return sum(1 for l in self.daemons[0].output().splitlines() if "probe: " in l
                   and " GPUs in " in l)

    # ---- what steers the pick ----

    def test_memory_held_on_gpu0_makes_pick_choose_gpu1(self):
        self.start()
        self.hold(0, 6 * GIB)
        rep = self.picked()
        self.assertEqual(rep["devices"], [1], rep)
        self.assertEqual(rep["uuids"], [uuid(1)])
        self.assertFalse(rep["cached"])
        g0, g1 = self.scored(rep, 0), self.scored(rep, 1)
        self.assertEqual(g0["memory_free"], 2 * GIB)
        self.assertEqual(g1["memory_free"], 8 * GIB)
        self.assertEqual(g0["memory_total"], 8 * GIB)
        self.assertEqual(g1["bus_id"], "0000:02:00.0")
        self.assertLess(g0["score"], g1["score"])
        self.assertGreaterEqual(g0["probe_delay_ms"], 0)  # probed, both
        self.assertGreaterEqual(g1["probe_delay_ms"], 0)

    def test_busy_gpu_loses_on_its_probe_delay(self):
        # GPU 1 has half its memory held: on memory alone (and utilization)
        # GPU 0 would win. GPU 0 is kept busy, so its probe waits for the
        # running kernel: the longer delay LOWERS its score (the paper's
        # formula would raise it) and GPU 1 is picked.
        self.start("[daemon]\nmax-cache-time-interval = 0\n")
        self.hold(1, 4 * GIB)
        self.busy(0)
        rep = self.picked()
        g0, g1 = self.scored(rep, 0), self.scored(rep, 1)
        print("\nbusy GPU 0: probe %.3f ms score %.3f; GPU 1 (half full): probe %.3f ms score %.3f"
              % (g0["probe_delay_ms"], g0["score"], g1["probe_delay_ms"], g1["score"]))
        self.assertEqual(rep["devices"], [1], rep)
        self.assertGreater(g0["probe_delay_ms"], 2.0, rep)
        self.assertGreater(g0["probe_delay_ms"], 10 * g1["probe_delay_ms"], rep)
        self.assertLess(g0["score"], g1["score"])

    def test_without_the_probe_memory_decides(self):
        # The same machine with daemon.probe off: no delay is measured and
        # GPU 0's free memory wins despite its load.
        self.start("[daemon]\nprobe = off\nmax-cache-time-interval = 0\n")
        self.hold(1, 4 * GIB)
        self.busy(0)
        rep = self.picked()
        self.assertEqual(rep["devices"], [0], rep)
        self.assertEqual(self.scored(rep, 0)["probe_delay_ms"], -1)
        self.assertEqual(self.probes(), 0)

    # ---- the cache ----

    def test_cache_is_reused_and_refreshed_after_max_requests(self):
        self.start("[daemon]\nmax-cache-time-interval = 60s\nmax-cache-request = 3\n")
        self.hold(1, 4 * GIB)
        first = self.picked()
        self.assertFalse(first["cached"])
        self.assertEqual(first["devices"], [0])
        # GPU 0 fills up past GPU 1, but the next two Picks are answered
        # from the numbers sampled before.
        self.hold(0, 6 * GIB)
        for _ in range(2):
            rep = self.picked()
            self.assertTrue(rep["cached"], rep)
            self.assertEqual(rep["devices"], [0], rep)
            self.assertEqual(self.scored(rep, 0)["memory_free"], 8 * GIB)
        self.assertEqual(self.probes(), 1)
        # The sample has served 3: the fourth samples (and probes) anew.
        rep = self.picked()
        self.assertFalse(rep["cached"], rep)
        self.assertEqual(rep["devices"], [1], rep)
        self.assertEqual(self.probes(), 2)

    def test_cache_is_stale_once_older_than_its_interval(self):
        self.start("[daemon]\nmax-cache-time-interval = 300ms\nmax-cache-request = 1000\n")
        self.assertFalse(self.picked()["cached"])
        t = time.monotonic()
        rep = self.picked()
        if time.monotonic() - t < 0.25:  # a slow machine may be past it already
            self.assertTrue(rep["cached"], rep)
        time.sleep(0.5)
        rep = self.picked()
        self.assertFalse(rep["cached"], rep)
        self.assertLess(rep["scored"][0]["sample_age_ms"], 300)

    # ---- what a Pick may be given ----

    def test_pod_confined_to_devices_is_given_only_those(self):
        self.start("[daemon]\nmax-cache-time-interval = 0\n")
        self.hold(1, 6 * GIB)  # GPU 0 is the better one, but pod a may use GPU 1 only
        rep = self.picked(pod="a")
        self.assertEqual(rep["devices"], [1], rep)
        self.assertEqual([d["index"] for d in rep["scored"]], [1])
        rep = self.picked(pod="b")  # every GPU
        self.assertEqual(rep["devices"], [0], rep)
        self.assertEqual(len(rep["scored"]), 2)
        rep = self.pick(pod="a", count=2)
        self.assertFalse(rep["ok"])
        self.assertEqual(rep["code"], -EINVAL)
        self.assertIn("asked for 2 GPUs; the pod may use 1", rep["message"])
        rep = self.pick(pod="nosuch")
        self.assertFalse(rep["ok"])
        self.assertIn("pod 'nosuch' is not in", rep["message"])

    def test_bytes_and_count(self):
        # No hold: each Pick sees only what is sampled (the GPUs given before
        # count too otherwise: the next test).
        self.start("[daemon]\nmax-cache-time-interval = 0\npick-hold = 0\n")
        self.hold(0, 6 * GIB)
        rep = self.picked(count=2)
        self.assertEqual(rep["devices"], [1, 0], rep)  # best first
        self.assertEqual(rep["uuids"], [uuid(1), uuid(0)])
        rep = self.picked(nbytes=3 * GIB, count=1)
        self.assertEqual(rep["devices"], [1])
        self.assertEqual(self.scored(rep, 0)["score"], 0)  # too full: not a candidate
        rep = self.pick(nbytes=3 * GIB, count=2)
        self.assertFalse(rep["ok"])
        self.assertEqual(rep["code"], -ENOSPC)
        self.assertIn("1 of the 2 GPUs considered has 3.0 GiB free (2 wanted)", rep["message"])
        rep = self.pick(nbytes=9 * GIB)
        self.assertEqual(rep["code"], -ENOSPC)
        self.assertIn("free: GPU 0 2.0 GiB, GPU 1 8.0 GiB", rep["message"])

    def test_jobs_started_together_are_spread(self):
        # Four Picks at once on two idle GPUs: each GPU given counts as one
        # more job there for daemon.pick-hold (10 s by default), so they
        # alternate; with its bytes reserved, so a second job that needs
        # most of a GPU gets the other. With the hold off, every Pick sees
        # the same idle GPUs and gets the same one. (No probe: its delays
        # on idle GPUs differ by jitter, which would break the ties.)
        fresh = "[daemon]\nmax-cache-time-interval = 0\nprobe = off\n"
        self.start(fresh)
        self.assertEqual([self.picked()["devices"][0] for _ in range(4)], [0, 1, 0, 1])
        self.daemons.pop().stop()
        self.start(fresh + "pick-hold = 0\n")
        self.assertEqual([self.picked()["devices"][0] for _ in range(4)], [0, 0, 0, 0])
        self.daemons.pop().stop()
        self.start(fresh)
        self.assertEqual(self.picked(nbytes=6 * GIB)["devices"], [0])
        self.assertEqual(self.picked(nbytes=6 * GIB)["devices"], [1])
        rep = self.pick(nbytes=6 * GIB)
        self.assertEqual(rep["code"], -ENOSPC)
        self.assertIn("free: GPU 0 2.0 GiB, GPU 1 2.0 GiB", rep["message"])

    def test_pick_through_a_pod_manager_is_for_its_pod(self):
        self.start("[daemon]\nmax-cache-time-interval = 0\n")
        self.start_pmgr("a")
        self.hold(1, 6 * GIB)
        url = self.pmgr_urls["a"][0]
        rep = self.picked(url=url)
        self.assertEqual(rep["devices"], [1], rep)
        self.assertEqual([d["index"] for d in rep["scored"]], [1])
        # A caller cannot pick for another pod through pod a's manager.
        rep = self.picked(url=url, pod="b")
        self.assertEqual(rep["devices"], [1], rep)

    # ---- the probe's bounds ----

    def slow_probe(self):
        """A stand-in gmt-probe that answers for GPU 0 and then hangs."""
        path = os.path.join(self.tmp, "slow-probe")
        with open(path, "w") as f:
            f.write("#!%s\nimport sys, time\nprint(sys.argv[1], 0.01, flush=True)\n"
                    "time.sleep(60)\n" % sys.executable)
        os.chmod(path, 0o755)
        return path

    def test_probe_timeout_counts_as_slowest_and_queue_is_bounded(self):
        self.start("[server]\nmax-queued-requests = 2\n[daemon]\nprobe-timeout = 1500ms\n",
                   env={"GMT_PROBE": self.slow_probe()})
        argv = [PICK_CALL, self.schd_url]
        t0 = time.monotonic()
        procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=self.env())]
        wait_for(lambda: "probe: " in self.daemons[0].output() and "slow-probe on 2" in
                 self.daemons[0].output(), what="the probe to start")
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=self.env()))
        time.sleep(0.3)
        # A third Pick while two wait: refused at once.
        busy = self.pick()
        self.assertFalse(busy["ok"], busy)
        self.assertEqual(busy["code"], -EBUSY)
        self.assertIn("server.max-queued-requests 2", busy["message"])
        reps = []
        for p in procs:
            out, _ = p.communicate(timeout=20)
            reps.append(json.loads(out))
        took = time.monotonic() - t0
        for rep in reps:
            self.assertTrue(rep["ok"], rep)
            self.assertEqual(rep["devices"], [0], rep)  # GPU 1 never answered: the slowest
            self.assertEqual(self.scored(rep, 1)["probe_delay_ms"], 1500)
            self.assertAlmostEqual(self.scored(rep, 0)["probe_delay_ms"], 0.01)
        self.assertGreater(took, 1.4)
        self.assertLess(took, 10)
        self.assertIn("did not finish within 1500 ms; killed", self.daemons[0].output())

    # ---- status and settings ----

    def test_status_shows_the_gpus(self):
        self.start()
        self.hold(0, 6 * GIB)
        self.picked()
        st = self.status()
        self.assertEqual([d["index"] for d in st["devices"]], [0, 1])
        g0 = st["devices"][0]
        self.assertEqual(g0["uuid"], uuid(0))
        self.assertEqual(g0["bus_id"], "0000:01:00.0")
        self.assertEqual(g0["memory_free"], 2 * GIB)
        self.assertEqual(g0["memory_reserved"], 0)
        self.assertEqual(g0["tokens_waiting"], 0)
        self.assertIsNone(g0["token_holder"])
        self.assertGreater(st["devices"][1]["score"], g0["score"])
        r = self.gmt("status")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("GPU  BUS ID", r.stdout)
        self.assertIn("0000:02:00.0", r.stdout)

    def test_a_bad_settings_file_stops_the_start(self):
        d = self.start_schd("--settings", self.settings("[daemon]\nprobe = on\ncache = 1\n"),
                            wait=False)
        d.proc.wait(timeout=20)
        self.assertNotEqual(d.proc.returncode, 0)
        self.assertIn("gmt.ini:3: unknown key 'daemon.cache'", d.output())


if __name__ == "__main__":
    unittest.main()
