#!/usr/bin/env python3
"""The hook's cost to a latency-bound PyTorch job (issue 27), side by side
in one run: the inference service of test/gpu/serve_job.py (8 x
Linear(2048) + ReLU, fp32, no grad, .item() after each call; about 17
launches and one synchronizing copy a call) in a closed loop at batch 1
and 64, natively and under the hook, alternating, several rounds. The pod
is alone with REQUEST 1.0, so every launch takes the token gate's fast
path.

A third side, the hook with no pod manager to reach (never gated, no
token, no reporting), shows what interposing alone costs. A fourth, the
service natively once more in the same alternation ("native, again"),
shows what the bench itself spreads by: a ratio of the hook within the
control's IQR is not a cost it can show (--no-control leaves it out).
With --baseline-hook PATH a fifth side runs gated under another build's
libgmthook.so (the last commit's, say): a change to the hook is read
against the build before it in the same alternation.

Both sides run with OPENBLAS_NUM_THREADS=1 (--blas-threads): NumPy's
OpenBLAS threads otherwise spin on the CPUs the loop needs (16% of the
samples of a native run on the H200 machine), and the rates spread 15%
between runs of the same side.

For each load it prints the rate with / without (the median of each
round's ratio, its IQR, and the spread of each side), and each side's
p50 / p99 / p99.9 per call (the median over rounds) with their ratios.

With --beside a busy job shares the GPU during every run of every side
(the token gate's slow path, issue 27): a PyTorch loop of 4096 x 4096
fp32 matmuls with .item() every 20, started before each run and stopped
after it; natively it runs natively (the GPU time-slices the two
contexts), under the hook in a pod of its own ("busy", REQUEST 0.5 beside
the service's 0.5), and beside the ungated side ungated too. The busy job
runs 1.5 s alone first; the last table gives its step rate while the
service ran over its rate alone (what the service's speed cost it). Under
the hook that depends on the load's length: gmt-schd evens the pods'
shares over its window (10 s), and the busy pod that ran alone first is
owed less until then (2 s loads: 0.32 of its rate; 5 s loads: 0.51).

usage: bench/hook_infer.py [--rounds R] [--seconds S] [--loads closed:1,closed:64]
                          [--blas-threads N] [--beside] [--cpus LIST] [--no-control]
                          [--baseline-hook PATH]
GMT_BUILD_DIR names the build (default build/); needs a GPU and PyTorch."""
import argparse
import os
import queue
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e"))
import gmt_e2e  # noqa: E402

SERVE = os.path.join(HERE, "..", "test", "gpu", "serve_job.py")


BUSY = """
import sys, time, torch
x = torch.randn(4096, 4096, device="cuda")
y = x
for i in range(20):
    y = y @ x
    y = y / y.norm()
y.sum().item()
print("READY", flush=True)
i = 0
while True:
    y = y @ x
    y = y / y.norm()
    i += 1
    if i % 20 == 0:
        y.sum().item()
        print("S t=%.6f n=%d" % (time.monotonic(), i), flush=True)
"""

# Seconds the busy job runs alone before the service starts: its rate
# then is what its rate beside the service is compared with.
ALONE_S = 1.5


def busy(env):
    """A busy job beside the service: its Prog, once it has run ALONE_S alone."""
    p = gmt_e2e.Prog([sys.executable, "-c", BUSY], env)
    p.expect("READY", timeout=120)
    time.sleep(ALONE_S)
    return p


def busy_share(p, during):
    """The busy job's step rate within during (t0, t1), over its rate in
    its first ALONE_S alone; None when too few steps were seen."""
    marks = []
    while True:
        try:
            line = p.lines.get_nowait()
        except queue.Empty:
            break
        if line and line.startswith("S "):
            f = dict(kv.split("=", 1) for kv in line.split()[1:])
            marks.append((float(f["t"]), int(f["n"])))

    def rate(t0, t1):
        inside = [m for m in marks if t0 <= m[0] <= t1]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return None
        return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])

    if not marks:
        return None
    alone = rate(marks[0][0], marks[0][0] + ALONE_S)
    beside = rate(*during)
    return beside / alone if alone and beside is not None else None


def serve(env, args, side, node=None):
    """{load: L row} of one run of the service; side is without, with,
    ungated or again. With node, also "held": each pod's share of the GPU's time in
    gmt-schd's window as the service ends."""
    # --cpus: every run of the service on the same CPUs (its hook threads
    # too), as bench/hook_overhead.py --cpus: unpinned, rounds spread 10-25%.
    pin = ["taskset", "-c", args.cpus] if args.cpus else []
    p = gmt_e2e.Prog(pin + [sys.executable, SERVE, "--loads", args.loads,
                            "--seconds", str(args.seconds)], env)
    p.expect("READY", timeout=120)
    t0 = time.monotonic()
    rows = p.records(prefixes=("L ",), timeout=60 + 10 * args.seconds * len(args.loads.split(",")))
    t1 = time.monotonic()
    st = node.try_status() if node else None
    rc, err = p.finish(timeout=60)
    if rc != 0:
        raise SystemExit("serve_job failed: " + err[-2000:])
    unhooked = "unhooked" in err or "no pod manager" in err
    if side in ("with", "baseline") and unhooked:
        raise SystemExit("the service did not register with its pod manager: " + err[-2000:])
    if side == "ungated" and not unhooked:
        raise SystemExit("the service found a pod manager where none listens: " + err[-2000:])
    got = {r["load"]: r for r in rows if "load" in r}
    got["window"] = (t0, t1)
    got["held"] = {p["name"]: p.get("gpu_time_share") or 0 for p in (st or {}).get("pods", [])}
    return got


def iqr(xs):
    q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
    return q[0], q[2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=3, help="each load, each run")
    ap.add_argument("--loads", default="closed:1,closed:64")
    ap.add_argument("--blas-threads", default="1", help="OPENBLAS_NUM_THREADS of both sides")
    ap.add_argument("--beside", action="store_true", help="a busy job shares the GPU")
    ap.add_argument("--cpus", default="", help="CPUs the service is held to in every run (4,5)")
    ap.add_argument("--no-control", action="store_true",
                    help="no second native run a round (the bench's own spread)")
    ap.add_argument("--baseline-hook", default="",
                    help="another build's libgmthook.so, run gated as a fifth side")
    args = ap.parse_args()
    if args.baseline_hook and not os.path.isfile(args.baseline_hook):
        raise SystemExit("--baseline-hook: no such file: " + args.baseline_hook)
    if args.rounds < 1:
        raise SystemExit("--rounds must be at least 1")

    node = gmt_e2e.Node("2\ninfer 0.5 1.0 64Gi\nbusy 0.5 1.0 64Gi\n" if args.beside
                        else "1\ninfer 1.0 1.0 64Gi\n", fake=False)
    runs = []  # per round: {side: {load: row}}
    # The busy job's rate beside / alone, per side.
    shares = {"without": [], "with": [], "ungated": [], "again": [], "baseline": []}
    try:
        node.start_schd()
        node.start_pmgr("infer")
        if args.beside:
            node.start_pmgr("busy")
        blas = {"OPENBLAS_NUM_THREADS": args.blas_threads}
        nobody = node.hook_env("infer", GMT_PMGR="tcp://127.0.0.1:%d" % gmt_e2e.free_port(),
                               **blas)
        sides = [("without", node.prog_env(**blas)), ("with", node.hook_env("infer", **blas)),
                 ("ungated", nobody)]
        if not args.no_control:
            sides.append(("again", node.prog_env(**blas)))
        if args.baseline_hook:
            sides.append(("baseline", node.hook_env("infer", LD_PRELOAD=args.baseline_hook,
                                                    **blas)))
        beside = {"without": node.prog_env(**blas), "with": node.hook_env("busy", **blas),
                  "ungated": node.hook_env("busy", GMT_PMGR="tcp://127.0.0.1:%d"
                                           % gmt_e2e.free_port(), **blas),
                  "again": node.prog_env(**blas),
                  "baseline": node.hook_env("busy", LD_PRELOAD=args.baseline_hook or
                                            node.preload(), **blas)} if args.beside else {}
        held = []  # each pod's share of the GPU's time in gmt-schd's window, per hooked run
        for r in range(args.rounds):
            # Odd rounds run the hooked side first: a drift of the machine
            # within a round favours neither.
            order = sides[::-1] if r % 2 else sides
            got = {}
            for name, env in order:
                other = busy(beside[name]) if args.beside else None
                try:
                    got[name] = serve(env, args, name, node if name == "with" else None)
                    if name == "with":
                        held.append(got[name]["held"])
                finally:
                    if other:
                        other.stop()
                if other:
                    share = busy_share(other, got[name]["window"])
                    if share is not None:
                        shares[name].append(share)
            runs.append(got)
            print("round %d done" % (r + 1), file=sys.stderr, flush=True)
    finally:
        node.stop()

    print("hook cost to a PyTorch inference loop (serve_job.py), %d alternating rounds, %g s each%s"
          % (args.rounds, args.seconds,
             ", a busy matmul job beside it (in its own pod under the hook)" if args.beside else ""))
    compared = [("hook", "with"), ("hook, ungated", "ungated")]
    if not args.no_control:
        compared.append(("native, again", "again"))
    if args.baseline_hook:
        compared.append(("hook, baseline", "baseline"))
    print("%-24s %9s %9s %7s %13s   %s" % ("load, side", "calls/s", "side", "ratio",
                                         "ratio IQR", "spread native / side (min-max)"))
    for load in args.loads.split(","):
        for label, k in compared:
            w = [float(run["without"][load]["rate"]) for run in runs]
            h = [float(run[k][load]["rate"]) for run in runs]
            pairs = [y / x for x, y in zip(w, h)]
            lo, hi = iqr(pairs)
            print("%-24s %9.0f %9.0f %7.3f %6.3f-%.3f   %.0f-%.0f / %.0f-%.0f" % (
                load + ", " + label, statistics.median(w), statistics.median(h),
                statistics.median(pairs), lo, hi, min(w), max(w), min(h), max(h)))
    print("\nper call (ms; each side's percentile, the median over rounds; ratio side / native)")
    print("%-24s %-24s %-24s %-24s" % ("load, side", "p50 native / side (x)",
                                       "p99 native / side (x)", "p99.9 native / side (x)"))
    for load in args.loads.split(","):
        for label, k in compared:
            cells = []
            for key in ("p50_ms", "p99_ms", "p999_ms"):
                a = statistics.median(float(run["without"][load][key]) for run in runs)
                b = statistics.median(float(run[k][load][key]) for run in runs)
                cells.append("%.3f / %.3f (%.2fx)" % (a, b, b / a))
            print("%-24s %-24s %-24s %-24s" % ((load + ", " + label,) + tuple(cells)))
    if args.beside:
        print("\nthe busy job's rate while the service ran, over its rate alone (median, min-max "
              "over rounds)")
        for side in ["without"] + [k for _, k in compared]:
            xs = shares[side]
            print("%-24s %s" % ("busy, " + {"without": "native", "with": "hook",
                                            "ungated": "hook, ungated",
                                            "again": "native, again",
                                            "baseline": "hook, baseline"}[side],
                                "%.3f (%.3f-%.3f, %d runs)" % (statistics.median(xs), min(xs),
                                                              max(xs), len(xs))
                                if xs else "not measured"))
        print("each pod's share of the GPU's time in gmt-schd's window as the hooked service "
              "ended: " + "; ".join(", ".join("%s %.3f" % kv for kv in sorted(h.items()))
                                     for h in held))


if __name__ == "__main__":
    main()
