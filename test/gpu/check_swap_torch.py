#!/usr/bin/env python3
"""Two PyTorch training jobs in mode=swap on a device declared smaller than
both (issue 12, item 7; run on the GPU machine). Each job trains an MLP with
fixed seeds and deterministic kernels, calling loss.item() every step (a
real loop: it waits on its own queued work), and holds BALLAST bytes of
activations-like tensors it reads every step, so that its footprint is
about FOOT. First each runs alone (swap pod, nothing to swap with), then
both at once on a device declared at 2/3 of their sum (--gpu-capacity): the
card cannot hold both, so they take turns, moved out and back by gmt. The
losses of every step must equal the runs alone, bit for bit. Prints the
makespan together against the two alone one after the other, and how many
moves each made, for each time quantum of --quanta (gmt-schd's
--min-quota-ms and --base-quota-ms: how long a pod holds the GPU before the
other may take it, and so how often they swap). Exits non-zero on a failed
check. GMT_BUILD_DIR names the build.

--mode um runs both in mode=um instead (managed memory, moved by
prefetch: docs/tiers.md, "Unified memory").

With --cache-mib N each job also frees a tensor of N MiB before its loop,
which PyTorch's caching allocator keeps: what torch.cuda.empty_cache(),
asked by gmt before a move out, gives back (GMT_TORCH_EMPTY_CACHE=0 keeps
it, and it moves with the rest).

usage: check_swap_torch.py [--steps N] [--quanta MS,..] [--mode swap|um] [--cache-mib N]
`check_swap_torch.py --job STEPS BALLAST_MIB SEED [CACHE_MIB]` is the job itself."""
import argparse
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 60
BALLAST_MIB = 3072
MIB = 1 << 20


def job(steps, ballast_mib, seed, cache_mib=0):
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    dev = torch.device("cuda", 0)
    model = torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
                                torch.nn.Linear(2048, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(seed)
    xs = [torch.randn(512, 2048, generator=g) for _ in range(4)]
    ys = [torch.randint(0, 10, (512,), generator=g) for _ in range(4)]
    # Ballast read every step: all of it must be on the GPU and intact.
    n = ballast_mib * MIB // 4 // 64
    ballast = [torch.full((n,), float(i + 1), device=dev) for i in range(64)]
    if cache_mib:  # freed at once: PyTorch's caching allocator keeps it
        tmp = torch.ones(cache_mib * MIB, dtype=torch.uint8, device=dev)
        del tmp
    print("READY pid=%d" % os.getpid(), flush=True)
    sys.stdin.readline()
    t0 = time.monotonic()
    for i in range(steps):
        x, y = xs[i % 4].to(dev), ys[i % 4].to(dev)
        opt.zero_grad(set_to_none=True)
        check = sum(float(b[i % n]) for b in ballast[i % 8::8])  # one element of 8 of them
        want = sum(float(j + 1) for j in range(i % 8, 64, 8))
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        print("STEP i=%d loss=%r ballast=%d" % (i, loss.item(), int(check == want)), flush=True)
    total = sum(float(b.sum()) for b in ballast)
    want = sum(float(j + 1) * n for j in range(64))
    print("DONE seconds=%.3f ballast_sum=%d" % (time.monotonic() - t0, int(total == want)),
          flush=True)
    sys.stdin.readline()  # alive until the check has read gmt status


def run(node, pods, seeds, steps, cache_mib=0):
    """Starts one job per pod, lets them go at once; {pod: (losses, seconds, ok)}."""
    procs = []
    for pod, seed in zip(pods, seeds):
        env = node.hook_env(pod, CUBLAS_WORKSPACE_CONFIG=":4096:8")
        p = node.run_prog(pod, sys.executable, os.path.abspath(__file__), "--job", str(steps),
                          str(BALLAST_MIB), str(seed), str(cache_mib), env=env)
        p.expect("READY", timeout=300)
        procs.append((pod, p))
    t0 = time.monotonic()
    for _, p in procs:
        p.send()
    out = {}
    for pod, p in procs:
        rows = p.records(prefixes=("STEP ",), done="DONE ", timeout=900)
        steps = [r for r in rows if "loss" in r]
        done = rows[-1]
        out[pod] = ([r["loss"] for r in steps], float(done["seconds"]),
                    all(r["ballast"] == "1" for r in steps) and done["ballast_sum"] == "1")
    wall = time.monotonic() - t0
    for pod, p in procs:  # every job is done and alive: what gmt counted
        out[pod] += (node.process(pod, p.proc.pid) or {},)
    for pod, p in procs:
        rc, err = p.finish(timeout=60)
        if rc != 0:
            raise RuntimeError("job exit %d: %s" % (rc, err[-3000:]))
        out[pod] += (err,)
    return out, wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--quanta", default="100")
    ap.add_argument("--mode", choices=("swap", "um"), default="swap")
    ap.add_argument("--cache-mib", type=int, default=0,
                    help="each job frees a tensor of this size before its loop: PyTorch keeps "
                    "it cached (what torch.cuda.empty_cache() gives back)")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
    sys.path.insert(0, HERE)
    import gmt_e2e
    import gpu_checks

    checks = gpu_checks.Checks()
    check = checks.check
    config = "2\na 0.5 1.0 8Gi mode={0}\nb 0.5 1.0 8Gi mode={0}\n".format(a.mode)

    alone, seq = {}, 0.0
    for pod, seed in (("a", 1), ("b", 2)):
        node = gmt_e2e.Node(config, fake=False)
        try:
            node.start_schd()
            node.start_pmgr(pod)
            res, wall = run(node, [pod], [seed], a.steps, a.cache_mib)
            alone[pod] = res[pod]
            seq += wall
        finally:
            node.stop()
    foot = max(alone[p][3].get("tiers", {}).get("gpu", 0) for p in "ab")
    check("footprint alone (swap bytes on the GPU)", foot, "> %d" % (BALLAST_MIB * MIB),
          foot > BALLAST_MIB * MIB)
    capacity = 2 * foot * 2 // 3 // MIB * MIB
    print("capacity declared %.2f GiB for footprints of %.2f GiB each (sum/capacity %.2f)"
          % (capacity / 2**30, foot / 2**30, 2 * foot / capacity))
    for q in (int(x) for x in a.quanta.split(",")):
        node = gmt_e2e.Node(config, fake=False)
        try:
            node.start_schd("--gpu-capacity", "0=%d" % capacity, "--min-quota-ms", str(q),
                            "--base-quota-ms", str(q))
            node.start_pmgr("a")
            node.start_pmgr("b")
            both, wall = run(node, ["a", "b"], [1, 2], a.steps, a.cache_mib)
        finally:
            node.stop()
        for pod in "ab":
            la, lb = alone[pod][0], both[pod][0]
            same = la == lb
            first = next((i for i, (x, y) in enumerate(zip(la, lb)) if x != y), None)
            check("quantum %d ms, pod %s: %d losses equal alone and together" % (q, pod, a.steps),
                  "equal" if same else "first differs at step %s" % first, "equal", same)
            check("quantum %d ms, pod %s: ballast intact every step" % (q, pod),
                  int(both[pod][2]), 1, both[pod][2])
            proc = both[pod][3]
            check("quantum %d ms, pod %s: moves out/in" % (q, pod),
                  "%s/%s" % (proc.get("swap_outs"), proc.get("swap_ins")), "> 0",
                  (proc.get("swap_outs") or 0) > 0)
        if os.environ.get("GMT_HOOK_DEBUG") == "1":  # PyTorch's cache released before moves
            for pod in "ab":
                err = both[pod][4]
                gave = sum(int(x) for x in re.findall(
                    r"PyTorch's cache gave back (\d+) bytes", err))
                print("pod %s: torch.cuda.empty_cache() ran %d times (%.2f GiB given back before "
                      "moves), not within the bound %d"
                      % (pod, err.count("torch.cuda.empty_cache() ran"), gave / 2**30,
                         err.count("PyTorch's cache not released within")))
        print("quantum %5d ms: makespan together %.1f s, alone one after the other %.1f s, "
              "ratio %.2f" % (q, wall, seq, wall / seq), flush=True)
    return checks.report("two PyTorch jobs in mode=%s on a device declared at 2/3 of their sum"
                         % a.mode)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--job":
        job(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
            int(sys.argv[5]) if len(sys.argv) > 5 else 0)
    else:
        sys.exit(main())
