#!/usr/bin/env python3
"""Idle pods make room, and wake fast (issue 26, item 2): an inference
pod whose model fills much of the GPU sits idle beside a training job that
needs the room; after its idle-out (a pod key) its memory moves to the
host, the training job runs, and at the inference pod's next request its
memory comes back. Side by side in one run, on the real GPU.

The inference job holds --gib GiB of fp16 Linear(8192) weights and serves
a request as one forward pass of batch 1 and .item(). The training job is
bench/makespan.py's AdamW job (about 7 GiB at its peak). Both run in
mode=swap pods on a GPU declared at --card-gib (default: the inference
model and 1 GiB: the training job fits only once most of the model has
moved out).

Prints: the pinned copy rate of --gib GiB (host to device, natively), a
request's latency natively with the model resident, and under gmt for
each of --wakes rounds: how long after the inference pod's last request
its memory began to move out, how much of it was off the GPU, how long
its first request after that took (the wake: the token, the training
job's memory moving out, the model coming back, the forward pass) against
the target (those bytes) / (0.8 x pinned rate) + 100 ms, and its next
requests; the training job's steps per second while the model was off
the card (before each wake: what bounding its queue for a wake costs it,
gmt-schd --wake-queue-ms), and over the whole run. Exits non-zero when a
job fails.

usage: bench/idle_wake.py [--gib 8] [--card-gib G] [--idle-out 2] [--wakes 3]
                          [--schd-flag=FLAG]... [--debug DIR]
`idle_wake.py --infer GIB` is the inference job. GMT_BUILD_DIR names the
build (default build/); needs a GPU."""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e"))
GIB = 1 << 30
MIB = 1 << 20


def infer(gib):
    """The inference job: READY once loaded; each stdin line 'req N' serves
    N requests and prints their latencies in ms; 'bw' prints the pinned
    host-to-device rate of the model's size; EOF ends it."""
    import torch
    dev = torch.device("cuda", 0)
    n = max(1, int(gib * GIB // (8192 * 8192 * 2)))
    torch.manual_seed(0)
    layers = [torch.nn.Linear(8192, 8192, bias=False, device=dev, dtype=torch.half)
              for _ in range(n)]
    model = torch.nn.Sequential(*layers).eval()
    x = torch.randn(1, 8192, dtype=torch.half, device=dev)
    torch.cuda.synchronize()
    print("READY pid=%d layers=%d bytes=%d" % (os.getpid(), n, n * 8192 * 8192 * 2), flush=True)
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["bw"]:
            host = torch.empty(n * 8192 * 8192, dtype=torch.half).pin_memory()
            buf = torch.empty_like(host, device=dev)
            buf.copy_(host, non_blocking=True)
            torch.cuda.synchronize()
            t0 = time.monotonic()
            buf.copy_(host, non_blocking=True)
            torch.cuda.synchronize()
            rate = host.numel() * 2 / (time.monotonic() - t0)
            del host, buf
            torch.cuda.empty_cache()
            print("BW rate=%.0f" % rate, flush=True)
        elif words[:1] == ["req"]:
            lat = []
            with torch.no_grad():
                for _ in range(int(words[1])):
                    t0 = time.monotonic()
                    y = model(x)
                    y.float().sum().item()
                    lat.append((time.monotonic() - t0) * 1e3)
            print("LAT ms=%s" % ",".join("%.3f" % v for v in lat), flush=True)


def gpu_of(node, pid):
    """What the inference process has on the GPU now, as gmt status says."""
    return ((node.process("inf", pid) or {}).get("tiers") or {}).get("gpu", 0)


def lat_of(p, n):
    p.send("req %d" % n)
    return [float(v) for v in p.expect("LAT", timeout=120)["ms"].split(",")]


def steps_of(pt, train_t):
    """Appends the training job's steps so far (the t= of its STEP lines,
    unread until now) to train_t."""
    while True:
        try:
            line = pt.lines.get_nowait()
        except Exception:
            return
        if line and line.startswith("STEP "):
            train_t.append(float(line.split("t=")[1]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=8)
    ap.add_argument("--card-gib", type=float, default=0)
    ap.add_argument("--idle-out", type=float, default=2)
    ap.add_argument("--wakes", type=int, default=3)
    ap.add_argument("--debug", default="")
    ap.add_argument("--schd-flag", action="append", default=[],
                    help="passed to gmt-schd (e.g. --schd-flag=--wake-queue-ms=off)")
    a = ap.parse_args()
    import gmt_e2e
    me = os.path.abspath(__file__)
    makespan = os.path.join(HERE, "makespan.py")

    # Natively: the pinned rate and a request with the model resident.
    node = gmt_e2e.Node("0\n", fake=False)
    try:
        p = node.run_prog("x", sys.executable, me, "--infer", str(a.gib), env=node.prog_env())
        model_bytes = int(p.expect("READY", timeout=300)["bytes"])
        p.send("bw")
        rate = float(p.expect("BW", timeout=120)["rate"])
        lat_of(p, 20)
        native = lat_of(p, 50)
        p.finish(timeout=60)
    finally:
        node.stop()
    print("model %.2f GiB; pinned host-to-device %.1f GB/s; a request natively p50 %.2f ms; "
          "wake target: bytes off / (0.8 x that rate) + 100 ms"
          % (model_bytes / GIB, rate / 1e9, statistics.median(native)), flush=True)

    card = int((a.card_gib or model_bytes / GIB + 1) * GIB)
    config = ("2\ninf 0.5 1.0 %d mode=swap idle-out=%g\ntrain 0.5 1.0 %d mode=swap\n"
              % (model_bytes * 21 // 20 // MIB * MIB, a.idle_out, 12 * GIB))
    node = gmt_e2e.Node(config, fake=False)
    rows, failed, train_t = [], [], []
    try:
        node.start_schd("--gpu-capacity", "0=%d" % card, *a.schd_flag)
        node.start_pmgr("inf")
        node.start_pmgr("train")
        # GMT_HOOK_DEBUG=2 in the bench's environment times the hooks' lines.
        dbg = os.environ.get("GMT_HOOK_DEBUG") or "1"
        env = node.hook_env("inf", GMT_HOOK_DEBUG=dbg)
        pi = node.run_prog("inf", sys.executable, me, "--infer", str(a.gib), env=env)
        pi.expect("READY", timeout=300)
        lat_of(pi, 20)
        last_req = time.monotonic()
        envt = node.hook_env("train", CUBLAS_WORKSPACE_CONFIG=":4096:8", GMT_HOOK_DEBUG=dbg)
        pt = node.run_prog("train", sys.executable, makespan, "--job", "100000", "1", env=envt)
        pt.expect("READY", timeout=300)
        pt.send()
        inf_pid = pi.proc.pid
        for w in range(a.wakes):
            # Wait for the model to start moving out (after its idle-out),
            # then let the training job run a while (it may move more out).
            deadline = time.monotonic() + a.idle_out + 60
            out_at = None
            while time.monotonic() < deadline:
                if gpu_of(node, inf_pid) < model_bytes:
                    out_at = time.monotonic()
                    break
                time.sleep(0.05)
            if out_at is None:
                failed.append("wake %d: the model never moved out" % w)
                break
            moved = out_at - last_req
            steps_of(pt, train_t)
            quiet0 = len(train_t)
            time.sleep(5)
            steps_of(pt, train_t)
            quiet = train_t[quiet0:]
            quiet_rate = (len(quiet) - 1) / (quiet[-1] - quiet[0]) if len(quiet) > 2 else 0
            off = model_bytes - gpu_of(node, inf_pid)
            t0 = time.monotonic()
            first = lat_of(pi, 1)[0]
            wake = time.monotonic() - t0
            after = lat_of(pi, 20)
            last_req = time.monotonic()
            rows.append((w, moved, off, wake, off / (0.8 * rate) + 0.1, first,
                         statistics.median(after), gpu_of(node, inf_pid), quiet_rate))
        steps_of(pt, train_t)
    except Exception as e:
        failed.append(str(e)[-2000:])
    finally:
        if a.debug:
            os.makedirs(a.debug, exist_ok=True)
            for i, p in enumerate(node.progs):
                with open(os.path.join(a.debug, "wake.job%d.err" % i), "w") as f:
                    f.write(p.stderr())
            for d in node.daemons:
                with open(os.path.join(a.debug, "wake.%s.log" % d.name), "w") as f:
                    f.write(d.output())
        node.stop()

    print("\nAn idle inference pod (%.2f GiB, idle-out=%g s) beside a training job on a GPU "
          "declared at %.1f GiB" % (model_bytes / GIB, a.idle_out, card / GIB))
    if a.schd_flag:
        print("gmt-schd %s" % " ".join(a.schd_flag))
    print("%-5s %11s %8s %8s %9s %9s %11s %8s %13s" % (
        "wake", "moved out s", "off GiB", "wake s", "target s", "first ms", "next p50 ms",
        "gpu GiB", "train steps/s"))
    for w, moved, off, wake, tgt, first, p50, gpu, quiet_rate in rows:
        print("%-5d %11.2f %8.2f %8.3f %9.3f %9.1f %11.2f %8.2f %13.2f%s" % (
            w, moved, off / GIB, wake, tgt, first, p50, gpu / GIB, quiet_rate,
            "" if wake <= tgt else "  MISSED"))
    print("native request p50 %.2f ms" % statistics.median(native))
    if len(train_t) > 1:
        print("training beside it: %d steps in %.1f s (%.2f steps/s)"
              % (len(train_t), train_t[-1], len(train_t) / train_t[-1]))
    for f in failed:
        print("FAILED:", f)
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--infer":
        infer(float(sys.argv[2]))
    else:
        sys.exit(main())
