#!/usr/bin/env python3
"""The tracer on the real driver (run on the GPU machine, as root): `gmt
trace -p` on the e2e test program (test/e2e/traceprogs/trace_job) with
libcuda as NVIDIA ships it must count what the program did exactly, as the
CI tests do on the fake driver: hot/cold buffers, 2D/3D copies by
direction, memory mapped with cuMemMap (a trace_job, and PyTorch with
expandable segments); and no entry point may be probed where a hit single-steps.
Prints a table; exits non-zero on a mismatch. GMT_BUILD_DIR names the
build."""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import gmt_e2e  # noqa: E402

TRACE_JOB = gmt_e2e.build_path("test", "e2e", "traceprogs", "trace_job")
HOT, COLD = 256 << 10, 64 << 10


def trace(mode, tmp, *args, argv=None):
    """Runs trace_job MODE (or argv) under `gmt trace -o`; returns (done
    fields, dump, tracer stderr)."""
    env = dict(os.environ)
    env.pop("LD_LIBRARY_PATH", None)  # the real libcuda.so.1
    job = gmt_e2e.Prog(argv or [TRACE_JOB, mode], env)
    tracer = None
    try:
        job.expect("ready", timeout=60)
        out = os.path.join(tmp, mode + ".json")
        tracer = gmt_e2e.Prog([gmt_e2e.GMT, "trace", "-p", str(job.proc.pid), "-o", out] +
                              list(args), gmt_e2e.daemon_env(env))
        gmt_e2e.wait_for(lambda: "tracing pid" in tracer.stderr() or tracer.proc.poll() is not None,
                         timeout=30, what="the tracer to attach")
        job.send("go")
        done = job.expect("done", timeout=60)
        rc, err = job.finish(timeout=60)
        if rc != 0:
            raise SystemExit("trace_job %s failed (%d): %s" % (mode, rc, err))
        trc, terr = tracer.finish(timeout=60)
        if trc != 0:
            raise SystemExit("gmt trace failed (%d): %s" % (trc, terr))
        with open(out) as f:
            return done, json.load(f), terr
    finally:
        job.stop()
        if tracer:
            tracer.stop()


def main():
    rows = []  # (check, seen, want)
    with tempfile.TemporaryDirectory(prefix="gmt-gpu-trace-") as tmp:
        done, dump, err = trace("hotcold", tmp, "--min-mmap", "1Gi")
        rows.append(("entry points that single-step", int("single-steps" in err), 0))
        dev = {a["address"]: a for a in dump["allocations"] if a["kind"] == "device"}
        for name, addrs, size, n in (("hot", done["hot"], HOT, 50), ("cold", done["cold"], COLD, 1)):
            for i, addr in enumerate(int(x, 16) for x in addrs.split(",")):
                a = dev.get(addr, {})
                seen = tuple(a.get(k, -1) for k in ("h2d_count", "d2h_count", "h2d_bytes", "d2h_bytes"))
                rows.append(("%s buffer %d H2D, D2H, bytes" % (name, i), seen, (n, n, n * size, n * size)))
        rows.append(("hotcold unmatched copies", dump["unmatched_copies"], 0))
        rows.append(("hotcold dropped events", dump["dropped_events"], 0))

        done, dump, _ = trace("pitched", tmp, "--min-mmap", "1Gi")
        a = {a["address"]: a for a in dump["allocations"]}.get(int(done["buf"], 16), {})
        seen = tuple(a.get(k, -1) for k in ("h2d_count", "h2d_bytes", "d2h_count", "d2h_bytes"))
        rows.append(("2D/3D copies H2D, bytes, D2H, bytes", seen, (6, 4 * 65536 + 2 * 16384, 4, 4 * 65536)))
        rows.append(("pitched unmatched copies", dump["unmatched_copies"], 0))

        done, dump, _ = trace("vmm", tmp, "--min-mmap", "1Gi")
        va, g = int(done["va"], 16), int(done["granule"])
        maps = {a["address"]: a for a in dump["allocations"] if a.get("origin") == "map"}
        for addr, n in ((va, 3), (va + g, 2)):
            a = maps.get(addr, {})
            seen = tuple(a.get(k, -1) for k in ("size", "h2d_count", "h2d_bytes", "active"))
            rows.append(("cuMemMap'd granule: size, H2D, bytes, active", seen, (g, n, n * g, False)))

        # PyTorch's expandable segments map physical memory the same way.
        done, dump, _ = trace("torch", tmp, "--min-mmap", "1Gi",
                              argv=[sys.executable, os.path.join(HERE, "torch_vmm_job.py")])
        ptr, size = int(done["ptr"], 16), int(done["bytes"])
        holder = [a for a in dump["allocations"] if a["address"] <= ptr < a["address"] + a["size"]]
        seen = tuple((a["origin"], a["h2d_count"] >= 5, a["h2d_bytes"] >= 5 * size) for a in holder)
        rows.append(("PyTorch tensor in mapped memory, 5 H2D", seen, (("map", True, True),)))

    bad = 0
    print("%-46s %-34s %-34s %s" % ("check", "seen", "want", "ok"))
    for what, seen, want in rows:
        ok = seen == want
        bad += not ok
        print("%-46s %-34s %-34s %s" % (what, seen, want, "ok" if ok else "MISMATCH"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
