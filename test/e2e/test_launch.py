"""End-to-end: scripts/launch-backend.py and scripts/launch-command.py
(docs/operators.md), Gemini's two launch scripts, on the fake driver with
a two-pod config. The backend is started as an operator would, its table
read from its stdout; every daemon it names is checked by pid after it
stops. Every wait is bounded and tearDown kills whatever is left."""
import fcntl
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

from gmt_e2e import (BUILD, PROGS, SCHD, Node, Prog, cannot_run, daemon_env, free_port,
                     wait_for)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BACKEND = os.path.join(ROOT, "scripts", "launch-backend.py")
COMMAND = os.path.join(ROOT, "scripts", "launch-command.py")
SHOW = os.path.join(PROGS, "show_devices")
NOBODY = 65534

# Comments and blank lines where config.c allows them: the pods' order
# (train first) is what gives their ports.
CONFIG = "# two pods\n2\n\ntrain 0.3 1.0 1Gi\n  # the second one\ninfer 0.7 1.0 2Gi pin=off\n"


def two_free_ports():
    """A port p with p+1 free too (the two pods' managers)."""
    for _ in range(100):
        p = free_port()
        if p < 65535 and not _in_use(p + 1):
            return p
    raise AssertionError("no two consecutive free ports")


def schd_port_beside(base):
    """A free port for gmt-schd that is neither of the pods' (base, base+1):
    free_port() alone may hand back base+1, which launch-backend.py refuses
    (seen once in CI)."""
    for _ in range(100):
        p = free_port()
        if p not in (base, base + 1):
            return p
    raise AssertionError("no free port apart from %d and %d" % (base, base + 1))


def _in_use(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def gone(pid):
    """Whether no process (not even a zombie) has pid."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "X"
    except OSError:
        return True


_HAS_METRICS = []


def schd_has_metrics():
    """Whether this gmt-schd has --metrics (its --help lists it)."""
    if not _HAS_METRICS:
        r = subprocess.run([SCHD, "--help"], capture_output=True, text=True, timeout=10,
                           env=daemon_env(os.environ))
        _HAS_METRICS.append("--metrics" in r.stdout)
    return _HAS_METRICS[0]


def as_nobody():
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


class Backend:
    """A running launch-backend.py: its table, once ready."""

    def __init__(self, prog):
        self.prog = prog
        self.lines = []
        self.rows = {}  # pod name ("-" for gmt-schd) -> {what, port, pid, url, ipc, log}
        self.state_dir = None
        self.sockets_line = None

    def read_until_ready(self, timeout=40.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.prog.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                continue
            if line is None:
                break
            self.lines.append(line)
            f = line.split()
            if len(f) == 7 and f[0] in ("gmt-schd", "gmt-pmgr"):
                self.rows[f[1]] = dict(zip(("what", "pod", "port", "pid", "url", "ipc", "log"), f))
            elif line.startswith("state: "):
                self.state_dir = f[1]
            elif line.startswith("ipc sockets: "):
                self.sockets_line = line
            elif line.startswith("launch-backend: ready"):
                return self
        raise AssertionError("launch-backend.py not ready within %.0fs; stdout: %s; stderr: %s"
                             % (timeout, self.lines, self.prog.stderr()))

    def pids(self):
        return [int(r["pid"]) for r in self.rows.values()]

    def wait_exit(self, timeout=30.0):
        try:
            return self.prog.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("launch-backend.py did not exit within %.0fs; stderr: %s"
                                 % (timeout, self.prog.stderr()))

    def stderr_when_done(self):
        # The reader thread ends when the pipe closes.
        self.prog.err_reader.join(timeout=10)
        return self.prog.stderr()

    def stdout_when_done(self):
        """Every stdout line not read yet, once it has exited."""
        self.prog.reader.join(timeout=10)
        rest = []
        while True:
            try:
                line = self.prog.lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                rest.append(line)
        return rest


class Launch(unittest.TestCase):
    def setUp(self):
        self.node = Node(CONFIG)
        self.node.base_env["GMT_BUILD_DIR"] = BUILD
        for k in ("GMT_PMGR", "GMT_HOOK_LIB", "CUDA_VISIBLE_DEVICES", "GMT_AUTO_DEVICE",
                  "LD_PRELOAD"):
            self.node.base_env.pop(k, None)
        self.backends = []
        self.extra_dirs = []

    def tearDown(self):
        for b in self.backends:
            if b.prog.proc.poll() is None:
                b.prog.proc.send_signal(signal.SIGTERM)
                try:
                    b.prog.proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    pass
            b.prog.stop()
            for pid in b.pids():
                if not gone(pid):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            if b.state_dir and b.state_dir.startswith(tempfile.gettempdir()):
                shutil.rmtree(b.state_dir, ignore_errors=True)
        for d in self.extra_dirs:
            shutil.rmtree(d, ignore_errors=True)
        self.node.stop()

    # ---- helpers ----

    def start(self, *extra, config=None, env=None, preexec_fn=None, run_dir=True,
              ports=None, python=sys.executable):
        """launch-backend.py on fresh ports; not waited for."""
        if not ports:
            base = two_free_ports()
            ports = (schd_port_beside(base), base)
        self.schd_port, self.base = ports
        argv = [python, BACKEND, "-c", config or self.node.config_path,
                "--schd-port", str(self.schd_port), "--base-port", str(self.base),
                "--timeout", "30"]
        if run_dir:
            # Tests run side by side: their sockets stay in their own folder.
            argv += ["--run-dir", os.path.join(self.node.tmp, "run")]
        if "--metrics" not in extra and schd_has_metrics():
            # Not gmt-schd's default port, which tests side by side share.
            argv += ["--metrics", "off"]
        p = Prog(argv + list(extra), env or self.node.env(), preexec_fn=preexec_fn)
        b = Backend(p)
        self.backends.append(b)
        return b

    def ready(self, *extra, **kw):
        return self.start(*extra, **kw).read_until_ready()

    def status(self):
        r = subprocess.run([os.path.join(BUILD, "client", "gmt"), "--schd",
                            "tcp://127.0.0.1:%d" % self.schd_port, "status", "--json"],
                           capture_output=True, text=True, timeout=10, env=self.node.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def pods_of(self, pid):
        return [p["name"] for p in self.status()["pods"]
                if any(q["pid"] == pid for q in p["processes"])]

    def command(self, *args, cmd=(SHOW, "--wait")):
        argv = [sys.executable, COMMAND] + list(args) + ["--"] + list(cmd)
        p = Prog(argv, self.node.env())
        self.node.progs.append(p)
        return p

    def assert_all_gone(self, b, timeout=5.0):
        for pid in b.pids():
            wait_for(lambda: gone(pid), timeout=timeout, what="pid %d to be gone" % pid)

    # ---- the backend ----

    def test_backend_starts_each_pod_on_its_port_and_sigterm_leaves_nothing(self):
        b = self.ready()
        # Its sockets are not in /run/gmt: it says how gmt finds gmt-schd.
        ready = [l for l in b.lines if l.startswith("launch-backend: ready")][0]
        sock = os.path.join(self.node.tmp, "run", "schd.sock")
        self.assertIn("export GMT_SCHD=ipc://%s." % sock, ready)
        r = subprocess.run([os.path.join(BUILD, "client", "gmt"), "status", "--json"],
                           capture_output=True, text=True, timeout=10,
                           env=dict(self.node.env(), GMT_SCHD="ipc://" + sock))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(set(b.rows), {"-", "train", "infer"}, b.lines)
        self.assertEqual(int(b.rows["-"]["port"]), self.schd_port)
        self.assertEqual(b.rows["-"]["url"], "tcp://127.0.0.1:%d" % self.schd_port)
        # The config's order: train (line 4) first, infer (line 6) next.
        self.assertEqual(int(b.rows["train"]["port"]), self.base)
        self.assertEqual(b.rows["train"]["url"], "tcp://127.0.0.1:%d" % self.base)
        self.assertEqual(int(b.rows["infer"]["port"]), self.base + 1)
        for r in b.rows.values():
            self.assertTrue(os.path.isfile(r["log"]), r)
            self.assertTrue(r["log"].startswith(b.state_dir + os.sep), r)
        self.assertIn("removed at exit", "\n".join(b.lines))
        st = {p["name"]: p for p in self.status()["pods"]}
        self.assertTrue(st["train"]["connected"] and st["infer"]["connected"], st)
        socks = [r["ipc"][len("ipc://"):] for r in b.rows.values()]
        for s in socks:
            self.assertTrue(os.path.exists(s), s)

        b.prog.proc.send_signal(signal.SIGTERM)
        self.assertEqual(b.wait_exit(), 0, b.prog.stderr())
        self.assert_all_gone(b)
        self.assertFalse(os.path.exists(b.state_dir), "temporary state folder left behind")
        for s in socks:
            self.assertFalse(os.path.exists(s), "socket %s left behind" % s)
        self.assertFalse(os.path.exists(os.path.join(self.node.tmp, "run")),
                         "the socket folder it made is left behind")
        self.assertIn("stopped", b.stderr_when_done())

    def test_a_dead_pod_manager_stops_the_backend_naming_it(self):
        state = os.path.join(self.node.tmp, "state")
        b = self.ready("--state-dir", state)
        self.assertIn("(kept)", "\n".join(b.lines))
        os.kill(int(b.rows["infer"]["pid"]), signal.SIGKILL)
        rc = b.wait_exit()
        err = b.stderr_when_done()
        self.assertEqual(rc, 1, err)
        self.assertIn("gmt-pmgr of pod 'infer' (pid %s) was killed by SIGKILL" %
                      b.rows["infer"]["pid"], err)
        self.assert_all_gone(b)
        # A given state folder keeps the logs; the sockets go.
        self.assertTrue(os.path.isfile(os.path.join(state, "gmt-schd.log")))
        self.assertTrue(os.path.isfile(os.path.join(state, "gmt-pmgr-train.log")))
        self.assertEqual(os.listdir(os.path.join(self.node.tmp)).count("run"), 0)

    def test_sigint_stops_it_too(self):
        b = self.ready()
        b.prog.proc.send_signal(signal.SIGINT)
        self.assertEqual(b.wait_exit(), 0, b.prog.stderr())
        self.assert_all_gone(b)
        self.assertFalse(os.path.exists(b.state_dir))

    def test_a_bad_config_fails_with_gmt_schds_file_line_message(self):
        bad = os.path.join(self.node.tmp, "bad-config.txt")
        with open(bad, "w") as f:
            f.write("2\ntrain 0.3 1.0 1Gi\ninfer 0.7 2.0 2Gi\n")
        b = self.start(config=bad)
        rc = b.wait_exit()
        err = b.stderr_when_done()
        self.assertEqual(rc, 2, err)
        self.assertIn(bad + ":3:", err)  # gmt-schd's words, file:line
        self.assertIn("gmt-schd (pid", err)
        self.assertNotIn("gmt-pmgr", "\n".join(b.stdout_when_done()))  # none started
        # Nothing left: the log it named sat in the temporary state folder.
        log = [w for w in err.split() if w.endswith("gmt-schd.log:")]
        self.assertTrue(log, err)
        self.assertFalse(os.path.exists(os.path.dirname(log[0])), err)

    def test_a_pod_that_never_connects_is_named_when_the_wait_runs_out(self):
        # A build folder whose gmt-pmgr starts but never registers.
        fake = os.path.join(self.node.tmp, "build")
        for sub, prog in (("server", "gmt-schd"), ("client", "gmt")):
            os.makedirs(os.path.join(fake, sub), exist_ok=True)
            os.symlink(os.path.join(BUILD, sub, prog), os.path.join(fake, sub, prog))
        pmgr = os.path.join(fake, "client", "gmt-pmgr")
        with open(pmgr, "w") as f:
            f.write("#!/bin/sh\necho 'a pod manager that never registers'\nexec sleep 60\n")
        os.chmod(pmgr, 0o755)
        b = self.start("--timeout", "2", env=self.node.env(GMT_BUILD_DIR=fake))
        t0 = time.monotonic()
        rc = b.wait_exit()
        err = b.stderr_when_done()
        self.assertEqual(rc, 1, err)
        self.assertLess(time.monotonic() - t0, 20, "the 2 s wait was not bounded")
        self.assertIn("timed out after 2 s waiting for all 2 pods to show connected", err)
        self.assertIn("pod 'train' is not connected; gmt-pmgr of pod 'train' (pid", err)
        self.assertIn("| a pod manager that never registers", err)  # its log's tail
        b.rows = {}
        for line in b.stdout_when_done():
            f = line.split()
            if len(f) == 7 and f[0] in ("gmt-schd", "gmt-pmgr"):
                b.rows[f[1]] = {"pid": f[3]}
        self.assertEqual(len(b.rows), 3, b.rows)
        self.assert_all_gone(b)

    def test_a_missing_config_is_refused(self):
        missing = os.path.join(self.node.tmp, "nope.txt")
        b = self.start(config=missing)
        rc = b.wait_exit()
        err = b.stderr_when_done()
        self.assertEqual(rc, 2, err)
        self.assertIn(missing, err)

    def test_a_taken_port_is_a_clear_error(self):
        with socket.socket() as s:
            base = two_free_ports()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", base + 1))
            s.listen(1)
            b = self.start(ports=(schd_port_beside(base), base))
            rc = b.wait_exit()
            err = b.stderr_when_done()
            self.assertEqual(rc, 1, err)
            self.assertIn("port %d (pod 'infer''s manager's) is in use" % (base + 1), err)
            self.assertIn("--base-port", err)
            self.assertEqual(b.stdout_when_done(), [])  # nothing was started

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
            taken = s.getsockname()[1]
            base = two_free_ports()
            while taken in (base, base + 1):
                base = two_free_ports()
            b = self.start(ports=(taken, base))
            rc = b.wait_exit()
            err = b.stderr_when_done()
            self.assertEqual(rc, 1, err)
            self.assertIn("port %d (gmt-schd's) is in use" % taken, err)
            self.assertIn("--schd-port", err)

    def test_metrics_is_passed_only_when_gmt_schd_has_it(self):
        has = schd_has_metrics()
        addr = "127.0.0.1:%d" % free_port()
        b = self.ready("--metrics", addr)
        text = "\n".join(b.lines)
        if has:
            self.assertIn("metrics: gmt-schd --metrics " + addr, text)
            # Served: what it holds is test_metrics's to check.
            with urllib.request.urlopen("http://%s/metrics" % addr, timeout=10) as r:
                self.assertEqual(r.status, 200)
        else:
            self.assertNotIn("metrics:", text)
            self.assertIn("lists no --metrics", b.prog.stderr())

    def test_default_sockets_are_the_daemons_own_where_it_may_make_them(self):
        d = "/run/gmt"
        if not (os.access(d, os.W_OK) if os.path.isdir(d) else os.access("/run", os.W_OK)):
            self.skipTest("this user may not make %s's sockets (the fallback is tested as "
                          "nobody)" % d)
        # /run/gmt is the node's: runs of this test side by side (two build
        # trees, two sessions) take turns, so that each sees its own.
        lock = open(os.path.join(tempfile.gettempdir(), "gmt-test-launch-run-gmt.lock"), "a")
        self.addCleanup(lock.close)  # after tearDown: the launcher has stopped by then
        fcntl.flock(lock, fcntl.LOCK_EX)
        existed = os.path.isdir(d)
        b = self.ready(run_dir=False)
        if "a gmt daemon already listens" in b.sockets_line:
            self.skipTest("another gmt daemon listens in %s" % d)
        self.assertEqual(b.sockets_line, "ipc sockets: in %s" % d)
        socks = [r["ipc"][len("ipc://"):] for r in b.rows.values()]
        self.assertEqual(sorted(socks), sorted([d + "/schd.sock", d + "/pmgr-%d.sock" % self.base,
                                                d + "/pmgr-%d.sock" % (self.base + 1)]))
        b.prog.proc.send_signal(signal.SIGTERM)
        self.assertEqual(b.wait_exit(), 0, b.prog.stderr())
        for s in socks:
            self.assertFalse(os.path.exists(s), s)
        if not existed:
            self.assertFalse(os.path.exists(d), "%s made by the launcher is left" % d)

    def test_as_a_user_who_may_not_write_run_gmt_sockets_go_under_the_state_folder(self):
        if os.geteuid() != 0:
            cannot_run(self, "needs root to run the launcher as nobody")
        if os.path.isdir("/run/gmt") and os.stat("/run/gmt").st_mode & 0o002:
            self.skipTest("/run/gmt is world-writable here")
        # A Python nobody can run (the test's own may sit in root's home).
        python = None
        for cand in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
            try:
                r = subprocess.run([cand, "-c", "import argparse, ctypes"], capture_output=True,
                                   timeout=10, preexec_fn=as_nobody)
            except OSError:
                continue
            if r.returncode == 0:
                python = cand
                break
        if python is None:
            self.skipTest("no Python 3 that nobody may run")
        r = subprocess.run([SCHD, "--help"], capture_output=True, timeout=10,
                           env=self.node.env(), preexec_fn=as_nobody)
        if r.returncode != 0:
            self.skipTest("nobody cannot run %s (the build folder is closed to it)" % SCHD)
        # The fake machine's folder must be nobody's to write.
        fake = os.path.join(self.node.tmp, "fake")
        os.mkdir(fake)
        os.chmod(fake, 0o777)
        os.chmod(self.node.tmp, 0o711)
        env = self.node.env(GMT_FAKE_DIR=fake)
        b = self.ready(run_dir=False, env=env, preexec_fn=as_nobody, python=python)
        self.assertTrue(b.sockets_line.startswith("ipc sockets: in %s/run, not /run/gmt: "
                                                  % b.state_dir), b.sockets_line)
        self.assertIn("uid %d" % NOBODY, b.sockets_line)
        for r in b.rows.values():
            self.assertTrue(r["ipc"].startswith("ipc://%s/run/" % b.state_dir), r)
        self.assertEqual(os.stat(b.state_dir).st_uid, NOBODY)
        b.prog.proc.send_signal(signal.SIGTERM)
        self.assertEqual(b.wait_exit(), 0, b.prog.stderr())
        self.assert_all_gone(b)
        self.assertFalse(os.path.exists(b.state_dir))

    # ---- launch-command.py ----

    def test_a_command_runs_in_its_pod(self):
        self.ready()
        cfg = self.node.config_path
        run = os.path.join(self.node.tmp, "run")
        p = self.command("--pod", "infer", "-c", cfg, "--base-port", str(self.base), "--run-dir",
                         run)
        env = p.expect("ENV")
        self.assertEqual(int(env["pid"]), p.proc.pid)  # exec: CMD has this pid
        # The pod manager's ipc socket, where the kernel names the caller.
        with open("/proc/%d/environ" % p.proc.pid, "rb") as f:
            environ = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        self.assertEqual(environ[b"GMT_PMGR"].decode(),
                         "ipc://" + os.path.join(run, "pmgr-%d.sock" % (self.base + 1)))
        wait_for(lambda: self.pods_of(p.proc.pid) == ["infer"], timeout=20,
                 what="pid %d under pod infer" % p.proc.pid)
        q = self.command("--pod", "train", "--pmgr", "tcp://127.0.0.1:%d" % self.base)
        env = q.expect("ENV")
        wait_for(lambda: self.pods_of(q.proc.pid) == ["train"], timeout=20,
                 what="pid %d under pod train" % q.proc.pid)
        for x in (p, q):
            x.send()
            rc, err = x.finish()
            self.assertEqual(rc, 0, err)

    def test_a_commands_exit_code_and_signal_are_its_own(self):
        self.ready()
        base = ["--pod", "train", "-c", self.node.config_path, "--base-port", str(self.base)]
        r = subprocess.run([sys.executable, COMMAND] + base + ["--", SHOW, "--exit", "7"],
                           capture_output=True, text=True, timeout=30, env=self.node.env())
        self.assertEqual(r.returncode, 7, r.stderr)
        r = subprocess.run([sys.executable, COMMAND] + base + ["--", "sh", "-c", "kill -TERM $$"],
                           capture_output=True, timeout=30, env=self.node.env())
        self.assertEqual(r.returncode, -signal.SIGTERM, r.stderr)

    def test_a_command_for_an_unknown_pod_or_no_backend_is_refused(self):
        r = subprocess.run([sys.executable, COMMAND, "--pod", "zz", "-c", self.node.config_path,
                            "--", SHOW], capture_output=True, text=True, timeout=30,
                           env=self.node.env())
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("pod 'zz' is not in %s (its pods: train, infer)" % self.node.config_path,
                      r.stderr)
        self.assertNotIn("ENV", r.stdout)
        port = two_free_ports()  # nothing listens there
        r = subprocess.run([sys.executable, COMMAND, "--pod", "infer", "-c",
                            self.node.config_path, "--base-port", str(port), "--", SHOW],
                           capture_output=True, text=True, timeout=30, env=self.node.env())
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("nothing listens on tcp://127.0.0.1:%d (pod 'infer''s manager" % (port + 1),
                      r.stderr)
        self.assertNotIn("ENV", r.stdout)

    def test_a_build_folder_without_gmt_is_a_clear_error(self):
        empty = os.path.join(self.node.tmp, "empty-build")
        os.mkdir(empty)
        env = self.node.env(GMT_BUILD_DIR=empty)
        r = subprocess.run([sys.executable, COMMAND, "--pod", "train", "--pmgr",
                            "tcp://127.0.0.1:1", "--", SHOW], capture_output=True, text=True,
                           timeout=30, env=env)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("GMT_BUILD_DIR=%s has no client/gmt" % empty, r.stderr)
        r = subprocess.run([sys.executable, BACKEND, "-c", self.node.config_path],
                           capture_output=True, text=True, timeout=30, env=env)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("GMT_BUILD_DIR=%s has no server/gmt-schd" % empty, r.stderr)


if __name__ == "__main__":
    unittest.main()
