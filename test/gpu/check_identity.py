#!/usr/bin/env python3
"""Real jobs on a node full of open files (issue 24, run on the GPU
machine as root): nobody holds FDS descriptors, and then a PyTorch
training loop (loss.item() each step) in pod train reaches its pod
manager by the default address (GMT_PMGR unset: ipc:///run/gmt/pmgr-50052.sock)
while four PyTorch processes in pod infer (2 GiB) reach theirs over
loopback tcp:// and each fill 512 MiB tensors until OutOfMemoryError.
Every process must register (shown in gmt status, nothing said about
running unhooked or unlimited), the infer pod's ledger must stay within
2 GiB with every process stopped by the quota, and the training loop
must run. Prints a table; exits non-zero on a failed check.

`check_identity.py --job train|fill` is a job itself."""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FDS = 250000
INFER_QUOTA = 2 << 30
CHUNK = 512 << 20
FILLERS = 4
DEFAULT_PORT = 50052


def job(kind):
    import torch
    dev = torch.device("cuda", 0)
    if kind == "train":
        torch.manual_seed(0)
        model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(4)]).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        x = torch.randn(256, 2048, device=dev)
        print("READY", flush=True)
        t0, steps = time.monotonic(), 0
        while time.monotonic() - t0 < 10:
            loss = model(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss.item()
            steps += 1
        print("DONE steps=%d" % steps, flush=True)
        return
    torch.zeros(1, device=dev)  # CUDA up: the process is registered by now
    print("READY", flush=True)
    sys.stdin.readline()
    held, oom = [], 0
    try:
        while len(held) < 16:
            held.append(torch.empty(CHUNK, dtype=torch.uint8, device=dev))
    except torch.cuda.OutOfMemoryError:
        oom = 1
    print("FILL oom=%d bytes=%d" % (oom, len(held) * CHUNK), flush=True)
    sys.stdin.readline()


def main():
    sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
    sys.path.insert(0, HERE)
    import gmt_e2e
    import gpu_checks

    if os.geteuid() != 0:
        raise SystemExit("check_identity.py: needs root (the descriptors are held by nobody)")
    node = gmt_e2e.Node("2\ntrain 0.5 1.0 8Gi\ninfer 0.5 1.0 2Gi\n", fake=False)
    checks = gpu_checks.Checks()
    check = checks.check
    holder = None
    me = os.path.abspath(__file__)
    try:
        node.start_schd()
        # train's pod manager on the default port: its ipc socket is the
        # hook's default address.
        node.pmgr_urls["train"] = (None, DEFAULT_PORT)
        node.start_pmgr("train", "--ipc", "/run/gmt/pmgr-%d.sock" % DEFAULT_PORT)
        node.start_pmgr("infer")
        t0 = time.monotonic()
        holder = gmt_e2e.hold_fds(FDS)
        check("descriptors held by nobody", FDS, FDS, True)
        print("holding %d descriptors took %.1f s" % (FDS, time.monotonic() - t0), flush=True)

        train_env = node.prog_env(LD_PRELOAD=node.preload())
        train_env.pop("GMT_PMGR", None)
        train = node.run_prog("train", sys.executable, me, "--job", "train", env=train_env)
        fillers = [node.run_prog("infer", sys.executable, me, "--job", "fill")
                   for _ in range(FILLERS)]
        t0 = time.monotonic()
        train.expect("READY", timeout=180)
        for p in fillers:
            p.expect("READY", timeout=180)
        ready = time.monotonic() - t0
        shown = {}
        for pod, progs in (("train", [train]), ("infer", fillers)):
            for p in progs:
                try:
                    node.wait_process(pod, p.proc.pid, timeout=10)
                    shown[p.proc.pid] = True
                except AssertionError:
                    shown[p.proc.pid] = False
        check("processes registered", sum(shown.values()), FILLERS + 1,
              sum(shown.values()) == FILLERS + 1)
        check("all ready within (s)", round(ready, 1), "< 180", ready < 180)
        for p in fillers:
            p.send()
        fills = [p.expect("FILL", timeout=180) for p in fillers]
        ooms = sum(f["oom"] == "1" for f in fills)
        total = sum(int(f["bytes"]) for f in fills)
        check("fillers stopped by the quota", ooms, FILLERS, ooms == FILLERS)
        check("infer tensors at OOM", total, "<= %d" % INFER_QUOTA, total <= INFER_QUOTA)
        led = node.pod("infer").get("memory_reserved", -1)
        check("infer ledger", led, "<= %d" % INFER_QUOTA, 0 <= led <= INFER_QUOTA)
        done = train.expect("DONE", timeout=120)
        check("training steps in 10 s", int(done["steps"]), "> 0", int(done["steps"]) > 0)
        said = [p for p in [train] + fillers
                if any(s in p.stderr() for s in ("no pod manager", "NOT limited", "refused"))]
        check("processes unhooked or unlimited", len(said), 0, not said)
        for p in said:
            print(p.stderr()[-1000:], file=sys.stderr)
        for p in fillers:
            p.send()
        for p in [train] + fillers:
            checks.finished(p)
    finally:
        if holder:
            holder.stdin.close()
            holder.wait(timeout=30)
        node.stop()
    sys.exit(checks.report("Real jobs on a node with %d open files (train over the default "
                           "ipc socket, infer over tcp://)" % FDS))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--job":
        job(sys.argv[2])
    else:
        main()
