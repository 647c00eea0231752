#!/usr/bin/env python3
"""How often each of the hook's threads wakes (issue 27, item 3): a job
under the hook, alone in its pod, busy (kernels back to back, a
synchronize after each) and then idle (one 100 us kernel a second), and
the voluntary and involuntary context switches of each of its threads
(/proc/PID/task/*/status, threads named by gmt__thread_start) over a
window, per second. The program's own threads (its main thread, the
driver's) are shown as they are named.

usage: bench/hook_wakeups.py [--seconds S] [--fake]
GMT_BUILD_DIR names the build (default build/)."""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e"))
import gmt_e2e  # noqa: E402

SPIN = gmt_e2e.build_path("test", "e2e", "tokenprogs", "spin_load")


def measure(node, what, args, seconds):
    p = gmt_e2e.Prog([SPIN] + list(args) + ["--seconds", str(seconds + 4)], node.hook_env("job"))
    p.expect("READY")
    pid = p.proc.pid
    time.sleep(2)  # past the start: threads up, the first grant made
    a = gmt_e2e.thread_switches(pid)
    time.sleep(seconds)
    b = gmt_e2e.thread_switches(pid)
    p.finish(timeout=seconds + 30)
    rows = {}
    for tid, (name, v, nv) in b.items():
        v0, nv0 = a.get(tid, (name, 0, 0))[1:]
        r = rows.setdefault(name, [0, 0, 0])
        r[0] += 1
        r[1] += (v - v0) / seconds
        r[2] += (nv - nv0) / seconds
    print("\n%s (%s), per second over %g s:" % (what, " ".join(args), seconds))
    print("  %-16s %7s %12s %12s" % ("thread", "threads", "voluntary", "involuntary"))
    for name, (n, v, nv) in sorted(rows.items()):
        print("  %-16s %7d %12.1f %12.1f" % (name, n, v, nv))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--fake", action="store_true")
    args = ap.parse_args()
    node = gmt_e2e.Node("1\njob 1.0 1.0 64Gi\n", fake=args.fake)
    try:
        node.start_schd()
        node.start_pmgr("job")
        measure(node, "busy", ["--kernel-us", "200"], args.seconds)
        measure(node, "idle", ["--every-ms", "1000", "--kernel-us", "100"], args.seconds)
    finally:
        node.stop()


if __name__ == "__main__":
    main()
