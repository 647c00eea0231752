#!/usr/bin/env python3
"""The GPU check (run on the GPU machine): a PyTorch job and a CUDA-runtime
program under the hook, each in its own pod; `gmt status` must show the
device memory each really holds and nonzero launch counts. Prints a table
and exits non-zero on a mismatch.

GMT_BUILD_DIR names the build; rt_job is looked for in $GMT_BUILD_DIR/gpu."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import gmt_e2e  # noqa: E402


def main():
    node = gmt_e2e.Node("2\ntorch 0.5 1.0 40Gi\nrt 0.5 1.0 8Gi\n", fake=False)
    rows, ok = [], True
    try:
        node.start_schd()
        node.start_pmgr("torch")
        node.start_pmgr("rt")

        rt = node.run_prog("rt", os.path.join(gmt_e2e.BUILD, "gpu", "rt_job"))
        r = rt.expect("READY", timeout=60)
        p = node.wait_process("rt", rt.proc.pid, timeout=10, memory_used=int(r["bytes"]))
        rows.append(("rt_job (cudaMalloc x3)", int(r["bytes"]), p["memory_used"], p["launches"]))
        ok &= p["launches"] >= int(r["launches"])
        rt.send()
        rt.finish()

        tj = node.run_prog("torch", sys.executable, os.path.join(HERE, "torch_job.py"))
        r = tj.expect("READY", timeout=120)
        reserved = int(r["reserved"])
        try:
            p = node.wait_process("torch", tj.proc.pid, timeout=10, memory_used=reserved)
        except AssertionError as e:
            print(e)
            p = node.process("torch", tj.proc.pid) or {"memory_used": -1, "launches": 0}
            ok = False
        rows.append(("torch (memory_reserved)", reserved, p["memory_used"], p["launches"]))
        ok &= p["launches"] > 0
        tj.send()
        f = tj.expect("FREED", timeout=30)
        p2 = node.wait_process("torch", tj.proc.pid, timeout=10, memory_used=int(f["reserved"]))
        rows.append(("torch after empty_cache", int(f["reserved"]), p2["memory_used"], p2["launches"]))
        tj.send()
        rc, err = tj.finish(timeout=60)
        ok &= rc == 0
        if rc:
            print(err)
    finally:
        node.stop()

    print("%-26s %16s %16s %10s %6s" % ("job", "job says (B)", "gmt status (B)", "launches", "match"))
    for name, says, seen, launches in rows:
        match = says == seen
        ok &= match
        print("%-26s %16d %16d %10d %6s" % (name, says, seen, launches, "yes" if match else "NO"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
