#!/usr/bin/env python3
"""Many clients on one pod manager, on a node full of open files (issue
24): does every hooked process register within its bound, does the
pod's quota hold, and does `gmt status` still answer quickly?

For each transport (tcp://, ipc://) and each flood (none, and FDS
descriptors held by nobody in processes of the hard open-file limit
each), it starts gmt-schd and one pod manager (pod a, 1 GiB), starts
CLIENTS hooked processes at once (test/e2e/memprogs/mem_paths, each to
allocate 8 MiB: 128 fit), and while they register and allocate calls
`gmt status --json` STATUS times. Printed per case: each client's time
from start to its first line (registration happens in its cuInit, before
it), how many ran unhooked (said so on stderr), how many allocations
succeeded and what the pod holds against its quota, and the status
calls' latency and failures.

usage: bench/peer_load.py [--clients N] [--fds N] [--status N]
                          [--transports tcp,ipc] [--floods 0,N]
GMT_BUILD_DIR names the build (a plain one: build-test-plain); run it on
two builds to compare them. Needs root (the flood is held by nobody)."""
import argparse
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e"))
import gmt_e2e  # noqa: E402

MEM_PATHS = gmt_e2e.build_path("test", "e2e", "memprogs", "mem_paths")
MIB = 1 << 20
STEP = 8 * MIB
QUOTA = 1 << 30

def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def one_case(transport, fds, clients, nstatus):
    node = gmt_e2e.Node("1\na 0.5 1.0 1Gi\n")
    holder = None
    try:
        node.start_schd()
        node.start_pmgr("a")
        if fds:
            holder = gmt_e2e.hold_fds(fds)
        url = node.pmgr_urls["a"][0] if transport == "tcp" else \
            "ipc://" + os.path.join(node.tmp, "run", "pmgr-a.sock")
        env = node.hook_env("a", GMT_PMGR=url)
        lat, fails = [], [0]

        def statuses():
            for _ in range(nstatus):
                t0 = time.monotonic()
                r = node.gmt("status", "--json", timeout=30)
                lat.append(time.monotonic() - t0)
                fails[0] += r.returncode != 0
                time.sleep(0.1)
        st = threading.Thread(target=statuses)
        st.start()
        t0 = time.monotonic()
        progs = [node.run_prog("a", MEM_PATHS, "alloc", str(STEP), "--step", str(STEP), env=env)
                 for _ in range(clients)]
        ready = []
        for p in progs:
            p.expect("INFO", timeout=120)
            ready.append(time.monotonic() - t0)
        for p in progs:
            p.send()
        oks = sum(p.expect("FILLED", timeout=120)["ok"] == "1" for p in progs)
        st.join()
        pod = node.pod("a")
        unhooked = sum(any(s in p.stderr() for s in ("no pod manager", "NOT limited", "refused"))
                       for p in progs)
        return {"transport": transport, "fds": fds, "clients": clients,
                "ready_p50": pct(ready, 0.5), "ready_max": max(ready), "unhooked": unhooked,
                "ok": oks, "used": pod.get("memory_used", 0), "status_p50": pct(lat, 0.5),
                "status_p99": pct(lat, 0.99), "status_max": max(lat), "status_failed": fails[0],
                "status_n": len(lat)}
    finally:
        if holder:
            holder.stdin.close()
            holder.wait(timeout=30)
        node.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=256)
    ap.add_argument("--fds", type=int, default=250000)
    ap.add_argument("--status", type=int, default=32)
    ap.add_argument("--transports", default="tcp,ipc")
    ap.add_argument("--floods", default=None, help="comma-separated fd counts (default 0,FDS)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("peer_load.py: needs root (the flood is held by nobody)")
    floods = [int(x) for x in (a.floods or "0,%d" % a.fds).split(",")]
    rows = []
    for fds in floods:
        for tr in a.transports.split(","):
            r = one_case(tr, fds, a.clients, a.status)
            rows.append(r)
            print("done: %s" % r, file=sys.stderr, flush=True)
    print("build: %s" % gmt_e2e.BUILD)
    print("| transport | fds held | clients | ready p50 / max s | unhooked | allocations ok "
          "(<= %d fit) | pod used / quota MiB | status p50 / p99 / max s | status failed |"
          % (QUOTA // STEP))
    print("|---|---:|---:|---|---:|---:|---|---|---:|")
    for r in rows:
        print("| %s | %d | %d | %.2f / %.2f | %d | %d | %d / %d | %.2f / %.2f / %.2f | %d of %d |"
              % (r["transport"], r["fds"], r["clients"], r["ready_p50"], r["ready_max"],
                 r["unhooked"], r["ok"], r["used"] // MIB, QUOTA // MIB, r["status_p50"],
                 r["status_p99"], r["status_max"], r["status_failed"], r["status_n"]))


if __name__ == "__main__":
    main()
