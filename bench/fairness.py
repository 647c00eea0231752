#!/usr/bin/env python3
"""GPU time fairness on the real GPU: two jobs of matrix products
(test/gpu/matmul_job.py) in pods at REQUEST 0.3 / 0.7, LIMIT 1.0 each.
First each job alone without gmt (its throughput alone), then both
together, each under the hook with its own pod manager and one gmt-schd.
A job's share of GPU time = its throughput together / alone; the GPU's
idle time between tokens is what the two shares leave of the whole
(1 - their sum).

usage: bench/fairness.py [--seconds S] [--alone-seconds S] [--window-ms MS]
                         [--base-quota-ms MS] [--fake]
GMT_BUILD_DIR names the build (default build/). --fake runs on the fake
driver with test/e2e/tokenprogs/spin_load as the job (a dry run on a
machine without a GPU: it checks the plumbing and the policy, not a GPU)."""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e"))
import gmt_e2e  # noqa: E402

MATMUL = os.path.join(HERE, "..", "test", "gpu", "matmul_job.py")
SPIN = gmt_e2e.build_path("test", "e2e", "tokenprogs", "spin_load")
REQUESTS = (("a", 0.3), ("b", 0.7))


def job_argv(fake, seconds):
    if fake:
        return [SPIN, "--seconds", str(seconds), "--kernel-us", "2000"]
    return [sys.executable, MATMUL, "--seconds", str(seconds)]


def read_rows(prog, timeout):
    """(mono_ms, work) of each T/DONE line until DONE. The fake's work is
    its launches, the real job's its finished matrix products."""
    try:
        rows = prog.records(timeout=timeout)
    except AssertionError as e:
        raise SystemExit(str(e))
    return [(float(r["mono_ms"]), float(r.get("work", r.get("launches")))) for r in rows]


def rate(rows, start_ms, end_ms):
    """Work per second between the first line at or after start_ms and the
    last at or before end_ms (monotonic ms)."""
    inside = [r for r in rows if start_ms <= r[0] <= end_ms]
    if len(inside) < 2:
        raise SystemExit("too short a run to measure (%d lines inside)" % len(inside))
    (t0, w0), (t1, w1) = inside[0], inside[-1]
    return (w1 - w0) / ((t1 - t0) / 1000.0)


def run_jobs(node, pods, argv, seconds, warmup_ms, hooked):
    progs = []
    for pod in pods:
        env = node.hook_env(pod) if hooked else node.prog_env()
        p = gmt_e2e.Prog(argv, env)
        node.progs.append(p)
        progs.append(p)
    for p in progs:
        p.expect("READY", timeout=120)
    rows = [read_rows(p, seconds + 120) for p in progs]
    for p in progs:
        p.finish(timeout=60)
        if "unhooked" in p.stderr() and hooked:
            raise SystemExit("a job did not register with its pod manager: " + p.stderr())
    # The interval in which every job ran: after the warm-up, before the first ended.
    start = max(r[0][0] for r in rows) + warmup_ms
    end = min(r[-1][0] for r in rows)
    return [rate(r, start, end) for r in rows], (end - start) / 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=40, help="both jobs together")
    ap.add_argument("--alone-seconds", type=float, default=15, help="each job alone")
    ap.add_argument("--window-ms", type=int, default=4000)
    ap.add_argument("--base-quota-ms", type=int, default=100)
    ap.add_argument("--fake", action="store_true")
    args = ap.parse_args()

    config = "2\n" + "".join("%s %.2f 1.0 64Gi\n" % (pod, req) for pod, req in REQUESTS)
    node = gmt_e2e.Node(config, fake=args.fake)
    try:
        node.start_schd("--window-ms", str(args.window_ms), "--base-quota-ms",
                        str(args.base_quota_ms))
        for pod, _ in REQUESTS:
            node.start_pmgr(pod)
        alone = []
        for pod, _ in REQUESTS:
            (r,), _ = run_jobs(node, [pod], job_argv(args.fake, args.alone_seconds),
                               args.alone_seconds, 2000, hooked=False)
            alone.append(r)
        together, measured_s = run_jobs(node, [p for p, _ in REQUESTS],
                                        job_argv(args.fake, args.seconds), args.seconds,
                                        max(args.window_ms, 2000), hooked=True)
    finally:
        node.stop()

    unit = "launches/s" if args.fake else "matmuls/s"
    print("GPU time fairness (%s), window %d ms, base quota %d ms, %.1f s measured together"
          % ("FAKE DRIVER: a dry run" if args.fake else "real GPU", args.window_ms,
             args.base_quota_ms, measured_s))
    print("%-4s %8s %14s %14s %8s %10s" % ("pod", "request", "alone " + unit,
                                           "together", "share", "error"))
    shares = []
    for (pod, req), a, t in zip(REQUESTS, alone, together):
        s = t / a
        shares.append(s)
        print("%-4s %8.2f %14.1f %14.1f %8.3f %+10.3f" % (pod, req, a, t, s, s - req))
    total = sum(shares)
    print("sum of shares %.3f; GPU idle between tokens (1 - sum) %.3f" % (total, 1 - total))
    print("targets: each share within 0.03 of its request; idle under 0.02")


if __name__ == "__main__":
    main()
