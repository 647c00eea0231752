"""A PyTorch job for the GPU check, in phases; after each it prints what
PyTorch's caching allocator holds and waits for a line on stdin:
  ALLOC    tensors allocated, nothing computed yet
  MATMUL   after matrix products (cuBLAS has initialised)
  FREED    after the tensors are gone and empty_cache()"""
import sys

import torch


def phase(name):
    torch.cuda.synchronize()
    print("%s reserved=%d allocated=%d" % (name, torch.cuda.memory_reserved(),
                                          torch.cuda.memory_allocated()), flush=True)
    sys.stdin.readline()


dev = torch.device("cuda", 0)
a = torch.randn(4096, 4096, device=dev)
b = torch.randn(4096, 4096, device=dev)
keep = [torch.empty(256 << 20, dtype=torch.uint8, device=dev)]
phase("ALLOC")
for _ in range(20):
    c = a @ b
phase("MATMUL")
del a, b, c, keep
torch.cuda.empty_cache()
phase("FREED")
