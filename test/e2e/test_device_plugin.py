"""End-to-end: gmt-device-plugin between gmt-schd (on the fake driver) and
a fake kubelet (fake_kubelet.py: the kubelet's side of the device-plugin
API v1beta1 over gRPC on Unix sockets in a temp folder, with Debian's
python3-grpcio). The plugin registers gmt.io/gpu-memory and
gmt.io/gpu-share, lists as many devices as gmt-schd's GPU spaces hold
units (and 100 per GPU), answers Allocate and GetPreferredAllocation,
registers again when the kubelet restarts, marks its devices Unhealthy and
keeps running while gmt-schd is down, and lists them anew when gmt-schd's
spaces change. Every wait is bounded; everything started is stopped."""
import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

import yaml

from gmt_e2e import Daemon, GmtTestCase, build_path, cannot_run, fake_uuid, wait_for

PLUGIN = build_path("deploy", "device-plugin", "gmt-device-plugin")
HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_KUBELET = os.path.join(HERE, "fake_kubelet.py")
DAEMONSET = os.path.join(HERE, "..", "..", "deploy", "kubernetes", "daemonset.yaml")
MEM, SHARE = "gmt.io/gpu-memory", "gmt.io/gpu-share"
GIB = 1 << 30


def grpc_python():
    """The first Python here that can import grpc (Debian's python3-grpcio
    is the system Python's), or None."""
    for py in (sys.executable, "/usr/bin/python3"):
        if py and os.path.exists(py):
            r = subprocess.run([py, "-c", "import grpc"], capture_output=True, timeout=60)
            if r.returncode == 0:
                return py
    return None


class FakeKubelet:
    """fake_kubelet.py in its own process: commands in, events out. events
    is every event so far; wait() looks at those after a mark."""

    def __init__(self, py, folder):
        self.proc = subprocess.Popen([py, FAKE_KUBELET, folder], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     bufsize=1)
        self.events = []
        self.lock = threading.Lock()
        self.err = []
        self.readers = [threading.Thread(target=self._read, daemon=True),
                        threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True)]
        for t in self.readers:
            t.start()
        self.wait(lambda e: e["event"] == "listening", 0, "the fake kubelet to listen")

    def _read(self):
        for line in self.proc.stdout:
            with self.lock:
                self.events.append(json.loads(line))

    def mark(self):
        with self.lock:
            return len(self.events)

    def wait(self, pred, since, what, timeout=10.0):
        def find():
            with self.lock:
                for e in self.events[since:]:
                    if e["event"] == "error":
                        raise AssertionError("the fake kubelet: %s" % e)
                    if pred(e):
                        return e
            return None
        try:
            return wait_for(find, timeout=timeout, what=what)
        except AssertionError as e:
            raise AssertionError("%s; events since: %s; its stderr: %s"
                                 % (e, self.events[since:][-6:], "".join(self.err)[-2000:]))

    def send(self, **cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def ask(self, event, **cmd):
        m = self.mark()
        self.send(**cmd)
        return self.wait(lambda e: e["event"] == event, m, "the %s answer" % event)

    def stop(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (subprocess.TimeoutExpired, BrokenPipeError):
            self.proc.kill()
            self.proc.wait(timeout=5)
        for t in self.readers:
            t.join(timeout=5)
        if not any(t.is_alive() for t in self.readers):  # else closing would block
            for f in (self.proc.stdout, self.proc.stderr):
                f.close()


def listed(kubelet, resource, since, what, pred=lambda devs: True, timeout=10.0):
    """The first device list of resource after since that pred takes."""
    e = kubelet.wait(lambda e: e["event"] == "devices" and e["resource"] == resource
                     and pred(e["devices"]), since, what, timeout)
    return e["devices"]


class DevicePlugin(GmtTestCase):
    CONFIG = "1\na 0.5 1.0 1Gi\n"

    def setUp(self):
        if not os.path.exists(PLUGIN):
            cannot_run(self, "gmt-device-plugin not built (no gRPC C core: Debian's libgrpc-dev)")
        self.py = grpc_python()
        if not self.py:
            cannot_run(self, "no Python here imports grpc (Debian: apt-get install python3-grpcio)")
        super().setUp()
        self.node.base_env["GMT_FAKE_DEVICES"] = "2"
        self.dir = os.path.join(self.node.tmp, "device-plugins")
        os.mkdir(self.dir)
        self.kubelets = []
        self.plugin = None

    def tearDown(self):
        try:
            for k in self.kubelets:
                k.stop()
        finally:
            super().tearDown()

    def start_kubelet(self):
        k = FakeKubelet(self.py, self.dir)
        self.kubelets.append(k)
        return k

    def start_plugin(self, *extra):
        argv = [PLUGIN, "--dir", self.dir, "--schd", "ipc://" + self.node.schd_ipc,
                "--poll-ms", "200", "-v"] + list(extra)
        self.plugin = Daemon("device-plugin", argv, self.node.env(), self.node.tmp)
        self.node.daemons.append(self.plugin)
        return self.plugin

    def spaces(self):
        """Each GPU's units of memory as gmt status gives its space."""
        tiers = self.node.status()["host"]["tiers"]
        return {t["index"]: t["limit"] // GIB for t in tiers if t["tier"] == "gpu"}

    def registered(self, k, since):
        regs = {}
        for res in (MEM, SHARE):
            regs[res] = k.wait(lambda e, r=res: e["event"] == "register" and e["resource_name"] == r,
                               since, "the plugin to register %s" % res)
        return regs

    def test_advertises_gmt_schd_space_and_allocates(self):
        self.start_schd("--gpu-capacity", "1=3Gi")
        units = self.spaces()
        self.assertEqual(units, {0: 7, 1: 3})  # 8 GiB less 512 MiB of contexts; 3 GiB
        k = self.start_kubelet()
        self.start_plugin()
        regs = self.registered(k, 0)
        for res, endpoint in ((MEM, "gmt-gpu-memory.sock"), (SHARE, "gmt-gpu-share.sock")):
            self.assertEqual(regs[res]["version"], "v1beta1")
            self.assertEqual(regs[res]["endpoint"], endpoint)
            self.assertEqual(regs[res]["options"],
                             {"pre_start_required": None, "get_preferred_allocation_available": True})
            opts = k.wait(lambda e, r=res: e["event"] == "options" and e["resource"] == r, 0,
                          "GetDevicePluginOptions of %s" % res)
            self.assertTrue(opts["get_preferred_allocation_available"])
            self.assertFalse(opts["pre_start_required"])

        mem = listed(k, MEM, 0, "the memory devices")
        want = ["gpu%d-%d" % (g, i) for g in sorted(units) for i in range(units[g])]
        self.assertEqual([d[0] for d in mem], want)
        self.assertEqual({d[1] for d in mem}, {"Healthy"})
        share = listed(k, SHARE, 0, "the share devices")
        self.assertEqual(len(share), 200)
        self.assertEqual(share[0], ["gpu0-0", "Healthy"])
        self.assertEqual(share[-1], ["gpu1-99", "Healthy"])

        a = k.ask("allocate", cmd="allocate", resource=MEM,
                  containers=[["gpu1-0", "gpu1-1"], ["gpu0-0", "gpu1-2"]])
        self.assertTrue(a["ok"], a)
        envs = [{x["key"]: x["value"] for x in c["envs"]} for c in a["reply"]["container_responses"]]
        self.assertEqual(envs, [
            {"GMT_GRANTED_GPU_MEMORY": str(2 * GIB), "GMT_GRANTED_GPU_MEMORY_GPUS": fake_uuid(1)},
            {"GMT_GRANTED_GPU_MEMORY": str(2 * GIB),
             "GMT_GRANTED_GPU_MEMORY_GPUS": fake_uuid(0) + "," + fake_uuid(1)}])
        a = k.ask("allocate", cmd="allocate", resource=SHARE, containers=[["gpu0-%d" % i for i in range(30)]])
        self.assertEqual({x["key"]: x["value"] for x in a["reply"]["container_responses"][0]["envs"]},
                         {"GMT_GRANTED_GPU_SHARE": "30", "GMT_GRANTED_GPU_SHARE_GPUS": fake_uuid(0)})
        # An ID it never listed (a unit past GPU 1's space) is refused.
        a = k.ask("allocate", cmd="allocate", resource=MEM, containers=[["gpu1-3"]])
        self.assertEqual((a["ok"], a["code"]), (False, "INVALID_ARGUMENT"))
        self.assertIn("'gpu1-3' is not one gmt-device-plugin advertises for gmt.io/gpu-memory",
                      a["details"])

        # Preferred: the tightest GPU that holds the whole request.
        ids = [d[0] for d in mem]
        for size, must, want in ((3, [], ["gpu1-0", "gpu1-1", "gpu1-2"]),
                                 (4, [], ["gpu0-%d" % i for i in range(4)]),
                                 (9, [], ["gpu0-%d" % i for i in range(7)] + ["gpu1-0", "gpu1-1"]),
                                 (2, ["gpu0-5"], ["gpu0-5", "gpu0-0"])):
            p = k.ask("prefer", cmd="prefer", resource=MEM, available=ids, must=must, size=size)
            self.assertEqual(p["reply"]["container_responses"][0]["deviceIDs"], want, (size, must))
        p = k.ask("prestart", cmd="prestart", resource=MEM, ids=["gpu0-0"])
        self.assertTrue(p["ok"], p)
        c = k.ask("call", cmd="call", resource=MEM, method="NoSuchMethod")
        self.assertEqual(c["code"], "UNIMPLEMENTED")
        # Not an AllocateRequest: refused, and the plugin serves on.
        c = k.ask("call", cmd="call", resource=MEM, method="Allocate", body="ff")
        self.assertEqual(c["code"], "INVALID_ARGUMENT")

        self.assertEqual(self.plugin.stop(), 0, self.plugin.output())
        left = [n for n in os.listdir(self.dir) if n != "kubelet.sock"]
        self.assertEqual(left, [], "its sockets are removed when it stops")

    def test_kubelet_restart_and_schd_outage(self):
        schd = self.start_schd()
        k = self.start_kubelet()
        self.start_plugin()
        self.registered(k, 0)
        before = listed(k, MEM, 0, "the memory devices")
        self.assertEqual(len(before), 14)

        # A restarting kubelet removes the folder's sockets and listens on a
        # new kubelet.sock: the plugin serves anew and registers again.
        m = k.mark()
        k.send(cmd="restart")
        self.registered(k, m)
        self.assertEqual(listed(k, MEM, m, "the memory devices after the restart"), before)
        self.assertEqual(len(listed(k, SHARE, m, "the share devices after the restart")), 200)
        self.assertTrue(k.ask("allocate", cmd="allocate", resource=MEM, containers=[["gpu0-1"]])["ok"])

        # gmt-schd hangs (SIGSTOP): Unhealthy once a Status is past its 3 s
        # bound, while the plugin answers the kubelet at once; back when
        # gmt-schd is.
        unhealthy = lambda d: {x[1] for x in d} == {"Unhealthy"}
        healthy = lambda d: d and {x[1] for x in d} == {"Healthy"}
        m = k.mark()
        os.kill(schd.proc.pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            k.send(cmd="allocate", resource=MEM, containers=[["gpu0-2"]])
            self.assertTrue(k.wait(lambda e: e["event"] == "allocate", m, "Allocate")["ok"])
            self.assertLess(time.monotonic() - t0, 2.0)
            hung = listed(k, MEM, m, "Unhealthy devices while gmt-schd hangs", unhealthy, 15)
            self.assertLess(time.monotonic() - t0, 10.0)
            self.assertEqual(len(hung), len(before))
        finally:
            os.kill(schd.proc.pid, signal.SIGCONT)
        m = k.mark()
        listed(k, MEM, m, "Healthy devices once gmt-schd goes on", healthy)

        # gmt-schd stops: the same devices, Unhealthy; the plugin runs on.
        m = k.mark()
        schd.stop()
        down = listed(k, MEM, m, "Unhealthy memory devices", unhealthy)
        self.assertEqual([d[0] for d in down], [d[0] for d in before])
        listed(k, SHARE, m, "Unhealthy share devices", unhealthy)
        self.assertTrue(self.plugin.alive())
        self.assertIn("does not answer", self.plugin.output())

        # Back with a smaller space on GPU 0 and a second GPU's: listed anew.
        m = k.mark()
        self.start_schd("--gpu-capacity", "0=2Gi")
        back = listed(k, MEM, m, "the devices of the new spaces", healthy)
        self.assertEqual([d[0] for d in back], ["gpu0-0", "gpu0-1"] +
                         ["gpu1-%d" % i for i in range(7)])
        self.assertEqual(len(back), sum(self.spaces().values()))
        self.assertEqual(self.plugin.stop(), 0, self.plugin.output())

    def test_starts_before_kubelet_and_schd(self):
        self.start_plugin()
        time.sleep(1.0)  # five polls of a gmt-schd that is not there, no kubelet
        self.assertTrue(self.plugin.alive(), self.plugin.output())
        k = self.start_kubelet()
        self.registered(k, 0)
        # gmt-schd never answered: nothing to advertise yet.
        self.assertEqual(listed(k, MEM, 0, "an empty list"), [])
        m = k.mark()
        schd = self.start_schd()
        self.assertEqual(len(listed(k, MEM, m, "the devices once gmt-schd answers", lambda d: d)), 14)
        # Stopped while an ask of a hung gmt-schd is in flight: it leaves
        # that thread to the exit and ends well within the DaemonSet's
        # 10 s grace, its sockets removed.
        os.kill(schd.proc.pid, signal.SIGSTOP)
        try:
            time.sleep(0.5)
            t0 = time.monotonic()
            self.assertEqual(self.plugin.stop(signal.SIGINT, timeout=8), 0, self.plugin.output())
            self.assertLess(time.monotonic() - t0, 5.0)
        finally:
            os.kill(schd.proc.pid, signal.SIGCONT)
        self.assertEqual([n for n in os.listdir(self.dir) if n != "kubelet.sock"], [])

    def test_bad_flags(self):
        for args, words in ((["--memory-unit", "1Ki"], "--memory-unit wants a byte count of at least 1Mi"),
                            (["--poll-ms", "5"], "--poll-ms wants milliseconds 100..600000"),
                            (["--resources", "gpu"], "--resources wants memory, share"),
                            (["--dir", "/" + "x" * 120], "at most 107 bytes"),
                            (["--nope"], "unknown flag '--nope'")):
            r = subprocess.run([PLUGIN] + args, capture_output=True, text=True, timeout=10,
                               env=self.node.env())
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn(words, r.stderr)



class Manifest(unittest.TestCase):
    """The DaemonSet runs the plugin beside gmt-schd, where the kubelet
    looks for plugins, with gmt-schd's socket. (test_kubernetes.py checks
    every field against the API's models.)"""

    def test_daemonset_runs_the_plugin_in_the_kubelets_folder_beside_gmt_schd(self):
        with open(DAEMONSET) as f:
            ds = [d for d in yaml.safe_load_all(f) if d["kind"] == "DaemonSet"][0]
        spec = ds["spec"]["template"]["spec"]
        schd, plugin = spec["containers"]
        self.assertEqual(plugin["command"][0], "gmt-device-plugin")
        flag = lambda name: plugin["command"][plugin["command"].index(name) + 1]  # noqa: E731
        vols = {v["name"]: v for v in spec["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in plugin["volumeMounts"]}
        self.assertEqual(flag("--dir"), "/var/lib/kubelet/device-plugins")
        self.assertEqual(vols[mounts[flag("--dir")]]["hostPath"]["path"], "/var/lib/kubelet/device-plugins")
        # gmt-schd's socket, in the folder both containers mount.
        sock = flag("--schd")
        self.assertTrue(sock.startswith("ipc:///run/gmt/"), sock)
        schd_mounts = {m["mountPath"]: m["name"] for m in schd["volumeMounts"]}
        self.assertEqual(mounts["/run/gmt"], schd_mounts["/run/gmt"])
        self.assertEqual(flag("--memory-unit"), "1Gi")
        self.assertEqual(plugin["securityContext"]["capabilities"], {"drop": ["ALL"]})


if __name__ == "__main__":
    unittest.main()
