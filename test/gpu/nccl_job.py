"""One rank of a torch.distributed NCCL job for test/gpu/check_gpus.py:
rank r on CUDA device r (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set by
the caller). Talks line by line; each step waits for a line on stdin:

  REDUCED rank= ok= ms=            all-reduces of a known tensor, exact
  BASE rank= pid= reserved=        PyTorch's pool after the all-reduces
  GREW rank= reserved= grew=       after one more tensor of --grow bytes
  OOM rank= ok= msg=               an allocation of --over bytes refused
  AGAIN rank= ok=                  one more all-reduce after the refusal
  DONE rank="""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist


def say(*parts):
    print(" ".join(str(p) for p in parts), flush=True)


def wait():
    if not sys.stdin.readline():
        sys.exit(0)


def reduce_ok(rank, world, n, rounds):
    want = float(world * (world + 1) // 2)
    ok = True
    for _ in range(rounds):
        t = torch.full((n,), float(rank + 1), device="cuda", dtype=torch.float32)
        dist.all_reduce(t)
        ok &= bool(torch.all(t == want).item())
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--elems", type=int, default=16 << 20)  # 64 MiB of fp32
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--grow", type=int, default=1 << 30)
    ap.add_argument("--over", type=int, default=64 << 30)
    args = ap.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    t0 = time.monotonic()
    ok = reduce_ok(rank, world, args.elems, args.rounds)
    torch.cuda.synchronize()
    say("REDUCED", "rank=%d" % rank, "ok=%d" % ok, "ms=%.1f" % ((time.monotonic() - t0) * 1e3))
    say("BASE", "rank=%d" % rank, "pid=%d" % os.getpid(),
        "reserved=%d" % torch.cuda.memory_reserved())
    wait()
    before = torch.cuda.memory_reserved()
    keep = torch.empty(args.grow, dtype=torch.uint8, device=dev)
    keep.fill_(rank)
    torch.cuda.synchronize()
    after = torch.cuda.memory_reserved()
    say("GREW", "rank=%d" % rank, "reserved=%d" % after, "grew=%d" % (after - before))
    wait()
    msg = "allocated"
    try:
        big = torch.empty(args.over, dtype=torch.uint8, device=dev)
        big.fill_(1)
        torch.cuda.synchronize()
        ok = 0
    except torch.cuda.OutOfMemoryError as e:
        ok = 1
        msg = str(e).splitlines()[0][:80].replace(" ", "_")
    say("OOM", "rank=%d" % rank, "ok=%d" % ok, "msg=%s" % msg)
    wait()
    ok = reduce_ok(rank, world, args.elems, 2) and bool(torch.all(keep == rank).item())
    say("AGAIN", "rank=%d" % rank, "ok=%d" % ok)
    dist.destroy_process_group()
    say("DONE", "rank=%d" % rank)


if __name__ == "__main__":
    main()
