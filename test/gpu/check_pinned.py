#!/usr/bin/env python3
"""Pinned host memory as gmt sees it (run on the GPU machine): a PyTorch
job pins a 64 MiB tensor (pin_memory=True, cudaHostAlloc underneath) and
registers a 32 MiB pageable one (cudaHostRegister through
torch.cuda.cudart()); `gmt status --json` must show at least those bytes
pinned for the process, the pod and the node, and none once they are
freed. Prints a table; exits non-zero on a failed check. GMT_BUILD_DIR
names the build.

`check_pinned.py --job` is the job itself (run under the hook)."""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1 << 20


def job():
    import torch

    a = torch.empty(64 * MIB, dtype=torch.uint8, pin_memory=True)
    b = torch.empty(32 * MIB, dtype=torch.uint8)
    rt = torch.cuda.cudart()
    rc = rt.cudaHostRegister(b.data_ptr(), b.numel(), 0)
    print("PINNED bytes=%d register_rc=%s" % (96 * MIB, int(rc)), flush=True)
    sys.stdin.readline()
    rt.cudaHostUnregister(b.data_ptr())
    del a
    torch.cuda.empty_cache()
    # PyTorch keeps freed pinned blocks in its caching host allocator.
    torch._C._host_emptyCache()
    print("FREED", flush=True)
    sys.stdin.readline()


def main():
    sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
    sys.path.insert(0, HERE)
    import gmt_e2e
    import gpu_checks

    node = gmt_e2e.Node("1\nq 1.0 1.0 4Gi\n", fake=False)
    checks = gpu_checks.Checks()
    check = checks.check

    def pinned(pid):
        st = node.status()
        pod = st["pods"][0]
        proc = next((q for q in pod["processes"] if q["pid"] == pid), {})
        return proc.get("pinned_bytes", -1), pod.get("pinned_bytes", -1), st["host"]

    try:
        node.start_schd("--pinned-limit", "8Gi")
        node.start_pmgr("q")
        p = node.run_prog("q", sys.executable, os.path.abspath(__file__), "--job")
        line = p.expect("PINNED", timeout=120)
        check("cudaHostRegister rc", int(line["register_rc"]), 0, line["register_rc"] == "0")
        want = int(line["bytes"])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and pinned(p.proc.pid)[0] < want:
            time.sleep(0.2)
        proc_b, pod_b, host = pinned(p.proc.pid)
        check("process pinned_bytes", proc_b, ">= %d" % want, proc_b >= want)
        check("pod pinned_bytes", pod_b, "= process", pod_b == proc_b)
        check("host pinned_bytes", host["pinned_bytes"], "= pod", host["pinned_bytes"] == pod_b)
        check("host pinned_limit", host["pinned_limit"], 8 << 30, host["pinned_limit"] == 8 << 30)
        p.send()
        p.expect("FREED", timeout=60)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and pinned(p.proc.pid)[0] != 0:
            time.sleep(0.2)
        check("process pinned_bytes after frees", pinned(p.proc.pid)[0], 0,
              pinned(p.proc.pid)[0] == 0)
        p.send()
        checks.finished(p)
    finally:
        node.stop()

    return checks.report("pinned host memory of a PyTorch job")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--job":
        job()
    else:
        sys.exit(main())
