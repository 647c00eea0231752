#!/usr/bin/env python3
"""Tracer overhead: each workload's blocks untraced and under
`gmt trace -p PID -o x.json`, both sides in the same process on the same
buffers. Needs root (BPF).

usage: bench/trace_overhead.py [--rounds R] [--fake] [--no-torch]
                               [--job-cpus LIST] [--tracer-cpus LIST]

Per workload one job (bench/copy_job, bench/train_job.py) is started and
kept: it runs one block per `go` on its stdin and says how long the block
took. A fresh process per run made pageable-copy times vary by +-15% on the
GPU VMs (other host pages), far more than the 2% to be shown. After one
warm-up block, R rounds each run a pair of blocks, one untraced and one
traced, the order alternating from pair to pair. For a traced block a
`gmt trace` is attached first and stopped with SIGINT once the block is
done (attaching and detaching are not timed); its dump must show the
block's copies (else the row says CHECK FAILED and the exit status is 1),
and gives the dropped events, while wait4 gives the tracer's CPU time.

Prints, per workload: the median untraced and traced block, the slowdown
of those medians, the median of the pairs' traced/untraced ratios with a
95% bootstrap interval, what the tracer added per copy (the difference of the
medians over the block's copies), the dropped events (sum), the tracer's
median CPU time and the rounds. The 4 KiB copies measure the fixed cost a
traced copy pays (the probe hit) where it is not lost in the copy's own
variation; the bigger ones show it end to end.

--job-cpus and --tracer-cpus (e.g. 2,3 and 4) pin the job (its driver
threads with it) and the tracer to CPUs, so that neither moves the other
between cores or memory nodes from block to block. GMT_BUILD_DIR names the build (default build/). --fake runs
on the fake driver (a dry run without a GPU: the numbers mean nothing)."""
import argparse
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e"))
import gmt_e2e  # noqa: E402

READY_S = 120  # PyTorch's import and CUDA start
BLOCK_S = 300
TRACER_S = 30


class BenchError(Exception):
    pass


def env_for(fake, tmp):
    env = dict(os.environ)
    if fake:
        env.update({"LD_LIBRARY_PATH": gmt_e2e.FAKECUDA_DIR, "GMT_FAKE_DIR": tmp})
    return env


def copies_check(iters):
    """A copy_job block: at least ITER copies each way, counted against the
    block's device buffer (which the tracer saw allocated)."""
    def check(dump):
        h2d = sum(a["h2d_count"] for a in dump["allocations"])
        d2h = sum(a["d2h_count"] for a in dump["allocations"])
        if h2d < iters or d2h < iters:
            return "the trace counted %d H2D and %d D2H copies, not %d each" % (h2d, d2h, iters)
        return None
    return check


def seen_check(least):
    """A PyTorch block: its allocator's buffers predate the tracer, so their
    copies stay unmatched; at least `least` copies must have been seen."""
    def check(dump):
        seen = sum(dump["copies"][k] for k in ("h2d_count", "d2h_count", "d2d_count"))
        seen += dump["unmatched_copies"]
        if seen < least:
            return "the trace saw %d copies, not at least %d" % (seen, least)
        return None
    return check


def reap(proc, timeout):
    """Waits up to timeout for proc to exit; returns its rusage, or None."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)


def block(job):
    """Runs one block in job; returns its seconds."""
    job.send("go")
    return float(job.expect("done", timeout=BLOCK_S)["seconds"])


def traced_block(job, env, out, cpus=None):
    """One block under `gmt trace`; returns (seconds, dump, tracer CPU s)."""
    tracer = gmt_e2e.Prog([gmt_e2e.GMT, "trace", "-p", str(job.proc.pid), "-o", out],
                          gmt_e2e.daemon_env(env), preexec_fn=pinned(cpus))
    try:
        deadline = time.monotonic() + TRACER_S
        while "tracing pid" not in tracer.stderr():
            if tracer.proc.poll() is not None:
                raise BenchError("gmt trace exited (%s) before it attached: %s"
                                 % (tracer.proc.returncode, tracer.stderr().strip()))
            if time.monotonic() >= deadline:
                raise BenchError("gmt trace did not attach within %d s: %s"
                                 % (TRACER_S, tracer.stderr().strip()))
            time.sleep(0.02)
        seconds = block(job)
        tracer.proc.send_signal(signal.SIGINT)  # stop, write the dump
        usage = reap(tracer.proc, TRACER_S)
        if usage is None:
            raise BenchError("gmt trace did not stop within %d s of SIGINT: %s"
                             % (TRACER_S, tracer.stderr().strip()))
        if tracer.proc.returncode != 0 or not os.path.exists(out):
            raise BenchError("gmt trace failed (exit %s): %s"
                             % (tracer.proc.returncode, tracer.stderr().strip()))
        with open(out) as f:
            dump = json.load(f)
        os.unlink(out)
        return seconds, dump, usage.ru_utime + usage.ru_stime
    finally:
        tracer.stop()


def pinned(cpus):
    """A preexec_fn that pins the child to cpus (None: no pinning)."""
    if not cpus:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def cpu_list(text):
    try:
        cpus = {int(c) for c in text.split(",") if c.strip()}
    except ValueError:
        raise argparse.ArgumentTypeError("not a list of CPU numbers: %r" % text)
    if not cpus or not cpus <= os.sched_getaffinity(0):
        raise argparse.ArgumentTypeError("CPUs %r are not all available here" % text)
    return cpus


def measure(name, argv, check, rounds, env, tmp, job_cpus=None, tracer_cpus=None, copies=0):
    """Runs one workload's pairs in one job; returns its table row (copies:
    a block's copies, for the cost per copy; 0 for none)."""
    job = gmt_e2e.Prog(argv, env, preexec_fn=pinned(job_cpus))
    try:
        job.expect("ready", timeout=READY_S)
        block(job)  # warm-up, not counted
        plain, traced, ratios, cpu, dropped, bad = [], [], [], [], 0, 0
        for r in range(rounds):
            # Odd pairs trace first, so that neither side always runs
            # after the other (or after an attach).
            sides = {}
            for side in (("plain", "traced") if r % 2 == 0 else ("traced", "plain")):
                if side == "plain":
                    sides[side] = block(job)
                    continue
                s, dump, c = traced_block(job, env, os.path.join(tmp, "trace.json"), tracer_cpus)
                sides[side] = s
                dropped += dump["dropped_events"]
                cpu.append(c)
                why = check(dump)
                if why:
                    bad += 1
                    print("error: %s, round %d: %s" % (name, r + 1, why), file=sys.stderr)
            plain.append(sides["plain"])
            traced.append(sides["traced"])
            ratios.append(sides["traced"] / sides["plain"])
            print("%s round %d: untraced %.4f s, traced %.4f s" % (
                name, r + 1, sides["plain"], sides["traced"]), flush=True)
        rc, err = job.finish(timeout=60)
        if rc != 0:
            raise BenchError("%s exited %s at the end of its stdin: %s" % (argv[0], rc, err.strip()))
        return name, plain, traced, ratios, dropped, cpu, bad, copies
    finally:
        job.stop()


def median_ci(xs, resamples=2000, seed=1):
    """A 95% bootstrap interval of the median of xs (seeded: reruns agree)."""
    rnd = random.Random(seed)
    meds = sorted(statistics.median(rnd.choices(xs, k=len(xs))) for _ in range(resamples))
    return meds[int(0.025 * resamples)], meds[int(0.975 * resamples) - 1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8, help="pairs of blocks per workload")
    ap.add_argument("--fake", action="store_true")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--job-cpus", type=cpu_list, help="pin each job to these CPUs (e.g. 2,3)")
    ap.add_argument("--tracer-cpus", type=cpu_list, help="pin the tracer to these CPUs (e.g. 4)")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")

    # Blocks of about 0.5 s on the H200 (a pageable copy there: 1 MiB
    # ~125 us, 16 MiB ~1.5 ms, 256 MiB ~25 ms), so that 8 rounds of every
    # workload, attaches included, take about 4 minutes.
    copy_job = os.path.join(gmt_e2e.BUILD, "bench", "copy_job")
    workloads = [("copies 4 KiB x 20000", [copy_job, str(4 << 10), "20000"], copies_check(20000)),
                 ("copies 1 MiB x 2000", [copy_job, str(1 << 20), "2000"], copies_check(2000)),
                 ("copies 16 MiB x 200", [copy_job, str(16 << 20), "200"], copies_check(200)),
                 ("copies 256 MiB x 12", [copy_job, str(256 << 20), "12"], copies_check(12))]
    if not args.no_torch and not args.fake:
        workloads.append(("PyTorch MLP x 300 steps",
                          [sys.executable, os.path.join(HERE, "train_job.py"), "300"],
                          seen_check(300)))
    rows = []
    with tempfile.TemporaryDirectory(prefix="gmt-trace-bench-") as tmp:
        env = env_for(args.fake, tmp)
        try:
            for name, argv, check in workloads:
                copies = 2 * int(argv[2]) if argv[0] == copy_job else 0
                rows.append(measure(name, argv, check, args.rounds, env, tmp, args.job_cpus,
                                    args.tracer_cpus, copies))
        except (BenchError, AssertionError) as e:
            raise SystemExit("trace_overhead: %s" % e)

    print("\ntracer overhead (%s): one process per workload, %d rounds of an untraced and a "
          "traced block, order alternating; job on CPUs %s, tracer on %s" %
          ("FAKE DRIVER, numbers mean nothing" if args.fake else "real GPU", args.rounds,
           sorted(args.job_cpus) if args.job_cpus else "any",
           sorted(args.tracer_cpus) if args.tracer_cpus else "any"))
    print("%-24s %10s %10s %9s %24s %9s %7s %10s %6s" % (
        "workload", "untraced s", "traced s", "slowdown", "per pair (95% CI)", "us/copy", "dropped",
        "tracer CPU", "rounds"))
    failed = 0
    for name, plain, traced, ratios, dropped, cpu, bad, copies in rows:
        a, b = statistics.median(plain), statistics.median(traced)
        per_copy = "%+9.2f" % (1e6 * (b - a) / copies) if copies else "%9s" % "-"
        lo, hi = median_ci(ratios)
        pair = "%+.1f%% (%+.1f..%+.1f)" % (100 * (statistics.median(ratios) - 1),
                                          100 * (lo - 1), 100 * (hi - 1))
        print("%-24s %10.4f %10.4f %8.1f%% %24s %s %7d %9.3fs %6d%s" % (
            name, a, b, 100 * (b / a - 1), pair, per_copy, dropped, statistics.median(cpu), len(ratios),
            "  CHECK FAILED x%d" % bad if bad else ""))
        failed += bad
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
