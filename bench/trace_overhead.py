#!/usr/bin/env python3
"""Tracer overhead, side by side in one run: each workload alternately
untraced and under `gmt trace -p PID -o x.json`, several rounds; prints the
median time of each side, the slowdown, the dropped events and the
tracer's own CPU time. Needs root (BPF).

usage: bench/trace_overhead.py [--rounds R] [--fake] [--no-torch]
GMT_BUILD_DIR names the build (default build/). --fake runs on the fake
driver (a dry run without a GPU: the numbers mean nothing)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e"))
import gmt_e2e  # noqa: E402


def env_for(fake, tmp):
    env = dict(os.environ)
    if fake:
        env.update({"LD_LIBRARY_PATH": gmt_e2e.FAKECUDA_DIR, "GMT_FAKE_DIR": tmp})
    return env


def run(argv, env, tmp, traced):
    """One run; returns (seconds, dropped events or None, tracer CPU s or None)."""
    job = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, bufsize=1)
    try:
        line = job.stdout.readline()
        if not line.startswith("ready"):
            raise SystemExit("%s did not get ready: %s %s" % (argv, line, job.stderr.read()))
        tracer = out = None
        if traced:
            out = os.path.join(tmp, "trace.json")
            errf = open(os.path.join(tmp, "trace.err"), "w+")
            tracer = subprocess.Popen([gmt_e2e.GMT, "trace", "-p", str(job.pid), "-o", out],
                                      env=gmt_e2e.daemon_env(env), stdout=subprocess.DEVNULL, stderr=errf)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                errf.seek(0)
                if "tracing pid" in errf.read():
                    break
                if tracer.poll() is not None:
                    errf.seek(0)
                    raise SystemExit("gmt trace failed: " + errf.read())
                time.sleep(0.05)
            else:
                raise SystemExit("gmt trace did not attach")
        job.stdin.write("go\n")
        job.stdin.flush()
        line = job.stdout.readline()
        if not line.startswith("done"):
            raise SystemExit("%s failed: %s %s" % (argv, line, job.stderr.read()))
        seconds = float(line.split("seconds=")[1])
        job.stdin.close()
        job.wait(timeout=60)
        if not traced:
            return seconds, None, None
        _, status, usage = os.wait4(tracer.pid, 0)
        tracer.returncode = status
        errf.close()
        with open(out) as f:
            dump = json.load(f)
        return seconds, dump["dropped_events"], usage.ru_utime + usage.ru_stime
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--fake", action="store_true")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()

    copy_job = os.path.join(gmt_e2e.BUILD, "bench", "copy_job")
    workloads = [
        ("copies 1 MiB x 4000", [copy_job, str(1 << 20), "4000"]),
        ("copies 16 MiB x 400", [copy_job, str(16 << 20), "400"]),
        ("copies 256 MiB x 25", [copy_job, str(256 << 20), "25"]),
    ]
    if not args.no_torch and not args.fake:
        workloads.append(("PyTorch MLP training x 300", [sys.executable,
                                                         os.path.join(HERE, "train_job.py"), "300"]))
    rows = []
    with tempfile.TemporaryDirectory(prefix="gmt-trace-bench-") as tmp:
        env = env_for(args.fake, tmp)
        for name, argv in workloads:
            plain, traced, dropped, cpu = [], [], 0, []
            for r in range(args.rounds):
                # Odd rounds trace first, so that a drift of the machine
                # within a round does not favour one side.
                for side in ((False, True) if r % 2 == 0 else (True, False)):
                    s, d, c = run(argv, env, tmp, side)
                    if not side:
                        plain.append(s)
                        continue
                    traced.append(s)
                    dropped += d
                    cpu.append(c)
            rows.append((name, plain, traced, dropped, cpu))

    print("tracer overhead (%s), median of %d rounds, sides alternating in order" %
          ("FAKE DRIVER: numbers mean nothing" if args.fake else "real GPU", args.rounds))
    print("%-28s %10s %10s %9s %8s %12s   %s" % ("workload", "untraced s", "traced s", "slowdown",
                                                "dropped", "tracer CPU s", "spread untraced / traced"))
    for name, plain, traced, dropped, cpu in rows:
        a, b = statistics.median(plain), statistics.median(traced)
        print("%-28s %10.4f %10.4f %8.1f%% %8d %12.3f   %.4f-%.4f / %.4f-%.4f" % (
            name, a, b, 100 * (b / a - 1), dropped, statistics.median(cpu),
            min(plain), max(plain), min(traced), max(traced)))


if __name__ == "__main__":
    main()
