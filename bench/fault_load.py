#!/usr/bin/env python3
"""Many processes of one pod allocating through daemon faults (issue 24:
"64 clients through daemon kills and stops got 345 out-of-memory errors
while the pod never showed more than 577 of its 2,048 MiB").

For each case it starts gmt-schd and one pod manager (pod a, CLIENTS x 32
MiB), starts CLIENTS hooked processes over ipc:// (bench/mem_churn: each
allocates and frees random amounts, never more than 32 MiB at once, so the
pod never needs more than its quota and every out-of-memory is false), and
for SECONDS injects the case's faults in turn, one every EVERY seconds:
  schd-kill   gmt-schd killed (SIGKILL), started again 1 s later
  pmgr-stop   the pod manager stopped (SIGSTOP) for 2 s
  pmgr-kill   the pod manager killed, started again 1 s later
Printed per case: the allocations that succeeded and failed, the most the
pod used and held in the ledger (gmt status every 100 ms), and what the
ledger still held 1.5 s after every process had freed everything (0 when
nothing leaked).

usage: bench/fault_load.py [--clients N] [--seconds S] [--every S]
                           [--cases 'none;schd-kill;pmgr-stop,pmgr-kill']
GMT_BUILD_DIR names the build (a plain one: build-test-plain); run it on
two builds to compare them (bench/mem_churn comes from the build)."""
import argparse
import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e"))
import gmt_e2e  # noqa: E402

CHURN = gmt_e2e.build_path("bench", "mem_churn")
MIB = 1 << 20
PER = 32 * MIB


def one_case(faults, clients, seconds, every):
    node = gmt_e2e.Node("1\na 0.5 1.0 %dMi\n" % (clients * PER // MIB))
    samples = []
    try:
        daemons = {"schd": node.start_schd(), "pmgr": node.start_pmgr("a")}
        env = node.hook_env("a", GMT_PMGR="ipc://" + os.path.join(node.tmp, "run", "pmgr-a.sock"))
        progs = [node.run_prog("a", CHURN, str(seconds), str(PER), str(i + 1), env=env)
                 for i in range(clients)]
        for p in progs:
            p.expect("READY", timeout=60)
        stop = [False]

        def poll():
            while not stop[0]:
                pod = node.pod("a")
                if pod:
                    samples.append((pod.get("memory_used", 0), pod.get("memory_reserved", 0)))
                time.sleep(0.1)
        th = threading.Thread(target=poll)
        th.start()
        t0 = time.monotonic()
        for p in progs:
            p.send()
        i = 0
        while faults and time.monotonic() - t0 < seconds - 3:
            time.sleep(every)
            kind = faults[i % len(faults)]
            i += 1
            if kind == "pmgr-stop":
                d = daemons["pmgr"]
                d.proc.send_signal(signal.SIGSTOP)
                time.sleep(2.0)
                d.proc.send_signal(signal.SIGCONT)
                continue
            who = "schd" if kind == "schd-kill" else "pmgr"
            d = daemons[who]
            node.daemons.remove(d)
            d.proc.kill()
            d.proc.wait()
            time.sleep(1.0)
            daemons[who] = node.start_schd() if who == "schd" else node.start_pmgr("a")
        done = [p.expect("DONE", timeout=120) for p in progs]
        time.sleep(1.5)
        stop[0] = True
        th.join()
        idle = node.pod("a")
        for p in progs:
            p.send()
        return {"faults": ",".join(faults) or "none", "ok": sum(int(d["ok"]) for d in done),
                "oom": sum(int(d["oom"]) for d in done),
                "used_max": max((s[0] for s in samples), default=0),
                "held_max": max((s[1] for s in samples), default=0),
                "held_idle": idle.get("memory_reserved", 0), "used_idle": idle.get("memory_used", 0)}
    finally:
        node.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--every", type=float, default=1.5)
    ap.add_argument("--cases", default="none;schd-kill;pmgr-stop;pmgr-kill;"
                    "schd-kill,pmgr-stop,pmgr-kill")
    a = ap.parse_args()
    rows = []
    for case in a.cases.split(";"):
        faults = [f for f in case.split(",") if f and f != "none"]
        for f in faults:
            if f not in ("schd-kill", "pmgr-stop", "pmgr-kill"):
                raise SystemExit("fault_load.py: unknown fault %r" % f)
        r = one_case(faults, a.clients, a.seconds, a.every)
        rows.append(r)
        print("done: %s" % r, file=sys.stderr, flush=True)
    print("build: %s" % gmt_e2e.BUILD)
    print("| faults | allocations ok | out of memory | pod used max MiB | ledger max / quota MiB "
          "| ledger when idle MiB |")
    print("|---|---:|---:|---:|---|---:|")
    for r in rows:
        print("| %s | %d | %d | %d | %d / %d | %d%s |"
              % (r["faults"], r["ok"], r["oom"], r["used_max"] // MIB, r["held_max"] // MIB,
                 a.clients * PER // MIB, r["held_idle"] // MIB,
                 "" if not r["used_idle"] else " (reports stuck: used %d)" % (r["used_idle"] // MIB)))


if __name__ == "__main__":
    main()
