#!/usr/bin/env python3
"""Many GPUs on the real driver (run on a node with 2 GPUs, the lent
nvidia-h200-x2; issue 13 item 5, docs/devices.md). Prints one table:

1. NCCL: a torch.distributed all-reduce job, one rank per GPU, both ranks
   in one pod under the hook: the all-reduces are exact; gmt status shows
   each rank on its own GPU, the pod's per-device memory equal to its
   process's there, and one more 1 GiB tensor raises exactly that GPU's
   count by 1 GiB; an allocation past the pod's quota is refused (OOM) and
   the job goes on.
2. Two pods on two GPUs (named by UUID, as containers and gmt run do) run
   a training loop (loss.item() each step) together as fast as each alone
   (each has its own token).
3. gmt run --auto-device picks the emptier GPU, both ways round.
4. nvidia-smi and pynvml under the hook read the pod's quota as total.
5. gmt topo beside nvidia-smi topo -m (printed, for the record).
6. gmt run --pod for a pod with devices=1: the job (PyTorch) sees one
   GPU, GPU 1, as its device 0.
GMT_BUILD_DIR names the build (scripts/gpu-bundle.sh's .carry)."""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import gmt_e2e  # noqa: E402
from gpu_checks import Checks  # noqa: E402

GIB = 1 << 30
QUOTA = 24 * GIB


def uuids():
    out = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    return [line.split(",")[1].strip() for line in out.strip().splitlines()]


def settled_pod(node, pod, key, timeout=15):
    """The pod's status once key's value has not moved for 1 s."""
    last, since, deadline = None, time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        p = node.pod(pod)
        v = json.dumps(p.get(key), sort_keys=True)
        if v != last:
            last, since = v, time.monotonic()
        elif time.monotonic() - since >= 1.0:
            return p
        time.sleep(0.1)
    return node.pod(pod)


def per_device(pod):
    return {d["device"]: d for d in pod.get("devices", [])}


def nccl(c):
    node = gmt_e2e.Node("1\ndist 0.5 1.0 %d\n" % QUOTA, fake=False)
    ranks = []
    try:
        node.start_schd()
        node.start_pmgr("dist")
        port = gmt_e2e.free_port()
        for r in (0, 1):
            env = node.hook_env("dist", RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r),
                                MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                                NCCL_DEBUG="WARN")
            ranks.append(node.run_prog("dist", sys.executable, os.path.join(HERE, "nccl_job.py"),
                                       "--over", str(QUOTA), env=env))
        red = [p.expect("REDUCED", timeout=240) for p in ranks]
        for r in (0, 1):
            c.check("nccl rank %d all-reduce exact" % r, red[r]["ok"], "1", red[r]["ok"] == "1")
        base = [p.expect("BASE", timeout=60) for p in ranks]
        pids = [int(b["pid"]) for b in base]
        pod = settled_pod(node, "dist", "devices")
        devs = per_device(pod)
        procs = {p["pid"]: p for p in pod.get("processes", [])}
        print("gmt status, pod dist:", json.dumps(pod, indent=1)[:3000])
        # Where NVML counts each rank's memory (its context_bytes is NVML's
        # count on every GPU less gmt's ledger).
        apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,gpu_bus_id,used_memory",
                               "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=60)
        print("nvidia-smi compute apps (ranks %s):\n%s" % (pids, apps.stdout))
        used0 = {}
        for r in (0, 1):
            pr = procs.get(pids[r], {})
            d = devs.get(r, {})
            used0[r] = d.get("memory_used", -1)
            c.check("rank %d shown on GPU %d" % (r, r), d.get("memory_used", -1),
                    pr.get("memory_used", -2), d.get("memory_used", -1) == pr.get("memory_used"))
            c.check("rank %d holds >= its pool" % r, pr.get("memory_used", -1),
                    ">= %s" % base[r]["reserved"],
                    pr.get("memory_used", -1) >= int(base[r]["reserved"]))
        for p in ranks:
            p.send()
        grew = [p.expect("GREW", timeout=60) for p in ranks]
        pod = settled_pod(node, "dist", "devices")
        devs = per_device(pod)
        for r in (0, 1):
            delta = devs.get(r, {}).get("memory_used", -1) - used0[r]
            c.check("GPU %d grew by rank %d's tensor" % (r, r), delta, grew[r]["grew"],
                    delta == int(grew[r]["grew"]) == GIB)
        c.check("pod total = sum of devices", pod.get("memory_used"),
                sum(d.get("memory_used", 0) for d in devs.values()),
                pod.get("memory_used") == sum(d.get("memory_used", 0) for d in devs.values()))
        for p in ranks:
            p.send()
        oom = [p.expect("OOM", timeout=60) for p in ranks]
        for r in (0, 1):
            c.check("rank %d refused past quota" % r, oom[r]["ok"], "1", oom[r]["ok"] == "1")
            print("rank %d: %s" % (r, oom[r]["msg"]))
        for p in ranks:
            p.send()
        again = [p.expect("AGAIN", timeout=60) for p in ranks]
        for r in (0, 1):
            c.check("rank %d all-reduce after OOM" % r, again[r]["ok"], "1", again[r]["ok"] == "1")
        for p in ranks:
            p.expect("DONE", timeout=60)
            c.finished(p, timeout=60)
    except AssertionError as e:
        c.check("nccl job", str(e)[:60], "runs", False)
        print(e, file=sys.stderr)
    finally:
        for p in ranks:
            p.stop()
        node.stop()


def matmul(node, pod, uuid, seconds):
    env = node.hook_env(pod, CUDA_VISIBLE_DEVICES=uuid)
    return node.run_prog(pod, sys.executable, os.path.join(HERE, "matmul_job.py"), "--mode",
                         "train", "--seconds", str(seconds), env=env)


def rate(prog):
    rows = prog.records(timeout=120)
    done = rows[-1]
    return float(done["work"]) / (float(done["t_ms"]) / 1000.0)


def two_pods(c, ids):
    node = gmt_e2e.Node("2\na 0.3 1.0 8Gi\nb 0.7 1.0 8Gi\n", fake=False)
    try:
        node.start_schd()
        node.start_pmgr("a")
        node.start_pmgr("b")
        alone = {}
        for pod, gpu in (("a", 0), ("b", 1)):
            p = matmul(node, pod, ids[gpu], 8)
            p.expect("READY", timeout=120)
            alone[pod] = rate(p)
            c.finished(p)
        progs = {pod: matmul(node, pod, ids[gpu], 8) for pod, gpu in (("a", 0), ("b", 1))}
        for p in progs.values():
            p.expect("READY", timeout=120)
        together = {pod: rate(p) for pod, p in progs.items()}
        for pod, p in progs.items():
            c.finished(p)
            ratio = together[pod] / alone[pod]
            c.check("pod %s together/alone (own GPU)" % pod, "%.3f" % ratio, ">= 0.90",
                    ratio >= 0.90)
    except AssertionError as e:
        c.check("two pods on two GPUs", str(e)[:60], "runs", False)
        print(e, file=sys.stderr)
    finally:
        node.stop()


HOLD = ("import sys, torch; d = int(sys.argv[1]); "
        "x = torch.empty(int(sys.argv[2]), dtype=torch.uint8, device=d); x.fill_(1); "
        "torch.cuda.synchronize(); print('HELD', flush=True); sys.stdin.readline()")


def auto_device(c, ids):
    node = gmt_e2e.Node("1\na 0.5 1.0 8Gi\n", fake=False)
    try:
        node.start_schd()
        for busy, want in ((0, 1), (1, 0)):
            # Not under the hook: another tenant of the node, seen by NVML.
            hold = gmt_e2e.Prog([sys.executable, "-c", HOLD, str(busy), str(60 * GIB)],
                                node.prog_env())
            hold.expect("HELD", timeout=120)
            r = node.gmt("run", "--auto-device", "--", sys.executable, "-c",
                         "import os; print(os.environ.get('CUDA_VISIBLE_DEVICES'))",
                         timeout=60)
            got = r.stdout.strip()
            print("gmt run with GPU %d busy: %s (stderr: %s)" % (busy, got, r.stderr.strip()))
            c.check("auto-device, GPU %d busy" % busy, got[:12], ids[want][:12],
                    r.returncode == 0 and got == ids[want])
            hold.finish(timeout=60)
    except AssertionError as e:
        c.check("gmt run --auto-device", str(e)[:60], "runs", False)
        print(e, file=sys.stderr)
    finally:
        node.stop()


CONFINED_JOB = ("import os, torch; x = torch.ones(1 << 20, device='cuda'); torch.cuda.synchronize(); "
                "print(os.environ.get('CUDA_VISIBLE_DEVICES'), torch.cuda.device_count(), "
                "torch.cuda.get_device_properties(0).uuid)")


def confine(c, ids):
    """A pod with devices=1, launched two ways: gmt run --pod, and a bare
    process under the hook with GMT_AUTO_DEVICE=pod (what the Kubernetes
    webhook gives its pods): the job sees GPU 1 alone, as its device 0.
    A pod without devices= under GMT_AUTO_DEVICE=pod sees both GPUs."""
    node = gmt_e2e.Node("2\nc 0.5 1.0 8Gi devices=1\nd 0.5 1.0 8Gi\n", fake=False)
    try:
        node.start_schd()
        node.start_pmgr("c")
        node.start_pmgr("d")
        job = [sys.executable, "-c", CONFINED_JOB]
        runs = (("gmt run --pod", lambda: node.gmt("run", "--pod", "c", "--pmgr",
                                                   node.pmgr_urls["c"][0], "--", *job,
                                                   timeout=120)),
                ("GMT_AUTO_DEVICE=pod", lambda: subprocess.run(
                    job, capture_output=True, text=True, timeout=120,
                    env=node.hook_env("c", GMT_AUTO_DEVICE="pod"))))
        for how, run in runs:
            r = run()
            print("%s, pod c (devices=1): %r (stderr: %s)" % (how, r.stdout.strip(),
                                                            r.stderr.strip()[-500:]))
            got = r.stdout.split()
            ok = r.returncode == 0 and len(got) == 3
            c.check("%s: CUDA_VISIBLE_DEVICES" % how,
                    got[0][:12] if ok else "rc=%d" % r.returncode, ids[1][:12],
                    ok and got[0] == ids[1])
            c.check("%s: torch device_count" % how, got[1] if ok else "-", "1",
                    ok and got[1] == "1")
            c.check("%s: device 0 is GPU 1" % how, got[2][:8] if ok else "-", ids[1][4:12],
                    ok and ids[1].endswith(got[2]))
        r = subprocess.run(job, capture_output=True, text=True, timeout=120,
                           env=node.hook_env("d", GMT_AUTO_DEVICE="pod"))
        print("GMT_AUTO_DEVICE=pod, pod d (no devices=): %r (stderr: %s)"
              % (r.stdout.strip(), r.stderr.strip()[-500:]))
        got = r.stdout.split()
        ok = r.returncode == 0 and len(got) == 3
        c.check("no devices=: CUDA_VISIBLE_DEVICES left unset", got[0] if ok else "-", "None",
                ok and got[0] == "None")
        c.check("no devices=: torch device_count", got[1] if ok else "-", str(len(ids)),
                ok and got[1] == str(len(ids)))
    except AssertionError as e:
        c.check("confined pods", str(e)[:60], "runs", False)
        print(e, file=sys.stderr)
    finally:
        node.stop()


def smi(c):
    """nvidia-smi under the hook in a pod of 8 GiB: does it read the pod's
    view (hook/memory/nvml.c) or the card's? pynvml the same way, as vLLM does."""
    node = gmt_e2e.Node("1\na 0.5 1.0 8Gi\n", fake=False)
    try:
        node.start_schd()
        node.start_pmgr("a")
        env = node.hook_env("a", CUDA_VISIBLE_DEVICES="0")
        r = subprocess.run(["nvidia-smi", "-i", "0", "--query-gpu=memory.total,memory.used",
                            "--format=csv,noheader,nounits"], capture_output=True, text=True,
                           timeout=60, env=env)
        print("nvidia-smi under the hook: %r %r" % (r.stdout.strip(), r.stderr.strip()[-300:]))
        total = r.stdout.strip().split(",")[0].strip() if r.returncode == 0 else "rc=%d" % r.returncode
        c.check("nvidia-smi total (MiB) in pod", total, "8192", total == "8192")
        code = ("import pynvml; pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0); "
                "print(pynvml.nvmlDeviceGetMemoryInfo(h).total)")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=60, env=env)
        got = r.stdout.strip() if r.returncode == 0 else "rc=%d" % r.returncode
        print("pynvml under the hook: %r %r" % (got, r.stderr.strip()[-300:]))
        c.check("pynvml total in pod", got, str(8 * GIB), got == str(8 * GIB))
    finally:
        node.stop()


def topo():
    node = gmt_e2e.Node("1\na 0.5 1.0 1Gi\n", fake=False)
    r = subprocess.run([gmt_e2e.GMT, "topo"], capture_output=True, text=True, timeout=60,
                       env=node.env())
    print("== gmt topo\n" + r.stdout + r.stderr)
    r = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=60)
    print("== nvidia-smi topo -m\n" + r.stdout + r.stderr)
    node.stop()


def main():
    ids = uuids()
    if len(ids) < 2:
        print("needs 2 GPUs; this node has %d" % len(ids))
        return 1
    c = Checks()
    parts = sys.argv[1:] or ["topo", "smi", "nccl", "pods", "auto", "confine"]
    if "topo" in parts:
        topo()
    if "smi" in parts:
        smi(c)
    if "nccl" in parts:
        nccl(c)
    if "pods" in parts:
        two_pods(c, ids)
    if "auto" in parts:
        auto_device(c, ids)
    if "confine" in parts:
        confine(c, ids)
    return c.report("many GPUs (%d): %s" % (len(ids), ", ".join(parts)))


if __name__ == "__main__":
    sys.exit(main())
