"""A GPU job for bench/fairness.py, in one of three modes:

  matmul: matrix products in a loop (4096x4096, --dtype fp16 by default),
          synchronising every --sync products, so that the count is of
          finished work; work = products done.
  train:  a PyTorch training loop (an MLP of --depth layers of --width on
          batches of --batch, SGD), reading loss.item() every step as a
          real loop does, so each step queues its kernels and then waits
          for them; work = steps done. The defaults take about 50-200 ms a
          step on an H100/H200 in fp32; the bench prints the step time.
  infer:  small-batch inference (--depth Linear(--width) layers on batches
          of --batch, no grad), reading .item() after each call as a
          server answering a request does: short kernels with the CPU's
          time between them, the GPU idle much of the time; work = calls.

Prints, like test/e2e/tokenprogs/spin_load,
  READY pid=<pid>
  T t_ms=<since READY> work=<done> mono_ms=<CLOCK_MONOTONIC ms> p10_ms=<P> p50_ms=<M>
                                                                        every second
  DONE t_ms=... work=... mono_ms=...
and stops after --seconds (or when stdin closes with --seconds 0). p10_ms and
p50_ms are the 10th and 50th percentiles of the GPU time of the last
second's steps, from an event after a one-cycle kernel (where a gated
launch waits for its token) to one after the step: beside other jobs they
say whether a step ran slower or faster on the GPU than alone (clocks, or
another process's work running with it). A step whose token ran out in its
middle also counts its wait, which the 10th percentile leaves out."""
import argparse
import os
import sys
import threading
import time

import torch

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def matmul_step(args, dev):
    dtype = DTYPES[args.dtype]
    a = torch.randn(args.size, args.size, device=dev, dtype=dtype)
    b = torch.randn(args.size, args.size, device=dev, dtype=dtype)

    def step():
        for _ in range(args.sync):
            c = a @ b
        torch.cuda.synchronize()
        del c
        return args.sync
    return step


def train_step(args, dev):
    dtype = DTYPES[args.dtype]
    layers = []
    for _ in range(args.depth):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(args.width, 10)).to(dev, dtype)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(args.batch, args.width, device=dev, dtype=dtype)
    y = torch.randint(0, 10, (args.batch,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x).float(), y)
        loss.backward()
        opt.step()
        loss.item()  # waits for the step's kernels, as a training loop does
        return 1
    return step


def infer_step(args, dev):
    dtype = DTYPES[args.dtype]
    layers = []
    for _ in range(args.depth):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).to(dev, dtype).eval()
    x = torch.randn(args.batch, args.width, device=dev, dtype=dtype)

    def step():
        with torch.no_grad():
            model(x).sum().item()  # the answer goes back to the caller
        return 1
    return step


STEPS = {"matmul": matmul_step, "train": train_step, "infer": infer_step}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--mode", choices=sorted(STEPS), default="matmul")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="fp16")
    ap.add_argument("--size", type=int, default=4096, help="matmul: the matrices' side")
    ap.add_argument("--sync", type=int, default=8, help="matmul: products per synchronize")
    ap.add_argument("--width", type=int, default=6144, help="train, infer: the MLP's width")
    ap.add_argument("--depth", type=int, default=4, help="train, infer: hidden layers")
    ap.add_argument("--batch", type=int, default=8192, help="train, infer: batch size")
    args = ap.parse_args()

    stop = threading.Event()
    if args.seconds <= 0:
        def watch():
            for _ in sys.stdin:
                pass
            stop.set()
        threading.Thread(target=watch, daemon=True).start()

    dev = torch.device("cuda", 0)
    step = STEPS[args.mode](args, dev)
    for _ in range(3):  # cuBLAS and the allocator initialise here, not in the measurement
        step()
    torch.cuda.synchronize()

    def mono_ms():
        return time.monotonic() * 1000.0

    print("READY pid=%d" % os.getpid(), flush=True)
    t0 = mono_ms()
    next_print = t0 + 1000
    work, times = 0, []
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def pct(q):
        xs = sorted(times)
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0.0

    while True:
        now = mono_ms()
        if now >= next_print:
            print("T t_ms=%.1f work=%d mono_ms=%.1f p10_ms=%.4f p50_ms=%.4f" % (
                now - t0, work, now, pct(0.1), pct(0.5)), flush=True)
            times = []
            next_print += 1000
        if (args.seconds > 0 and now - t0 >= args.seconds * 1000) or stop.is_set():
            break
        torch.cuda._sleep(1)  # a launch: where a gated step waits for its token
        ev0.record()
        work += step()
        ev1.record()
        ev1.synchronize()  # the step synchronized already: this costs nothing
        times.append(ev0.elapsed_time(ev1))
    now = mono_ms()
    print("DONE t_ms=%.1f work=%d mono_ms=%.1f" % (now - t0, work, now), flush=True)


if __name__ == "__main__":
    main()
