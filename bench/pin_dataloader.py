#!/usr/bin/env python3
"""A PyTorch training loop fed by a DataLoader(pin_memory=True), for the
pin-advice benchmark (bench/pin_advice.py --dataloader runs it natively
and under the hook in each pin= mode).

A synthetic image set (--batches batches of --batch samples of --shape,
fp32: 64 x 64 x 3x224x224 by default, 38.5 MB a batch) drawn from a pool
of --pool distinct samples, collated by --workers worker processes, pinned
by the DataLoader's pin thread (PyTorch's caching host allocator, that is
cudaHostAlloc, not malloc), copied with non_blocking=True, through a small
convolutional net so that the copy of each batch is a real part of a step.
loss.item() every step; every loss and, at the end, every weight must be
finite.

Prints one JSON line: steps/s and samples/s over the steps after
--warmup, the H2D bytes a step, whether the batches came pinned, the first
and last loss, finite. Exit 1 when something was not finite.

usage: bench/pin_dataloader.py [--pin-memory 0|1] [--steps N] [--warmup N]
         [--batches N] [--batch B] [--shape C,H,W] [--pool N] [--workers W]
         [--device cuda|cpu] [--seed S]
--device cpu is a dry run of the loop's plumbing without a GPU."""
import argparse
import json
import math
import os
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Images(Dataset):
    """length samples cycled from a pool of distinct ones, with labels."""

    def __init__(self, length, pool, shape, classes, seed):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn((pool,) + shape, generator=g)
        self.y = torch.randint(0, classes, (pool,), generator=g)
        self.length = length

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        j = i % len(self.x)
        return self.x[j], self.y[j]


def model(shape, classes):
    c = shape[0]
    return nn.Sequential(
        nn.Conv2d(c, 32, kernel_size=8, stride=4), nn.ReLU(),
        nn.Conv2d(32, 64, kernel_size=4, stride=2), nn.ReLU(),
        nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(64 * 16, classes))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pin-memory", type=int, choices=(0, 1), default=1)
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--batches", type=int, default=64, help="batches an epoch")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--shape", default="3,224,224")
    ap.add_argument("--pool", type=int, default=256, help="distinct samples")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--classes", type=int, default=10)
    args = ap.parse_args()
    shape = tuple(int(x) for x in args.shape.split(","))
    if args.steps <= args.warmup:
        raise SystemExit("--steps must be more than --warmup")

    torch.manual_seed(args.seed)
    dev = torch.device(args.device)
    data = Images(args.batches * args.batch, args.pool, shape, args.classes, args.seed)
    loader = DataLoader(data, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                        pin_memory=bool(args.pin_memory), drop_last=True,
                        persistent_workers=args.workers > 0,
                        generator=torch.Generator().manual_seed(args.seed))
    net = model(shape, args.classes).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    losses, finite, step = [], True, 0
    batch_pinned = None
    h2d_bytes = 0
    t0 = None
    while step < args.steps:
        for x, y in loader:
            if step == args.warmup:
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                t0 = time.monotonic()
            if batch_pinned is None:
                batch_pinned = bool(x.is_pinned()) if dev.type == "cuda" else False
                h2d_bytes = x.numel() * x.element_size() + y.numel() * y.element_size()
            x = x.to(dev, non_blocking=True)
            y = y.to(dev, non_blocking=True)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
            v = loss.item()
            losses.append(v)
            finite = finite and math.isfinite(v)
            step += 1
            if step >= args.steps:
                break
    if dev.type == "cuda":
        torch.cuda.synchronize()
    secs = time.monotonic() - t0
    finite = finite and all(bool(torch.isfinite(p).all()) for p in net.parameters())
    measured = args.steps - args.warmup
    print(json.dumps({
        "pid": os.getpid(), "torch": torch.__version__, "device": str(dev),
        "pin_memory": bool(args.pin_memory), "batch_pinned": batch_pinned,
        "steps": args.steps, "warmup": args.warmup, "batch": args.batch, "shape": shape,
        "workers": args.workers, "h2d_bytes_per_step": h2d_bytes,
        "measured_s": secs, "steps_per_s": measured / secs,
        "samples_per_s": measured * args.batch / secs,
        "h2d_gbps": measured * h2d_bytes / secs / 1e9,
        "loss_first": losses[0], "loss_last": losses[-1], "finite": finite}), flush=True)
    return 0 if finite else 1


if __name__ == "__main__":
    sys.exit(main())
