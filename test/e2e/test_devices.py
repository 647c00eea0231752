"""Many GPUs per pod (docs/devices.md): a pod confined by devices= is
refused on the node's other GPUs (allocations and launches fail at once,
with the scheduler's words), its view per GPU in `gmt status` is the
ledger's to the byte, tokens on two GPUs stay apart under confinement,
and each process's context memory (NVML's count less gmt's charge) is
shown, never charged, also for a pod manager in a PID namespace of its
own. The fake machine has two GPUs here; gmt-schd reads the fake NVML
over the same ledger as the programs."""
import os
import shutil
import time
import unittest

import gmt_e2e
from gmt_e2e import BUILD, PMGR, Daemon, GmtTestCase, build_path, free_port, wait_for

DEV_ALLOC = os.path.join(BUILD, "test", "e2e", "memprogs", "dev_alloc")
SPIN = build_path("test", "e2e", "tokenprogs", "spin_load")
MIB = 1 << 20
INVALID_DEVICE = 101  # CUDA_ERROR_INVALID_DEVICE


class Devices(GmtTestCase):
    CONFIG = "2\na 0.5 1.0 1Gi devices=1\nb 0.5 1.0 1Gi\n"

    def setUp(self):
        super().setUp()
        self.node.base_env["GMT_FAKE_DEVICES"] = "2"
        self.node.base_env.pop("CUDA_VISIBLE_DEVICES", None)

    def logs(self):
        return "".join("\n%s: %s" % (d.name, d.output()[-1500:]) for d in self.daemons)

    def dev_alloc(self, pod, *args, **env):
        p = self.run_prog(pod, DEV_ALLOC, *args, env=self.hook_env(pod, **env))
        lines = {}
        while True:
            line = p.lines.get(timeout=30)
            if line is None:
                raise AssertionError("dev_alloc ended early: %s%s" % (p.stderr(), self.logs()))
            head, *rest = line.split()
            fields = dict(kv.split("=", 1) for kv in rest)
            if head == "FAIL":
                raise AssertionError("dev_alloc: %s; stderr: %s" % (line, p.stderr()))
            if head == "READY":
                return p, int(fields["pid"]), lines
            lines.setdefault(head, {})[int(fields["dev"])] = fields

    def wait_reserved(self, pod, pid, want):
        return self.wait_process(pod, pid, timeout=10, memory_reserved=want)


class Confinement(Devices):
    def test_a_pod_on_gpu_1_is_refused_gpu_0_and_runs_on_gpu_1(self):
        self.start_schd()
        self.start_pmgr("a")
        t0 = time.monotonic()
        p, pid, lines = self.dev_alloc("a", "--launch", "0:%d" % (64 * MIB), "1:%d" % (64 * MIB))
        took = time.monotonic() - t0
        refused, ok = lines["ALLOC"][0], lines["ALLOC"][1]
        self.assertEqual(int(refused["rc"]), INVALID_DEVICE, refused)
        self.assertEqual(refused["name"], "CUDA_ERROR_INVALID_DEVICE")
        self.assertEqual(int(ok["rc"]), 0, (ok, p.stderr()))
        self.assertEqual(int(lines["LAUNCH"][0]["rc"]), INVALID_DEVICE, lines["LAUNCH"])
        self.assertEqual(int(lines["LAUNCH"][1]["rc"]), 0, (lines["LAUNCH"], p.stderr()))
        # Refused at once: no wait for a token that never comes.
        self.assertLess(float(lines["LAUNCH"][0]["ms"]), 2000, lines["LAUNCH"])
        self.assertLess(took, 20)
        # The process is told why, in the scheduler's words, once each.
        want = ("pod 'a' may use GPU 1 only (devices= in %s); memory on GPU 0 refused"
                % self.config_path)
        self.assertIn(want, p.stderr())
        self.assertIn("pod 'a' may use GPU 1 only (devices= in %s); a token on GPU 0 refused"
                      % self.config_path, p.stderr())
        self.assertEqual(p.stderr().count("allocations on device 0 fail"), 1, p.stderr())
        self.assertIn("pod 'a' pid %d: memory on GPU 0 refused: its devices= is 1" % pid,
                      self.daemons[0].output())
        # Only GPU 1's bytes are the pod's; GPU_MEM is its total.
        self.wait_reserved("a", pid, 64 * MIB)
        st = self.pod("a")
        self.assertEqual(st["allowed_devices"], [1])
        # Counted under their own why (the Reserve and the token), the
        # last one's words kept (issue 28 item 3); no other why counted.
        self.assertGreaterEqual(st["refused_devices"], 2, st)
        self.assertEqual((st["refused_quota"], st["refused_space"], st["refused_limit"]),
                         (0, 0, 0), st)
        self.assertIn("pod 'a' may use GPU 1 only (devices= in %s)" % self.config_path,
                      st["last_refusal"])
        self.assertIn("calls refused for its devices=: %d" % st["refused_devices"],
                      self.gmt("status").stdout)
        self.assertEqual([(d["device"], d["memory_used"]) for d in st["devices"]],
                         [(1, 64 * MIB)])
        self.finish_freed(p)

    def test_a_reload_that_allows_gpu_0_lets_the_next_allocation_in(self):
        self.start_schd()
        self.start_pmgr("a")
        p, pid, lines = self.dev_alloc("a", "0:%d" % MIB)
        self.assertEqual(int(lines["ALLOC"][0]["rc"]), INVALID_DEVICE)
        p.stop()
        self.write_config("2\na 0.5 1.0 1Gi devices=0,1\nb 0.5 1.0 1Gi\n")
        wait_for(lambda: self.pod("a").get("allowed_devices") == [0, 1], timeout=5,
                 what="the reload")
        self.assertIn("devices 1 -> 0,1", self.daemons[0].output())
        p, pid, lines = self.dev_alloc("a", "--launch", "0:%d" % MIB)
        self.assertEqual(int(lines["ALLOC"][0]["rc"]), 0, p.stderr())
        self.assertEqual(int(lines["LAUNCH"][0]["rc"]), 0, p.stderr())
        self.finish_freed(p)


class PerDevice(Devices):
    def test_memory_per_gpu_is_the_ledgers_to_the_byte(self):
        self.start_schd()
        self.start_pmgr("b")
        one, two = 10000001, 3000001  # not multiples of any chunk
        p, pid, lines = self.dev_alloc("b", "--launch", "0:%d" % one, "1:%d" % two)
        self.assertEqual([int(lines["ALLOC"][d]["rc"]) for d in (0, 1)], [0, 0], p.stderr())
        # Slack goes back after 100 ms without allocations: then the ledger
        # holds what was allocated, exactly.
        self.wait_reserved("b", pid, one + two)
        st = self.pod("b")
        self.assertEqual(st["allowed_devices"], [])
        devs = {d["device"]: d for d in st["devices"]}
        self.assertEqual(sorted(devs), [0, 1], st)
        self.assertEqual(devs[0]["memory_used"], one)
        self.assertEqual(devs[1]["memory_used"], two)
        self.assertEqual(sum(d["memory_used"] for d in st["devices"]), st["memory_reserved"])
        self.assertEqual(set(devs[0]), {"device", "memory_used", "holds_token", "gpu_time_share",
                                        "swap_turns", "turn_moves_bytes", "turn_cost_ms",
                                        "turn_ms", "out_rate"})
        # Both launches were charged to their own GPU's time.
        self.assertGreater(devs[0]["gpu_time_share"], 0, st)
        self.assertGreater(devs[1]["gpu_time_share"], 0, st)
        r = self.gmt("status")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"  per GPU: 0: 9\.5 MiB, 0\.\d\d( \*)?; 1: 2\.9 MiB, 0\.\d\d")
        self.finish_freed(p)
        wait_for(lambda: all(d["memory_used"] == 0 for d in self.pod("b")["devices"]), timeout=10,
                 what="the bytes back")


class TokensConfined(Devices):
    """Tokens are per GPU with confinement too: pods a and c on GPU 0 share
    it, pod b alone on GPU 1 gets all of it."""
    CONFIG = "3\na 0.5 1.0 1Gi devices=0\nb 0.5 1.0 1Gi devices=1\nc 0.5 1.0 1Gi devices=0\n"

    def test_pods_waiting_on_gpu_0_do_not_slow_the_pod_on_gpu_1(self):
        self.start_schd("--window-ms", "2000", "--base-quota-ms", "100")
        for pod in "abc":
            self.start_pmgr(pod)
        progs = []
        for pod, gpu in (("a", "0"), ("b", "1"), ("c", "0")):
            p = self.run_prog(pod, SPIN, "--kernel-us", "10000", "--seconds", "8", "--device", gpu)
            p.expect("READY")
            progs.append(p)
        rows = [p.records(timeout=60) for p in progs]
        for p in progs:
            rc, err = p.finish()
            self.assertEqual(rc, 0, err)

        def share(rs):
            first = next(r for r in rs if float(r["t_ms"]) >= 2000)
            last = rs[-1]
            return ((float(last["busy_us"]) - float(first["busy_us"])) / 1000.0
                    / (float(last["t_ms"]) - float(first["t_ms"])))
        sa, sb, sc = (share(r) for r in rows)
        print("\nconfined: a (GPU 0) %.3f, b (GPU 1) %.3f, c (GPU 0) %.3f" % (sa, sb, sc))
        self.assertGreater(sb, 0.85, self.logs())
        self.assertGreater(sa + sc, 0.85, self.logs())
        self.assertGreater(min(sa, sc), 0.3, self.logs())

    def test_a_launch_on_the_other_gpu_fails_without_hanging(self):
        self.start_schd()
        self.start_pmgr("a")
        p = self.run_prog("a", SPIN, "--kernel-us", "1000", "--seconds", "2", "--device", "1")
        rc, err = p.finish(timeout=20)
        self.assertEqual(rc, 1, err)
        self.assertIn("CUDA_ERROR_INVALID_DEVICE", err)
        self.assertIn("pod 'a' may use GPU 0 only", err)


class ContextMemory(Devices):
    """Each process's context: NVML's count for its pid less what the
    ledger holds for it. GMT_FAKE_CONTEXT_MIB makes the fake's contexts
    take that much of their card."""
    CONFIG = "1\na 0.5 1.0 1Gi\n"
    ALLOC = 64 * MIB

    def two_processes(self, **env):
        self.start_schd()
        self.start_pmgr("a")
        out = []
        for _ in range(2):
            p, pid, _ = self.dev_alloc("a", "0:%d" % self.ALLOC, **env)
            self.wait_reserved("a", pid, self.ALLOC)
            out.append((p, pid))
        return out

    def test_context_is_each_processs_fake_context(self):
        procs = self.two_processes(GMT_FAKE_CONTEXT_MIB="300")
        want = 300 * MIB

        def shown():
            st = self.pod("a")
            ctx = {p["pid"]: p["context_bytes"] for p in st["processes"]}
            return st if all(ctx.get(pid) == want for _, pid in procs) else None
        st = wait_for(shown, timeout=5, what="context_bytes of both processes")
        self.assertEqual(st["context_bytes"], 2 * want)
        # Shown, not charged: the quota holds the allocations alone.
        self.assertEqual(st["memory_reserved"], 2 * self.ALLOC)
        r = self.gmt("status")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("  context: 600.0 MiB, not charged (pid %d 300.0 MiB, pid %d 300.0 MiB)"
                      % tuple(sorted(pid for _, pid in procs)), r.stdout)
        for p, _ in procs:
            self.finish_freed(p)

    def test_a_gpu_process_outside_gmt_is_listed_as_unmanaged(self):
        # One of pod a's processes, and one started without the hook (as a
        # job whose hook did not load would run): only the second is
        # outside gmt, with what NVML counts for it.
        (p, pid), = self.two_processes(GMT_FAKE_CONTEXT_MIB="100")[:1]
        q = self.run_prog(None, DEV_ALLOC, "0:%d" % self.ALLOC,
                          env=self.prog_env(GMT_FAKE_CONTEXT_MIB="100"))
        qpid = int(q.expect("READY")["pid"])

        def listed():
            un = {u["pid"]: u for u in self.status()["unmanaged"]}
            return un if qpid in un else None
        un = wait_for(listed, timeout=5, what="the process outside gmt listed")
        self.assertNotIn(pid, un)
        self.assertEqual(un[qpid]["memory_used"], self.ALLOC + 100 * MIB)
        self.assertIn("dev_alloc", un[qpid]["exe"])
        text = self.gmt("status").stdout
        self.assertIn("UNMANAGED: 1 process on the GPUs outside gmt", text)
        self.finish_freed(q)
        wait_for(lambda: not self.status()["unmanaged"] or None, timeout=5,
                 what="the unmanaged process gone")

    def test_without_a_fake_context_there_is_none(self):
        procs = self.two_processes()
        time.sleep(0.6)  # past one reading
        st = self.pod("a")
        self.assertEqual(st["context_bytes"], 0, st)
        self.assertEqual([p["context_bytes"] for p in st["processes"]], [0, 0])
        for p, _ in procs:
            self.finish_freed(p)


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("unshare") and shutil.which("nsenter"),
                     "needs root, unshare and nsenter")
class PidNamespace(Devices):
    """A pod manager in a PID namespace of its own, as a Kubernetes pod's
    sidecar is: it reports its processes by that namespace's pids, NVML
    (the fake's too, which records /proc/self: the node's pid) names them
    by the node's. gmt-schd finds each one's node pid (server/nspid.c), so
    that its context memory is shown, and gmt status gives both pids."""
    CONFIG = "1\na 0.5 1.0 1Gi\n"
    ALLOC = 64 * MIB

    def start_pod_in_namespace(self):
        """gmt-pmgr as pid 1 of a new PID namespace (/proc left the node's,
        as for the fake driver; the pod manager takes its callers' pids from
        SO_PEERCRED on its ipc socket, in its own namespace). Returns the
        pod manager's pid on the node."""
        sock = os.path.join(self.tmp, "run", "pmgr-a.sock")
        argv = ["unshare", "--pid", "--fork", "--kill-child=SIGTERM", PMGR, "--port",
                str(free_port()), "--name", "a", "--schd", "ipc://" + self.schd_ipc, "--ipc",
                sock, "-v"]
        d = Daemon("pmgr-a", argv, self.env(), self.tmp)
        self.daemons.append(d)
        self.pmgr_urls["a"] = ("ipc://" + sock, 0)
        wait_for(lambda: not d.alive() or self.pod("a").get("connected"),
                 what="pod a to connect")
        kids = open("/proc/%d/task/%d/children" % (d.proc.pid, d.proc.pid)).read().split()
        self.assertEqual(len(kids), 1, kids)
        return int(kids[0])

    def test_a_pods_pids_are_found_on_the_node(self):
        self.start_schd()
        pmgr = self.start_pod_in_namespace()
        env = self.hook_env("a", GMT_FAKE_CONTEXT_MIB="300")
        p = gmt_e2e.Prog(["nsenter", "--target", str(pmgr), "--pid", "--", DEV_ALLOC,
                          "0:%d" % self.ALLOC], env)
        self.progs.append(p)
        ready = p.expect("READY", timeout=30)
        pod_pid = int(ready["pid"])  # getpid() in the pod's namespace
        node_pid = int(open("/proc/%d/task/%d/children" % (p.proc.pid, p.proc.pid))
                       .read().split()[0])
        self.assertNotEqual(pod_pid, node_pid)

        def shown():
            procs = self.pod("a").get("processes", [])
            return procs if procs and procs[0].get("context_bytes") else None
        procs = wait_for(shown, timeout=5, what="the process's context_bytes")
        self.assertEqual(len(procs), 1, procs)
        self.assertEqual(procs[0]["pid"], pod_pid)
        self.assertEqual(procs[0]["node_pid"], node_pid)
        self.assertEqual(procs[0]["context_bytes"], 300 * MIB)
        self.assertEqual(procs[0]["memory_reserved"], self.ALLOC)
        self.assertIn("pod 'a': pid %d is pid %d on the node" % (pod_pid, node_pid),
                      self.daemons[0].output())
        r = self.gmt("status")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("dev_alloc  (node pid %d)\n" % node_pid, r.stdout)
        self.finish_freed(p)


if __name__ == "__main__":
    unittest.main(verbosity=2)
