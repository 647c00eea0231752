"""The tracer benchmark's PyTorch workload: a small MLP trained on batches
copied from host memory each step (as a data loader does). Prints
`ready pid=P`, waits for a line on stdin, trains STEPS steps, prints
`done seconds=S`."""
import os
import sys
import time

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
dev = torch.device("cuda", 0)
model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                            torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                            torch.nn.Linear(4096, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
batches = [(torch.randn(256, 4096), torch.randint(0, 10, (256,))) for _ in range(8)]
for x, y in batches[:2]:  # warm up: cuBLAS, the allocator
    loss = torch.nn.functional.cross_entropy(model(x.to(dev)), y.to(dev))
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print("ready pid=%d" % os.getpid(), flush=True)
sys.stdin.readline()
t0 = time.monotonic()
for i in range(steps):
    x, y = batches[i % len(batches)]
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x.to(dev)), y.to(dev))
    loss.backward()
    opt.step()
torch.cuda.synchronize()
print("done seconds=%.6f" % (time.monotonic() - t0), flush=True)
