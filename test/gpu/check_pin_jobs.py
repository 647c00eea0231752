#!/usr/bin/env python3
"""Pin advice on real jobs (run on the GPU machine): frameworks under the
hook with pin=adaptive, their pageable host buffers copied again and again.

- PyTorch: a training loop whose input batch lives in one pageable CPU
  tensor (64 MiB) copied to the GPU every step, loss.item() every step,
  the batch copied back and compared every 10 steps;
- CuPy and JAX, where installed: one 64 MiB NumPy array sent to the GPU
  and brought back (to a new array) 40 times, compared each time.

Each job runs in pod `off` (pin=off) and in pod `adaptive`; every byte
must come back as sent, nothing may be pinned by gmt under off, and under
adaptive PyTorch's reused input tensor must be (`gmt status`: the
process's pinned_advised reaches 64 MiB while it runs; what CuPy and JAX
got pinned is shown: they may stage through buffers of their own). Prints a table and the steps per second in both pods; exits
non-zero on a failed check. GMT_BUILD_DIR names the build.

`check_pin_jobs.py --job torch|cupy|jax` is a job itself (run under the
hook): it prints READY, runs, prints DONE rate=... ok=..., waits for a
line, exits."""
import importlib.util
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1 << 20
BUF = 64 * MIB


def job_torch():
    import torch

    torch.manual_seed(0)
    x = torch.randn(BUF // 4, dtype=torch.float32).reshape(-1, 1024)  # pageable, reused
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 1)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    print("READY", flush=True)
    ok, steps, t0 = True, 60, time.monotonic()
    for step in range(steps):
        xb = x.to("cuda")
        loss = model(xb).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        ok &= bool(torch.isfinite(torch.tensor(loss.item())))
        if step % 10 == 9:
            ok &= torch.equal(xb.cpu(), x)  # the bytes went over whole
    rate = steps / (time.monotonic() - t0)
    print("DONE rate=%.2f ok=%d" % (rate, ok), flush=True)


def job_cupy():
    import cupy as cp
    import numpy as np

    a = np.random.default_rng(0).random(BUF // 8)
    print("READY", flush=True)
    ok, steps, t0 = True, 40, time.monotonic()
    for _ in range(steps):
        b = cp.asnumpy(cp.asarray(a))
        ok &= bool(np.array_equal(a, b))
    rate = steps / (time.monotonic() - t0)
    print("DONE rate=%.2f ok=%d" % (rate, ok), flush=True)


def job_jax():
    import jax
    import numpy as np

    a = np.random.default_rng(0).random(BUF // 8, dtype=np.float32).reshape(-1)
    a = np.concatenate([a, a])  # 64 MiB of float32
    print("READY", flush=True)
    ok, steps, t0 = True, 40, time.monotonic()
    for _ in range(steps):
        d = jax.device_put(a)
        d.block_until_ready()
        ok &= bool(np.array_equal(a, np.asarray(d)))
    rate = steps / (time.monotonic() - t0)
    print("DONE rate=%.2f ok=%d" % (rate, ok), flush=True)


JOBS = {"torch": ("torch", job_torch), "cupy": ("cupy", job_cupy), "jax": ("jax", job_jax)}


def main():
    sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
    sys.path.insert(0, HERE)
    import gmt_e2e
    import gpu_checks

    node = gmt_e2e.Node("2\noff 0.5 1.0 16Gi\nadaptive 0.5 1.0 16Gi pin=adaptive\n", fake=False)
    checks = gpu_checks.Checks()
    check = checks.check
    rates = []

    def advised(pod, pid):
        p = node.process(pod, pid) or {}
        return p.get("pinned_advised", 0)

    try:
        node.start_schd("--pinned-limit", "8Gi")
        node.start_pmgr("off")
        node.start_pmgr("adaptive")
        for name, (module, _) in JOBS.items():
            if importlib.util.find_spec(module) is None:
                print("%s: not installed here, skipped" % name)
                continue
            for pod in ("off", "adaptive"):
                env = node.hook_env(pod, XLA_PYTHON_CLIENT_PREALLOCATE="false")
                p = node.run_prog(pod, sys.executable, os.path.abspath(__file__), "--job", name,
                                  env=env)
                p.expect("READY", timeout=180)
                peak, stop = [0], threading.Event()

                def poll(pid=p.proc.pid, pod=pod):
                    while not stop.wait(0.05):
                        peak[0] = max(peak[0], advised(pod, pid))

                poller = threading.Thread(target=poll, daemon=True)
                poller.start()
                try:
                    done = p.expect("DONE", timeout=300)
                finally:
                    stop.set()
                    poller.join(timeout=10)
                peak = peak[0]
                check("%s in %s: bytes came back" % (name, pod), done["ok"], 1, done["ok"] == "1")
                if pod == "off":
                    check("%s in off: gmt pinned (peak)" % name, peak, 0, peak == 0)
                elif name == "torch":  # its one input tensor is the reused buffer
                    check("torch in adaptive: gmt pinned (peak)", peak, ">= %d" % BUF, peak >= BUF)
                # CuPy and JAX may stage through buffers of their own: what
                # gmt pinned there is shown, not required.
                rates.append((name, pod, float(done["rate"]), peak))
                p.send()
                checks.finished(p)
    finally:
        node.stop()

    code = checks.report("pin advice on framework jobs (pin=off against pin=adaptive)")
    print("%-8s %-9s %10s %18s" % ("job", "pod", "steps/s", "gmt pinned peak"))
    for name, pod, rate, peak in rates:
        print("%-8s %-9s %10.2f %18d" % (name, pod, rate, peak))
    return code


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--job":
        JOBS[sys.argv[2]][1]()
        sys.stdin.readline()
    else:
        sys.exit(main())
