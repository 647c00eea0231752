"""End-to-end: `gmt trace -p PID` (the eBPF tracer, bpf/) on
unmodified driver-API programs (test/e2e/traceprogs/trace_job.c) against the
fake libcuda.so.1. Needs root (BPF); no GPU, no daemons.

Each test starts trace_job, which prints "ready pid=N" and waits for a line
on stdin; the tracer attaches ("tracing pid N" on its stderr), then the test
sends the line and the job does its work and exits. Every wait is bounded."""
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from gmt_e2e import (ASAN_PRELOAD, FAKECUDA_DIR, GMT, TRACE_JOB, Prog, build_path, cannot_run,
                     tracer_missing, unless_runnable, wait_for)

HOT_SIZE = 256 << 10
COLD_SIZE = 64 << 10
PIN_SIZE = 256 << 10
PAGEABLE_SIZE = 4 << 20
FORK_SIZE = 128 << 10
ATTACH_SIZE = 1 << 20
HOT_COPIES = 50
NOBODY = 65534


class Tracer(Prog):
    """A running `gmt trace`. As a gmt_e2e.Prog, threads read its stdout and
    stderr, so that every wait on it is bounded."""

    def wait_attached(self, timeout=20.0):
        """Waits until its stderr says "tracing pid"; fails if it exits first."""
        def attached():
            return "tracing pid" in self.stderr()

        try:
            wait_for(lambda: attached() or self.proc.poll() is not None, timeout=timeout,
                     what="the tracer to attach")
        except AssertionError:
            pass
        if self.proc.poll() is not None:
            self.err_reader.join(timeout=5)  # what it wrote before it exited
        if attached():
            return
        rc = self.proc.poll()
        self.stop()
        why = "did not attach within %.0fs" % timeout if rc is None else "exited (%d)" % rc
        raise AssertionError("tracer %s; stderr: %s" % (why, self.stderr()))

    def finish(self, timeout=30.0):
        """Waits for it to exit; returns (exit code, stdout, stderr)."""
        try:
            rc, err = super().finish(timeout)
        except AssertionError as e:
            raise AssertionError("%s; stderr: %s" % (e, self.stderr()))
        out = []
        while True:  # stop() has joined the reader: its stdout is all queued
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                break
            if line is None:
                break
            out.append(line + "\n")
        return rc, "".join(out), err


@unless_runnable(tracer_missing("the tracer"))
class TraceTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gmt-e2e-trace-")
        os.chmod(self.tmp, 0o777)  # the no-rights test writes here as nobody
        self.argv = [GMT, "trace"]
        self.jobs = []
        self.tracers = []

    def tearDown(self):
        for t in self.tracers:
            t.stop()
        for p in self.jobs:
            p.stop()
        if os.environ.get("GMT_E2E_KEEP"):
            print("kept", self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- helpers ----

    def env(self, libdir=FAKECUDA_DIR):
        env = dict(os.environ)
        env.update({"LD_LIBRARY_PATH": libdir, "GMT_FAKE_DIR": self.tmp,
                    "GMT_FAKE_MEM": "8Gi"})
        if ASAN_PRELOAD:
            env["ASAN_OPTIONS"] = "detect_leaks=0"
        return env

    def path(self, name):
        return os.path.join(self.tmp, name)

    def start_job(self, mode, preexec_fn=None, job_args=(), job=TRACE_JOB, env=None):
        p = Prog([job, mode] + list(job_args), env or self.env(), preexec_fn=preexec_fn)
        self.jobs.append(p)
        ready = p.expect("ready")
        self.assertEqual(int(ready["pid"]), p.proc.pid)
        return p

    def start_tracer(self, *args, preexec_fn=None, env=None):
        t = Tracer(self.argv + list(args), env or self.env(), preexec_fn=preexec_fn)
        self.tracers.append(t)
        return t

    def trace(self, mode, *args, env=None, job_args=()):
        """Traces one run of trace_job MODE; returns (done fields, stdout, stderr, pid)."""
        job = self.start_job(mode, job_args=job_args)
        tracer = self.start_tracer("-p", str(job.proc.pid), *args, env=env)
        tracer.wait_attached()
        job.send("go")
        done = job.expect("done")
        rc, err = job.finish()
        self.assertEqual(rc, 0, err)
        trc, out, terr = tracer.finish()
        self.assertEqual(trc, 0, terr)
        return done, out, terr, job.proc.pid

    def run_tracer(self, *args, timeout=30):
        return subprocess.run(self.argv + list(args), capture_output=True, text=True,
                              timeout=timeout, env=self.env())

    @staticmethod
    def by_address(dump, kind=None, pid=None):
        out = {}
        for a in dump["allocations"]:
            if (kind is None or a["kind"] == kind) and (pid is None or a["pid"] == pid):
                out.setdefault(a["address"], []).append(a)
        return out

    # ---- what is traced ----

    def test_hot_and_cold_buffers_have_exact_counts_and_rank(self):
        # --min-mmap 1Gi: only the device side here (an ASan build's own
        # allocator regions would otherwise be host buffers too).
        x = self.path("x.json")
        done, _, err, pid = self.trace("hotcold", "-o", x, "--min-mmap", "1Gi")
        self.assertIn("wrote", err)
        hot = [int(a, 16) for a in done["hot"].split(",")]
        cold = [int(a, 16) for a in done["cold"].split(",")]
        with open(x) as f:
            dump = json.load(f)
        self.assertEqual(dump["dropped_events"], 0)
        self.assertEqual(dump["root_pid"], pid)
        dev = self.by_address(dump, kind="device", pid=pid)
        self.assertEqual(sorted(dev), sorted(hot + cold))
        for addr in hot:
            (a,) = dev[addr]
            self.assertEqual((a["size"], a["h2d_count"], a["d2h_count"], a["h2d_bytes"], a["d2h_bytes"]),
                             (HOT_SIZE, 50, 50, 50 * HOT_SIZE, 50 * HOT_SIZE), a)
            self.assertIn("alloc_hot", a["site"])
            self.assertFalse(a["active"])  # the process exited
        for addr in cold:
            (a,) = dev[addr]
            self.assertEqual((a["size"], a["h2d_count"], a["d2h_count"], a["h2d_bytes"], a["d2h_bytes"]),
                             (COLD_SIZE, 1, 1, COLD_SIZE, COLD_SIZE), a)
            self.assertIn("alloc_cold", a["site"])
            self.assertEqual(a["events"][-1]["type"], "free")
        self.assertEqual(sorted(dev[a][0]["site_nth"] for a in cold), [1, 2, 3, 4, 5])
        self.assertEqual(dump["copies"]["h2d_count"], 105)
        self.assert_copies_entry_only(dump)

        # The summary of the dump ranks them: 2 hot first, then 5 cold.
        r = self.run_tracer("--load", x, "-k", "7")
        self.assertEqual(r.returncode, 0, r.stderr)
        hottest = self.table(r.stdout, "hottest")
        self.assertEqual(hottest[:2], hot)
        self.assertEqual(sorted(hottest[2:7]), sorted(cold))
        coldest = self.table(r.stdout, "coldest")
        self.assertEqual(coldest[:5], cold)  # equal counts and sizes: in order made
        self.assertEqual(coldest[5:7], hot)
        self.assertIn("H2D 105 (25.31 MiB), D2H 105 (25.31 MiB)", r.stdout)
        self.assertIn("0 dropped events", r.stdout)

    def test_buffers_made_before_the_attach_are_found_by_their_copies(self):
        # trace_job attach makes its 7 host buffers and its device buffer
        # before "ready": the tracer never sees them allocated. Each copy
        # still counts, and places both its ends.
        x, z, t = self.path("a.json"), self.path("a.gmtz"), self.path("a.trace.json")
        done, _, _, pid = self.trace("attach", "-o", x)
        dev = int(done["dev"], 16)
        hot = [int(a, 16) for a in done["hot"].split(",")]
        cold = [int(a, 16) for a in done["cold"].split(",")]
        with open(x) as f:
            dump = json.load(f)
        n = 2 * 2 * HOT_COPIES + 5 * 2  # 210 copies of 1 MiB, half each way
        self.assertEqual(dump["copies"], {"h2d_count": n // 2, "h2d_bytes": n // 2 * ATTACH_SIZE,
                                          "d2h_count": n // 2, "d2h_bytes": n // 2 * ATTACH_SIZE,
                                          "d2d_count": 0, "d2d_bytes": 0})
        self.assertEqual((dump["unmatched_copies"], dump["dropped_events"]), (0, 0))
        allocs = {a["address"]: a for a in dump["allocations"]}
        self.assertEqual(sorted(allocs), sorted([dev] + hot + cold))
        want = {dev: ("device", n // 2, n // 2)}
        want.update({a: ("host_pageable", HOT_COPIES, HOT_COPIES) for a in hot})
        want.update({a: ("host_pageable", 1, 1) for a in cold})
        for addr, (kind, h2d, d2h) in want.items():
            a = allocs[addr]
            self.assertEqual((a["pid"], a["kind"], a["origin"], a["size"], a["h2d_count"],
                              a["h2d_bytes"], a["d2h_count"], a["d2h_bytes"], a["d2d_count"]),
                             (pid, kind, "attach", ATTACH_SIZE, h2d, h2d * ATTACH_SIZE, d2h,
                              d2h * ATTACH_SIZE, 0), a)
            self.assertEqual(len([e for e in a["events"] if e["type"] in ("h2d", "d2h")]),
                             h2d + d2h, a)
        # Ids in the order the copies first touched them: the device buffer
        # (the first copy's destination), then the host ones.
        self.assertEqual([a["address"] for a in sorted(allocs.values(), key=lambda a: a["id"])],
                         [dev] + hot + cold)

        # Ranked like any buffer: the device buffer every copy touched, the
        # 2 hot ones, then the 5 cold ones (ties in the order seen).
        r = self.run_tracer("--load", x, "-k", "8")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.table(r.stdout, "hottest"), [dev] + hot + cold)
        self.assertEqual(self.table(r.stdout, "coldest"), cold + hot + [dev])
        self.assertIn("H2D 105 (105.00 MiB), D2H 105 (105.00 MiB), D2D 0, unmatched 0", r.stdout)
        self.assertIn("8 not seen allocated", r.stdout)
        self.assertIn("(not seen allocated)", r.stdout)

        # Every dump format keeps the origin: .gmtz back to the same JSON,
        # and the Chrome trace names it (each copy drawn once, from the
        # device end: all 210).
        for src, dst in ((x, z), (z, self.path("b.json")), (x, t)):
            r = self.run_tracer("--load", src, "-o", dst)
            self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.path("b.json")) as f:
            self.assertEqual(json.load(f), dump)
        with open(t) as f:
            chrome = json.load(f)["traceEvents"]
        begins = [e for e in chrome if e["ph"] == "b"]
        self.assertEqual(sorted((int(e["args"]["address"], 16), e["args"]["origin"]) for e in begins),
                         sorted((a, "attach") for a in [dev] + hot + cold))
        self.assertEqual(len([e for e in chrome if e.get("cat") == "copy"]), n)

    def test_probes_sit_where_a_hit_is_cheap(self):
        # The fake's entry points begin with endbr64; push %rbp (as a CET
        # build would): the probe goes on the push, which the kernel
        # emulates, and the tracer warns of none that would single-step.
        _, _, err, _ = self.trace("idle", "-o", self.path("i.json"))
        self.assertNotIn("single-steps", err)
        self.assertRegex(err, r"tracing pid \d+ \(.*: (\d+) entry points probed")

    def test_bpf_stats_and_skipped_kernel_programs(self):
        # GMT_TRACE_SKIP leaves kernel-side programs out (an unknown name is
        # said); --bpf-stats reports the runs of the programs that ran.
        env = dict(self.env(), GMT_TRACE_SKIP="sys_enter,sys_exit,nonesuch")
        _, _, err, _ = self.trace("hotcold", "-o", self.path("b.json"), "--min-mmap", "1Gi",
                                  "--bpf-stats", "-v", env=env)
        self.assertIn("left out: sys_enter (GMT_TRACE_SKIP), sys_exit (GMT_TRACE_SKIP)", err)
        self.assertIn("GMT_TRACE_SKIP: 'nonesuch' is not a kernel-side program", err)
        runs = {m.group(1): int(m.group(2)) for m in re.finditer(r"BPF (\w+) +(\d+) runs", err)}
        self.assertGreaterEqual(runs.get("cuda_enter", 0), 2 * 105, err)  # every copy at least
        self.assertNotIn("sys_enter", runs)
        self.assertNotIn("sys_exit", runs)
        self.assertRegex(err, r"BPF total \d+\.\d{3} ms")

    def test_2d_and_3d_copies_count_by_direction(self):
        x = self.path("c.json")
        done, _, _, pid = self.trace("pitched", "-o", x, "--min-mmap", "1Gi")
        with open(x) as f:
            dump = json.load(f)
        (a,) = self.by_address(dump, kind="device", pid=pid)[int(done["buf"], 16)]
        # 4 2D H2D of 1024 x 64 + 2 3D H2D of 512 x 8 x 4; 3 + 1 2D D2H
        self.assertEqual((a["h2d_count"], a["h2d_bytes"], a["d2h_count"], a["d2h_bytes"]),
                         (6, 4 * 65536 + 2 * 16384, 4, 4 * 65536), a)
        self.assertEqual(dump["unmatched_copies"], 0)
        self.assert_copies_entry_only(dump)

    def test_mapped_physical_memory_is_a_device_buffer(self):
        x = self.path("v.json")
        done, _, _, pid = self.trace("vmm", "-o", x)
        with open(x) as f:
            dump = json.load(f)
        va, g = int(done["va"], 16), int(done["granule"])
        dev = self.by_address(dump, kind="device", pid=pid)
        self.assertEqual(sorted(dev), [va, va + g])
        for addr, copies in ((va, 3), (va + g, 2)):
            (a,) = dev[addr]
            self.assertEqual((a["origin"], a["size"], a["h2d_count"], a["h2d_bytes"], a["active"]),
                             ("map", g, copies, copies * g, False), a)
            self.assertEqual(a["events"][-1]["type"], "free")  # one cuMemUnmap ended both
        self.assertEqual(dump["unmatched_copies"], 0)
        # A PROT_NONE mapping reserves addresses (as the driver does for
        # unified addressing): no host buffer.
        resv = int(done["reserved"], 16)
        self.assertEqual([a for a in dump["allocations"]
                          if a["address"] <= resv < a["address"] + a["size"]], [])

    def test_page_cache_faults_are_counted(self):
        # Every first write to a page of a shared file mapping goes through
        # the page cache's fault handler: at least the file's 1024 pages.
        x = self.path("m.json")
        data = build_path("test", "e2e", "trace-filemap-%d.dat" % os.getpid())  # not tmpfs
        done, _, _, pid = self.trace("filemap", "-o", x, job_args=[data])
        with open(x) as f:
            dump = json.load(f)
        (p,) = [p for p in dump["processes"] if p["pid"] == pid]
        self.assertGreaterEqual(p["pagecache_faults"], int(done["pages"]), p)
        self.assertLess(p["pagecache_faults"], 2 * int(done["pages"]), p)
        self.assertFalse(os.path.exists(data))

    @unittest.skipUnless(os.path.exists("/proc/sys/vm/compact_memory"), "kernel without compaction")
    def test_compaction_the_process_waits_for_is_a_stall(self):
        x = self.path("s.json")
        _, _, _, pid = self.trace("compact", "-o", x)
        with open(x) as f:
            dump = json.load(f)
        (p,) = [p for p in dump["processes"] if p["pid"] == pid]
        self.assertGreaterEqual(p["compact_stalls"], 1, p)  # one run per zone
        self.assertGreater(p["compact_ns"], 0, p)
        r = self.run_tracer("--load", x)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"compaction %d \(\d+\.\d ms\)" % p["compact_stalls"])

    def test_one_uprobe_per_entry_point_counts_the_same(self):
        # Kernels before 6.6 have no uprobe_multi links: the tracer falls
        # back to a perf-event uprobe per entry point (slow to detach).
        env = dict(self.env(), GMT_TRACE_NO_UPROBE_MULTI="1")
        x = self.path("p.json")
        done, _, _, pid = self.trace("hotcold", "-o", x, "--min-mmap", "1Gi", env=env)
        with open(x) as f:
            dump = json.load(f)
        dev = self.by_address(dump, kind="device", pid=pid)
        for addr in (int(a, 16) for a in done["hot"].split(",")):
            self.assertEqual((dev[addr][0]["h2d_count"], dev[addr][0]["d2h_count"]), (50, 50))
        self.assert_copies_entry_only(dump)

    def assert_copies_entry_only(self, dump):
        """Copies are sent by their entry probe alone (no return probe):
        their events carry no duration, while each has its bytes."""
        copies = [e for a in dump["allocations"] for e in a["events"]
                  if e["type"] in ("h2d", "d2h", "d2d")]
        self.assertGreater(len(copies), 0)
        for e in copies:
            self.assertNotIn("dur_ns", e, e)
            self.assertGreater(e["bytes"], 0, e)

    @staticmethod
    def table(text, title):
        """Addresses of the rows of the table under the line starting with title."""
        lines = text.splitlines()
        start = next(i for i, l in enumerate(lines) if l.startswith(title))
        rows = []
        for l in lines[start + 2:]:
            if not l.strip():
                break
            rows.append(int(l.split()[3], 16))
        return rows

    def test_dumps_round_trip_through_both_formats(self):
        x, y, z, t = (self.path(n) for n in ("x.json", "y.gmtz", "z.json", "t.trace.json"))
        self.trace("reuse", "-o", x)
        for src, dst in ((x, y), (y, z), (x, t)):
            r = self.run_tracer("--load", src, "-o", dst)
            self.assertEqual(r.returncode, 0, r.stderr)
        with open(x) as f:
            a = json.load(f)
        with open(z) as f:
            b = json.load(f)
        self.assertEqual(a, b)
        self.assertGreater(len(a["allocations"]), 0)
        self.assertLess(os.path.getsize(y), os.path.getsize(x))
        with open(t) as f:
            chrome = json.load(f)
        copies = [e for e in chrome["traceEvents"] if e.get("cat") == "copy"]
        self.assertEqual(len(copies), 3 + 7 + 2 + 1)  # reuse: 12 H2D + 1 D2H
        # entry-only copies: zero-width slices at the call's start
        self.assertTrue(all(e["ph"] == "X" and e["dur"] == 0 for e in copies))
        # a file that is no dump
        r = self.run_tracer("--load", t)
        self.assertEqual(r.returncode, 1)
        self.assertIn("not a gmt trace dump", r.stderr)

    def test_forked_children_are_followed(self):
        f = self.path("f.gmtz")
        done, _, _, pid = self.trace("fork", "-o", f)
        child = int(done["child"])
        r = self.run_tracer("--load", f, "-o", self.path("f.json"))
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.path("f.json")) as fh:
            dump = json.load(fh)
        procs = {p["pid"]: p for p in dump["processes"]}
        self.assertEqual(procs[child]["parent"], pid)
        self.assertTrue(procs[child]["exited"])
        (c,) = [a for a in dump["allocations"] if a["pid"] == child and a["kind"] == "device"]
        self.assertEqual((c["size"], c["h2d_count"], c["d2h_count"], c["h2d_bytes"]),
                         (FORK_SIZE, 10, 10, 10 * FORK_SIZE))
        (p,) = [a for a in dump["allocations"] if a["pid"] == pid and a["kind"] == "device"]
        self.assertEqual((p["h2d_count"], p["d2h_count"]), (3, 0))

    def test_no_follow_leaves_children_out(self):
        done, out, _, pid = self.trace("fork", "--no-follow", "-o", self.path("n.json"))
        with open(self.path("n.json")) as fh:
            dump = json.load(fh)
        self.assertEqual({a["pid"] for a in dump["allocations"]}, {pid})
        self.assertEqual([p["pid"] for p in dump["processes"]], [pid])

    def test_address_reuse_keeps_the_earlier_history(self):
        x = self.path("r.json")
        done, _, _, pid = self.trace("reuse", "-o", x)
        with open(x) as f:
            dump = json.load(f)
        pin = int(done["pin"], 16)
        pinned = self.by_address(dump, kind="host_pinned", pid=pid)[pin]
        self.assertEqual([(a["h2d_count"], a["active"], a["origin"]) for a in pinned],
                         [(3, False, "register"), (7, False, "register")])
        self.assertLess(pinned[0]["id"], pinned[1]["id"])
        self.assertEqual(pinned[0]["events"][-1]["type"], "unpin")
        (dev,) = self.by_address(dump, kind="device", pid=pid).values()
        self.assertEqual((dev[0]["h2d_count"], dev[0]["d2h_count"]), (12, 1))

        p1, p2 = int(done["pageable1"], 16), int(done["pageable2"], 16)
        pageable = self.by_address(dump, kind="host_pageable", pid=pid)
        first = pageable[p1][0]
        self.assertEqual((first["size"], first["h2d_count"], first["d2h_count"]), (PAGEABLE_SIZE, 2, 0))
        self.assertGreaterEqual(first["faults"], 1)  # touched page by page
        self.assertLessEqual(first["faults"], PAGEABLE_SIZE // 4096)
        self.assertEqual(first["events"][-1]["type"], "free")  # munmap
        if p1 == p2:  # the kernel handed the same range out again
            self.assertEqual([a["d2h_count"] for a in pageable[p1]], [0, 1])
            self.assertFalse(pageable[p1][0]["active"])
        else:
            self.assertEqual(pageable[p2][0]["d2h_count"], 1)

    def test_summary_without_output_file(self):
        job = self.start_job("fork")
        tracer = self.start_tracer("-p", str(job.proc.pid), "-k", "2")
        tracer.wait_attached()
        job.send("go")
        job.expect("done")
        job.finish()
        rc, out, err = tracer.finish()
        self.assertEqual(rc, 0, err)
        self.assertIn("trace of pid %d: 2 processes" % job.proc.pid, out)
        self.assertIn("H2D 13 (1.62 MiB), D2H 10 (1.25 MiB)", out)
        self.assertEqual(len(self.table(out, "hottest")), 2)

    def test_duration_and_ctrl_c_stop_the_trace(self):
        job = self.start_job("idle")  # never told to go: it waits
        start = time.monotonic()
        r = self.run_tracer("-p", str(job.proc.pid), "--duration", "1", "-o", self.path("d.json"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(time.monotonic() - start, 15)
        with open(self.path("d.json")) as f:
            self.assertEqual(json.load(f)["allocations"], [])

        tracer = self.start_tracer("-p", str(job.proc.pid))
        tracer.wait_attached()
        tracer.proc.send_signal(signal.SIGINT)
        rc, out, err = tracer.finish(timeout=15)
        self.assertEqual(rc, 0, err)
        self.assertIn("trace of pid %d" % job.proc.pid, out)
        self.assertTrue(job.proc.poll() is None, "tracing must not disturb the process")

    # ---- errors: one line, exit 2, bounded ----

    def assert_error(self, r, text):
        self.assertEqual(r.returncode, 2, (r.stdout, r.stderr))
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn(text, lines[0])

    def test_missing_pid_is_an_error(self):
        with open("/proc/sys/kernel/pid_max") as f:
            pid_max = int(f.read())
        self.assert_error(self.run_tracer("-p", str(pid_max + 1)), "no process with pid")

    def test_process_without_libcuda_is_an_error_after_the_wait(self):
        sleeper = subprocess.Popen(["sleep", "60"])
        try:
            start = time.monotonic()
            r = self.run_tracer("-p", str(sleeper.pid), "--wait-libcuda", "0.5")
            self.assert_error(r, "has not loaded libcuda.so.1 after 0.5 s")
            self.assertLess(time.monotonic() - start, 10)
        finally:
            sleeper.kill()
            sleeper.wait(timeout=5)

    def copies_for_nobody(self):
        """trace_job, gmt and the fake libcuda.so.1 copied into a folder
        nobody may enter: the build folder may sit under one nobody cannot
        (a checkout in root's 0700 home). Returns the folder."""
        d = self.path("nobody")
        os.mkdir(d)
        os.chmod(d, 0o755)
        for src in (TRACE_JOB, GMT, os.path.join(FAKECUDA_DIR, "libcuda.so.1")):
            dst = os.path.join(d, os.path.basename(src))
            shutil.copyfile(src, dst)
            os.chmod(dst, 0o755)
        return d

    @staticmethod
    def uids(pid):
        with open("/proc/%d/status" % pid) as f:
            line = next(l for l in f if l.startswith("Uid:"))
        return {int(u) for u in line.split()[1:]}

    def test_no_rights_to_load_bpf_is_an_error(self):
        def as_nobody():
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
        d = self.copies_for_nobody()
        env = self.env(libdir=d)
        try:
            job = self.start_job("idle", preexec_fn=as_nobody, job=os.path.join(d, "trace_job"),
                                 env=env)
        except AssertionError as e:
            cannot_run(self, "trace_job does not run as nobody from %s: %s" % (d, e))
        self.assertEqual(self.uids(job.proc.pid), {NOBODY})
        r = subprocess.run([os.path.join(d, "gmt"), "trace", "-p", str(job.proc.pid),
                            "--wait-libcuda", "2"],
                           capture_output=True, text=True, timeout=30, env=env,
                           preexec_fn=as_nobody)
        self.assert_error(r, "no rights to load BPF programs")

    def test_bad_usage_is_an_error(self):
        self.assert_error(self.run_tracer("-p", "1", "-o", self.path("x.txt")),
                          "must end in .json, .gmtz or .trace.json")
        self.assert_error(self.run_tracer("-p", "abc"), "needs a process id")
        self.assert_error(self.run_tracer(), "which process?")


if __name__ == "__main__":
    unittest.main()
