#!/usr/bin/env python3
"""Hook overhead, side by side in one run: the same binary with and without
libgmthook.so (registered with a live pod manager), alternating, several
rounds; prints medians and ratios. With the hook every launch passes the
token gate: the pod is alone with LIMIT 1.0, so the token is always
granted and the row "token held" is the gated fast path (plus one token
request per quota). A third variant, the hook with no pod manager (never
gated), shows what the gate itself costs.

Each loop also times every call on its own (a pair for alloc+free; ten
launches and a synchronizing 4-byte copy for "infer", the shape of a
batch-1 inference call with .item()) and the second table gives the
median over rounds of each side's p50 / p99 / p99.9 and what the hook
adds to each, in microseconds (issue 27).

usage: bench/hook_overhead.py [--rounds R] [--launches N] [--allocs N] [--copies N]
                              [--infers N] [--fake] [--calllog] [--cpus 2,3]
GMT_BUILD_DIR names the build (default build/); --fake runs on the fake
driver (a dry run on a machine without a GPU: its numbers mean nothing).
--calllog adds a fourth side, the hook with Alnair's per-call logs on
(GMT_LOG_DIR, hook/logs/calllog.c), and a third loop of cuGetProcAddress_v2 (a
call that does little, so the timing's own cost shows), and prints what
the logs cost per call. --cpus holds every run to the CPUs named (the
rounds of one side spread 10-25% on the H200 machine's 16 cores when the
loop wandered between them)."""
import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e"))
import gmt_e2e  # noqa: E402


CPUS = None  # --cpus: the CPUs every run is held to


def run_once(binary, mode, n, env, want_unhooked=False):
    r = subprocess.run([binary, mode, str(n)], env=env, capture_output=True, text=True, timeout=300,
                       preexec_fn=(lambda: os.sched_setaffinity(0, CPUS)) if CPUS else None)
    if r.returncode != 0:
        raise SystemExit("%s %s failed: %s" % (binary, mode, r.stderr))
    # "no pod manager": the hook's words for it before they said "unhooked" again.
    unhooked = "unhooked" in r.stderr or "no pod manager" in r.stderr
    if unhooked != want_unhooked:
        raise SystemExit("the hook %s register: %s" % ("did" if want_unhooked else "did not",
                                                       r.stderr))
    # "<mode> rate=R p50_us=A p99_us=B p999_us=C"
    return {k: float(v) for k, v in (f.split("=") for f in r.stdout.split()[1:])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--launches", type=int, default=200000)
    ap.add_argument("--allocs", type=int, default=5000)
    ap.add_argument("--copies", type=int, default=50000)
    ap.add_argument("--infers", type=int, default=20000)
    ap.add_argument("--fake", action="store_true")
    ap.add_argument("--calllog", action="store_true")
    ap.add_argument("--procaddrs", type=int, default=2000000)
    ap.add_argument("--cpus", default="", help="CPUs every run is held to (2,3): the loop and the "
                    "hook's threads stay on the same cores in every round")
    args = ap.parse_args()
    global CPUS
    CPUS = {int(c) for c in args.cpus.split(",")} if args.cpus else None

    binary = os.path.join(gmt_e2e.BUILD, "bench", "hook_overhead")
    node = gmt_e2e.Node("1\nbench 1.0 1.0 64Gi\n", fake=args.fake)
    try:
        node.start_schd()
        node.start_pmgr("bench")
        plain = node.prog_env()
        hooked = node.hook_env("bench")
        # A pod manager address where nobody listens: the hook runs unhooked.
        nobody = node.hook_env("bench", GMT_PMGR="tcp://127.0.0.1:%d" % gmt_e2e.free_port())
        logged_env = node.hook_env("bench", GMT_LOG_DIR=os.path.join(node.tmp, "calllog"))
        rows = []
        ungated = ([], [])
        logged_rows = []
        lat = {}  # mode -> [(without, with) timings of each round]
        loops = [("launch", args.launches), ("alloc", args.allocs), ("dtoh", args.copies),
                 ("infer", args.infers)]
        if args.calllog:
            loops.append(("procaddr", args.procaddrs))
        for mode, n in loops:
            without, with_, logged = [], [], []
            for r in range(args.rounds):
                # Odd rounds run the hooked sides first, so that a drift of
                # the machine within a round does not favour one side.
                sides = [("without", plain, False), ("with", hooked, False)]
                if mode == "launch":
                    sides.append(("ungated", nobody, True))
                if args.calllog:
                    sides.append(("logged", logged_env, False))
                if r % 2:
                    sides.reverse()
                got = {name: run_once(binary, mode, n, env, want_unhooked=unhooked)
                       for name, env, unhooked in sides}
                without.append(got["without"])
                with_.append(got["with"])
                if args.calllog:
                    logged.append(got["logged"])
                if mode == "launch":
                    ungated[0].append(got["without"])
                    ungated[1].append(got["ungated"])
                lat.setdefault(mode, []).append((got["without"], got["with"]))
            rows.append((mode, without, with_))
            if args.calllog:
                logged_rows.append((mode + "_logged", with_, logged))
        rows.insert(1, ("launch_ungated",) + ungated)
        rows += logged_rows  # after the ones above: rows[2] stays alloc
    finally:
        node.stop()

    print("hook overhead (%s), %d alternating rounds" %
          ("FAKE DRIVER: numbers mean nothing" if args.fake else "real GPU", args.rounds))
    print("%-34s %12s %12s %7s %8s %15s   %s" % (
        "workload (median rate)", "without hook", "with hook", "ratio", "paired", "paired IQR",
        "spread without / with (min-max)"))
    names = {"launch": "launches /s, hook, token held",
             "dtoh": "4-byte DtoH copies /s",
             "infer": "infer calls /s (10 launches + copy)",
             "launch_ungated": "launches /s, hook, no pod manager",
             "alloc": "cuMemAlloc+cuMemFree 2 MiB /s",
             "procaddr": "cuGetProcAddress_v2 /s",
             # These compare the hook with and without the logs.
             "launch_logged": "launches /s, hook + per-call logs",
             "alloc_logged": "alloc+free /s, hook + per-call logs",
             "procaddr_logged": "cuGetProcAddress /s, hook + logs"}
    for mode, without, with_ in rows:
        without = [w["rate"] for w in without]
        with_ = [w["rate"] for w in with_]
        a, b = statistics.median(without), statistics.median(with_)
        # Each round's with/without pair ran back to back: the median of the
        # pairs' ratios is steadier than the ratio of medians when the
        # machine's speed drifts between rounds.
        pairs = sorted(w / o for w, o in zip(with_, without))
        q = statistics.quantiles(pairs, n=4) if len(pairs) >= 2 else [pairs[0]] * 3
        print("%-34s %12.0f %12.0f %7.3f %8.3f %7.3f-%.3f   %.0f-%.0f / %.0f-%.0f" % (
            names[mode], a, b, b / a, statistics.median(pairs), q[0], q[2],
            min(without), max(without), min(with_), max(with_)))
    a, b = (statistics.median(w["rate"] for w in rows[2][i]) for i in (1, 2))
    print("(ratio = with/without rate; alloc+free cost with the hook = %.2fx native)" % (a / b))
    for mode, with_, logged in logged_rows:
        # Back-to-back pairs again: the median of each round's difference.
        calls = 2 if mode == "alloc_logged" else 1
        per_call = statistics.median((1e9 / l["rate"] - 1e9 / w["rate"]) / calls
                                     for w, l in zip(with_, logged))
        print("(per-call logs, %s: %+.0f ns per call; rows *_logged: without = hook alone, "
              "with = hook + logs)" % (mode[:-len("_logged")], per_call))

    print("\nper call (us; each side's percentile, the median over rounds; added: the median of "
          "each round's with - without)")
    print("%-10s %9s %9s %8s %9s %9s %8s %9s %9s %8s" % (
        "loop", "p50 w/o", "p50 with", "added", "p99 w/o", "p99 with", "added", "p99.9 w/o",
        "p99.9 with", "added"))
    for mode, pairs in lat.items():
        cells = []
        for q in ("p50_us", "p99_us", "p999_us"):
            cells += [statistics.median(o[q] for o, _ in pairs),
                      statistics.median(w[q] for _, w in pairs),
                      statistics.median(w[q] - o[q] for o, w in pairs)]
        print("%-10s %9.3f %9.3f %+8.3f %9.3f %9.3f %+8.3f %9.3f %9.3f %+8.3f" % ((mode,) + tuple(cells)))


if __name__ == "__main__":
    main()
