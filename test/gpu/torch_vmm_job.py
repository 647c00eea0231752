"""For check_trace.py: PyTorch with expandable segments (its allocator maps
physical memory with cuMemCreate/cuMemMap). Prints `ready pid=P`, waits for
a line, copies a pageable 64 MiB host tensor into one device tensor 5
times, prints `done ptr=0x... bytes=N`."""
import os
import sys

os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
import torch  # noqa: E402

host = torch.ones(16 << 20, dtype=torch.float32)  # 64 MiB, pageable
torch.cuda.init()
print("ready pid=%d" % os.getpid(), flush=True)
sys.stdin.readline()
dev = torch.empty_like(host, device="cuda")
for _ in range(5):
    dev.copy_(host)
torch.cuda.synchronize()
print("done ptr=0x%x bytes=%d" % (dev.data_ptr(), host.numel() * host.element_size()), flush=True)
