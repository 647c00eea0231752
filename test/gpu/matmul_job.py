"""A GPU job for bench/fairness.py: matrix products in a loop (4096x4096
fp16 by default), synchronising every --sync products so that the count is
of finished work. Prints, like test/e2e/tokenprogs/spin_load,
  READY pid=<pid>
  T t_ms=<since READY> work=<products done> mono_ms=<CLOCK_MONOTONIC ms>   every second
  DONE t_ms=... work=... mono_ms=...
and stops after --seconds (or when stdin closes with --seconds 0)."""
import argparse
import os
import sys
import threading
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--sync", type=int, default=8)
    args = ap.parse_args()

    stop = threading.Event()
    if args.seconds <= 0:
        def watch():
            for _ in sys.stdin:
                pass
            stop.set()
        threading.Thread(target=watch, daemon=True).start()

    dev = torch.device("cuda", 0)
    a = torch.randn(args.size, args.size, device=dev, dtype=torch.float16)
    b = torch.randn(args.size, args.size, device=dev, dtype=torch.float16)
    for _ in range(3):  # cuBLAS initialises here, not in the measurement
        c = a @ b
    torch.cuda.synchronize()

    def mono_ms():
        return time.monotonic() * 1000.0

    print("READY pid=%d" % os.getpid(), flush=True)
    t0 = mono_ms()
    next_print = t0 + 1000
    work = 0
    while True:
        now = mono_ms()
        if now >= next_print:
            print("T t_ms=%.1f work=%d mono_ms=%.1f" % (now - t0, work, now), flush=True)
            next_print += 1000
        if (args.seconds > 0 and now - t0 >= args.seconds * 1000) or stop.is_set():
            break
        for _ in range(args.sync):
            c = a @ b
        torch.cuda.synchronize()
        work += args.sync
    now = mono_ms()
    print("DONE t_ms=%.1f work=%d mono_ms=%.1f" % (now - t0, work, now), flush=True)
    del c


if __name__ == "__main__":
    main()
