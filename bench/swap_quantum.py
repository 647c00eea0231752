#!/usr/bin/env python3
"""What swapping at every turn costs two busy jobs, by time quantum and
working set (issue 12, item 7: the quantum at which swapping costs <= 10%).

Two swap pods each hold SIZE bytes (test/e2e/memprogs/swap_job) and keep
the GPU busy at once: spin kernels of --kernel-us, waiting for every 4 (a
training loop's loss.item()), for --seconds. Side by side in one run, per
quantum (gmt-schd's --min-quota-ms and --base-quota-ms):
  fit:  no --gpu-capacity, so both stay on the card; they take turns on
        the GPU by token only;
  swap: --gpu-capacity 1.5 x SIZE, so only one fits: at every turn the one
        that gets the token waits for the other to move out and for its own
        bytes to come back.
The cost of swapping is 1 - (kernels done, swap) / (kernels done, fit),
both pods together. Before the window, both spin for a warm-up (two quanta
and a second a GiB) so that the first moves, which pin host copies, are
not in it. Prints per size and quantum both counts, the cost, the turns
(moves in per job) and the median move out and in (from the hook's debug
log) and the median wait for memory at the start of a turn (the other's
move out and its own move in); then per size the smallest quantum that
cost <= 10%. With --pieces K each job holds its SIZE as K allocations:
the turn's two moves then overlap, allocation by allocation (docs/tiers.md,
"Swap mode in the scheduler"). Exits 1 when a run failed.

usage: bench/swap_quantum.py [--sizes MIB,..] [--quanta MS,..] [--seconds S]
                             [--kernel-us U] [--pieces K] [--fake]
GMT_BUILD_DIR names the build (.carry on the GPU machine); --fake is a dry
run on the fake driver, whose moves run at its simulated rates and touch
fresh memory (slow: its costs say nothing about a GPU)."""
import argparse
import os
import re
import statistics
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e"))
import gmt_e2e  # noqa: E402

JOB = gmt_e2e.build_path("test", "e2e", "memprogs", "swap_job")
MIB = 1 << 20
OUT_RE = re.compile(r"moved \d+ allocations \(\d+ bytes\) off the GPU in ([\d.]+) ms")
WAIT_RE = re.compile(r"waited (\d+) ms for memory to come back")
IN_RE = re.compile(r"brought \d+ bytes back to device \d+ in ([\d.]+) ms")


def spun(p, timeout):
    while True:
        line = p.lines.get(timeout=timeout)
        if line is None:
            raise RuntimeError("swap_job ended: " + p.stderr()[-2000:])
        if line.startswith("CUDAFAIL"):
            raise RuntimeError(line + "; " + p.stderr()[-2000:])
        if line.startswith("SPUN "):
            return int(line.split()[1])


def spin_both(progs, ms):
    """Both spin ms at once; their kernel counts."""
    for p in progs:
        p.send("spin %d" % ms)
    return [spun(p, timeout=ms / 1e3 + 300) for p in progs]


def run(size_mib, quantum, seconds, kernel_us, swap, fake, pieces=1):
    size = size_mib * MIB
    quota = "%dMi" % (size_mib + 64)
    node = gmt_e2e.Node("2\na 0.5 1.0 %s mode=swap\nb 0.5 1.0 %s mode=swap\n" % (quota, quota),
                        fake=fake)
    try:
        args = ["--min-quota-ms", str(quantum), "--base-quota-ms", str(quantum)]
        if swap:
            args += ["--gpu-capacity", "0=%d" % (size * 3 // 2)]
        node.start_schd(*args)
        node.start_pmgr("a")
        node.start_pmgr("b")
        progs = []
        for pod in "ab":
            env = node.hook_env(pod, GMT_HOOK_DEBUG="1", GMT_FAKE_MEM="%dMi" % (size_mib * 2 + 64))
            p = node.run_prog(pod, JOB, "--mib", str(size_mib), "--kernel-us", str(kernel_us),
                              "--pieces", str(pieces), env=env)
            p.expect("READY", timeout=600)
            progs.append(p)
        spin_both(progs, 2 * quantum + 1000 * (1 + size_mib // 1024))
        done = spin_both(progs, seconds * 1000)
        ins = [(node.process(pod, p.proc.pid) or {}).get("swap_ins", 0) // pieces
               for pod, p in zip("ab", progs)]
        outs_ms, ins_ms, waits = [], [], []
        for p in progs:
            p.send("exit")
            rc, err = p.finish(timeout=300)
            if rc != 0:
                raise RuntimeError("swap_job exit %d: %s" % (rc, err[-2000:]))
            outs_ms += [float(x) for x in OUT_RE.findall(err)][1:]  # the first pins
            ins_ms += [float(x) for x in IN_RE.findall(err)]
            waits += [float(x) for x in WAIT_RE.findall(err)]
        return {"kernels": sum(done), "ins": ins, "out_ms": outs_ms, "in_ms": ins_ms,
                "wait_ms": waits}
    finally:
        node.stop()


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1024,4096,12288")
    ap.add_argument("--quanta", default="250,1000,4000")
    ap.add_argument("--seconds", type=int, default=12)
    ap.add_argument("--kernel-us", type=int, default=1000)
    ap.add_argument("--pieces", type=int, default=1)
    ap.add_argument("--fake", action="store_true")
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    quanta = [int(x) for x in a.quanta.split(",")]
    rows, failed = [], False
    for q in quanta:
        try:
            fit = run(min(sizes), q, a.seconds, a.kernel_us, False, a.fake)
        except Exception as e:  # report it and go on
            print("quantum %d ms, fit: failed: %s" % (q, e), flush=True)
            failed = True
            continue
        for s in sizes:
            try:
                sw = run(s, q, a.seconds, a.kernel_us, True, a.fake, a.pieces)
            except Exception as e:
                print("quantum %d ms, %d MiB: failed: %s" % (q, s, e), flush=True)
                failed = True
                continue
            cost = 1 - sw["kernels"] / fit["kernels"] if fit["kernels"] else float("nan")
            rows.append((s, q, fit["kernels"], sw["kernels"], cost, sw["ins"], med(sw["out_ms"]),
                         med(sw["in_ms"]), med(sw["wait_ms"])))
            print("size %d MiB quantum %d ms: fit %d kernels, swap %d, cost %.1f%%, turns "
                  "%s, move out %.1f ms, in %.1f ms, turn's wait %.1f ms"
                  % (s, q, fit["kernels"], sw["kernels"], 100 * cost, sw["ins"], rows[-1][6],
                     rows[-1][7], rows[-1][8]), flush=True)
    print("\n%8s %8s %10s %10s %8s %10s %10s %10s %10s"
          % ("MiB", "quantum", "fit", "swap", "cost", "turns a/b", "out ms", "in ms", "wait ms"))
    for s, q, f, sw, cost, ins, o, i, w in rows:
        print("%8d %8d %10d %10d %7.1f%% %10s %10.1f %10.1f %10.1f"
              % (s, q, f, sw, 100 * cost, "%d/%d" % tuple(ins), o, i, w))
    for s in sizes:
        ok = [q for (s2, q, _, _, cost, _, _, _, _) in rows if s2 == s and cost <= 0.10]
        print("%d MiB: smallest quantum costing <= 10%%: %s"
              % (s, "%d ms" % min(ok) if ok else "none of " + a.quanta))
    sys.exit(1 if failed or not rows else 0)


if __name__ == "__main__":
    main()
