"""End-to-end harness: starts the real gmt-schd and gmt-pmgr on loopback
with a temporary state folder, runs driver-API programs under the hook
against the fake libcuda.so.1, and reads `gmt status --json`.

Every wait is bounded; every daemon started is stopped in tearDown."""
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

BUILD = os.environ.get("GMT_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
ASAN_PRELOAD = os.environ.get("GMT_ASAN_PRELOAD", "")


def build_path(*parts):
    return os.path.join(BUILD, *parts)


SCHD = build_path("server", "gmt-schd")
PMGR = build_path("client", "gmt-pmgr")
GMT = build_path("client", "gmt")
HOOK = build_path("hook", "libgmthook.so")
FAKECUDA_DIR = build_path("test", "fakecuda")
PROGS = build_path("test", "e2e", "progs")
TRACE_JOB = build_path("test", "e2e", "traceprogs", "trace_job")

# Under CI=true a test that cannot run here fails instead of skipping: a CI
# that is not root, or built without the tracer, must not pass untested.
CI = os.environ.get("CI") == "true"


def cannot_run(test, why):
    """Skips test saying why, or fails it under CI=true."""
    if CI:
        test.fail("cannot run here, and CI=true: %s" % why)
    test.skipTest(why)


def unless_runnable(why):
    """Class decorator: with a reason (not None), the class's tests skip
    saying it, or, under CI=true, each fails saying it."""
    def wrap(cls):
        if not why:
            return cls
        if not CI:
            return unittest.skip(why)(cls)

        def setUp(self):
            cannot_run(self, why)
        cls.setUp = setUp
        return cls
    return wrap


def gmt_has_trace():
    """gmt has `gmt trace` only where the tracer could be built (kernel BTF)."""
    if not os.path.exists(GMT):
        return False
    r = subprocess.run([GMT, "trace", "--help"], capture_output=True, timeout=10)
    return r.returncode == 0


def tracer_missing(who):
    """Why the tracer's end-to-end tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "%s needs root to load BPF programs" % who
    if not os.path.exists(TRACE_JOB):
        return "trace_job not built (no fakecuda target)"
    if not gmt_has_trace():
        return "gmt built without the tracer (no kernel BTF)"
    return None


def thread_switches(pid):
    """{tid: (name, voluntary, involuntary)} of pid's threads now: each
    thread's context switches (/proc/PID/task/*/status), named as
    gmt__thread_start names the hook's."""
    out = {}
    base = "/proc/%d/task" % pid
    for tid in os.listdir(base):
        try:
            name = open("%s/%s/comm" % (base, tid)).read().strip()
            st = dict(l.split(":", 1) for l in open("%s/%s/status" % (base, tid)) if ":" in l)
        except OSError:
            continue  # ended meanwhile
        out[tid] = (name, int(st["voluntary_ctxt_switches"]), int(st["nonvoluntary_ctxt_switches"]))
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, timeout=10.0, interval=0.05, what="condition"):
    """Polls pred() until it returns a true value or timeout passes."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError("timed out after %.1fs waiting for %s (last: %r)" % (timeout, what, last))


# Run as nobody by hold_fds: N descriptors (dups of /dev/null) held by as
# many processes as the open-file limit needs, until stdin closes.
_FD_HOLDER = r"""
import os, resource, sys
want = int(sys.argv[1])
per = resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 32
r, w = os.pipe()
kids = []
for i in range(0, want, per):
    pid = os.fork()
    if pid == 0:
        os.close(r)
        fd = os.open("/dev/null", os.O_RDONLY)
        held = [os.dup(fd) for _ in range(min(per, want - i) - 1)]
        os.write(w, b"%d\n" % (len(held) + 1))
        os.read(0, 1)  # until stdin closes
        os._exit(0)
    kids.append(pid)
os.close(w)
got = 0
with os.fdopen(r) as f:
    for _ in kids:
        got += int(f.readline())
print("HOLDING", got, flush=True)
sys.stdin.readline()
for k in kids:
    os.waitpid(k, 0)
"""
NOBODY = 65534


def hold_fds(n):
    """A node full of open files: n descriptors held by nobody (root only),
    in processes of the hard open-file limit each. Returns the Popen;
    closing its stdin ends it."""
    import resource
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    def drop():
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    # The system's python: nobody may not enter a user's own install.
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    p = subprocess.Popen([py, "-c", _FD_HOLDER, str(n)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, preexec_fn=drop)
    line = p.stdout.readline().split()
    if line != ["HOLDING", str(n)]:
        p.kill()
        p.wait(timeout=10)
        raise AssertionError("nobody could not hold %d descriptors: %r" % (n, line))
    return p


def daemon_env(env):
    """env for one of gmt's own programs: GMT_DAEMON_LIBS, where set, names
    the folder of the shared libraries they need (the GPU machine)."""
    env = dict(env)
    if os.environ.get("GMT_DAEMON_LIBS"):
        env["LD_LIBRARY_PATH"] = os.environ["GMT_DAEMON_LIBS"]
    return env


class Daemon:
    def __init__(self, name, argv, env, logdir):
        self.name = name
        self.argv = argv
        self.log_path = os.path.join(logdir, "%s.log" % name)
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(argv, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)

    def output(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        """Stops the daemon; returns its exit code (killed after timeout)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
                self.log.close()
                # The log goes with the test's folder: its tail is the
                # only trace of where the stop hung.
                raise AssertionError("%s did not stop within %.0fs of %s; its log ends:\n%s"
                                     % (self.name, timeout, sig, self.output()[-3000:]))
        self.log.close()
        return self.proc.returncode


class Prog:
    """A test program under the hook, talking line by line on stdin/stdout.
    A thread reads its stdout so that waits can be bounded."""

    def __init__(self, argv, env, preexec_fn=None):
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1,
                                     preexec_fn=preexec_fn, start_new_session=True)
        self.lines = queue.Queue()
        self.err_lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.err_reader = threading.Thread(target=self._read_err, daemon=True)
        self.reader.start()
        self.err_reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _read_err(self):
        for line in self.proc.stderr:
            self.err_lines.append(line)

    def stderr(self):
        """What the program wrote on stderr so far."""
        return "".join(self.err_lines)

    def expect(self, prefix, timeout=20.0):
        """Reads stdout lines until one starts with prefix; returns its key=value fields."""
        return self.expect_all([prefix], timeout)[prefix]

    def expect_all(self, prefixes, timeout=20.0):
        """Reads stdout lines until each prefix has started one, in any order;
        returns {prefix: its key=value fields}."""
        deadline = time.monotonic() + timeout
        seen, found = [], {}
        while True:
            left = deadline - time.monotonic()
            try:
                line = self.lines.get(timeout=max(0.0, left)) if left > 0 else None
            except queue.Empty:
                line = None
            if line is None:
                break
            seen.append(line)
            for prefix in prefixes:
                if line.startswith(prefix) and prefix not in found:
                    found[prefix] = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
            if len(found) == len(prefixes):
                return found
        self.proc.kill()
        self.proc.wait(timeout=5)
        raise AssertionError("no %r lines from %s within %.0fs; stdout: %s; stderr: %s"
                             % ([x for x in prefixes if x not in found], self.proc.args, timeout,
                                seen, self.stderr()))

    def send(self, line="go"):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def stop(self):
        """Kills the program and whatever it forked, and closes its pipes."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=5)
        # The readers end when the last writer (a forked child too) is gone.
        self.reader.join(timeout=5)
        self.err_reader.join(timeout=5)
        if self.reader.is_alive() or self.err_reader.is_alive():
            return  # closing a pipe a thread still reads would block
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except Exception:
                pass

    def records(self, prefixes=("T ",), done="DONE ", timeout=60.0):
        """Reads lines until one starts with done; returns the key=value
        fields of every line starting with one of prefixes or with done."""
        rows = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                continue
            if line is None:
                break
            if line.startswith(tuple(prefixes) + (done,)):
                rows.append(dict(x.split("=", 1) for x in line.split()[1:] if "=" in x))
                if line.startswith(done):
                    return rows
        raise AssertionError("no %r line from %s within %.0fs; last %s; stderr: %s"
                             % (done, self.proc.args, timeout, rows[-3:], self.stderr()[-2000:]))

    def finish(self, timeout=20.0):
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError("%s did not exit within %.0fs" % (self.proc.args, timeout))
        self.stop()  # whatever it left behind
        return rc, self.stderr()


def fake_uuid(dev):
    """The fake driver's UUID of its device dev (test/fakecuda/machine.c)."""
    return "GPU-fa4ec0da-0000-0000-0000-0000000000%02x" % dev


class Node:
    """One node's gmt: a scheduler on a fresh port, pod managers, hooked
    programs, all under one temp folder. stop() ends everything it started.
    Used by the end-to-end tests and by the benchmarks."""

    def __init__(self, config, env=None, fake=True):
        self.tmp = tempfile.mkdtemp(prefix="gmt-e2e-")
        self.base_env = dict(os.environ if env is None else env)
        self.fake = fake
        self.daemons = []
        self.progs = []
        self.config_path = os.path.join(self.tmp, "resource-config.txt")
        self.write_config(config)
        self.schd_port = free_port()
        self.schd_url = "tcp://127.0.0.1:%d" % self.schd_port
        self.schd_ipc = os.path.join(self.tmp, "run", "schd.sock")
        self.pmgr_urls = {}

    def write_config(self, text):
        """Writes resource-config.txt as an editor does: a new file renamed
        over the old, so the scheduler never reads a half-written one."""
        tmp = self.config_path + ".new"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, self.config_path)

    def stop(self):
        for p in self.progs:
            p.stop()
        for d in reversed(self.daemons):
            try:
                d.stop(timeout=5)
            except AssertionError:
                pass
        if os.environ.get("GMT_E2E_KEEP"):
            print("kept", self.tmp, file=sys.stderr)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def env(self, **extra):
        """The environment of gmt's own programs (GMT_DAEMON_LIBS, where set,
        names the folder of the shared libraries they need)."""
        env = daemon_env(self.prog_env())
        env.update(extra)
        return env

    def prog_env(self, **extra):
        """The environment of a CUDA program (GMT_HOOK_LIBS, where set, names
        the folder of the few libraries the hook needs, kept apart so that
        a framework's own libraries are not shadowed)."""
        env = dict(self.base_env)
        # Staged copies (hook/pin/stage.c) count their pinned buffers in a
        # process's pinned_bytes, and start by the machine's CPU count: off
        # on the fake unless a test asks, so that its pinned counts do not
        # depend on the machine.
        if self.fake:
            env.setdefault("GMT_STAGE_THREADS", "0")
        if os.environ.get("GMT_HOOK_LIBS"):
            env["LD_LIBRARY_PATH"] = os.environ["GMT_HOOK_LIBS"]
        if self.fake:
            env.update({"GMT_FAKE_DIR": self.tmp, "GMT_FAKE_MEM": "8Gi",
                        "LD_LIBRARY_PATH": FAKECUDA_DIR,
                        "GMT_REAL_LIBCUDA": os.path.join(FAKECUDA_DIR, "libcuda.so.1")})
        if ASAN_PRELOAD:
            # Leaks in programs killed by tests are not what we test here.
            env["ASAN_OPTIONS"] = "detect_leaks=0"
        env.update(extra)
        return env

    def start_schd(self, *extra, wait=True):
        argv = [SCHD, "-c", self.config_path, "--listen", self.schd_url,
                "--listen", "ipc://" + self.schd_ipc, "--state-dir", os.path.join(self.tmp, "state"),
                "-v"] + list(extra)
        if "--metrics" not in extra:
            # Not the default 127.0.0.1:9479: tests run side by side
            # (test_metrics.py asks for a free port of its own).
            argv += ["--metrics", "off"]
        d = Daemon("schd", argv, self.env(), self.tmp)
        self.daemons.append(d)
        if wait:
            wait_for(lambda: not d.alive() or self.try_status() is not None, what="gmt-schd to answer")
            if not d.alive():
                raise AssertionError("gmt-schd exited: " + d.output())
        return d

    def start_pmgr(self, name, *extra, wait=True):
        port = self.pmgr_urls.get(name, (None, free_port()))[1]
        argv = [PMGR, "--port", str(port), "--name", name, "--schd", self.schd_url,
                "--ipc", os.path.join(self.tmp, "run", "pmgr-%s.sock" % name), "-v"] + list(extra)
        d = Daemon("pmgr-" + name, argv, self.env(), self.tmp)
        self.daemons.append(d)
        self.pmgr_urls[name] = ("tcp://127.0.0.1:%d" % port, port)
        if wait:
            wait_for(lambda: not d.alive() or self.pod(name).get("connected"),
                     what="pod %s to connect" % name)
            if not d.alive():
                raise AssertionError("gmt-pmgr exited: " + d.output())
        return d

    @staticmethod
    def preload():
        return HOOK if not ASAN_PRELOAD else ASAN_PRELOAD + ":" + HOOK

    def hook_env(self, pod, **extra):
        env = self.prog_env(LD_PRELOAD=self.preload(), GMT_PMGR=self.pmgr_urls[pod][0])
        env.update(extra)
        return env

    def run_prog(self, pod, name, *args, env=None):
        path = name if os.path.isabs(name) else os.path.join(PROGS, name)
        p = Prog([path] + list(args), env or self.hook_env(pod))
        self.progs.append(p)
        return p

    def gmt(self, *args, timeout=10):
        return subprocess.run([GMT, "--schd", self.schd_url] + list(args), capture_output=True,
                              text=True, timeout=timeout, env=self.env())

    def try_status(self):
        r = self.gmt("status", "--json")
        if r.returncode != 0:
            return None
        return json.loads(r.stdout)

    def status(self):
        r = self.gmt("status", "--json")
        if r.returncode != 0:
            raise AssertionError("gmt status failed: " + r.stderr)
        return json.loads(r.stdout)

    def pod(self, name):
        st = self.try_status() or {"pods": []}
        for p in st["pods"]:
            if p["name"] == name:
                return p
        return {}

    def process(self, pod, pid):
        for p in self.pod(pod).get("processes", []):
            if p["pid"] == pid:
                return p
        return None

    def wait_process(self, pod, pid, timeout=10.0, **want):
        """Waits until the pod shows process pid with every field in want."""
        def match():
            p = self.process(pod, pid)
            return p if p and all(p.get(k) == v for k, v in want.items()) else None
        try:
            return wait_for(match, timeout=timeout, what="pid %d in pod %s with %s" % (pid, pod, want))
        except AssertionError:
            progs = "".join("\n  %s stderr: %s" % (p.proc.args, p.stderr()) for p in self.progs)
            logs = "".join("\n  %s log: %s" % (d.name, d.output()[-2000:]) for d in self.daemons)
            raise AssertionError("pod %s never showed pid %d with %s; last status: %s%s%s"
                                 % (pod, pid, want, json.dumps(self.pod(pod)), progs, logs))


class GmtTestCase(unittest.TestCase):
    """Each test gets its own Node; its methods are the test's."""

    CONFIG = "2\na 0.3 1.0 1Gi\nb 0.7 1.0 2Gi\n"
    FAKE = True  # False: the real driver (a test run again on the GPU machine)

    def setUp(self):
        self.node = Node(self.CONFIG, fake=self.FAKE)

    def tearDown(self):
        self.node.stop()

    def finish_freed(self, p):
        """For a memprog that frees at one line (printing FREED) and exits at
        the next: both, and its exit must be clean."""
        p.send()
        p.expect("FREED")
        p.send()
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)

    def __getattr__(self, name):
        # Only called for names the test case lacks: the node's.
        if name == "node":
            raise AttributeError(name)
        return getattr(self.node, name)
