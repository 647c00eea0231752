#!/usr/bin/env python3
"""Oversubscription that pays (issue 26): two training jobs whose memory
together is more than the GPU, run together in mode=swap pods, against the
same two run one after the other with no gmt. Side by side in one run, on
the real GPU.

Each job trains 4 x Linear(8192) + GELU with AdamW, batch 4096, fp32,
fixed seeds and deterministic kernels, loss.item() every step (about 7 GiB
at its peak). First each runs alone with no gmt (its losses, its time, its
footprint: PyTorch's peak reserved bytes); then for each --ratios R both
run together under gmt in mode=swap pods, each with a quota of its
footprint, on a GPU declared at (both footprints) / R (--gpu-capacity), and
at least 1.1 x the larger footprint.
Prints for each R: the makespan together against one after the other
natively, each pod's moves out and in, the bytes moved, the time its moves
took and their rate, the time it waited for memory, and whether every loss
equals the native run's bit for bit. Exits non-zero on a differing loss or
a failed job.

With --debug DIR the hook's and gmt-schd's logs of each run go to DIR.

With --shares S,.. each ratio runs once per gmt-schd --swap-move-share S
(a swap pod's turn is long enough that moving its memory, at the card's
measured rate, is at most S of it; default 0.05, gmt-schd's). Each pod's row says how
many turns brought its memory back and how long its last one was planned,
and the card's measured switch rate.

--hook-env K=V,.. sets more of the hooked jobs' environment (as
GMT_TORCH_EMPTY_CACHE=0: PyTorch's cache kept across moves).

--jobs 3 runs three such jobs (seeds 1, 2, 3; REQUEST 0.33 each) and
the GPU is declared at (all three footprints) / R.

--model transformer trains a 12-layer torch.nn.TransformerEncoder (width
1024, batch 16 x 512 tokens) instead of the Linear stack. --trace FILE
appends each pod's bytes on the GPU and in host memory every 100 ms
(run, seconds, pod, gpu, host) to a CSV (bench/plot_memory.py draws it).

usage: bench/makespan.py [--steps N] [--ratios 1.2,1.5,1.75] [--alloc default|expandable] [--jobs 2|3]
                         [--shares 0.1] [--model adamw|transformer] [--trace FILE]
                         [--hook-env K=V,..] [--debug DIR]
`makespan.py --job STEPS SEED` is the job itself. GMT_BUILD_DIR names the
build (default build/); needs a GPU."""
import argparse
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e"))
GIB = 1 << 30
MIB = 1 << 20


def job(steps, seed, kind="adamw"):
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda", 0)
    g = torch.Generator().manual_seed(seed)
    if kind == "transformer":
        # 12 encoder layers of width 1024, batch 16 x 512 tokens; the
        # math attention (the fused kernels' backward is not deterministic).
        torch.backends.cuda.enable_flash_sdp(False)
        torch.backends.cuda.enable_mem_efficient_sdp(False)
        layer = torch.nn.TransformerEncoderLayer(1024, 16, 4096, dropout=0.0, batch_first=True)
        layers = [torch.nn.TransformerEncoder(layer, 12, enable_nested_tensor=False)]
        x = torch.randn(16, 512, 1024, generator=g).to(dev)
        y = torch.randn(16, 512, 1024, generator=g).to(dev)
    else:
        layers = []
        for _ in range(4):
            layers += [torch.nn.Linear(8192, 8192), torch.nn.GELU()]
        x = torch.randn(4096, 8192, generator=g).to(dev)
        y = torch.randn(4096, 8192, generator=g).to(dev)
    model = torch.nn.Sequential(*layers).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    print("READY pid=%d" % os.getpid(), flush=True)
    sys.stdin.readline()
    t0 = time.monotonic()
    for i in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        print("STEP i=%d loss=%r t=%.4f" % (i, loss.item(), time.monotonic() - t0), flush=True)
    wsum = sum(float(p.double().sum()) for p in model.parameters())
    # t0: the monotonic clock at its first step, as the hook's and the
    # daemons' stamped lines (GMT_HOOK_DEBUG=2, GMT_LOG_TIMES=1) read it.
    print("DONE seconds=%.3f peak=%d wsum=%r t0=%.4f" % (time.monotonic() - t0,
                                                         torch.cuda.max_memory_reserved(), wsum,
                                                         t0),
          flush=True)
    # Done: its memory goes back as a job's that exits would (an idle pod
    # keeps its memory for its idle-out, 30 s by default, and the other
    # job would wait for it), but it stays alive until the bench has read
    # gmt status.
    del model, layers, opt, x, y, loss
    torch.cuda.empty_cache()
    sys.stdin.readline()


def start_jobs(node, pods, seeds, steps, env_of, kind="adamw"):
    procs = []
    for pod, seed in zip(pods, seeds):
        p = node.run_prog(pod, sys.executable, os.path.abspath(__file__), "--job", str(steps),
                          str(seed), kind, env=env_of(pod))
        procs.append((pod, p))
    for _, p in procs:
        p.expect("READY", timeout=300)
    return procs


def finish_jobs(node, procs, steps, gmt):
    """Lets the jobs go at once: ({pod: result}, makespan)."""
    t0 = time.monotonic()
    for _, p in procs:
        p.send()
    out = {}
    for pod, p in procs:
        rows = p.records(prefixes=("STEP ",), done="DONE ", timeout=1200)
        done = rows[-1]
        out[pod] = {"losses": [r["loss"] for r in rows if "loss" in r],
                    "steps": [float(r["t"]) for r in rows if "t" in r],
                    "seconds": float(done["seconds"]), "peak": int(done["peak"]),
                    "wsum": done["wsum"], "end": time.monotonic(), "t0": float(done["t0"])}
    wall = max(r["end"] for r in out.values()) - t0
    st = node.status() if gmt else {}
    for pod, p in procs:
        out[pod]["proc"] = (node.process(pod, p.proc.pid) or {}) if gmt else {}
        out[pod]["dev"] = next((q["devices"][0] for q in st.get("pods", [])
                                if q["name"] == pod and q.get("devices")), {})
        out[pod]["gpu"] = next((t for t in st.get("host", {}).get("tiers", [])
                                if t["tier"] == "gpu" and t["index"] == 0), {})
        rc, err = p.finish(timeout=60)
        if rc != 0:
            raise RuntimeError("job %s exit %d: %s" % (pod, rc, err[-3000:]))
        out[pod]["err"] = err
    return out, wall


class MemoryTrace:
    """Each pod's bytes on the GPU and in host memory every 100 ms, as
    gmt status says, appended to a CSV (run, seconds, pod, gpu, host)."""

    def __init__(self, node, path, run):
        import threading
        self.node, self.path, self.run = node, path, run
        self.done = threading.Event()
        self.t0 = time.monotonic()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        import csv
        with open(self.path, "a", newline="") as f:
            out = csv.writer(f)
            while not self.done.is_set():
                st = self.node.try_status() or {}
                t = time.monotonic() - self.t0
                for pod in st.get("pods", []):
                    tiers = pod.get("tiers") or {}
                    out.writerow([self.run, "%.2f" % t, pod["name"], tiers.get("gpu", 0),
                                  tiers.get("host", 0)])
                f.flush()
                self.done.wait(0.1)

    def stop(self):
        self.done.set()
        self.thread.join(timeout=5)


def moves(err):
    """What the hook's debug lines say it moved: (bytes out, ms, bytes in,
    ms, ms waited for memory)."""
    out = [(int(b), float(ms)) for b, ms in re.findall(
        r"moved \d+ allocations \((\d+) bytes\) off the GPU in ([\d.]+) ms", err)]
    back = [(int(b), float(ms)) for b, ms in re.findall(
        r"brought (\d+) bytes back to device \d+ in ([\d.]+) ms", err)]
    waited = [float(ms) for ms in re.findall(r"waited (\d+) ms for memory to come back", err)]
    return (sum(b for b, _ in out), sum(ms for _, ms in out), sum(b for b, _ in back),
            sum(ms for _, ms in back), sum(waited))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--ratios", default="1.2,1.5,1.75")
    ap.add_argument("--alloc", choices=("default", "expandable"), default="default")
    ap.add_argument("--shares", default="0.05")
    ap.add_argument("--hook-env", default="")
    ap.add_argument("--debug", default="")
    ap.add_argument("--model", choices=("adamw", "transformer"), default="adamw")
    ap.add_argument("--trace", default="")
    ap.add_argument("--jobs", type=int, choices=(2, 3), default=2)
    a = ap.parse_args()
    import gmt_e2e

    alloc = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"} \
        if a.alloc == "expandable" else {}
    if a.debug:
        os.makedirs(a.debug, exist_ok=True)
    failed = []

    # One after the other, no gmt.
    native, seq = {}, 0.0
    pods = "abc"[:a.jobs]
    for seed, pod in enumerate(pods, 1):
        node = gmt_e2e.Node("0\n", fake=False)
        try:
            env = dict(node.prog_env(), CUBLAS_WORKSPACE_CONFIG=":4096:8", **alloc)
            procs = start_jobs(node, [pod], [seed], a.steps, lambda _: env, a.model)
            res, wall = finish_jobs(node, procs, a.steps, False)
            native[pod] = res[pod]
            seq += wall
        finally:
            node.stop()
    foot = {p: native[p]["peak"] for p in pods}
    print("native: %s; one after the other %.2f s; peak reserved %s GiB"
          % (", ".join("%s %.2f s" % (p, native[p]["seconds"]) for p in pods), seq,
             " / ".join("%.2f" % (foot[p] / GIB) for p in pods)), flush=True)

    rows, breakdown, slows = [], [], []
    runs = [(float(r), f) for r in a.ratios.split(",") for f in a.shares.split(",")]
    for ratio, share in runs:
        # Each pod's quota: its footprint and the allocator's rounding.
        quota = {p: (foot[p] * 21 // 20) // MIB * MIB for p in pods}
        # Never below one job's footprint and a tenth: a job whose own peak
        # is the whole card cannot run at all (spans are rounded up to the
        # driver's granularity, and a peak may pass what PyTorch reported).
        capacity = int(max(sum(foot.values()) / ratio,
                           1.1 * max(foot.values()))) // MIB * MIB
        config = "%d\n" % len(pods) + "".join(
            "%s %.2f 1.0 %d mode=swap\n" % (p, (100 // len(pods)) / 100, quota[p]) for p in pods)
        node = gmt_e2e.Node(config, fake=False)
        try:
            node.start_schd("--gpu-capacity", "0=%d" % capacity, "--swap-move-share", share)
            for p in pods:
                node.start_pmgr(p)

            def env_of(pod):
                e = node.hook_env(pod, CUBLAS_WORKSPACE_CONFIG=":4096:8", GMT_HOOK_DEBUG="1")
                e.update(alloc)
                e.update(kv.split("=", 1) for kv in a.hook_env.split(",") if kv)
                return e
            procs = start_jobs(node, list(pods), list(range(1, len(pods) + 1)), a.steps, env_of,
                               a.model)
            tracer = MemoryTrace(node, a.trace, "%s, %s allocator, %.1fx" % (a.model, a.alloc, ratio)) \
                if a.trace else None
            try:
                res, wall = finish_jobs(node, procs, a.steps, True)
            finally:
                if tracer:
                    tracer.stop()
        except Exception as e:  # a failed ratio is reported, the others still run
            print("ratio %.1f share %s failed: %s" % (ratio, share, str(e)[-2000:]), flush=True)
            failed.append("ratio %.1f share %s: %s" % (ratio, share, str(e)[:200]))
            continue
        finally:
            if a.debug:  # before stop(), which removes the daemons' logs
                tag = "%s_%.1f_s%s" % (a.alloc, ratio, share)
                for i, p in enumerate(node.progs):
                    with open(os.path.join(a.debug, "%s.job%d.err" % (tag, i)), "w") as f:
                        f.write(p.stderr())
                for d in node.daemons:
                    with open(os.path.join(a.debug, "%s.%s.log" % (tag, d.name)), "w") as f:
                        f.write(d.output())
            node.stop()
        for pod in pods:
            same = res[pod]["losses"] == native[pod]["losses"] and \
                res[pod]["wsum"] == native[pod]["wsum"]
            if not same:
                failed.append("ratio %.1f share %s pod %s: losses differ from native"
                              % (ratio, share, pod))
            proc = res[pod]["proc"]
            bout, msout, bin_, msin, waited = moves(res[pod]["err"])
            dev, gpu = res[pod]["dev"], res[pod]["gpu"]
            steps = res[pod]["steps"]
            dur = [b - a for a, b in zip([0.0] + steps, steps)]
            nat_steps = native[pod]["steps"]
            nat_dur = sorted(b - a for a, b in zip([0.0] + nat_steps, nat_steps))
            med = nat_dur[len(nat_dur) // 2] if nat_dur else 0
            slow = [d - med for d in dur if med and d > 2 * med]
            for i, d in enumerate(dur):
                if med and d > 2 * med:
                    slows.append("ratio %.1f share %s pod %s step %d: %.3f s (native median "
                                 "%.3f), from t=%.3f (monotonic %.3f)"
                                 % (ratio, share, pod, i, d, med, steps[i] - d,
                                    res[pod]["t0"] + steps[i] - d))
            breakdown.append((ratio, share, pod, res[pod]["seconds"], native[pod]["seconds"],
                              proc.get("token_wait_us", 0) / 1e6, proc.get("swap_wait_us", 0) / 1e6,
                              proc.get("allocs", 0), proc.get("launches", 0), len(slow),
                              sum(slow)))
            rows.append((ratio, share, capacity, pod, wall, seq, proc.get("swap_outs", 0),
                         proc.get("swap_ins", 0), bout, msout, bin_, msin, waited, same,
                         res[pod]["seconds"], dev.get("swap_turns", 0), dev.get("turn_ms", 0),
                         gpu.get("move_rate", 0), gpu.get("switches", 0)))

    print("\n%s %s jobs (%d steps, %s allocator) in mode=swap pods, together against one "
          "after the other natively (%.2f s)" % (("Two", "Three")[len(pods) - 2], a.model, a.steps,
                                                 a.alloc, seq))
    print("%-5s %-5s %-8s %-3s %8s %6s %8s %8s %6s %8s %6s %7s %6s %8s %9s" % (
        "ratio", "share", "gpu GiB", "pod", "makespan", "x seq", "outs/ins", "out GiB", "GB/s",
        "in GiB", "GB/s", "wait s", "turns", "turn ms", "card GB/s"))
    for (ratio, share, cap, pod, wall, s, outs, ins, bout, msout, bin_, msin, waited, same,
         secs, turns, turn_ms, rate, switches) in rows:
        print("%-5.1f %-5s %-8.2f %-3s %8.2f %6.2f %8s %8.2f %6.2f %8.2f %6.2f %7.2f %6d %8.0f "
              "%5.2f/%-3d%s" % (
                  ratio, share, cap / GIB, pod, wall, wall / s, "%d/%d" % (outs, ins), bout / GIB,
                  bout / msout / 1e6 if msout else 0, bin_ / GIB,
                  bin_ / msin / 1e6 if msin else 0, waited / 1e3, turns, turn_ms, rate / 1e9,
                  switches, "" if same else " LOSSES DIFFER"))
    print("target (issue 26): makespan together <= 1.1x one after the other")
    # Where each job's time went under gmt: its own work (as it took
    # natively), waiting for the token (the other's turns), waiting for
    # its memory, and the rest (its steps slower than natively: the hook's
    # allocation path, hand-overs). Steps slower than 2x their native
    # median are counted with the time they took past it.
    print("\n%-5s %-5s %-3s %7s %8s %9s %9s %7s %7s %7s %12s" % (
        "ratio", "share", "pod", "wall s", "native s", "token s", "memory s", "rest s", "allocs",
        "launches", "slow steps"))
    for ratio, share, pod, wall, nat, tok, mem, allocs, launches, slow, slow_s in breakdown:
        print("%-5.1f %-5s %-3s %7.2f %8.2f %9.2f %9.2f %7.2f %7d %7d %5d (%.2f s)" % (
            ratio, share, pod, wall, nat, tok, mem, wall - nat - tok - mem, allocs, launches,
            slow, slow_s))
    for line in slows:
        print("slow:", line)
    for f in failed:
        print("FAILED:", f)
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--job":
        job(int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:5])
    else:
        sys.exit(main())
