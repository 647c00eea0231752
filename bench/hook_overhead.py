#!/usr/bin/env python3
"""Hook overhead, side by side in one run: the same binary with and without
libgmthook.so (registered with a live pod manager), alternating, several
rounds; prints medians and ratios. With the hook every launch passes the
token gate: the pod is alone with LIMIT 1.0, so the token is always
granted and the row "token held" is the gated fast path (plus one token
request per quota). A third variant, the hook with no pod manager (never
gated), shows what the gate itself costs.

usage: bench/hook_overhead.py [--rounds R] [--launches N] [--allocs N] [--fake]
GMT_BUILD_DIR names the build (default build/); --fake runs on the fake
driver (a dry run on a machine without a GPU: its numbers mean nothing)."""
import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e"))
import gmt_e2e  # noqa: E402


def run_once(binary, mode, n, env, want_unhooked=False):
    r = subprocess.run([binary, mode, str(n)], env=env, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise SystemExit("%s %s failed: %s" % (binary, mode, r.stderr))
    if ("unhooked" in r.stderr) != want_unhooked:
        raise SystemExit("the hook %s register: %s" % ("did" if want_unhooked else "did not",
                                                       r.stderr))
    return float(r.stdout.split("rate=")[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--launches", type=int, default=200000)
    ap.add_argument("--allocs", type=int, default=5000)
    ap.add_argument("--fake", action="store_true")
    args = ap.parse_args()

    binary = os.path.join(gmt_e2e.BUILD, "bench", "hook_overhead")
    node = gmt_e2e.Node("1\nbench 1.0 1.0 64Gi\n", fake=args.fake)
    try:
        node.start_schd()
        node.start_pmgr("bench")
        plain = node.prog_env()
        hooked = node.hook_env("bench")
        # A pod manager address where nobody listens: the hook runs unhooked.
        nobody = node.hook_env("bench", GMT_PMGR="tcp://127.0.0.1:%d" % gmt_e2e.free_port())
        rows = []
        ungated = ([], [])
        for mode, n in (("launch", args.launches), ("alloc", args.allocs)):
            without, with_ = [], []
            for r in range(args.rounds):
                # Odd rounds run the hooked sides first, so that a drift of
                # the machine within a round does not favour one side.
                sides = [("without", plain, False), ("with", hooked, False)]
                if mode == "launch":
                    sides.append(("ungated", nobody, True))
                if r % 2:
                    sides.reverse()
                got = {name: run_once(binary, mode, n, env, want_unhooked=unhooked)
                       for name, env, unhooked in sides}
                without.append(got["without"])
                with_.append(got["with"])
                if mode == "launch":
                    ungated[0].append(got["without"])
                    ungated[1].append(got["ungated"])
            rows.append((mode, without, with_))
        rows.insert(1, ("launch_ungated",) + ungated)
    finally:
        node.stop()

    print("hook overhead (%s), %d alternating rounds" %
          ("FAKE DRIVER: numbers mean nothing" if args.fake else "real GPU", args.rounds))
    print("%-34s %12s %12s %7s %8s %15s   %s" % (
        "workload (median rate)", "without hook", "with hook", "ratio", "paired", "paired IQR",
        "spread without / with (min-max)"))
    names = {"launch": "launches /s, hook, token held",
             "launch_ungated": "launches /s, hook, no pod manager",
             "alloc": "cuMemAlloc+cuMemFree 2 MiB /s"}
    for mode, without, with_ in rows:
        a, b = statistics.median(without), statistics.median(with_)
        # Each round's with/without pair ran back to back: the median of the
        # pairs' ratios is steadier than the ratio of medians when the
        # machine's speed drifts between rounds.
        pairs = sorted(w / o for w, o in zip(with_, without))
        q = statistics.quantiles(pairs, n=4) if len(pairs) >= 2 else [pairs[0]] * 3
        print("%-34s %12.0f %12.0f %7.3f %8.3f %7.3f-%.3f   %.0f-%.0f / %.0f-%.0f" % (
            names[mode], a, b, b / a, statistics.median(pairs), q[0], q[2],
            min(without), max(without), min(with_), max(with_)))
    a, b = statistics.median(rows[2][1]), statistics.median(rows[2][2])
    print("(ratio = with/without rate; alloc+free cost with the hook = %.2fx native)" % (a / b))


if __name__ == "__main__":
    main()
