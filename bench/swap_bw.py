#!/usr/bin/env python3
"""mode=swap's moves against plain pinned copies (issue 12, item 7). Two
swap pods each hold SIZE bytes (test/e2e/memprogs/swap_job) on a device
declared with --gpu-capacity at 1.5 x SIZE, so only one fits: each of the
--rounds read-backs of one makes the other move out, and brings its own
back. The hook logs every move with its bytes and time (GMT_HOOK_DEBUG);
side by side in the same run, a pinned cuMemcpy of SIZE each way (PyTorch,
pinned tensor) is the baseline. Prints per size: the first move out (which
pins a host copy), the median later one (into the kept copy), the median
move in, each in GB/s and against the pinned copy; and the median time of a
read-back that had to swap against one that did not. Exits 1 when a byte
came back wrong or a run failed.

Each size runs twice, side by side: with prepared host copies off
(GMT_SWAP_PREPARE=0: a's first move out pins its copy) and on (the card is
contested once a holds SIZE, so a pins its copy ahead, and b starts only
once a reports it: docs/tiers.md, "Prepared host copies"); "prep" is how
long that took, off the path of any move. --prepare on|off runs one.

With --spill DIR every move goes to a spill file in DIR instead (the host
space declared at 1 MiB): "first out" and "out" are then both new files.
With --mode um the pods are in mode=um: a move is a prefetch of managed
memory (docs/tiers.md, "Unified memory"), and nothing is pinned, so "first
out" is no different from "out".

usage: bench/swap_bw.py [--sizes MIB,..] [--rounds N] [--fake] [--spill DIR] [--mode swap|um]
                        [--prepare both|on|off] [--out FILE]
GMT_BUILD_DIR names the build (.carry on the GPU machine); --fake is a dry
run on the fake driver (its copies run at its simulated rates)."""
import argparse
import json
import os
import re
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e"))
import gmt_e2e  # noqa: E402

JOB = gmt_e2e.build_path("test", "e2e", "memprogs", "swap_job")
MIB = 1 << 20
OUT_RE = re.compile(r"moved \d+ allocations \((\d+) bytes\) off the GPU in ([\d.]+) ms")
IN_RE = re.compile(r"brought (\d+) bytes back to device \d+ in ([\d.]+) ms")
PREP_RE = re.compile(r"prepared a host copy of (\d+) bytes for 0x[0-9a-f]+ in ([\d.]+) ms")


def pinned_copy_gbps(size):
    """Median GB/s of a pinned H2D and D2H copy of size bytes (PyTorch)."""
    import torch
    host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(size, dtype=torch.uint8, device="cuda")
    h2d, d2h = [], []
    for _ in range(5):
        torch.cuda.synchronize()
        t = time.perf_counter()
        dev.copy_(host, non_blocking=False)
        torch.cuda.synchronize()
        h2d.append(size / (time.perf_counter() - t) / 1e9)
        t = time.perf_counter()
        host.copy_(dev, non_blocking=False)
        torch.cuda.synchronize()
        d2h.append(size / (time.perf_counter() - t) / 1e9)
    del host, dev
    torch.cuda.empty_cache()
    return statistics.median(h2d), statistics.median(d2h)


def result(p, timeout=120):
    while True:
        line = p.lines.get(timeout=timeout)
        if line is None:
            raise RuntimeError("swap_job ended: " + p.stderr()[-2000:])
        if line.startswith(("OK", "BAD", "CUDAFAIL")):
            return line


def moves(err, regex):
    return [(int(b), float(ms)) for b, ms in regex.findall(err)]


def run_size(size_mib, rounds, fake, spill=None, mode="swap", prepare=False):
    size = size_mib * MIB
    node = gmt_e2e.Node("2\na 0.5 1.0 {0}Mi mode={1}\nb 0.5 1.0 {0}Mi mode={1}\n"
                        .format(size_mib + 64, mode), fake=fake)
    try:
        tiers = ["--host-tier", "1Mi", "--disk-tier", spill] if spill else []
        node.start_schd("--gpu-capacity", "0=%d" % (size * 3 // 2), *tiers)
        node.start_pmgr("a")
        node.start_pmgr("b")
        progs = []
        for pod in "ab":
            # The fake card holds both (mode=um's managed memory may not
            # pass it); the space declared for it, one.
            env = node.hook_env(pod, GMT_HOOK_DEBUG="1", GMT_FAKE_MEM="%dMi" % (size_mib * 3),
                                GMT_SWAP_PREPARE="1" if prepare else "0")
            p = node.run_prog(pod, JOB, "--mib", str(size_mib), env=env)
            p.expect("READY", timeout=300)
            progs.append(p)
            if prepare and pod == "a":  # b comes once a's copy is ready
                deadline = time.monotonic() + 120
                while (node.process("a", p.proc.pid) or {}).get("swap_kept", 0) < size:
                    if time.monotonic() > deadline:
                        raise RuntimeError("a's host copy not prepared in 120 s: "
                                           + p.stderr()[-2000:])
                    time.sleep(0.05)
        swapped, resident = [], []
        for _ in range(rounds):
            for p in progs:
                for times in (swapped, resident):  # the second finds it on the GPU
                    t = time.perf_counter()
                    p.send("check")
                    line = result(p)
                    if line != "OK %d" % size:
                        raise RuntimeError("read-back: %s; %s" % (line, p.stderr()[-2000:]))
                    times.append((time.perf_counter() - t) * 1e3)
        outs, ins, preps = [], [], []
        for p in progs:
            p.send("exit")
            rc, err = p.finish(timeout=120)
            if rc != 0:
                raise RuntimeError("swap_job exit %d: %s" % (rc, err[-2000:]))
            outs.append(moves(err, OUT_RE))
            ins.extend(moves(err, IN_RE))
            if p is progs[0]:
                preps = moves(err, PREP_RE)
        # a's first move out was when b filled: it pinned a's host copy.
        first = [o[0] for o in outs if o]
        later = [m for o in outs for m in o[1:]]
        return {"size_mib": size_mib, "prepare": prepare, "first_out": first, "later_out": later,
                "in": ins, "prepared_a": preps[:1],
                "check_swapped_ms": swapped, "check_resident_ms": resident}
    finally:
        node.stop()


def gbps(moves_):
    return statistics.median(b / (ms / 1e3) / 1e9 for b, ms in moves_) if moves_ else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="256,1024,4096")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fake", action="store_true")
    ap.add_argument("--spill", metavar="DIR",
                    help="every move goes to a spill file in DIR (--host-tier 1Mi --disk-tier DIR)")
    ap.add_argument("--mode", choices=("swap", "um"), default="swap")
    ap.add_argument("--prepare", choices=("both", "on", "off"), default="both",
                    help="prepared host copies (mode=swap): off and on side by side, or one")
    ap.add_argument("--out")
    a = ap.parse_args()
    variants = {"both": (False, True), "on": (True,), "off": (False,)}[a.prepare]
    if a.mode == "um" or a.spill:
        variants = (False,)  # nothing is pinned ahead: managed memory, or spill files
    rows, failed = [], False
    for s in (int(x) for x in a.sizes.split(",")):
        for prepare in variants:
            try:
                r = run_size(s, a.rounds, a.fake, a.spill, a.mode, prepare)
            except Exception as e:  # report the size and go on
                print("size %d MiB (prepare %s) failed: %s" % (s, prepare, e), flush=True)
                failed = True
                continue
            r["pinned_h2d_gbps"], r["pinned_d2h_gbps"] = (
                (float("nan"), float("nan")) if a.fake else pinned_copy_gbps(s * MIB))
            rows.append(r)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)
    print("%8s %5s %10s %10s %10s %10s %10s %10s %10s %10s %10s %9s %12s %12s"
          % ("MiB", "prep", "out1 GB/s", "out GB/s", "in GB/s", "pin D2H", "pin H2D", "out/pin",
             "in/pin", "out1/pin", "prep ms", "prep GB/s", "check swap", "check res"))
    for r in rows:
        out1, out, inn = gbps(r["first_out"]), gbps(r["later_out"]), gbps(r["in"])
        d2h, h2d = r["pinned_d2h_gbps"], r["pinned_h2d_gbps"]
        prep_ms = r["prepared_a"][0][1] if r["prepared_a"] else float("nan")
        print("%8d %5s %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.1f %9.2f "
              "%9.1f ms %9.1f ms"
              % (r["size_mib"], "on" if r["prepare"] else "off", out1, out, inn, d2h, h2d,
                 out / d2h, inn / h2d, out1 / d2h, prep_ms, gbps(r["prepared_a"]),
                 statistics.median(r["check_swapped_ms"]),
                 statistics.median(r["check_resident_ms"])))
    sys.exit(1 if failed or not rows else 0)


if __name__ == "__main__":
    main()
