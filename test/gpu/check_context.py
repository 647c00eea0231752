#!/usr/bin/env python3
"""Context memory and devices= on a real GPU (run on the GPU machine).

Pod `a`: two driver-API processes (dev_alloc, 64 MiB each), a
CUDA-runtime one (rt_job) and, where installed, a PyTorch one. Once each is idle, gmt status's context_bytes
of each must equal what NVML counts for its pid (read here through
ctypes, nvmlDeviceGetComputeRunningProcesses_v3) less what the ledger
holds for it, and the pod's must be their sum; the quota holds the
allocations alone. Pod `c` is confined to a GPU the node lacks
(devices=63): the real driver's device 0 must refuse its allocation and
its launch with CUDA_ERROR_INVALID_DEVICE at once. Pod `n`: its pod
manager runs as pid 1 of a PID namespace of its own with its own /proc
(unshare --mount-proc, as a Kubernetes pod's sidecar) and a dev_alloc in
it (nsenter): gmt status must
give its pod pid and its node pid, and its context_bytes from NVML's count
for the node pid (where unshare is not allowed, said and skipped).

Prints a table of what it saw; exits non-zero on a mismatch.
GMT_BUILD_DIR names the build; rt_job is looked for in $GMT_BUILD_DIR/gpu."""
import ctypes
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import gmt_e2e  # noqa: E402

MIB = 1 << 20
DEV_ALLOC = os.path.join(gmt_e2e.BUILD, "test", "e2e", "memprogs", "dev_alloc")
RT_JOB = os.path.join(gmt_e2e.BUILD, "gpu", "rt_job")


class ProcInfo(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


def nvml_used():
    """{pid: bytes} summed over the node's GPUs, as NVML counts them."""
    nv = ctypes.CDLL("libnvidia-ml.so.1")
    assert nv.nvmlInit_v2() == 0
    try:
        count = ctypes.c_uint()
        assert nv.nvmlDeviceGetCount_v2(ctypes.byref(count)) == 0
        out = {}
        for i in range(count.value):
            h = ctypes.c_void_p()
            assert nv.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h)) == 0
            n = ctypes.c_uint(256)
            infos = (ProcInfo * 256)()
            rc = nv.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), infos)
            assert rc == 0, rc
            for p in infos[:n.value]:
                if p.usedGpuMemory != 0xFFFFFFFFFFFFFFFF:
                    out[p.pid] = out.get(p.pid, 0) + p.usedGpuMemory
        return out
    finally:
        nv.nvmlShutdown()


def dev_alloc(node, pod, *args):
    p = node.run_prog(pod, DEV_ALLOC, *args)
    lines = {}
    while True:
        line = p.lines.get(timeout=60)
        if line is None:
            raise AssertionError("dev_alloc ended early: " + p.stderr())
        head, *rest = line.split()
        fields = dict(kv.split("=", 1) for kv in rest)
        if head == "READY":
            return p, int(fields["pid"]), lines
        if head == "FAIL":
            raise AssertionError("dev_alloc: %s; %s" % (line, p.stderr()))
        lines.setdefault(head, {})[int(fields["dev"])] = fields


def pid_namespace(node, bad, rows):
    """Pod n's pod manager in a PID namespace of its own; one dev_alloc in it."""
    if not (shutil.which("unshare") and shutil.which("nsenter")):
        print("PID namespace: no unshare/nsenter here; skipped")
        return
    # Its own /proc too, as a container has: the real driver's cuInit fails
    # (304) in a PID namespace that sees the node's /proc.
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        print("PID namespace: unshare not allowed here (%s); skipped" % r.stderr.strip())
        return
    sock = os.path.join(node.tmp, "run", "pmgr-n.sock")
    d = gmt_e2e.Daemon("pmgr-n", ["unshare", "--pid", "--fork", "--mount-proc",
                                  "--kill-child=SIGTERM",
                                  gmt_e2e.PMGR, "--port", str(gmt_e2e.free_port()), "--name", "n",
                                  "--schd", "ipc://" + node.schd_ipc, "--ipc", sock, "-v"],
                       node.env(), node.tmp)
    node.daemons.append(d)
    node.pmgr_urls["n"] = ("ipc://" + sock, 0)
    gmt_e2e.wait_for(lambda: not d.alive() or node.pod("n").get("connected"),
                     what="pod n to connect")
    pmgr = int(open("/proc/%d/task/%d/children" % (d.proc.pid, d.proc.pid)).read().split()[0])
    p = gmt_e2e.Prog(["nsenter", "--target", str(pmgr), "--pid", "--mount", "--", DEV_ALLOC,
                      "--launch",
                      "0:%d" % (64 * MIB)], node.hook_env("n"))
    node.progs.append(p)
    ready = p.expect("READY", timeout=60)
    pod_pid = int(ready["pid"])
    node_pid = int(open("/proc/%d/task/%d/children" % (p.proc.pid, p.proc.pid)).read().split()[0])
    time.sleep(2.0)
    x = (node.pod("n").get("processes") or [{}])[0]
    used = nvml_used()
    want = max(0, used.get(node_pid, 0) - x.get("memory_reserved", 0))
    rows.append(("pod n in a PID namespace: pid %s, node %s" % (x.get("pid"), x.get("node_pid")),
                 node_pid, used.get(node_pid), x.get("memory_reserved"), x.get("context_bytes"),
                 want))
    if (x.get("pid"), x.get("node_pid")) != (pod_pid, node_pid):
        bad.append("PID namespace: pid/node_pid %s/%s, want %d/%d"
                   % (x.get("pid"), x.get("node_pid"), pod_pid, node_pid))
    if node_pid not in used or x.get("context_bytes") != want or not want:
        bad.append("PID namespace: context_bytes %s, NVML less the ledger %s (NVML pids %s)"
                   % (x.get("context_bytes"), want, sorted(used)))
    p.stop()


def main():
    node = gmt_e2e.Node("3\na 0.5 1.0 8Gi\nc 0.5 1.0 1Gi devices=63\nn 0.5 1.0 8Gi\n",
                        fake=False)
    bad = []
    rows = []
    try:
        node.start_schd()
        node.start_pmgr("a")
        node.start_pmgr("c")
        procs = []
        for _ in range(2):
            p, pid, lines = dev_alloc(node, "a", "--launch", "0:%d" % (64 * MIB))
            procs.append((p, pid, "dev_alloc 64 MiB"))
        rt = node.run_prog("a", RT_JOB)
        r = rt.expect("READY", timeout=60)
        procs.append((rt, rt.proc.pid, "rt_job %d MiB" % (int(r["bytes"]) // MIB)))
        # PyTorch, where installed: one small tensor and a matmul (cuBLAS).
        torch_prog = ("import os, sys, torch\n"
                      "x = torch.ones(1024, 1024, device='cuda'); y = x @ x\n"
                      "torch.cuda.synchronize()\n"
                      "print('READY pid=%d' % os.getpid(), flush=True)\n"
                      "sys.stdin.readline()\n")
        tj = node.run_prog("a", sys.executable, "-c", torch_prog)
        try:
            tj.expect("READY", timeout=120)
            procs.append((tj, tj.proc.pid, "PyTorch 1024x1024 matmul"))
        except AssertionError as e:
            print("no PyTorch job:", str(e)[:300])
        # Idle: the slack goes back after 100 ms; then the ledger holds the
        # allocations exactly and the readings agree.
        time.sleep(2.0)
        st = node.pod("a")
        by_pid = {x["pid"]: x for x in st["processes"]}
        used = nvml_used()
        total = 0
        for _, pid, what in procs:
            x = by_pid.get(pid, {})
            want = max(0, used.get(pid, 0) - x.get("memory_reserved", 0)) if pid in used else 0
            got = x.get("context_bytes")
            total += got or 0
            rows.append((what, pid, used.get(pid), x.get("memory_reserved"), got, want))
            if got != want:
                bad.append("pid %d: context_bytes %s, NVML less the ledger %s" % (pid, got, want))
        if st["context_bytes"] != total:
            bad.append("pod context_bytes %s != sum %d" % (st["context_bytes"], total))
        if not any(pid in used for _, pid, _ in procs):
            bad.append("NVML lists none of the pids %s (a PID namespace?): %s"
                       % ([pid for _, pid, _ in procs], sorted(used)))
        # Confined to a GPU the node lacks: device 0 is refused.
        t0 = time.monotonic()
        pc, _, lines = dev_alloc(node, "c", "--launch", "0:%d" % MIB)
        took = time.monotonic() - t0
        rc_alloc, rc_launch = int(lines["ALLOC"][0]["rc"]), int(lines["LAUNCH"][0]["rc"])
        rows.append(("pod c devices=63: alloc, launch on GPU 0 (rc)", 0, None, None,
                     "%d, %d in %.1f s" % (rc_alloc, rc_launch, took), "101, 101"))
        if (rc_alloc, rc_launch) != (101, 101):
            bad.append("confined pod: alloc rc %d, launch rc %d; stderr %s"
                       % (rc_alloc, rc_launch, pc.stderr()))
        pid_namespace(node, bad, rows)
        r = node.gmt("status")
        print(r.stdout)
        for p, _, _ in procs:
            p.stop()
        pc.stop()
    finally:
        node.stop()
    print("%-46s %8s %14s %14s %14s %14s" % ("what", "pid", "NVML used", "ledger", "context",
                                              "want"))
    for row in rows:
        print("%-46s %8s %14s %14s %14s %14s" % tuple("-" if v is None else v for v in row))
    for b in bad:
        print("MISMATCH:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
