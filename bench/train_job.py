"""The tracer benchmark's PyTorch workload: a small MLP trained on batches
copied from host memory each step (as a data loader does).

usage: train_job.py [STEPS]   (default 300)

Prints `ready pid=P`, then for each `go` line on stdin trains STEPS steps
and prints `done seconds=S`; exits 0 at the end of stdin. The bench runs its
traced and untraced blocks in this one process, on the same model and host
batches."""
import os
import sys
import time

import torch


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    dev = torch.device("cuda", 0)
    model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    batches = [(torch.randn(256, 4096), torch.randint(0, 10, (256,))) for _ in range(8)]

    def step(i):
        x, y = batches[i % len(batches)]
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x.to(dev)), y.to(dev))
        loss.backward()
        opt.step()

    for i in range(2):  # warm up: cuBLAS, the allocator
        step(i)
    torch.cuda.synchronize()
    print("ready pid=%d" % os.getpid(), flush=True)
    while True:
        line = sys.stdin.readline()
        if not line:
            return 0
        if line.strip() != "go":
            print("train_job: expected 'go' on stdin, not %r" % line, file=sys.stderr)
            return 2
        t0 = time.monotonic()
        for i in range(steps):
            step(i)
        torch.cuda.synchronize()
        print("done seconds=%.6f" % (time.monotonic() - t0), flush=True)


if __name__ == "__main__":
    sys.exit(main())
