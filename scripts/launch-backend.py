#!/usr/bin/env python3
"""launch-backend.py: one node's gmt by hand, as Gemini's launch-backend.py
started its backend: gmt-schd, then one gmt-pmgr per pod of
resource-config.txt, in the file's order on consecutive ports. It prints
which pod has which port, waits (bounded) until every pod is connected,
and stays in the foreground; SIGINT, SIGTERM or SIGHUP stop everything it
started, as does any of its daemons dying (named, exit 1). Python 3
standard library only; docs/operators.md.

  launch-backend.py -c FILE [--schd-port N] [--base-port N] [--state-dir DIR]
                    [--run-dir DIR] [--metrics ADDR] [--timeout S] [-- GMT_SCHD_ARGS...]
"""
import argparse
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # nothing written beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from launchlib import (DEFAULT_BASE_PORT, DEFAULT_RUN_DIR, DEFAULT_SCHD_PORT,  # noqa: E402
                       MAX_SUN_PATH, LaunchError, find_program, listening, pod_names,
                       port_in_use, tcp_url)

PROG = "launch-backend"
STOP_GRACE_S = 5.0  # SIGTERM, then SIGKILL after this long
POLL_S = 0.1
LOG_TAIL_LINES = 20


def say(msg):
    print("%s: %s" % (PROG, msg), file=sys.stderr, flush=True)


def out(msg=""):
    print(msg, flush=True)


def how_it_ended(rc):
    if rc is None:
        return "is running"
    if rc < 0:
        try:
            return "was killed by %s" % signal.Signals(-rc).name
        except ValueError:
            return "was killed by signal %d" % -rc
    return "exited with code %d" % rc


def _pdeathsig():
    """A preexec_fn that has the kernel send SIGTERM to the child when this
    launcher dies, even by SIGKILL, so that no daemon outlives it. None
    where prctl cannot be had (the launcher's own stop still applies)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    PR_SET_PDEATHSIG = 1

    def preexec():
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
    return preexec


class Daemon:
    """One started daemon, its log (appended to: a kept --state-dir keeps
    the history of earlier runs) and where this run's part of it begins."""

    def __init__(self, what, pod, port, url, ipc, argv, log_path, env, preexec):
        self.what, self.pod, self.port, self.url, self.ipc = what, pod, port, url, ipc
        self.argv = argv
        self.log_path = log_path
        # Not through a link, and the daemon's user's alone: the log says
        # who ran what.
        self.log = os.fdopen(os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT |
                                     os.O_NOFOLLOW | os.O_CLOEXEC, 0o600), "ab")
        self.log.write(("==== %s: %s started at %s\n"
                        % (PROG, " ".join(argv), time.strftime("%Y-%m-%d %H:%M:%S"))).encode())
        self.log.flush()
        self.log_start = self.log.tell()
        # A session of its own: a terminal's Ctrl-C reaches the launcher
        # only, which stops the daemons in order (pod managers first).
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                     preexec_fn=preexec)

    def name(self):
        if self.pod is None:
            return "gmt-schd (pid %d)" % self.proc.pid
        return "gmt-pmgr of pod '%s' (pid %d)" % (self.pod, self.proc.pid)

    def tail(self, n=LOG_TAIL_LINES):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_start)
                lines = f.read().decode(errors="replace").splitlines()
        except OSError as e:
            return "(cannot read %s: %s)" % (self.log_path, e.strerror)
        if not lines:
            return "(%s is empty)" % self.log_path
        return "\n".join("  | " + line for line in lines[-n:])

    def died(self, doing):
        """A LaunchError naming this daemon, how it ended and its log's tail."""
        return LaunchError("%s %s %s; the end of its log %s:\n%s"
                           % (self.name(), how_it_ended(self.proc.poll()), doing, self.log_path,
                              self.tail()))


class Backend:
    def __init__(self, args, schd_extra):
        self.args = args
        self.schd_extra = schd_extra
        self.daemons = []  # gmt-schd first
        self.state_dir = None
        self.state_dir_created = False
        self.run_dir = None
        self.run_dir_created = False
        self.stop_signal = None

    # ---- signals ----

    def on_signal(self, signum, _frame):
        if self.stop_signal is None:
            self.stop_signal = signum

    def stopping(self):
        return self.stop_signal is not None

    # ---- start ----

    def run(self):
        a = self.args
        schd = find_program("gmt-schd")
        pmgr = find_program("gmt-pmgr")
        self.gmt = find_program("gmt")

        # Our reading of the file gives the pods' order (their ports); a
        # file we cannot read is left for gmt-schd to refuse in its words.
        try:
            names, names_err = pod_names(a.config), None
        except LaunchError as e:
            names, names_err = None, e
        self.check_ports(names)
        self.make_state_dir()
        self.choose_run_dir(names or [])

        schd_url = tcp_url(a.schd_port)
        schd_ipc = os.path.join(self.run_dir, "schd.sock")
        argv = [schd, "-c", a.config, "--listen", schd_url, "--listen", "ipc://" + schd_ipc,
                "--state-dir", os.path.join(self.state_dir, "store")]
        argv += self.metrics_flags(schd) + self.schd_extra
        preexec = _pdeathsig()
        env = dict(os.environ)
        d = Daemon("gmt-schd", None, a.schd_port, schd_url, schd_ipc, argv,
                   os.path.join(self.state_dir, "gmt-schd.log"), env, preexec)
        self.daemons.append(d)
        self.schd_url = schd_url
        deadline = time.monotonic() + a.timeout

        st = self.wait(deadline, lambda s: True, "gmt-schd to answer `gmt status`")
        if st is None:
            return 0
        if names_err:
            raise LaunchError("gmt-schd accepted %s but %s cannot read it: %s"
                              % (a.config, PROG, names_err), 2)
        listed = sorted(p["name"] for p in st.get("pods", []))
        if listed != sorted(names):
            raise LaunchError("%s read the pods %s from %s, gmt-schd reads %s: not starting pod "
                              "managers for a file read two ways"
                              % (PROG, names, a.config, listed))

        for i, pod in enumerate(names):
            port = a.base_port + i
            ipc = os.path.join(self.run_dir, "pmgr-%d.sock" % port)
            argv = [pmgr, "--name", pod, "--port", str(port), "--schd", "ipc://" + schd_ipc,
                    "--ipc", ipc, "--wait", "%g" % max(1.0, a.timeout)]
            self.daemons.append(Daemon("gmt-pmgr", pod, port, tcp_url(port), ipc, argv,
                                       os.path.join(self.state_dir, "gmt-pmgr-%s.log" % pod),
                                       env, preexec))
        self.print_table()

        def all_connected(s):
            up = {p["name"] for p in s.get("pods", []) if p.get("connected")}
            return all(n in up for n in names)
        if self.wait(deadline, all_connected,
                     "all %d pods to show connected in `gmt status`" % len(names)) is None:
            return 0
        # gmt finds gmt-schd at the default socket by itself; elsewhere
        # GMT_SCHD names it for every gmt command.
        where = ("" if self.run_dir == DEFAULT_RUN_DIR else
                 " For gmt status, top and trace: export GMT_SCHD=ipc://%s."
                 % os.path.join(self.run_dir, "schd.sock"))
        out("%s: ready: gmt-schd on %s and %d pod manager%s, all connected (%.1f s). Run a job "
            "with: scripts/launch-command.py --pod %s%s%s -- CMD.%s Ctrl-C or SIGTERM stops "
            "them all." % (PROG, schd_url, len(names), "" if len(names) == 1 else "s",
                           a.timeout - (deadline - time.monotonic()),
                           names[0] if names else "NAME",
                           " -c " + a.config,
                           ("" if a.base_port == DEFAULT_BASE_PORT else
                            " --base-port %d" % a.base_port) +
                           ("" if self.run_dir == DEFAULT_RUN_DIR else
                            " --run-dir " + self.run_dir), where))

        while not self.stopping():
            for d in self.daemons:
                if d.proc.poll() is not None:
                    raise d.died("unexpectedly; stopping the others")
            time.sleep(POLL_S)
        return 0

    def check_ports(self, names):
        a = self.args
        wanted = [(a.schd_port, "gmt-schd's")]
        for i, pod in enumerate(names or []):
            wanted.append((a.base_port + i, "pod '%s''s manager's" % pod))
        seen = {}
        for port, who in wanted:
            if not 1 <= port <= 65535:
                raise LaunchError("port %d (%s) is not a TCP port (1 to 65535): choose another "
                                  "--base-port or --schd-port" % (port, who), 2)
            if port in seen:
                raise LaunchError("port %d would be both %s and %s: --schd-port must lie "
                                  "outside --base-port's %d ports"
                                  % (port, seen[port], who, len(names or [])), 2)
            seen[port] = who
        for port, who in wanted:
            why = port_in_use(port)
            if why:
                raise LaunchError("port %d (%s) is in use on 127.0.0.1 (%s): stop what holds it "
                                  "or choose another %s"
                                  % (port, who, why,
                                     "--schd-port" if port == a.schd_port else "--base-port"))

    def make_state_dir(self):
        if self.args.state_dir:
            self.state_dir = os.path.abspath(self.args.state_dir)
            try:
                os.makedirs(self.state_dir, mode=0o700, exist_ok=True)
            except OSError as e:
                raise LaunchError("--state-dir %s: %s" % (self.state_dir, e.strerror), 2)
        else:
            self.state_dir = tempfile.mkdtemp(prefix="gmt-backend-")
            self.state_dir_created = True

    def choose_run_dir(self, names):
        """Where the daemons' ipc sockets go: --run-dir; else /run/gmt, the
        daemons' own default, where this user may make sockets and no gmt
        daemon listens on the ones we would use; else under the state
        folder (said in the table)."""
        a = self.args
        socks = ["schd.sock"] + ["pmgr-%d.sock" % (a.base_port + i) for i in range(len(names))]
        self.run_dir_why = None
        if a.run_dir:
            d = os.path.abspath(a.run_dir)
        else:
            d, why = DEFAULT_RUN_DIR, None
            parent = os.path.dirname(d)
            if os.path.isdir(d):
                if not os.access(d, os.W_OK | os.X_OK):
                    why = "%s is not writable by uid %d" % (d, os.geteuid())
            elif not os.access(parent, os.W_OK | os.X_OK):
                why = "%s does not exist and %s is not writable by uid %d" % (d, parent,
                                                                              os.geteuid())
            if why is None:
                live = [s for s in socks if listening("ipc://" + os.path.join(d, s))]
                if live:
                    why = "a gmt daemon already listens on %s" % os.path.join(d, live[0])
            if why:
                d = os.path.join(self.state_dir, "run")
                self.run_dir_why = why
        for s in socks:
            p = os.path.join(d, s)
            if len(p) > MAX_SUN_PATH:
                raise LaunchError("ipc socket path %s is %d characters, more than a socket's %d: "
                                  "give a shorter --state-dir or --run-dir"
                                  % (p, len(p), MAX_SUN_PATH), 2)
            if listening("ipc://" + p):
                raise LaunchError("a daemon already listens on %s: stop it or give another "
                                  "--run-dir" % p)
        if not os.path.isdir(d):
            try:
                os.makedirs(d, mode=0o755)
            except OSError as e:
                raise LaunchError("cannot make the socket folder %s: %s" % (d, e.strerror))
            self.run_dir_created = True
        self.run_dir = d

    def metrics_flags(self, schd):
        """--metrics ADDR for gmt-schd, when asked and when this gmt-schd
        has the flag (its --help lists it)."""
        if not self.args.metrics:
            return []
        try:
            r = subprocess.run([schd, "--help"], stdin=subprocess.DEVNULL, capture_output=True,
                               text=True, timeout=10)
            has = "--metrics" in r.stdout
        except (OSError, subprocess.TimeoutExpired):
            has = False
        if not has:
            say("warning: %s --help lists no --metrics: this gmt-schd serves no Prometheus "
                "metrics; --metrics %s ignored" % (schd, self.args.metrics))
            self.metrics = None
            return []
        self.metrics = self.args.metrics
        return ["--metrics", self.args.metrics]

    def status(self):
        try:
            r = subprocess.run([self.gmt, "--schd", self.schd_url, "status", "--json"],
                               stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=3)
        except subprocess.TimeoutExpired:
            self.status_err = "`gmt status` did not answer within 3 s"
            return None
        if r.returncode != 0:
            self.status_err = r.stderr.strip() or "gmt status exited %d" % r.returncode
            return None
        try:
            return json.loads(r.stdout)
        except ValueError as e:
            self.status_err = "gmt status --json printed no JSON (%s)" % e
            return None

    def wait(self, deadline, ready, what):
        """Polls `gmt status --json` until ready(status) holds; returns the
        status, or None when a signal asked us to stop. Raises LaunchError
        naming what did not come up (a daemon that died, or the deadline)."""
        self.status_err = "not asked yet"
        st = None
        while True:
            if self.stopping():
                return None
            for d in self.daemons:
                if d.proc.poll() is not None:
                    err = d.died("while waiting for %s" % what)
                    if d.pod is None and d.proc.returncode == 2:
                        err.code = 2  # a usage error: flags or the config
                    raise err
            st = self.status()
            if st is not None and ready(st):
                return st
            if time.monotonic() >= deadline:
                break
            time.sleep(POLL_S)
        lines = ["timed out after %g s waiting for %s" % (self.args.timeout, what)]
        if st is None:
            lines.append("gmt --schd %s status: %s" % (self.schd_url, self.status_err))
            lines.append("%s's log %s ends:\n%s" % (self.daemons[0].name(),
                                                     self.daemons[0].log_path,
                                                     self.daemons[0].tail()))
        else:
            up = {p["name"] for p in st.get("pods", []) if p.get("connected")}
            for d in self.daemons[1:]:
                if d.pod not in up:
                    lines.append("pod '%s' is not connected; %s's log %s ends:\n%s"
                                 % (d.pod, d.name(), d.log_path, d.tail()))
        raise LaunchError("\n".join(lines))

    def print_table(self):
        a = self.args
        rows = [("WHAT", "POD", "PORT", "PID", "URL", "IPC", "LOG")]
        for d in self.daemons:
            rows.append((d.what, d.pod or "-", str(d.port), str(d.proc.pid), d.url,
                         "ipc://" + d.ipc, d.log_path))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
        out("%s: gmt-schd and %d pod manager%s for %s"
            % (PROG, len(self.daemons) - 1, "" if len(self.daemons) == 2 else "s", a.config))
        for r in rows:
            out("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
        out("state: %s (%s)" % (self.state_dir, "a temporary folder, removed at exit"
                                if self.state_dir_created else "kept"))
        if self.run_dir_why:
            out("ipc sockets: in %s, not %s: %s" % (self.run_dir, DEFAULT_RUN_DIR,
                                                    self.run_dir_why))
        else:
            out("ipc sockets: in %s" % self.run_dir)
        if getattr(self, "metrics", None):
            out("metrics: gmt-schd --metrics %s" % self.metrics)

    # ---- stop ----

    def stop_all(self):
        """Pod managers first (they would only reconnect to a scheduler
        that went first), then gmt-schd: SIGTERM, then SIGKILL after
        STOP_GRACE_S. Then whatever they could not remove themselves."""
        pmgrs = [d for d in self.daemons if d.pod is not None]
        schds = [d for d in self.daemons if d.pod is None]
        for group in (pmgrs, schds):
            for d in group:
                if d.proc.poll() is None:
                    try:
                        d.proc.send_signal(signal.SIGTERM)
                    except ProcessLookupError:
                        pass
            end = time.monotonic() + STOP_GRACE_S
            for d in group:
                try:
                    d.proc.wait(timeout=max(0.0, end - time.monotonic()))
                except subprocess.TimeoutExpired:
                    say("%s did not stop within %g s of SIGTERM: killing it"
                        % (d.name(), STOP_GRACE_S))
                    d.proc.kill()
                    d.proc.wait()
        for d in self.daemons:
            d.log.close()
            # A daemon killed (or dead) leaves its socket files (the ipc
            # one and the bell's beside it): ours to remove, unless
            # something else listens there now.
            for path in (d.ipc, d.ipc + ".bell"):
                if os.path.exists(path) and not listening("ipc://" + path):
                    try:
                        os.unlink(path)
                    except OSError:
                        pass
        if self.run_dir_created:
            try:
                os.rmdir(self.run_dir)  # only when empty
            except OSError:
                pass
        if self.state_dir_created:
            shutil.rmtree(self.state_dir, ignore_errors=True)


def parse_args(argv):
    if "--" in argv:
        i = argv.index("--")
        argv, schd_extra = argv[:i], argv[i + 1:]
    else:
        schd_extra = []
    p = argparse.ArgumentParser(
        prog="launch-backend.py",
        description="Starts gmt-schd and one gmt-pmgr per pod of resource-config.txt (in the "
        "file's order, on --base-port, --base-port+1, ...), prints which pod has which port, "
        "waits until every pod is connected and stays in the foreground. SIGINT, SIGTERM or "
        "SIGHUP stop them all; a daemon dying stops the others and exits 1. Arguments after "
        "'--' go to gmt-schd. The build is found through GMT_BUILD_DIR, else on PATH and "
        "where `make install` puts it.",
        epilog="Exit: 0 stopped by a signal; 1 something did not come up or died (named, "
        "with its log's end); 2 bad flags or a config gmt-schd refuses (its file:line "
        "messages).")
    p.add_argument("-c", "--config", required=True, metavar="FILE",
                   help="resource-config.txt (gmt-schd re-reads it when it changes; a pod "
                   "added later needs a restart of this launcher for its manager)")
    p.add_argument("--schd-port", type=int, default=DEFAULT_SCHD_PORT, metavar="N",
                   help="gmt-schd's TCP port on 127.0.0.1 (default %(default)s)")
    p.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT, metavar="N",
                   help="the first pod's manager's port; the i-th pod gets N+i (default "
                   "%(default)s)")
    p.add_argument("--state-dir", metavar="DIR",
                   help="the daemons' logs and gmt-schd's store (kept; default: a temporary "
                   "folder, removed at exit)")
    p.add_argument("--run-dir", metavar="DIR",
                   help="where the ipc sockets go (default %s when this user may make sockets "
                   "there, else STATE_DIR/run)" % DEFAULT_RUN_DIR)
    p.add_argument("--metrics", metavar="ADDR",
                   help="passed to gmt-schd as --metrics ADDR when its --help lists the flag")
    p.add_argument("--timeout", type=float, default=10.0, metavar="S",
                   help="how long everything may take to come up (default %(default)s)")
    args = p.parse_args(argv)
    if not 0 < args.timeout <= 3600:
        p.error("--timeout %g: want seconds above 0, at most 3600" % args.timeout)
    return args, schd_extra


def main(argv):
    args, schd_extra = parse_args(argv)
    b = Backend(args, schd_extra)
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, b.on_signal)
    code = 0
    try:
        code = b.run()
    except LaunchError as e:
        say(str(e))
        code = e.code
    except OSError as e:  # a program that cannot be run, a log that cannot be made
        say("%s%s" % (e.strerror or e, ": " + e.filename if e.filename else ""))
        code = 1
    finally:
        n = len(b.daemons)
        if b.stop_signal is not None:
            say("%s: stopping %d daemon%s" % (signal.Signals(b.stop_signal).name, n,
                                               "" if n == 1 else "s"))
        b.stop_all()
        if b.stop_signal is not None:
            say("stopped")
        elif code != 0 and b.state_dir_created and b.daemons:
            say("the logs named above went with the temporary folder; --state-dir DIR keeps "
                "them")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
