"""End-to-end: who may act for a pod (docs/security.md). Forged requests
are sent with wire_call, as any local program could, by an unprivileged
user (nobody) and by root from a process that is not the pod's pod
manager; each must be refused and change nothing. A process registers
only itself: the pid it names is replaced by the kernel's."""
import os
import resource
import shutil
import socket
import stat
import subprocess
import sys
import time

from gmt_e2e import (BUILD, PMGR, SCHD, Daemon, GmtTestCase, cannot_run, free_port, hold_fds,
                      wait_for)
from rawwire import call_raw, error_of, field, fields, sp_answers

WIRE = os.path.join(BUILD, "test", "e2e", "wireprogs", "wire_call")
MEM_PATHS = os.path.join(BUILD, "test", "e2e", "memprogs", "mem_paths")
NOBODY = 65534
MIB = 1 << 20
EPERM = -1


def as_nobody():
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


class Trust(GmtTestCase):
    CONFIG = "2\na 0.5 1.0 1Gi\nb 0.5 1.0 1Gi\n"

    def setUp(self):
        super().setUp()
        if os.geteuid() != 0:
            cannot_run(self, "the forged calls are sent as nobody: needs root")
        self.start_schd()
        self.start_pmgr("a")
        self.start_pmgr("b", "--allow-uid", str(NOBODY))
        # A copy nobody can run: the build folder may sit where it cannot.
        os.chmod(self.tmp, 0o711)
        d = os.path.join(self.tmp, "nobody")
        os.mkdir(d)
        os.chmod(d, 0o755)
        self.wire = os.path.join(d, "wire_call")
        shutil.copy(WIRE, self.wire)
        os.chmod(self.wire, 0o755)

    def call(self, url, *args, nobody=False):
        """One forged request; its reply as (code, text), code 0 for OK."""
        r = subprocess.run([self.wire, url] + [str(a) for a in args], capture_output=True,
                           text=True, timeout=20, preexec_fn=as_nobody if nobody else None)
        line = r.stdout.strip()
        self.assertTrue(line.startswith(("OK", "ERROR")), "no reply: %r %r" % (line, r.stderr))
        if line.startswith("OK"):
            return 0, line
        _, code, text = line.split(" ", 2)
        return int(code), text

    def holder(self):
        """A hooked process of pod a holding 512 MiB."""
        p = self.run_prog("a", MEM_PATHS, "alloc", str(512 * MIB), "--step", str(256 * MIB))
        p.expect("INFO")
        p.send()
        p.expect("FILLED")
        wait_for(lambda: self.reserved("a") == 512 * MIB or None, what="a to hold 512 MiB")
        return p

    def reserved(self, pod):
        return self.pod(pod).get("memory_reserved")

    def test_nobody_cannot_act_for_a_pod_at_the_scheduler(self):
        p = self.holder()
        pid = p.proc.pid
        before = self.pod("a")
        # Each of these worked before: a pod's memory handed back for it,
        # another pod charged, its process table rewritten, its token taken
        # for 10 s.
        for args in (("release", "a", pid, 512 * MIB), ("reserve", "b", pid, 900 * MIB),
                     ("heartbeat", "a", 1, 1 << 40, 1), ("token", "a", pid, 10000),
                     ("register", "a", 0)):
            code, text = self.call(self.schd_url, *args, nobody=True)
            self.assertEqual(code, EPERM, "%s: %s" % (args, text))
            self.assertIn("does not admit uid %d" % NOBODY, text)
        after = self.pod("a")
        self.assertEqual(after.get("memory_reserved"), 512 * MIB)
        self.assertEqual([q["pid"] for q in after["processes"]],
                         [q["pid"] for q in before["processes"]])
        self.assertNotIn(1, [q["pid"] for q in after["processes"]])
        self.assertFalse(self.reserved("b"))
        # A view is for everyone.
        self.assertEqual(self.call(self.schd_url, "status", nobody=True)[0], 0)

    def test_only_the_pods_own_pod_manager_speaks_for_it(self):
        p = self.holder()
        # root is admitted, but this process is not pod a's pod manager.
        for args in (("release", "a", p.proc.pid, 512 * MIB), ("register", "a", 0),
                     ("heartbeat", "a", 1, 1 << 40)):
            code, text = self.call(self.schd_url, *args)
            self.assertEqual(code, EPERM, "%s: %s" % (args, text))
            self.assertIn("served by another pod manager", text)
        self.assertEqual(self.reserved("a"), 512 * MIB)
        self.assertEqual(len(self.pod("a")["processes"]), 1)
        # Once it is gone, its successor takes the pod over.
        pmgr_a = self.daemons[1]
        pmgr_a.stop()
        self.start_pmgr("a")
        wait_for(lambda: self.pod("a").get("connected") or None, what="a's new pod manager")

    def test_nobody_cannot_join_a_pod_that_does_not_admit_it(self):
        code, text = self.call(self.pmgr_urls["a"][0], "register", "a", 1, nobody=True)
        self.assertEqual(code, EPERM, text)
        self.assertIn("does not admit uid %d" % NOBODY, text)
        self.assertNotIn("pid 1 (", self.daemons[1].output())
        # --allow-uid admits it, as itself.
        code, text = self.call(self.pmgr_urls["b"][0], "register", "b", 1, nobody=True)
        self.assertEqual(code, 0, text)
        self.assertNotIn("pid 1 (", self.daemons[2].output())

    def test_a_process_registers_only_itself(self):
        # Registering pid 1 made the pod hold its memory for good and the
        # tracer probe it; now the caller is registered, whatever it names.
        r = subprocess.Popen([self.wire, self.pmgr_urls["a"][0], "register", "a", "1"],
                             stdout=subprocess.PIPE, text=True)
        out, _ = r.communicate(timeout=20)
        self.assertTrue(out.startswith("OK"), out)
        log = self.daemons[1].output()
        self.assertIn("pid %d (wire_call) joined the pod" % r.pid, log)
        self.assertNotIn("pid 1 (", log)

    def test_ipc_sockets_are_for_owner_and_group(self):
        for path in (self.schd_ipc, os.path.join(self.tmp, "run", "pmgr-a.sock")):
            self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o660, path)


# Run as nobody: opens N connections to PORT with nng's SP handshake and
# prints how many the daemon kept (it closes the ones it turns away).
HOARD = r"""
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
socks, kept = [], 0
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"\x00SP\x00\x00\x30\x00\x00")
    socks.append(s)
time.sleep(1.0)
for s in socks:
    # The handshake, then EOF on one the daemon closed; nothing more on one it kept.
    s.setblocking(False)
    try:
        while s.recv(64):
            pass
    except BlockingIOError:
        kept += 1
    except OSError:
        pass
print("KEPT", kept, flush=True)
sys.stdin.readline()
"""


class Connections(GmtTestCase):
    CONFIG = "1\na 0.5 1.0 1Gi\n"

    def test_one_user_cannot_take_every_connection(self):
        if os.geteuid() != 0:
            cannot_run(self, "the connections are opened as nobody: needs root")
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard < 4096:
            cannot_run(self, "hard open-file limit %d is too low for this test" % hard)
        self.start_schd()

        def nobody_with_fds():
            resource.setrlimit(resource.RLIMIT_NOFILE, (4096, hard))
            as_nobody()
        # The system's python: nobody may not enter a user's own install.
        py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        p = subprocess.Popen([py, "-c", HOARD, str(self.schd_port), "1100"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             preexec_fn=nobody_with_fds)
        try:
            line = p.stdout.readline()
            self.assertTrue(line.startswith("KEPT"), line)
            self.assertEqual(int(line.split()[1]), 1024)
            self.assertIn("refusing more", self.daemons[0].output())
            # Everyone else is still served.
            r = self.gmt("status", "--json", timeout=10)
            self.assertEqual(r.returncode, 0, r.stderr)
        finally:
            p.stdin.close()
            p.wait(timeout=20)


def register_claiming(port, pid, fd=None):
    """A Register whose Envelope.caller claims pid (and fd, by default this
    socket's own descriptor): what a local program that lies about itself
    sends. Returns (code, message), code 0 for a RegisterReply."""
    reg = field(1, b"a") + field(2, pid) + field(3, b"/forged")
    rep = call_raw(port, field(1, 1) + field(10, reg), timeout=10, claim=(pid, fd))
    err = error_of(rep)
    if err:
        return err
    if 11 not in [num for num, _ in fields(rep)]:
        raise AssertionError("no RegisterReply in %r" % rep)
    return 0, ""


class Claims(GmtTestCase):
    """Over tcp:// a caller names its process (Envelope.caller); the pod
    manager takes the claim only when that process holds the connection's
    socket, one readlink however loaded the node is."""
    CONFIG = "2\na 0.5 1.0 1Gi\nb 0.5 1.0 1Gi\n"

    def test_a_tcp_caller_is_known_by_the_process_that_holds_its_socket(self):
        self.start_schd()
        self.start_pmgr("a")
        port = self.pmgr_urls["a"][1]
        code, text = register_claiming(port, os.getpid())
        self.assertEqual(code, 0, text)
        self.assertIn("pid %d (" % os.getpid(), self.daemons[1].output())
        # Another live process, pid 1, and a descriptor that is not the
        # socket: refused, and nobody joins the pod.
        other = subprocess.Popen(["sleep", "30"])
        try:
            for pid, fd in ((other.pid, None), (1, None), (other.pid, 0)):
                code, text = register_claiming(port, pid, fd)
                self.assertEqual(code, EPERM, text)
                self.assertIn("cannot tell which process is calling", text)
            log = self.daemons[1].output()
            self.assertIn("claims pid %d, not taken" % other.pid, log)
            self.assertNotIn("pid %d (" % other.pid, log)
            self.assertNotIn("pid 1 (", log)
        finally:
            other.kill()
            other.wait(timeout=5)


class LoadedNode(GmtTestCase):
    """Issue 24: with another user holding 250,000 open files, each new
    tcp:// connection took a 2.4 s walk of every process's descriptors to
    identify, past the hook's 1 s bound: the processes ran unhooked, and
    4 x 900 MiB went into a 1 GiB pod."""
    CONFIG = "1\na 0.5 1.0 1Gi\n"
    FDS = 250000

    def test_a_node_full_of_open_files_does_not_unhook_a_pod(self):
        if os.geteuid() != 0:
            cannot_run(self, "the descriptors are held by nobody: needs root")
        self.start_schd()
        self.start_pmgr("a")
        holder = hold_fds(self.FDS)
        try:
            progs = [self.run_prog("a", MEM_PATHS, "alloc", str(900 * MIB), "--step",
                                   str(900 * MIB)) for _ in range(4)]
            for p in progs:
                p.expect("INFO")
                self.wait_process("a", p.proc.pid, timeout=5)
            for p in progs:
                p.send()
            filled = [p.expect("FILLED") for p in progs]
            # 4 x 900 MiB in a 1 GiB pod: one fits, the others get OOM.
            self.assertEqual([f["ok"] for f in filled].count("1"), 1, filled)
            for p in progs:
                self.assertNotIn("no pod manager", p.stderr())
                self.assertNotIn("NOT limited", p.stderr())
            wait_for(lambda: self.pod("a").get("memory_used") == 900 * MIB or None, timeout=5,
                     what="the pod to count the one 900 MiB")
            self.assertLessEqual(self.pod("a")["memory_reserved"], 1 << 30)
        finally:
            holder.stdin.close()
            holder.wait(timeout=20)


class HungUpClients(GmtTestCase):
    """nng 1.5's ipc listener stops accepting for good after a client hangs
    up before the server's half of the handshake (nng #1518): one
    connect-and-close, or a job killed while it dials, cut every later
    process of the pod off its pod manager. The daemons listen again."""
    CONFIG = "1\na 0.5 1.0 1Gi\n"

    def stop_listening(self, path):
        """Hangs up on path until its listener stops (whether a hang-up
        stops it is a race with the server's first send); the number of
        hang-ups it took."""
        for n in range(1, 301):
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(path)
            if not sp_answers(path):
                return n
        self.skipTest("300 hang-ups on %s never stopped its listener here" % path)

    def test_a_client_that_hangs_up_mid_handshake_cuts_nobody_off(self):
        self.start_schd()
        self.start_pmgr("a")
        pmgr_ipc = os.path.join(self.tmp, "run", "pmgr-a.sock")
        self.assertTrue(sp_answers(pmgr_ipc))
        n = self.stop_listening(pmgr_ipc)
        print("the pod manager's listener stopped after %d hang-ups" % n)
        t0 = time.monotonic()
        env = self.hook_env("a", GMT_PMGR="ipc://" + pmgr_ipc)
        # A hooked process registers at its cuInit; one that came before the
        # pod manager listened again registers from its next report. Either
        # way it is in the pod within a few seconds.
        p = self.run_prog("a", MEM_PATHS, "alloc", str(64 * MIB), "--step", str(64 * MIB),
                          env=env)
        p.expect("INFO")
        self.wait_process("a", p.proc.pid, timeout=6)
        self.assertLess(time.monotonic() - t0, 6.0)
        self.assertIn("listening on it again", self.daemons[1].output())
        p.send()
        self.assertEqual(p.expect("FILLED")["ok"], "1")
        # gmt-schd's own ipc socket too.
        self.stop_listening(self.schd_ipc)
        wait_for(lambda: sp_answers(self.schd_ipc), timeout=5, what="gmt-schd to listen again")
        r = subprocess.run([os.path.join(BUILD, "client", "gmt"), "--schd",
                            "ipc://" + self.schd_ipc, "status"], capture_output=True, text=True,
                           timeout=10, env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)


class OpenFileLimit(GmtTestCase):
    """Each connection costs a daemon a descriptor and one user may hold
    1,024: with a hard limit near that, the cap protects nobody, and the
    daemons say so at start."""
    CONFIG = "1\na 0.5 1.0 1Gi\n"

    def start_limited(self, nofile):
        """gmt-schd and a pod manager under prlimit --nofile=nofile."""
        lim = ["prlimit", "--nofile=" + nofile]
        schd = Daemon("schd", lim + [SCHD, "-c", self.config_path, "--listen", self.schd_url,
                                     "--state-dir", os.path.join(self.tmp, "state"),
                                     "--metrics", "off"], self.env(), self.tmp)
        self.daemons.append(schd)
        wait_for(lambda: not schd.alive() or self.try_status() is not None,
                 what="gmt-schd to answer")
        self.assertTrue(schd.alive(), schd.output())
        port = free_port()
        pmgr = Daemon("pmgr-a", lim + [PMGR, "--port", str(port), "--name", "a", "--schd",
                                       self.schd_url, "--ipc",
                                       os.path.join(self.tmp, "run", "pmgr-a.sock")],
                      self.env(), self.tmp)
        self.daemons.append(pmgr)
        self.pmgr_urls["a"] = ("tcp://127.0.0.1:%d" % port, port)
        wait_for(lambda: not pmgr.alive() or self.pod("a").get("connected"),
                 what="pod a to connect")
        self.assertTrue(pmgr.alive(), pmgr.output())
        return schd, pmgr

    def test_a_hard_limit_of_1024_is_said_at_start_with_how_to_raise_it(self):
        for d in self.start_limited("1024:1024"):
            lines = [l for l in d.output().splitlines() if "open-file limit" in l]
            self.assertEqual(len(lines), 1, d.output())
            self.assertIn("warning: open-file limit 1024 (hard limit 1024) is below 5120", lines[0])
            self.assertIn("per-user cap", lines[0])
            self.assertIn("LimitNOFILE=", lines[0])

    def test_a_soft_limit_of_1024_under_a_high_hard_one_is_raised_and_not_said(self):
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard < 8192 and os.geteuid() != 0:
            cannot_run(self, "hard open-file limit %d: cannot give the daemons 8192" % hard)
        for d in self.start_limited("1024:8192"):
            self.assertNotIn("open-file limit", d.output())
            with open("/proc/%d/limits" % d.proc.pid) as f:
                row = [l for l in f if l.startswith("Max open files")][0]
            self.assertEqual(row.split()[3:5], ["8192", "8192"], row)


class StateFolder(GmtTestCase):
    """gmt.db and its journals have names anyone can foresee: gmt-schd
    keeps them only in a folder no other user may write."""
    CONFIG = "1\na 0.5 1.0 1Gi\n"

    def run_schd(self, state):
        return subprocess.run([SCHD, "-c", self.config_path, "--listen",
                               "tcp://127.0.0.1:%d" % free_port(), "--metrics", "off",
                               "--state-dir", state], capture_output=True, text=True, timeout=20,
                              env=self.env())

    def test_a_state_folder_others_may_write_is_refused_at_start(self):
        for mode, who in ((0o1777, "others"), (0o777, "others"), (0o770, "its group")):
            d = os.path.join(self.tmp, "state-%o" % mode)
            os.mkdir(d)
            os.chmod(d, mode)
            r = self.run_schd(d)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("state dir %s is writable by %s (mode %04o)" % (d, who, mode), r.stderr)
            self.assertIn("--state-dir", r.stderr)
            self.assertEqual(os.listdir(d), [])
        if os.geteuid() == 0:
            d = os.path.join(self.tmp, "state-nobody")
            os.mkdir(d, 0o700)
            os.chown(d, NOBODY, NOBODY)
            r = self.run_schd(d)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("state dir %s belongs to uid %d" % (d, NOBODY), r.stderr)
            self.assertEqual(os.listdir(d), [])


class Listen(GmtTestCase):
    CONFIG = "1\na 0.5 1.0 1Gi\n"

    def test_scheduler_refuses_to_listen_beyond_loopback(self):
        for url in ("tcp://0.0.0.0:50999", "tcp://10.1.2.3:50999", "tcp://127.evil:1",
                    "ws://127.0.0.1:50999"):
            r = subprocess.run([SCHD, "-c", self.config_path, "--listen", url, "--state-dir",
                                os.path.join(self.tmp, "state")], capture_output=True, text=True,
                               timeout=20, env=self.env())
            self.assertEqual(r.returncode, 2, url + ": " + r.stderr)
            self.assertIn("loopback", r.stderr)
