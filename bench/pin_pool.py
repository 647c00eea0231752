#!/usr/bin/env python3
"""The caching pinned pool (issue 11): bench/pin_pool allocates a pinned
staging block per round (cuMemHostAlloc), fills it, copies it to the GPU
and frees it (cuMemFreeHost), as code calling cudaMallocHost/cudaFreeHost
per batch does. Side by side in one run, for each size:

  native   no hook
  no pool  the hook, pod pin=adaptive, GMT_PIN_POOL_MIB=0 (every free real)
  pool     the hook, pod pin=adaptive: freed blocks come back

Each (variant, size) runs --reps times, a fresh process each, the variants
alternating; medians. Prints the whole loop's time and the allocation +
free calls' time, and each against native. Exits 1 when a run failed or a
byte came back wrong.

usage: bench/pin_pool.py [--sizes MIB,..] [--rounds N] [--reps R] [--fake]
         [--out FILE]
GMT_BUILD_DIR names the build (.carry on the GPU machine); --fake runs on
the fake driver (a dry run: cuMemHostAlloc costs 374 ms/GiB there too)."""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e"))
import gmt_e2e  # noqa: E402

WORKLOAD = gmt_e2e.build_path("bench", "pin_pool")
VARIANTS = ("native", "no pool", "pool")
POD = "bench"


def run(node, variant, size_mib, rounds):
    if variant == "native":
        env = node.prog_env()
    else:
        env = node.hook_env(POD, **({"GMT_PIN_POOL_MIB": "0"} if variant == "no pool" else {}))
    r = subprocess.run([WORKLOAD, str(size_mib), str(rounds)], env=env, capture_output=True,
                       text=True, timeout=120 + rounds * size_mib / 50)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        raise RuntimeError("%s %d MiB: exit %d: %s" % (variant, size_mib, r.returncode,
                                                       r.stderr.strip()[-800:]))
    got = json.loads(lines[-1])
    if variant != "native" and "unhooked" in r.stderr:
        raise RuntimeError("the hook did not register: " + r.stderr[-800:])
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,16,64,256")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--fake", action="store_true")
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "/tmp"), "pin_pool.json"))
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",") if x.strip()]
    if not os.path.exists(WORKLOAD):
        raise SystemExit("%s not built (GMT_BUILD_DIR=%s)" % (WORKLOAD, gmt_e2e.BUILD))
    node = gmt_e2e.Node("1\n%s 1.0 1.0 64Gi pin=adaptive\n" % POD, fake=a.fake)
    rows, failed = [], 0
    try:
        node.start_schd()
        node.start_pmgr(POD)
        for rep in range(a.reps):
            for size in sizes:
                order = VARIANTS if rep % 2 == 0 else tuple(reversed(VARIANTS))
                for v in order:
                    try:
                        got = run(node, v, size, a.rounds)
                        rows.append(dict(got, variant=v, size_mib=size, rep=rep))
                        failed += not got.get("verified")
                    except (RuntimeError, subprocess.TimeoutExpired) as e:
                        print("FAILED:", e, file=sys.stderr)
                        rows.append({"variant": v, "size_mib": size, "rep": rep, "error": str(e)})
                        failed += 1
    finally:
        node.stop()

    def med(v, size, key):
        xs = [r[key] for r in rows if r["variant"] == v and r["size_mib"] == size and key in r]
        return statistics.median(xs) if xs else None

    print("\npinned pool: %d rounds of cuMemHostAlloc + fill + HtoD + cuMemFreeHost, medians of %d"
          % (a.rounds, a.reps))
    print("%8s  %10s %10s %10s  %12s %12s  %9s %9s" % (
        "size", "native s", "no pool s", "pool s", "alloc+free n", "alloc+free p", "pool/nat",
        "distinct"))
    summary = []
    for size in sizes:
        w = {v: med(v, size, "whole_s") for v in VARIANTS}
        af = {v: (med(v, size, "alloc_s") or 0) + (med(v, size, "free_s") or 0) for v in VARIANTS}
        dist = med("pool", size, "distinct")
        speed = w["native"] / w["pool"] if w["native"] and w["pool"] else None
        summary.append({"size_mib": size, "whole_s": w, "alloc_free_s": af,
                        "pool_speedup_vs_native": speed, "pool_distinct": dist})
        print("%5d MiB  %10s %10s %10s  %12.4f %12.4f  %9s %9s" % (
            size, *("%.4f" % w[v] if w[v] is not None else "-" for v in VARIANTS),
            af["native"], af["pool"], "%.2fx" % speed if speed else "-", dist))
    with open(a.out, "w") as f:
        json.dump({"rows": rows, "summary": summary, "rounds": a.rounds, "reps": a.reps,
                   "fake": a.fake}, f, indent=1)
    print("wrote", a.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
