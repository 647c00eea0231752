#!/usr/bin/env python3
"""A PyTorch job under a memory quota (run on the GPU machine): the pod
gets GPU_MEM 4 GiB; torch.cuda.mem_get_info() must show total = 4 GiB;
allocating past the quota must raise torch.cuda.OutOfMemoryError while the
job stays alive, and the job must still allocate within the quota
afterwards; gmt's ledger never holds more than the quota. Prints a table;
exits non-zero on a failed check. GMT_BUILD_DIR names the build.

`torch_quota.py --job` is the job itself (run under the hook by the
check)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
QUOTA = 4 << 30
CHUNK = 512 << 20


def job():
    import torch

    def say(*words):
        print(*words, flush=True)

    dev = torch.device("cuda", 0)
    free, total = torch.cuda.mem_get_info(dev)
    say("INFO free=%d total=%d" % (free, total))
    held, oom = [], 0
    try:
        while len(held) < 64:
            held.append(torch.empty(CHUNK, dtype=torch.uint8, device=dev))
    except torch.cuda.OutOfMemoryError:
        oom = 1
    say("FILL oom=%d tensors=%d bytes=%d reserved=%d" % (
        oom, len(held), len(held) * CHUNK, torch.cuda.memory_reserved(dev)))
    sys.stdin.readline()
    # One allocation larger than the whole quota fails too.
    big_oom = 0
    try:
        torch.empty(QUOTA + CHUNK, dtype=torch.uint8, device=dev)
    except torch.cuda.OutOfMemoryError:
        big_oom = 1
    # Alive and well: free half, allocate again within the quota, compute.
    del held[len(held) // 2:]
    torch.cuda.empty_cache()
    ok = 0
    try:
        again = torch.ones(CHUNK // 4, dtype=torch.float32, device=dev)
        ok = int(float(again.sum().item()) == float(CHUNK // 4))
    except torch.cuda.OutOfMemoryError:
        pass
    free2, total2 = torch.cuda.mem_get_info(dev)
    say("AFTER big_oom=%d ok=%d free=%d total=%d reserved=%d" % (
        big_oom, ok, free2, total2, torch.cuda.memory_reserved(dev)))
    sys.stdin.readline()


def main():
    sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
    sys.path.insert(0, HERE)
    import gmt_e2e
    import gpu_checks

    node = gmt_e2e.Node("1\nq 1.0 1.0 4Gi\n", fake=False)
    checks = gpu_checks.Checks()
    check = checks.check

    try:
        node.start_schd()
        node.start_pmgr("q")
        p = node.run_prog("q", sys.executable, os.path.abspath(__file__), "--job")
        info = p.expect("INFO", timeout=120)
        check("mem_get_info total", int(info["total"]), QUOTA, int(info["total"]) == QUOTA)
        check("mem_get_info free", int(info["free"]), "<= %d" % QUOTA, int(info["free"]) <= QUOTA)
        fill = p.expect("FILL", timeout=120)
        check("OutOfMemoryError past the quota", int(fill["oom"]), 1, fill["oom"] == "1")
        check("bytes in tensors at OOM", int(fill["bytes"]), "<= %d" % QUOTA,
              int(fill["bytes"]) <= QUOTA)
        led = node.pod("q").get("memory_reserved", -1)
        check("gmt ledger at OOM", led, "<= %d" % QUOTA, 0 <= led <= QUOTA)
        p.send()
        after = p.expect("AFTER", timeout=120)
        check("OOM for one tensor > quota", int(after["big_oom"]), 1, after["big_oom"] == "1")
        check("allocates + computes after OOM", int(after["ok"]), 1, after["ok"] == "1")
        check("job still alive", int(p.proc.poll() is None), 1, p.proc.poll() is None)
        check("mem_get_info total after", int(after["total"]), QUOTA, int(after["total"]) == QUOTA)
        p.send()
        checks.finished(p)
    finally:
        node.stop()

    return checks.report("PyTorch under a 4 GiB quota (GPU_MEM 4Gi)")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--job":
        job()
    else:
        sys.exit(main())
