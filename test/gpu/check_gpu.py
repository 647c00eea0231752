#!/usr/bin/env python3
"""The GPU check (run on the GPU machine): a CUDA-runtime program and a
PyTorch job under the hook, each in its own pod; `gmt status` must show
the device memory each really holds and nonzero launch counts.

PyTorch's memory_reserved() counts only its caching allocator; libraries
(cuBLAS) also allocate device memory directly, which the hook sees too. So
the PyTorch job is checked in phases: before any matmul gmt must equal
memory_reserved() exactly; after the first matmul the difference is what
cuBLAS took for itself, and after empty_cache() gmt must equal
memory_reserved() plus that same difference. Prints a table; exits
non-zero on a mismatch. GMT_BUILD_DIR names the build; rt_job is looked
for in $GMT_BUILD_DIR/gpu."""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import gmt_e2e  # noqa: E402


def seen(node, pod, pid, want, launches=0):
    """gmt's view of pid once it shows memory_used == want and at least
    launches launches (or after 10 s): the hook reports allocations within
    about 20 ms but launch counts within about 100 ms, so a report may carry
    the memory before the launches."""
    deadline = time.monotonic() + 10
    while True:
        p = node.process(pod, pid) or {"memory_used": -1, "launches": 0}
        if (p["memory_used"] == want and p["launches"] >= launches) or time.monotonic() > deadline:
            return p
        time.sleep(0.05)


def settled(node, pod, pid):
    """gmt's view of pid once its memory_used has not moved for 1 s."""
    last, since = None, time.monotonic()
    deadline = since + 15
    while time.monotonic() < deadline:
        p = node.process(pod, pid) or {"memory_used": -1, "launches": 0}
        if last is None or p["memory_used"] != last["memory_used"]:
            last, since = p, time.monotonic()
        elif time.monotonic() - since >= 1.0:
            break
        time.sleep(0.1)
    return last


def main():
    node = gmt_e2e.Node("2\ntorch 0.5 1.0 40Gi\nrt 0.5 1.0 8Gi\n", fake=False)
    rows = []  # (what, job says, gmt shows, launches, expected gmt)
    try:
        node.start_schd()
        node.start_pmgr("torch")
        node.start_pmgr("rt")

        rt = node.run_prog("rt", os.path.join(gmt_e2e.BUILD, "gpu", "rt_job"))
        r = rt.expect("READY", timeout=60)
        p = seen(node, "rt", rt.proc.pid, int(r["bytes"]), int(r["launches"]))
        rows.append(("rt_job: 3 cudaMalloc", int(r["bytes"]), p["memory_used"], p["launches"],
                     int(r["bytes"])))
        if p["launches"] < int(r["launches"]):
            rows.append(("rt_job launches", int(r["launches"]), p["launches"], p["launches"],
                         int(r["launches"])))
        rt.send()
        rt.finish()

        tj = node.run_prog("torch", sys.executable, os.path.join(HERE, "torch_job.py"))
        r = tj.expect("ALLOC", timeout=120)
        p = seen(node, "torch", tj.proc.pid, int(r["reserved"]))
        rows.append(("torch: tensors, no matmul", int(r["reserved"]), p["memory_used"],
                     p["launches"], int(r["reserved"])))
        tj.send()
        r = tj.expect("MATMUL", timeout=60)
        # cuBLAS's own allocations: whatever gmt sees beyond PyTorch's pool.
        p = settled(node, "torch", tj.proc.pid)
        outside = p["memory_used"] - int(r["reserved"])
        rows.append(("torch: after matmuls", int(r["reserved"]), p["memory_used"], p["launches"],
                     int(r["reserved"]) + outside))
        tj.send()
        r = tj.expect("FREED", timeout=60)
        p = seen(node, "torch", tj.proc.pid, int(r["reserved"]) + outside)
        rows.append(("torch: after empty_cache", int(r["reserved"]), p["memory_used"],
                     p["launches"], int(r["reserved"]) + outside))
        tj.send()
        rc, err = tj.finish(timeout=60)
        if rc:
            print(err)
            rows.append(("torch exit code", 0, rc, 0, 0))
    finally:
        node.stop()

    ok = True
    print("%-28s %14s %14s %14s %9s %5s" % ("phase", "job says (B)", "gmt status (B)", "expected (B)",
                                             "launches", "ok"))
    for what, says, shown, launches, expected in rows:
        good = shown == expected and launches > 0
        ok &= good
        print("%-28s %14d %14d %14d %9d %5s" % (what, says, shown, expected, launches,
                                                "yes" if good else "NO"))
    print("device memory allocated outside PyTorch's caching allocator (cuBLAS): %d B" % outside)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
