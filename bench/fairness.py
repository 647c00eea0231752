#!/usr/bin/env python3
"""GPU time fairness on the real GPU: two jobs in pods at REQUEST 0.3 / 0.7,
LIMIT 1.0 each. First each job alone without gmt (its throughput alone),
then both together, each under the hook with its own pod manager and one
gmt-schd. A job's share of GPU time = its throughput together / alone; the
two together against one alone is their sum, and the GPU's idle time
between tokens is what the two shares leave of the whole (1 - their sum).
While both run, `gmt status --json` is read every second: its GPU TIME
(gpu_time_share, over the scheduler's window) is printed beside what the
jobs measured.

Workloads (test/gpu/matmul_job.py):
  --mode matmul --dtype D --sync N   products of 4096x4096 D matrices, a
                                     synchronize every N (the queued work
                                     per synchronize grows with N and D)
  --mode train --dtype D             a training loop with loss.item() each
                                     step (50-200 ms a step)
  --suite                            fp16 sync 8, fp32 sync 10, train fp32:
                                     one table for the three (the issue's)
  --mix                              three pods whose jobs differ (issue 25),
                                     REQUEST 0.2 / 0.3 / 0.5: an MLP training
                                     loop (6 x Linear(4096), loss.item() each
                                     step), fp16 8192x8192 products synced
                                     every 8, and small-batch inference
                                     (8 x Linear(2048), batch 64, .item()
                                     each call); shares normalized over the
                                     pods beside gmt status (real GPU only)

usage: bench/fairness.py [--mode M] [--dtype D] [--sync N] [--suite]
                         [--seconds S] [--alone-seconds S] [--window-ms MS]
                         [--base-quota-ms MS] [--fake]
GMT_BUILD_DIR names the build (default build/). --fake runs on the fake
driver with test/e2e/tokenprogs/spin_load as the job: 2 ms kernels queued N
at a time (train: 33 x 3 ms, a 100 ms step), a dry run on a machine without
a GPU that checks the plumbing and the policy, not a GPU."""
import argparse
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e"))
import gmt_e2e  # noqa: E402

JOB = os.path.join(HERE, "..", "test", "gpu", "matmul_job.py")
SPIN = gmt_e2e.build_path("test", "e2e", "tokenprogs", "spin_load")
REQUESTS = (("a", 0.3), ("b", 0.7))
SUITE = (("matmul", "fp16", 8), ("matmul", "fp32", 10), ("train", "fp32", 1))
MIX = (("a", 0.2, ["--mode", "train", "--dtype", "fp32", "--width", "4096", "--depth", "6"]),
       ("b", 0.3, ["--mode", "matmul", "--dtype", "fp16", "--size", "8192", "--sync", "8"]),
       ("c", 0.5, ["--mode", "infer", "--dtype", "fp32", "--width", "2048", "--depth", "8",
                   "--batch", "64"]))


def job_argv(fake, seconds, mode, dtype, sync):
    if fake:
        q = ["--queue", "33", "--kernel-us", "3000"] if mode == "train" else \
            ["--queue", str(sync), "--kernel-us", "2000"]
        return [SPIN, "--seconds", str(seconds)] + q
    argv = [sys.executable, JOB, "--seconds", str(seconds), "--mode", mode, "--dtype", dtype]
    return argv + (["--sync", str(sync)] if mode == "matmul" else [])


def read_rows(prog, timeout):
    """(mono_ms, work) of each T/DONE line until DONE. The fake's work is
    its launches, the real job's its finished products or steps."""
    try:
        rows = prog.records(timeout=timeout)
    except AssertionError as e:
        raise SystemExit(str(e))
    return [(float(r["mono_ms"]), float(r.get("work", r.get("launches"))),
             float(r.get("p10_ms", "nan")), float(r.get("p50_ms", "nan"))) for r in rows]


def step_ms(rows, start_ms, end_ms):
    """The medians over the interval's seconds of the real job's per-second
    10th and 50th percentile step GPU times (ms)."""
    inside = [r for r in rows if start_ms <= r[0] <= end_ms and r[2] == r[2]]
    med = lambda xs: sorted(xs)[len(xs) // 2] if xs else float("nan")  # noqa: E731
    return med([r[2] for r in inside]), med([r[3] for r in inside])


class ClockSampler:
    """nvidia-smi's SM clock and power every 250 ms while a phase runs."""

    def __init__(self):
        import subprocess
        try:
            self.proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                 "-lms", "250"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            self.proc = None

    def stop(self):
        """(mean SM MHz, mean W), nan without nvidia-smi."""
        if not self.proc:
            return float("nan"), float("nan")
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        xs = []
        for line in out.splitlines():
            try:
                mhz, watts = (float(v) for v in line.split(","))
                xs.append((mhz, watts))
            except ValueError:
                pass
        xs = xs[len(xs) // 4:]  # past the start
        if not xs:
            return float("nan"), float("nan")
        return sum(x[0] for x in xs) / len(xs), sum(x[1] for x in xs) / len(xs)


def rate(rows, start_ms, end_ms):
    """Work per second between the first line at or after start_ms and the
    last at or before end_ms (monotonic ms)."""
    inside = [r for r in rows if start_ms <= r[0] <= end_ms]
    if len(inside) < 2:
        raise SystemExit("too short a run to measure (%d lines inside)" % len(inside))
    (t0, w0), (t1, w1) = inside[0][:2], inside[-1][:2]
    return (w1 - w0) / ((t1 - t0) / 1000.0)


class StatusSampler:
    """Reads `gmt status --json` every second: each pod's gpu_time_share."""

    def __init__(self, node):
        self.node, self.samples, self.stop = node, [], threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.wait(1.0):
            st = self.node.try_status()
            if st:
                now = time.monotonic() * 1000.0
                self.samples.append((now, {p["name"]: p.get("gpu_time_share", 0.0)
                                           for p in st["pods"]}))

    def mean(self, pod, start_ms, end_ms):
        xs = [s[pod] for t, s in self.samples if start_ms <= t <= end_ms and pod in s]
        self.stop.set()
        return sum(xs) / len(xs) if xs else float("nan")


def grants(node):
    """How many grants gmt-schd has logged so far (it runs with -v)."""
    return node.daemons[0].output().count("grant to pod")


def run_jobs(node, pods, argv, seconds, warmup_ms, hooked):
    grants0, t0 = grants(node), time.monotonic()
    progs = []
    for i, pod in enumerate(pods):
        env = node.hook_env(pod) if hooked else node.prog_env()
        p = gmt_e2e.Prog(argv[i] if isinstance(argv[0], list) else argv, env)
        node.progs.append(p)
        progs.append(p)
    for p in progs:
        p.expect("READY", timeout=120)
    sampler = StatusSampler(node) if hooked else None
    rows = [read_rows(p, seconds + 120) for p in progs]
    for p in progs:
        p.finish(timeout=60)
        if "unhooked" in p.stderr() and hooked:
            raise SystemExit("a job did not register with its pod manager: " + p.stderr())
    # The interval in which every job ran: after the warm-up, before the first ended.
    start = max(r[0][0] for r in rows) + warmup_ms
    end = min(r[-1][0] for r in rows)
    status = [sampler.mean(pod, start, end) for pod in pods] if sampler else None
    # Each grant's end costs a round trip with the GPU idle (the next grant
    # starts once the last one's work has run): grants a second say how
    # much of the idle time that explains.
    status_grants = (grants(node) - grants0) / (time.monotonic() - t0)
    run_jobs.steps = [step_ms(r, start, end) for r in rows]
    return [rate(r, start, end) for r in rows], (end - start) / 1000.0, (status, status_grants)


def measure(node, args, mode, dtype, sync):
    """One workload: each job alone, then both together. A table row per pod."""
    alone = []
    for pod, _ in REQUESTS:
        (r,), _, _ = run_jobs(node, [pod], job_argv(args.fake, args.alone_seconds, mode, dtype,
                                                    sync),
                              args.alone_seconds, 2000, hooked=False)
        alone.append(r)
    together, measured_s, (status, per_s) = run_jobs(
        node, [p for p, _ in REQUESTS], job_argv(args.fake, args.seconds, mode, dtype, sync),
        args.seconds, max(args.window_ms, 2000), hooked=True)
    name = "train %s" % dtype if mode == "train" else "matmul %s sync %d" % (dtype, sync)
    return name, alone, together, measured_s, status, per_s


def mix(args):
    """Three pods, three kinds of job: each alone without gmt, then the three
    together under gmt. A pod's progress together over alone, normalized
    over the pods, is its share of the GPU as its user sees it."""
    if args.fake:
        raise SystemExit("--mix needs a GPU")
    argv = [[sys.executable, JOB, "--seconds", str(secs)] + extra
            for secs in (args.alone_seconds, args.seconds) for _, _, extra in MIX]
    config = "3\n" + "".join("%s %.2f 1.0 64Gi\n" % (pod, req) for pod, req, _ in MIX)
    node = gmt_e2e.Node(config, fake=False)
    pods = [pod for pod, _, _ in MIX]
    try:
        node.start_schd("--window-ms", str(args.window_ms), "--base-quota-ms",
                        str(args.base_quota_ms))
        for pod in pods:
            node.start_pmgr(pod)
        alone, alone_steps, alone_clk, hooked, hooked_steps = [], [], [], [], []
        for i, pod in enumerate(pods):
            clk = ClockSampler()
            alone.append(run_jobs(node, [pod], argv[i], args.alone_seconds, 2000,
                                  hooked=False)[0][0])
            alone_clk.append(clk.stop())
            alone_steps.append(run_jobs.steps[0])
            # The same job alone in its pod under gmt: what the hook and the
            # gate cost it with nobody to share with.
            hooked.append(run_jobs(node, [pod], argv[i], args.alone_seconds, 2000,
                                   hooked=True)[0][0])
            hooked_steps.append(run_jobs.steps[0])
        clk = ClockSampler()
        together, measured_s, (status, per_s) = run_jobs(
            node, pods, argv[len(MIX):], args.seconds, max(args.window_ms, 2000), hooked=True)
        together_clk = clk.stop()
        together_steps = run_jobs.steps
    finally:
        node.stop()
    progress = [t / a for t, a in zip(together, alone)]
    total = sum(progress)
    print("GPU time shares of mixed jobs (real GPU), window %d ms, base quota %d ms, %.1f s "
          "measured" % (args.window_ms, args.base_quota_ms, measured_s))
    print("%-3s %8s %-7s %10s %10s %9s %10s %7s %10s" % (
        "pod", "request", "job", "alone/s", "together", "progress", "normalized", "error",
        "gmt status"))
    for (pod, req, extra), a, t, f, st in zip(MIX, alone, together, progress, status):
        print("%-3s %8.2f %-7s %10.2f %10.2f %9.3f %10.3f %+7.3f %10.3f" % (
            pod, req, extra[1], a, t, f, f / total, f / total - req, st))
    print("together/alone %.3f (the pods' progress summed); %.1f grants/s" % (total, per_s))
    print("\nstep GPU time (ms, median of each second's 10th / 50th percentile) and clocks:")
    print("%-3s %10s %17s %17s %17s %14s" % ("pod", "alone hooked", "alone p10/p50",
                                            "gmt alone p10/p50", "together p10/p50",
                                            "alone MHz/W"))
    for i, (pod, _, _) in enumerate(MIX):
        print("%-3s %10.3f %8.3f/%-8.3f %8.3f/%-8.3f %8.3f/%-8.3f %7.0f/%-6.0f" % (
            pod, hooked[i] / alone[i], alone_steps[i][0], alone_steps[i][1], hooked_steps[i][0],
            hooked_steps[i][1], together_steps[i][0], together_steps[i][1], alone_clk[i][0],
            alone_clk[i][1]))
    print("together: %.0f MHz, %.0f W (alone hooked: the job's rate alone under gmt over "
          "alone without)" % together_clk)
    print("targets (issue 25): each normalized share and each gmt status within 0.03 of "
          "its request")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("matmul", "train"), default="matmul")
    ap.add_argument("--dtype", choices=("fp16", "bf16", "fp32"), default="fp16")
    ap.add_argument("--sync", type=int, default=8, help="matmul: products per synchronize")
    ap.add_argument("--suite", action="store_true", help="fp16 sync 8, fp32 sync 10, train")
    ap.add_argument("--seconds", type=float, default=40, help="both jobs together")
    ap.add_argument("--alone-seconds", type=float, default=15, help="each job alone")
    ap.add_argument("--window-ms", type=int, default=4000)
    ap.add_argument("--base-quota-ms", type=int, default=100)
    ap.add_argument("--fake", action="store_true")
    ap.add_argument("--mix", action="store_true", help="three pods whose jobs differ")
    args = ap.parse_args()
    if args.mix:
        return mix(args)

    workloads = SUITE if args.suite else ((args.mode, args.dtype, args.sync),)
    config = "2\n" + "".join("%s %.2f 1.0 64Gi\n" % (pod, req) for pod, req in REQUESTS)
    node = gmt_e2e.Node(config, fake=args.fake)
    results = []
    try:
        node.start_schd("--window-ms", str(args.window_ms), "--base-quota-ms",
                        str(args.base_quota_ms))
        for pod, _ in REQUESTS:
            node.start_pmgr(pod)
        for w in workloads:
            results.append(measure(node, args, *w))
    finally:
        node.stop()

    print("GPU time fairness (%s), window %d ms, base quota %d ms, REQUEST a 0.3 / b 0.7"
          % ("FAKE DRIVER: a dry run" if args.fake else "real GPU", args.window_ms,
             args.base_quota_ms))
    print("%-22s %-3s %8s %10s %10s %7s %7s %10s" % ("workload", "pod", "request", "alone/s",
                                                      "together", "share", "error",
                                                      "gmt status"))
    for name, alone, together, measured_s, status, per_s in results:
        shares = []
        for i, ((pod, req), a, t) in enumerate(zip(REQUESTS, alone, together)):
            s = t / a
            shares.append(s)
            print("%-22s %-3s %8.2f %10.2f %10.2f %7.3f %+7.3f %10.3f"
                  % (name if i == 0 else "", pod, req, a, t, s, s - req, status[i]))
        total = sum(shares)
        print("%-22s together/alone %.3f, GPU idle %.3f, %.1f s measured"
              % ("", total, 1 - total, measured_s))
        print("%-22s %.1f grants/s: %.2f ms idle per grant"
              % ("", per_s, (1 - total) * 1000 / per_s if per_s else float("nan")))
    print("targets: each share within 0.03 of its request; together >= 0.95 of alone "
          "(idle < 0.02)")


if __name__ == "__main__":
    main()
