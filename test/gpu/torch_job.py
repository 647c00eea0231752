"""A PyTorch job for the GPU check: tensors and matrix products, then it
prints what PyTorch's allocator holds and waits for a line on stdin."""
import sys

import torch

dev = torch.device("cuda", 0)
a = torch.randn(4096, 4096, device=dev)
b = torch.randn(4096, 4096, device=dev)
keep = [torch.empty(256 << 20, dtype=torch.uint8, device=dev)]
for _ in range(20):
    c = a @ b
torch.cuda.synchronize()
print("READY reserved=%d allocated=%d" % (torch.cuda.memory_reserved(), torch.cuda.memory_allocated()),
      flush=True)
sys.stdin.readline()
del a, b, c, keep
torch.cuda.empty_cache()
print("FREED reserved=%d" % torch.cuda.memory_reserved(), flush=True)
sys.stdin.readline()
