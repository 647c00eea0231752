#!/usr/bin/env python3
"""The hook built for old userlands (scripts/build-hook-compat.sh) at work
on this machine: a job on the fake driver, with that hook preloaded, is
registered with its pod, counted to the byte, refused past its quota, and
gated at its launch, and it loads the libraries beside the hook (its
$ORIGIN RPATH), not this machine's. Exits non-zero on a failed check.

usage: test/e2e/compat_hook_check.py HOOK_FOLDER
GMT_BUILD_DIR names the build of the daemons and test programs."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gmt_e2e  # noqa: E402

MIB = 1 << 20
DEV_ALLOC = os.path.join(gmt_e2e.BUILD, "test", "e2e", "memprogs", "dev_alloc")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder = os.path.abspath(sys.argv[1])
    hook = os.path.join(folder, "libgmthook.so")
    node = gmt_e2e.Node("1\na 0.5 1.0 256Mi\n")
    failed = []

    def check(what, ok, got):
        print("%-60s %s" % (what, "ok" if ok else "FAILED: %s" % got))
        if not ok:
            failed.append(what)
    try:
        node.start_schd()
        node.start_pmgr("a")
        preload = hook if not gmt_e2e.ASAN_PRELOAD else gmt_e2e.ASAN_PRELOAD + ":" + hook
        env = node.hook_env("a", LD_PRELOAD=preload)
        p = node.run_prog("a", DEV_ALLOC, "--launch", "0:%d" % (64 * MIB), "0:%d" % (512 * MIB),
                          env=env)
        rows = p.records(prefixes=("ALLOC ", "LAUNCH "), done="READY", timeout=60)
        allocs = [r for r in rows if "bytes" in r]
        check("64 MiB allocated", allocs[0]["rc"] == "0", allocs[0])
        check("512 MiB more refused past the pod's 256 MiB quota",
              allocs[1]["name"] == "CUDA_ERROR_OUT_OF_MEMORY", allocs[1])
        launched = [r for r in rows if "ms" in r]
        check("a kernel launched under the gate", launched and launched[0]["rc"] == "0", launched)
        pid = p.proc.pid
        gmt_e2e.wait_for(lambda: (node.process("a", pid) or {}).get("memory_used") == 64 * MIB,
                         timeout=10, what="its 64 MiB counted")
        proc = node.process("a", pid)
        check("counted in pod a to the byte", proc["memory_used"] == 64 * MIB, proc)
        try:  # reports come every few hundred ms
            gmt_e2e.wait_for(lambda: (node.process("a", pid) or {}).get("launches", 0) >= 1,
                             timeout=10, what="its launches reported")
            check("its launches counted", True, None)
        except AssertionError as e:
            check("its launches counted", False, e)
        with open("/proc/%d/maps" % pid) as f:
            maps = f.read()
        for lib in sorted(os.listdir(folder)):
            path = os.path.join(folder, lib)
            check("%s loaded from the hook's folder" % lib, path in maps, "not mapped")
        p.send()
        p.expect("FREED", timeout=20)
        rc, err = p.finish()
        check("the job exits 0", rc == 0, err[-2000:])
    finally:
        node.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
