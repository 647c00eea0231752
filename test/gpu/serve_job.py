"""An inference service for bench/latency.py: 8 x Linear(2048) + ReLU in
fp32, no grad, .item() after each call as an answer going back to its
caller. It serves each load of --loads in turn for --seconds:

  closed:B       batch B, the next request as soon as the last is answered
  open:B:R       batch B, R requests a second arriving at random (Poisson),
                 each answered in turn; latency counts from its arrival, so
                 time spent queued behind a late answer counts too

Prints READY pid=<pid>, then per load
  L load=<load> n=<answered> rate=<answered/s> p50_ms= p99_ms= p999_ms= max_ms=
    mono0_ms= mono1_ms=      (CLOCK_MONOTONIC span of the load)
and, with --cdf FILE, appends "<load> <latency_ms>" lines for a plot.
DONE at the end."""
import argparse
import os
import random
import time

import torch


def model(batch, dev):
    layers = []
    for _ in range(8):
        layers += [torch.nn.Linear(2048, 2048), torch.nn.ReLU()]
    m = torch.nn.Sequential(*layers).to(dev).eval()
    x = torch.randn(batch, 2048, device=dev)

    def call():
        with torch.no_grad():
            return m(x).sum().item()
    return call


def pct(xs, q):
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def serve(load, seconds, dev, rng, trace=None):
    parts = load.split(":")
    call = model(int(parts[1]), dev)
    for _ in range(20):  # cuBLAS and the allocator start here, not in the measurement
        call()
    rate = float(parts[2]) if parts[0] == "open" else 0.0
    lat = []
    t0 = time.monotonic()
    arrival = t0
    while True:
        if rate > 0:
            arrival += rng.expovariate(rate)
            now = time.monotonic()
            if arrival > now:
                time.sleep(arrival - now)
        else:
            arrival = time.monotonic()
        if arrival - t0 >= seconds:
            break
        call()
        lat.append((time.monotonic() - arrival) * 1000.0)
        if trace:
            trace.write("%.6f %.4f\n" % (arrival, lat[-1]))
    t1 = time.monotonic()
    return lat, t0, t1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loads", default="closed:1,closed:64,open:1:100,open:1:1000")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--cdf", help="append each load's latencies here")
    ap.add_argument("--trace", help="append '<arrival, CLOCK_MONOTONIC s> <latency ms>' a request")
    args = ap.parse_args()
    trace = open(args.trace, "a") if args.trace else None
    dev = torch.device("cuda", 0)
    rng = random.Random(1)
    print("READY pid=%d" % os.getpid(), flush=True)
    for load in args.loads.split(","):
        lat, t0, t1 = serve(load, args.seconds, dev, rng, trace)
        xs = sorted(lat)
        print("L load=%s n=%d rate=%.1f p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f "
              "mono0_ms=%.1f mono1_ms=%.1f" % (load, len(xs), len(xs) / (t1 - t0), pct(xs, 0.5),
                                              pct(xs, 0.99), pct(xs, 0.999), xs[-1],
                                              t0 * 1000.0, t1 * 1000.0), flush=True)
        if args.cdf:
            with open(args.cdf, "a") as f:
                f.writelines("%s %.4f\n" % (load, x) for x in xs)
    print("DONE t=0", flush=True)


if __name__ == "__main__":
    main()
