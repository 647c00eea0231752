"""End-to-end: gmt-schd's tracer (server/rpc_trace.c) and `gmt trace --pod`.
The scheduler traces every process its pod managers report; test/e2e/
traceprogs/trace_job runs under the hook in pod a against the fake
libcuda.so.1, and `gmt trace --pod a --json` must rank its 2 hot buffers
above its 5 cold ones with exact counts and bytes; a job that the scheduler
only traces after it made its buffers (gmt-schd restarted under it) gets
them found by their copies. Needs root (BPF); no GPU.

trace_job says "ready pid=N" after cuInit (so the hook has registered it)
and waits for a line on stdin; the test sends it once the scheduler shows
the pid traced with its libcuda probed. Every wait is bounded."""
import json
import os
import unittest

from gmt_e2e import (TRACE_JOB, GmtTestCase, build_path, tracer_missing, unless_runnable,
                     wait_for)

HOT_SIZE = 256 << 10
COLD_SIZE = 64 << 10
HOT_COPIES = 50
ATTACH_SIZE = 1 << 20


@unless_runnable(tracer_missing("the scheduler's tracer"))
class TraceDaemonTest(GmtTestCase):
    def spots(self, pod, *args):
        r = self.gmt("trace", "--pod", pod, "--json", *args)
        if r.returncode != 0:
            raise AssertionError("gmt trace --pod %s failed (%d): %s" % (pod, r.returncode, r.stderr))
        return json.loads(r.stdout)

    def start_job(self, pod, *args):
        job = self.run_prog(pod, TRACE_JOB, *(args or ("hotcold",)))
        pid = int(job.expect("ready")["pid"])
        self.assertEqual(pid, job.proc.pid)
        self.wait_probed(pod, pid)
        return job, pid

    def wait_probed(self, pod, pid):
        def probed():
            procs = {p["pid"]: p for p in self.spots(pod)["processes"]}
            return procs.get(pid, {}).get("probed")
        wait_for(probed, timeout=15, what="gmt-schd to trace pid %d with its libcuda probed" % pid)

    def test_pod_spots_rank_hot_buffers_first_with_exact_counts(self):
        self.start_schd()
        self.start_pmgr("a")
        self.start_pmgr("b")
        job, pid = self.start_job("a")
        job.send("go")
        done = job.expect("done")
        hot = sorted(int(a, 16) for a in done["hot"].split(","))
        cold = sorted(int(a, 16) for a in done["cold"].split(","))

        # Events reach the scheduler through its ring buffer: wait for the
        # last copy, then the table must be exact.
        def settled():
            s = self.spots("a", "-k", "50")
            return s if s["copies"]["h2d_count"] >= 2 * HOT_COPIES + 5 else None
        s = wait_for(settled, timeout=10, what="the copies to reach gmt-schd")
        self.assertEqual(s["dropped_events"], 0)
        self.assertEqual(s["copies"]["h2d_count"], 2 * HOT_COPIES + 5)
        self.assertEqual(s["copies"]["d2h_count"], 2 * HOT_COPIES + 5)
        self.assertEqual(s["copies"]["h2d_bytes"], 2 * HOT_COPIES * HOT_SIZE + 5 * COLD_SIZE)
        self.assertEqual(s["copies"]["d2h_bytes"], 2 * HOT_COPIES * HOT_SIZE + 5 * COLD_SIZE)
        self.assertEqual([p["pid"] for p in s["processes"]], [pid])

        dev_hot = [a for a in s["hot"] if a["kind"] == "device"]
        self.assertEqual(sorted(a["address"] for a in dev_hot[:2]), hot)
        self.assertEqual(sorted(a["address"] for a in dev_hot[2:7]), cold)
        self.assertEqual(len(dev_hot), 7)
        for a in s["hot"][:2]:
            self.assertEqual((a["pid"], a["kind"], a["size"], a["h2d_count"], a["d2h_count"],
                              a["h2d_bytes"], a["d2h_bytes"], a["faults"]),
                             (pid, "device", HOT_SIZE, HOT_COPIES, HOT_COPIES,
                              HOT_COPIES * HOT_SIZE, HOT_COPIES * HOT_SIZE, 0), a)
            self.assertIn("alloc_hot", a["site"])
        for a in dev_hot[2:7]:
            self.assertEqual((a["size"], a["h2d_count"], a["d2h_count"], a["h2d_bytes"],
                              a["d2h_bytes"]), (COLD_SIZE, 1, 1, COLD_SIZE, COLD_SIZE), a)
            self.assertIn("alloc_cold", a["site"])
            self.assertFalse(a["active"])  # freed before "done" was read
        dev_cold = [a["address"] for a in s["cold"] if a["kind"] == "device"]
        # equal counts and sizes: in the order they were made, as in the hot list
        self.assertEqual(dev_cold[-2:], [a["address"] for a in s["hot"][:2]])
        self.assertEqual(sorted(dev_cold[-7:-2]), cold)

        # The text table says the same.
        r = self.gmt("trace", "--pod", "a", "-k", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("pod a: 1 process traced", r.stdout)
        self.assertIn("H2D 105 (25.31 MiB), D2H 105 (25.31 MiB)", r.stdout)
        self.assertIn("alloc_hot", r.stdout)

        # A pod with no processes: an empty table, not an error.
        b = self.spots("b")
        self.assertEqual((b["hot"], b["cold"], b["processes"]), ([], [], []))
        self.assertEqual(b["copies"]["h2d_count"], 0)

        # Once the job has exited (it does after "done") its buffers stay,
        # inactive.
        rc, err = job.finish()
        self.assertEqual(rc, 0, err)

        def exited():
            s = self.spots("a", "-k", "2")
            procs = s["processes"]
            return s if procs and not procs[0]["active"] else None
        s = wait_for(exited, timeout=10, what="gmt-schd to see pid %d exit" % pid)
        self.assertEqual(sorted(a["address"] for a in s["hot"]), hot)
        self.assertFalse(any(a["active"] for a in s["hot"]))

    def test_buffers_made_before_the_job_was_traced_are_found_by_their_copies(self):
        # trace_job attach makes its 7 host buffers and its device buffer
        # before "ready"; then gmt-schd restarts, and the new one traces the
        # job from the pod manager's next report: after all of them.
        schd = self.start_schd()
        self.start_pmgr("a")
        job = self.run_prog("a", TRACE_JOB, "attach")
        pid = int(job.expect("ready")["pid"])
        self.assertEqual(schd.stop(), 0)
        self.daemons.remove(schd)
        self.start_schd()
        self.wait_probed("a", pid)
        self.assertEqual(self.spots("a")["allocations"], 0)  # nothing seen allocated
        job.send("go")
        done = job.expect("done")
        dev = int(done["dev"], 16)
        hot = [int(a, 16) for a in done["hot"].split(",")]
        cold = [int(a, 16) for a in done["cold"].split(",")]

        n = 2 * 2 * HOT_COPIES + 5 * 2  # 210 copies of 1 MiB, half each way
        def settled():
            s = self.spots("a", "-k", "8")
            return s if s["copies"]["h2d_count"] + s["copies"]["d2h_count"] >= n else None
        s = wait_for(settled, timeout=10, what="the copies to reach gmt-schd")
        self.assertEqual(s["dropped_events"], 0)
        self.assertEqual(s["copies"], {"h2d_count": n // 2, "h2d_bytes": n // 2 * ATTACH_SIZE,
                                       "d2h_count": n // 2, "d2h_bytes": n // 2 * ATTACH_SIZE,
                                       "d2d_count": 0, "d2d_bytes": 0})
        self.assertEqual(s["allocations"], 8)
        self.assertEqual([a["address"] for a in s["hot"]], [dev] + hot + cold)
        self.assertEqual([a["address"] for a in s["cold"]], cold + hot + [dev])
        want = {dev: ("device", n // 2)}
        want.update({a: ("host_pageable", HOT_COPIES) for a in hot})
        want.update({a: ("host_pageable", 1) for a in cold})
        for a in s["hot"]:
            kind, each_way = want[a["address"]]
            self.assertEqual((a["pid"], a["kind"], a["origin"], a["size"], a["h2d_count"],
                              a["h2d_bytes"], a["d2h_count"], a["d2h_bytes"]),
                             (pid, kind, "attach", ATTACH_SIZE, each_way, each_way * ATTACH_SIZE,
                              each_way, each_way * ATTACH_SIZE), a)

        r = self.gmt("trace", "--pod", "a", "-k", "3")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("allocations: 8; copies: H2D 105 (105.00 MiB), D2H 105 (105.00 MiB)", r.stdout)
        self.assertEqual(r.stdout.count("(not seen allocated)"), 6)  # 3 hottest, 3 coldest
        rc, err = job.finish()
        self.assertEqual(rc, 0, err)

    def test_pod_processes_show_the_kernels_side(self):
        self.start_schd()
        self.start_pmgr("a")
        data = build_path("test", "e2e", "trace-daemon-filemap-%d.dat" % os.getpid())  # not tmpfs
        job, pid = self.start_job("a", "filemap", data)
        job.send("go")
        pages = int(job.expect("done")["pages"])

        def counted():
            (p,) = self.spots("a")["processes"]
            return p if p["pagecache_faults"] >= pages else None
        p = wait_for(counted, timeout=10, what="the page-cache faults to reach gmt-schd")
        self.assertLess(p["pagecache_faults"], 2 * pages, p)
        r = self.gmt("trace", "--pod", "a")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("kernel: page-cache faults %d;" % p["pagecache_faults"], r.stdout)
        job.finish()

    def test_histories_of_exited_processes_are_dropped_later(self):
        # Kept 10 minutes by default; 1.5 s here.
        self.node.base_env["GMT_TRACE_KEEP_GONE_MS"] = "1500"
        self.start_schd()
        self.start_pmgr("a")
        job, pid = self.start_job("a")
        job.send("go")
        job.expect("done")
        rc, err = job.finish()
        self.assertEqual(rc, 0, err)
        # Right after the exit the pod still shows what the job did ...
        s = self.spots("a")
        self.assertEqual([p["pid"] for p in s["processes"]], [pid])
        self.assertEqual(s["copies"]["h2d_count"], 2 * HOT_COPIES + 5)
        # ... and within a few sweeps (1 s each) it is gone, histories too.
        s = wait_for(lambda: (lambda s: s if not s["processes"] else None)(self.spots("a")),
                     timeout=10, what="pid %d to be forgotten" % pid)
        self.assertEqual((s["hot"], s["cold"], s["allocations"]), ([], [], 0))
        self.assertEqual(s["copies"]["h2d_count"], 0)

    def test_unknown_pod_and_tracing_off_are_errors(self):
        self.start_schd()
        r = self.gmt("trace", "--pod", "nope")
        self.assertEqual(r.returncode, 1)
        self.assertIn("pod 'nope' is not in", r.stderr)

    def test_no_trace_flag_turns_the_tracer_off(self):
        d = self.start_schd("--no-trace")
        r = self.gmt("trace", "--pod", "a")
        self.assertEqual(r.returncode, 1)
        self.assertIn("tracing is off: turned off (--no-trace)", r.stderr)
        self.assertEqual(d.output().count("tracing is off"), 1)


if __name__ == "__main__":
    unittest.main()
