#!/usr/bin/env python3
"""Pin advice (issue 11): the eBPF CUDA tracer design's workload
(bench/pin_workload: 2 hot host buffers with 175 H2D + 175 D2H copies, 25
cold ones with 1 + 1, all from one malloc site) at each buffer size, in
each mode:

  native    no hook at all: the hook's own cost shows against "unpinned"
  unpinned  the hook, pin=off: malloc'd buffers stay pageable
  pinned    the hook, pin=off, buffers from cuMemHostAlloc: "all pinned"
  profile   the hook, pin=profile: pins what is transferred, records it
  use       the hook, pin=use: pins what the profile says is hot (run
            after the profile run of the same size)
  adaptive  the hook, pin=adaptive: pins a buffer once its copies pay
  use-nostage, adaptive-nostage  the same with staged copies off
            (GMT_STAGE_THREADS=0); the others stage with --stage-threads
  hand-profile, hand-use, hand-adaptive  no hook: the workload pins by its
            own hand (pin_workload --by-hand all|hot|pays) at the copy
            where profile, use and adaptive pin: the bound on what advice
            can reach, whatever gmt's own costs. Not run unless named in
            --modes; the targets are judged on them too ("bound" rows)

One gmt-schd and one pod ("bench"), whose pin= is changed between modes
(the config rewritten, gmt-schd reloaded, the pod manager's heartbeat
bringing it over; the pod manager is restarted if it does not). Each
(mode, size) runs --reps times, a fresh process each time, in rounds that
alternate the order of the modes (profile always before use); medians are
reported. Time is the whole run (allocate, fill, copy, free: pinning costs
time of its own) and the copy phase alone. Bytes pinned are counted twice:
by the workload (which of its buffers the driver says are page-locked at
the end of the copy phase) and by the peak of `gmt status --json`'s
host.pinned_bytes, polled during the run; after its copies the workload
waits, untimed, until `gmt status` shows its process with as many bytes
pinned as the driver counted (at most --hold-max-s), so that the poll
cannot miss them.

Targets (the issue's, whole run unless said): use >= 0.95x the all-pinned
speed with <= 10% of bytes pinned; adaptive >= 0.90x; profile <= 3% slower
than all pinned; use's copy phase >= 0.75x all pinned's.

--dataloader also runs bench/pin_dataloader.py (a PyTorch training loop
with DataLoader(pin_memory=True)) natively and under the hook in each pin
mode, and with pin_memory=False natively and under pin=adaptive.

usage: bench/pin_advice.py [--sizes MIB,..] [--reps R] [--big-mib MIB]
         [--big-reps R] [--modes M,..] [--max-total BYTES] [--budget-s S]
         [--out FILE] [--fake] [--dataloader] [--dl-reps R] [--strict]
         [workload options: --hot N --hot-copies K --cold M --cold-copies C]
Writes everything as JSON to --out (default $OUT/pin_advice.json where OUT
is set); bench/pin_plot.py draws it. Exits 1 when a run failed (crashed,
timed out, a wrong byte, not hooked); with --strict also on a target not
met. GMT_BUILD_DIR names the build (default build/; .carry on the GPU
machine). --fake runs on the fake driver (pageable copies 4 GB/s, pinned
20 GB/s by default): a dry run of the plumbing, its numbers mean little."""
import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e"))
import gmt_e2e  # noqa: E402

MIB = 1 << 20
GIB = 1 << 30
WORKLOAD = gmt_e2e.build_path("bench", "pin_workload")
DATALOADER = os.path.join(HERE, "pin_dataloader.py")
POD = "bench"
MODES = ("native", "unpinned", "pinned", "profile", "use", "use-nostage", "adaptive",
         "adaptive-nostage", "hand-profile", "hand-use", "hand-adaptive")
PIN = {"native": None, "unpinned": "off", "pinned": "off", "profile": "profile", "use": "use",
       "use-nostage": "use", "adaptive": "adaptive", "adaptive-nostage": "adaptive",
       "hand-profile": None, "hand-use": None, "hand-adaptive": None}
# The by-hand modes: pin_workload --by-hand's policy, and the mode whose
# targets they bound.
BY_HAND = {"hand-profile": ("all", "profile"), "hand-use": ("hot", "use"),
           "hand-adaptive": ("pays", "adaptive")}
DEFAULT_MODES = [m for m in MODES if m not in BY_HAND]
# Staged copies (hook/pin/stage.c): on in every hooked mode with --stage-threads
# threads, off in the -nostage modes, to compare side by side.
NOSTAGE = ("use-nostage", "adaptive-nostage")
# The dataloader's variants: (name, pin= or None for no hook, pin_memory).
DL_VARIANTS = (("native", None, True), ("native, pin_memory=False", None, False),
               ("unpinned (pin=off)", "off", True), ("profile", "profile", True),
               ("use", "use", True), ("adaptive", "adaptive", True),
               ("adaptive, pin_memory=False", "adaptive", False))
# The targets: (mode, what, want, test of (whole speed, copy speed, % pinned)).
TARGETS = (
    ("use", "whole >= 0.95x all pinned, <= 10% pinned",
     lambda w, c, p: w >= 0.95 and p is not None and p <= 10.0),
    ("adaptive", "whole >= 0.90x all pinned", lambda w, c, p: w >= 0.90),
    ("profile", "whole <= 3% slower than all pinned", lambda w, c, p: 1.0 / w <= 1.03),
    ("use", "copy phase >= 0.75x all pinned", lambda w, c, p: c >= 0.75),
)


class RunError(Exception):
    pass


def parse_bytes(s):
    """A byte count: 8G, 8Gi, 512MiB, 1e9."""
    m = re.match(r"^\s*([0-9.e+]+)\s*([KMGT]?)(?:i?B?)\s*$", s, re.I)
    try:
        return int(float(m.group(1)) * (1 << (10 * " KMGT".index(m.group(2).upper() or " "))))
    except (AttributeError, ValueError):
        raise argparse.ArgumentTypeError("'%s' is not a byte count (e.g. 8G, 512M)" % s)


def parse_sizes(s):
    try:
        sizes = [int(float(x) * MIB) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("--sizes '%s': want MiB, comma-separated (1,4,16)" % s)
    if not sizes or min(sizes) <= 0:
        raise argparse.ArgumentTypeError("--sizes '%s': want sizes above 0" % s)
    return sizes


def parse_modes(s):
    modes = [m.strip() for m in s.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise argparse.ArgumentTypeError("--modes: %s not among %s" % (bad, ",".join(MODES)))
    if any(m.startswith("use") for m in modes) and "profile" not in modes:
        raise argparse.ArgumentTypeError("--modes: use needs profile (its profile run)")
    return [m for m in MODES if m in modes]


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 8 * GIB


def mib(size):
    return "%g" % (size / MIB)


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


class StatusPoller:
    """Polls `gmt status --json` while one run goes: the peaks of the node's
    pinned bytes (and of what gmt pinned on advice), the pod's, the
    process's."""

    def __init__(self, node, interval):
        self.node, self.interval = node, interval
        self.pid = None
        self.peak = {"host_pinned_bytes": 0, "host_pinned_advised": 0, "pod_pinned_bytes": 0,
                     "process_pinned_bytes": 0}
        self.samples = 0
        self.lock = threading.Lock()
        self.stop_ev = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def sample(self):
        """One read of `gmt status`, folded into the peaks; returns the
        process's pinned bytes in it (None when it is not there)."""
        try:
            st = self.node.try_status()
        except (subprocess.TimeoutExpired, ValueError):
            st = None
        if not st:
            return None
        with self.lock:
            self.samples += 1
            host = st.get("host", {})
            pod = next((p for p in st.get("pods", []) if p.get("name") == POD), {})
            proc = next((q for q in pod.get("processes", []) if q.get("pid") == self.pid), {})
            for key, v in (("host_pinned_bytes", host.get("pinned_bytes")),
                           ("host_pinned_advised", host.get("pinned_advised")),
                           ("pod_pinned_bytes", pod.get("pinned_bytes")),
                           ("process_pinned_bytes", proc.get("pinned_bytes"))):
                if v is not None:
                    self.peak[key] = max(self.peak[key], int(v))
        return proc.get("pinned_bytes")

    def run(self):
        while not self.stop_ev.is_set():
            self.sample()
            self.stop_ev.wait(self.interval)

    def stop(self):
        self.stop_ev.set()
        self.thread.join(timeout=15)
        return dict(self.peak, samples=self.samples)


class Bench:
    """The node (gmt-schd, the pod's manager) and the pod's current pin=."""

    def __init__(self, args, pinned_limit):
        self.args = args
        self.pin = "off"
        self.node = gmt_e2e.Node(self.config("off"), fake=args.fake)
        self.schd = self.node.start_schd("--pinned-limit", str(pinned_limit))
        self.pmgr = self.node.start_pmgr(POD)
        self.restarts = 0

    @staticmethod
    def config(pin):
        return "1\n%s 1.0 1.0 64Gi pin=%s\n" % (POD, pin)

    def set_pin(self, pin):
        """Makes the pod's pin= `pin`, in gmt-schd and in its pod manager
        (which gives new processes their pod's mode)."""
        if pin == self.pin:
            return
        marker = "pin %s -> %s" % (self.pin, pin)
        seen = self.pmgr.output().count(marker)
        self.node.write_config(self.config(pin))
        self.schd.proc.send_signal(signal.SIGHUP)
        gmt_e2e.wait_for(lambda: self.node.pod(POD).get("pin") == pin, timeout=15,
                         what="gmt-schd to show pod %s with pin=%s" % (POD, pin))
        try:
            gmt_e2e.wait_for(lambda: self.pmgr.output().count(marker) > seen, timeout=5,
                             interval=0.05, what="the pod manager to log '%s'" % marker)
        except AssertionError:
            # Its heartbeat did not bring the change (or no longer logs it):
            # a new pod manager registers with the config as it is now.
            self.pmgr.stop(timeout=10)
            try:
                gmt_e2e.wait_for(lambda: not self.node.pod(POD).get("connected"), timeout=10,
                                 what="the pod to show disconnected")
            except AssertionError:
                pass
            self.pmgr = self.node.start_pmgr(POD)
            self.restarts += 1
        self.pin = pin

    def workload_argv(self, mode, size):
        a = self.args
        return [WORKLOAD, "--size", str(size), "--hot", str(a.hot), "--hot-copies",
                str(a.hot_copies), "--cold", str(a.cold), "--cold-copies", str(a.cold_copies),
                "--alloc", "pinned" if mode == "pinned" else "malloc", "--hold"] + (
                    ["--by-hand", BY_HAND[mode][0]] if mode in BY_HAND else [])

    def run_timeout(self, size):
        a = self.args
        copied = 2 * size * (a.hot * a.hot_copies + a.cold * a.cold_copies)
        return a.run_timeout or 60 + copied / 1.5e9

    def wait_gone(self, pid, timeout=5.0):
        """Waits until gmt-schd has forgotten process pid (its last report
        in, its pinned bytes gone from the node's count), so that the next
        run's peak of host.pinned_bytes is its own and a profile run's
        histories are in before the use run asks. Returns the seconds it
        took, or None when it did not happen in time (not an error)."""
        t0 = time.monotonic()
        try:
            gmt_e2e.wait_for(lambda: self.node.process(POD, pid) is None, timeout=timeout,
                             interval=0.05, what="pid %d to leave gmt status" % pid)
        except AssertionError:
            return None
        return time.monotonic() - t0

    def run_prog(self, argv, pin, timeout, hold=False, stage_threads=None):
        """Runs argv under the hook with pod pin=`pin` (None: no hook), with
        a status poller; returns (its last stdout line as JSON, the poll's
        peaks, stderr). With hold, the program says `HOLD pinned_bytes=N`
        once its copies are done and waits: `gmt status` is read until it
        shows the process with N bytes pinned too (at most --hold-max-s),
        then the program goes on."""
        if pin:
            self.set_pin(pin)
        env = self.node.hook_env(POD) if pin else self.node.prog_env()
        if pin and stage_threads is not None:
            env["GMT_STAGE_THREADS"] = str(stage_threads)
        poller = StatusPoller(self.node, self.args.poll_s)
        try:
            p = gmt_e2e.Prog(argv, env)
        except OSError as e:
            poller.stop()
            raise RunError("cannot start %s: %s" % (argv[0], e))
        poller.pid = p.proc.pid
        t0 = time.monotonic()
        try:
            if hold:
                want = int(p.expect("HOLD", timeout=timeout)["pinned_bytes"])
                t_hold = time.monotonic()
                seen = poller.sample()
                while pin and (seen is None or seen < want) and \
                        time.monotonic() - t_hold < self.args.hold_max_s:
                    time.sleep(0.02)
                    seen = poller.sample()
                poller.peak["hold_s"] = time.monotonic() - t_hold
                poller.peak["hold_status_bytes"] = seen
                p.send()
            rc, err = p.finish(timeout=max(30.0, timeout - (time.monotonic() - t0)))
        except AssertionError as e:  # a wait ran out: Prog has killed it
            p.stop()
            poller.stop()
            raise RunError(str(e)[-2000:])
        except BaseException:
            p.stop()
            poller.stop()
            raise
        peak = poller.stop()
        if pin:
            peak["gone_s"] = self.wait_gone(p.proc.pid)
        out = []
        while not p.lines.empty():
            line = p.lines.get_nowait()
            if line is not None:
                out.append(line)
        got = None
        for line in reversed(out):
            if line.startswith("{"):
                try:
                    got = json.loads(line)
                except ValueError:
                    pass
                break
        if rc != 0 or got is None:
            raise RunError("exit %d%s; stderr: %s" % (rc, "" if got else ", no JSON",
                                                      err.strip()[-1500:]))
        if pin and "unhooked" in err:
            raise RunError("the hook did not register with the pod manager: " + err[-1500:])
        return got, peak, err

    def run_workload(self, mode, size, rep):
        row = {"mode": mode, "size": size, "rep": rep, "pin": PIN[mode], "ok": False}
        t0 = time.monotonic()
        try:
            got, peak, _ = self.run_prog(
                self.workload_argv(mode, size), PIN[mode], self.run_timeout(size), hold=True,
                stage_threads=0 if mode in NOSTAGE else self.args.stage_threads)
            row.update(workload=got, status_peak=peak)
            if not got.get("verified"):
                raise RunError("the data check failed: %d wrong words, %d round trips wrong"
                               % (got.get("bad_words", -1), got.get("bad_trips", -1)))
            row["ok"] = True
        except (RunError, AssertionError) as e:
            row["error"] = str(e)
        row["wall_s"] = time.monotonic() - t0
        return row


def plan(args, sizes):
    """(rep, mode, size) in run order: each round goes through the modes,
    every size of a mode in turn; odd rounds take the modes backwards, but
    profile always comes before use."""
    order = []
    rounds = max(args.reps, args.big_reps if any(s >= args.big_mib * MIB for s in sizes) else 0)
    for rep in range(rounds):
        modes = list(args.modes)
        if rep % 2:
            modes.reverse()
            if "use" in modes and "profile" in modes:
                modes.remove("profile")
                modes.insert(modes.index("use"), "profile")
        for mode in modes:
            for size in sizes:
                reps = args.big_reps if size >= args.big_mib * MIB else args.reps
                if rep < reps:
                    order.append((rep, mode, size))
    return order


def estimate_s(args, mode, size):
    """A rough time for one run on an H200 (DESIGN.md's rates), to plan."""
    copied = 2 * size * (args.hot * args.hot_copies + args.cold * args.cold_copies)
    total = size * (args.hot + args.cold)
    if args.fake:
        rate = 20e9 if mode == "pinned" else 4e9
        return 0.3 + copied / rate + total / 1e9
    rate = 10e9 if mode in ("native", "unpinned") else 50e9
    alloc = 0.374 * total / GIB if mode == "pinned" else 0.05 * total / GIB
    return 1.0 + copied / rate + alloc + total / 2e9


def summarize(rows, sizes, modes):
    summary = []
    for size in sizes:
        for mode in modes:
            ok = [r for r in rows if r["ok"] and r["mode"] == mode and r["size"] == size]
            if not ok:
                continue
            w = [r["workload"] for r in ok]
            total = w[0]["total_bytes"]
            peaks = [r["status_peak"]["host_pinned_bytes"] for r in ok]
            summary.append({
                "size": size, "mode": mode, "reps": len(ok), "total_bytes": total,
                "whole_s": median([x["whole_s"] for x in w]),
                "copy_s": median([x["copy_s"] for x in w]),
                "alloc_s": median([x["alloc_s"] for x in w]),
                "fill_s": median([x["fill_s"] for x in w]),
                "nofill_s": median([x["whole_s"] - x["fill_s"] for x in w]),
                "free_s": median([x["free_s"] for x in w]),
                "whole_min_s": min(x["whole_s"] for x in w),
                "whole_max_s": max(x["whole_s"] for x in w),
                "copy_gbps": median([x["copy_gbps"] for x in w]),
                "pinned_pct": median([x["pinned_pct"] for x in w]),
                "pinned_bytes": median([x["pinned_bytes"] for x in w]),
                "hot_pinned": median([x["hot_pinned"] for x in w]),
                "cold_pinned": median([x["cold_pinned"] for x in w]),
                "status_peak_pinned_bytes": median(peaks) if PIN[mode] else None,
                "status_peak_pinned_pct": 100.0 * median(peaks) / total if PIN[mode] else None,
                "status_peak_process_pinned_bytes": median(
                    [r["status_peak"]["process_pinned_bytes"] for r in ok]) if PIN[mode] else None,
                "status_peak_advised_bytes": median(
                    [r["status_peak"]["host_pinned_advised"] for r in ok]) if PIN[mode] else None,
            })
    by = {(s["size"], s["mode"]): s for s in summary}
    for s in summary:
        ref = by.get((s["size"], "pinned"))
        s["speed_vs_pinned"] = ref["whole_s"] / s["whole_s"] if ref else None
        s["copy_speed_vs_pinned"] = ref["copy_s"] / s["copy_s"] if ref else None
        s["nofill_speed_vs_pinned"] = ref["nofill_s"] / s["nofill_s"] if ref else None
        nat = by.get((s["size"], "native"))
        s["speed_vs_native"] = nat["whole_s"] / s["whole_s"] if nat else None
    return summary, by


def targets(by, sizes):
    """Each target on its mode, then on the mode's by-hand bound where that
    was run (bound: true; what the same policy reaches with no hook)."""
    out = []
    hand_of = {v[1]: k for k, v in BY_HAND.items()}
    for size in sizes:
        for mode, what, test in TARGETS:
            for m, bound in ((mode, False), (hand_of[mode], True)):
                s = by.get((size, m))
                if bound and not s:
                    continue
                if not s or s["speed_vs_pinned"] is None:
                    out.append({"size": size, "mode": m, "target": what, "bound": bound,
                                "verdict": "n/a"})
                    continue
                w, c, p = s["speed_vs_pinned"], s["copy_speed_vs_pinned"], s["pinned_pct"]
                out.append({"size": size, "mode": m, "target": what, "bound": bound,
                            "whole_vs_pinned": w, "copy_vs_pinned": c, "pinned_pct": p,
                            "verdict": "PASS" if test(w, c, p) else "FAIL"})
    return out


def fmt(x, spec):
    return "-" if x is None else spec % x


def print_tables(summary, tgts, fake):
    print("\npin advice: the design's workload (%s); whole = alloc+fill+copies+free, medians"
          % ("FAKE DRIVER: a dry run" if fake else "real GPU"))
    print("%8s %-13s %4s %9s %8s %9s %8s %8s %8s %9s %8s %8s %9s %7s  %s" % (
        "size MiB", "mode", "reps", "whole s", "fill s", "copy s", "whole x", "-fill x",
        "copy x", "copy GB/s", "% pinned", "% status", "hot/cold", "x native",
        "whole min-max s"))
    for s in summary:
        print("%8s %-13s %4d %9.4f %8.4f %9.4f %8s %8s %8s %9.2f %8s %8s %9s %7s  %.4f-%.4f" % (
            mib(s["size"]), s["mode"], s["reps"], s["whole_s"], s["fill_s"], s["copy_s"],
            fmt(s["speed_vs_pinned"], "%.3f"), fmt(s["nofill_speed_vs_pinned"], "%.3f"),
            fmt(s["copy_speed_vs_pinned"], "%.3f"),
            s["copy_gbps"], fmt(s["pinned_pct"], "%.1f"), fmt(s["status_peak_pinned_pct"], "%.1f"),
            "%s/%s" % (fmt(s["hot_pinned"], "%g"), fmt(s["cold_pinned"], "%g")),
            fmt(s["speed_vs_native"], "%.3f"), s["whole_min_s"], s["whole_max_s"]))
    print("(whole x, -fill x, copy x: all pinned's time / this mode's for the whole run, the"
          " whole run less the fill (the pages' first touch) and the copies, so 1.0 = as fast"
          " as all pinned;"
          " % pinned: the buffers' bytes the driver says are page-locked after the copies;"
          " % status: peak host.pinned_bytes in `gmt status` / the buffers' bytes;"
          " x native: native's whole time / this mode's)")
    print("\ntargets")
    for t in tgts:
        if t["verdict"] == "n/a":
            print("%8s %-13s %-42s n/a (not measured)" % (mib(t["size"]), t["mode"], t["target"]))
        else:
            print("%8s %-13s %-42s %s  (whole %.3fx, copy %.3fx, %s%% pinned)%s" % (
                mib(t["size"]), t["mode"], t["target"], t["verdict"], t["whole_vs_pinned"],
                t["copy_vs_pinned"], fmt(t["pinned_pct"], "%.1f"),
                "  bound: by hand, no hook" if t["bound"] else ""))


def run_dataloader(bench, args, over_budget):
    """The PyTorch training loop in each variant; a row per variant (none
    started once over_budget() says the time is spent)."""
    rows, unrun = [], []
    for rep in range(args.dl_reps):
        variants = DL_VARIANTS if rep % 2 == 0 else tuple(reversed(DL_VARIANTS))
        # profile before use, whatever the order.
        if rep % 2:
            variants = [v for v in variants if v[0] != "profile"]
            variants.insert([v[0] for v in variants].index("use"), DL_VARIANTS[3])
        for name, pin, pin_memory in variants:
            if over_budget():
                unrun.append({"variant": name, "rep": rep})
                continue
            argv = [args.dl_python, DATALOADER, "--pin-memory", "1" if pin_memory else "0",
                    "--device", args.dl_device] + args.dl_args
            row = {"variant": name, "pin": pin, "pin_memory": pin_memory, "rep": rep,
                   "ok": False}
            try:
                got, peak, _ = bench.run_prog(argv, pin, args.dl_timeout)
                row.update(result=got, status_peak=peak)
                if not got.get("finite"):
                    raise RunError("a loss or a weight was not finite")
                row["ok"] = True
            except (RunError, AssertionError) as e:
                row["error"] = str(e)
            rows.append(row)
            print("  dataloader %-28s rep %d: %s" % (
                name, rep, ("%.2f steps/s" % row["result"]["steps_per_s"]) if row["ok"]
                else "FAILED: " + row["error"][:300]), flush=True)
    summary = []
    for name, pin, pin_memory in DL_VARIANTS:
        ok = [r for r in rows if r["ok"] and r["variant"] == name]
        if ok:
            summary.append({"variant": name, "pin": pin, "pin_memory": pin_memory,
                            "reps": len(ok),
                            "steps_per_s": median([r["result"]["steps_per_s"] for r in ok]),
                            "batch_pinned": ok[0]["result"].get("batch_pinned"),
                            "status_peak_pinned_bytes": median(
                                [r["status_peak"]["host_pinned_bytes"] for r in ok])
                            if pin else None})
    ref = next((s for s in summary if s["variant"] == "native"), None)
    for s in summary:
        s["vs_native"] = s["steps_per_s"] / ref["steps_per_s"] if ref else None
    return {"runs": rows, "summary": summary, "not_run": unrun}


def print_dataloader(summary):
    print("\nPyTorch training loop with a DataLoader (bench/pin_dataloader.py), medians")
    print("%-28s %10s %4s %10s %10s %12s %16s" % ("variant", "pin_memory", "reps", "steps/s",
                                                  "x native", "batch pinned", "status peak MiB"))
    for s in summary:
        peak = s["status_peak_pinned_bytes"]
        print("%-28s %10s %4d %10.2f %10s %12s %16s" % (
            s["variant"], s["pin_memory"], s["reps"], s["steps_per_s"],
            fmt(s["vs_native"], "%.3f"), s["batch_pinned"],
            fmt(peak / MIB if peak is not None else None, "%.1f")))
    print("(x native: steps/s against the native run with pin_memory=True; batch pinned: the"
          " DataLoader's batches came page-locked)")


def gpu_name():
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        return r.stdout.strip() if r.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=parse_sizes, default=parse_sizes("1,4,16,64,256"),
                    help="buffer sizes in MiB (default 1,4,16,64,256)")
    ap.add_argument("--reps", type=int, default=3, help="runs per (mode, size); medians")
    ap.add_argument("--big-mib", type=float, default=256, help="sizes from this many MiB up...")
    ap.add_argument("--big-reps", type=int, default=1, help="...run this many times")
    ap.add_argument("--modes", type=parse_modes, default=DEFAULT_MODES)
    ap.add_argument("--max-total", type=parse_bytes, default=None,
                    help="skip sizes whose buffers take more host memory than this "
                         "(default half of MemAvailable)")
    ap.add_argument("--budget-s", type=float, default=0,
                    help="start no run after this many seconds (0: no limit)")
    ap.add_argument("--stage-threads", type=int, default=4,
                    help="GMT_STAGE_THREADS in the hooked modes but the -nostage ones "
                         "(default 4)")
    ap.add_argument("--hot", type=int, default=2)
    ap.add_argument("--hot-copies", type=int, default=175)
    ap.add_argument("--cold", type=int, default=25)
    ap.add_argument("--cold-copies", type=int, default=1)
    ap.add_argument("--hold-max-s", type=float, default=2.0,
                    help="how long the workload waits, untimed, after its copies for `gmt "
                         "status` to show its pinned bytes")
    ap.add_argument("--poll-s", type=float, default=0.1, help="gmt status poll interval")
    ap.add_argument("--run-timeout", type=float, default=0,
                    help="seconds per run (default: 60 + its bytes at 1.5 GB/s)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--fake", action="store_true")
    ap.add_argument("--strict", action="store_true", help="exit 1 on a target not met too")
    ap.add_argument("--dataloader", action="store_true",
                    help="also the PyTorch DataLoader(pin_memory=True) training loop")
    ap.add_argument("--dl-reps", type=int, default=2)
    ap.add_argument("--dl-timeout", type=float, default=300)
    ap.add_argument("--dl-python", default=sys.executable)
    ap.add_argument("--dl-device", default="cuda",
                    help="cpu: a dry run of the loop's plumbing without a GPU")
    ap.add_argument("--dl-arg", dest="dl_args", action="append", default=[],
                    help="passed to pin_dataloader.py (repeat: --dl-arg=--steps --dl-arg=64)")
    args = ap.parse_args()
    if args.reps < 1 or args.big_reps < 1 or args.dl_reps < 1:
        ap.error("--reps, --big-reps and --dl-reps must be at least 1")
    out = args.out or (os.path.join(os.environ["OUT"], "pin_advice.json")
                       if os.environ.get("OUT") else None)
    if not os.access(WORKLOAD, os.X_OK):
        raise SystemExit("%s not built (GMT_BUILD_DIR=%s)" % (WORKLOAD, gmt_e2e.BUILD))

    nbuf = args.hot + args.cold
    max_total = args.max_total or mem_available() // 2
    sizes = [s for s in args.sizes if s * nbuf <= max_total]
    skipped = [s for s in args.sizes if s * nbuf > max_total]
    for s in skipped:
        print("skipping %s MiB: %d buffers take %.2f GiB, more than --max-total %.2f GiB"
              % (mib(s), nbuf, s * nbuf / GIB, max_total / GIB))
    order = plan(args, sizes)
    est = sum(estimate_s(args, m, s) for _, m, s in order)
    print("pin advice: %d runs (sizes %s MiB, modes %s), about %.0f s by %s rates"
          % (len(order), ",".join(mib(s) for s in sizes), ",".join(args.modes), est,
             "the fake driver's" if args.fake else "DESIGN.md's H200"), flush=True)
    # The node's pinned budget must hold "profile" pinning every buffer.
    pinned_limit = max(GIB, 2 * nbuf * max(sizes or [MIB]))

    t_start = time.monotonic()
    rows, unrun, dl_box = [], [], {}
    gpu = None if args.fake else gpu_name()

    def over_budget():
        return bool(args.budget_s) and time.monotonic() - t_start > args.budget_s

    def result(bench, complete):
        summary, by = summarize(rows, sizes, args.modes)
        return {
            "bench": "pin_advice", "complete": complete,
            "date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "host": socket.gethostname(),
            "gpu": gpu, "fake": args.fake, "build": gmt_e2e.BUILD, "args": vars(args),
            "workload": {"hot": args.hot, "hot_copies": args.hot_copies, "cold": args.cold,
                         "cold_copies": args.cold_copies},
            "skipped_sizes": skipped, "not_run": unrun, "pod_manager_restarts": bench.restarts,
            "elapsed_s": time.monotonic() - t_start, "runs": rows, "summary": summary,
            "targets": targets(by, sizes), "dataloader": dl_box.get("dl"),
        }

    def save(res):
        """Written after every run too, so that a run killed by a time limit
        still leaves what it measured."""
        if out:
            with open(out + ".new", "w") as f:
                json.dump(res, f, indent=1, default=str)
            os.replace(out + ".new", out)

    def on_term(signum, frame):
        raise KeyboardInterrupt("signal %d" % signum)
    signal.signal(signal.SIGTERM, on_term)

    bench = Bench(args, pinned_limit)
    complete = False
    try:
        def dataloader():
            if args.fake and args.dl_device == "cuda":
                print("dataloader: skipped on the fake driver (PyTorch needs a GPU; "
                      "--dl-device cpu runs its plumbing)")
                return
            dl_box["dl"] = run_dataloader(bench, args, over_budget)
            unrun.extend(dict(r, dataloader=True) for r in dl_box["dl"]["not_run"])
            save(result(bench, False))

        # The DataLoader loop runs after the first round of every mode and
        # size, before the repetitions: a time budget then cuts repetitions,
        # not whole parts of the benchmark.
        dl_at = next((i for i, (rep, _, _) in enumerate(order) if rep > 0), len(order))
        for i, (rep, mode, size) in enumerate(order):
            if i == dl_at and args.dataloader:
                dataloader()
            if over_budget():
                unrun.append({"rep": rep, "mode": mode, "size": size})
                continue
            row = bench.run_workload(mode, size, rep)
            rows.append(row)
            w = row.get("workload", {})
            print("  %-13s %6s MiB rep %d: %s" % (
                mode, mib(size), rep,
                ("whole %.4f s (fill %.4f), copy %.4f s, %s%% pinned, status peak %.1f MiB"
                 % (w["whole_s"], w["fill_s"], w["copy_s"], fmt(w.get("pinned_pct"), "%.1f"),
                    row["status_peak"]["host_pinned_bytes"] / MIB)) if row["ok"]
                else "FAILED: " + row["error"][:400]), flush=True)
            save(result(bench, False))
        if dl_at == len(order) and args.dataloader:
            dataloader()
        complete = True
    except KeyboardInterrupt as e:
        print("\npin advice: stopped (%s); the results so far follow" % (e or "interrupted"))
    finally:
        bench.node.stop()

    res = result(bench, complete)
    save(res)
    print_tables(res["summary"], res["targets"], args.fake)
    dl = res["dataloader"]
    if dl:
        print_dataloader(dl["summary"])
    failed = [r for r in rows if not r["ok"]] + (
        [r for r in dl["runs"] if not r["ok"]] if dl else [])
    if unrun:
        print("\nthe time budget (%.0f s) ran out: %d runs not made" % (args.budget_s, len(unrun)))
    if bench.restarts:
        print("(the pod manager was restarted %d times to change pin=)" % bench.restarts)
    if failed:
        print("\nFAILED RUNS: %d" % len(failed))
        for r in failed:
            print("  %s: %s" % ({k: r[k] for k in r if k in ("mode", "size", "rep", "variant")},
                                r["error"][:600]))
    if out:
        print("\nwrote %s (bench/pin_plot.py %s DIR draws it)" % (out, out))
    print("elapsed %.0f s" % res["elapsed_s"])
    bad_target = any(t["verdict"] == "FAIL" and not t["bound"] for t in res["targets"])
    return 1 if failed or not complete or (args.strict and bad_target) else 0


if __name__ == "__main__":
    sys.exit(main())
