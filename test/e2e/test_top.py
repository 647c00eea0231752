"""End-to-end: `gmt top` in a real terminal. tmux (on a private socket,
killed whatever happens) runs it in a 160x40 pane (80x40 where the test
says so); the test reads the screen with capture-pane and types with
send-keys. Both pods are shown, with the memory, quota and context
numbers `gmt status --json` gives; m and n reorder them; ? shows the
keys; q ends it with exit 0; a scheduler killed under it shows as
unreachable within seconds while the view goes on and answers keys, and
one that comes back is shown again. At 80 columns a busy pod's row has
its share bar against REQUEST, its history, its memory bar against its
quota and its processes under it; Enter folds them, j/k pick a pod; a
process that exits leaves the view (its row, and with the tracer its
hottest buffers). Colour only where it is wanted (NO_COLOR). Without a
terminal it refuses and points at `gmt status` and `gmt top -n`, which
prints refreshes as text, a GPU process outside gmt as one UNMANAGED line
under the GPUs. tmux is one of the packages scripts/setup.sh
installs: under CI=true a missing tmux fails the test instead of skipping
it."""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
import unittest

from gmt_e2e import (BUILD, GMT, GmtTestCase, build_path, cannot_run, free_port, tracer_missing,
                     unless_runnable, wait_for)

DEV_ALLOC = os.path.join(BUILD, "test", "e2e", "memprogs", "dev_alloc")
PIN_BUFFERS = os.path.join(BUILD, "test", "e2e", "memprogs", "pin_buffers")
SPIN = build_path("test", "e2e", "tokenprogs", "spin_load")
MIB = 1 << 20
# The history's glyphs: ASCII, or Unicode blocks where the locale is UTF-8.
SPARK = set("_.-=+*%#") | set("\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588")
# A colour of gmt top's (SGR 31-34), as capture-pane -e writes it.
COLOUR = re.compile(r"\x1b\[(?:[0-9]+;)*3[1-4]m")


def human(n):
    """gmt_human_bytes (client/cli/status_json.c), as gmt status and top write bytes."""
    if n < 1024:
        return "%d B" % n
    v, u = n / 1024, 0
    units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    while v >= 1024 and u < 5:
        v /= 1024
        u += 1
    return "%.1f %s" % (v, units[u])


class Tmux:
    """One tmux server of our own (tmux -L NAME), one session, one pane."""

    def __init__(self, env):
        self.name = "gmt-top-%d-%d" % (os.getpid(), int(time.monotonic() * 1000) % 100000)
        self.env = env
        self.started = False

    def tmux(self, *args, check=True):
        r = subprocess.run(["tmux", "-L", self.name] + list(args), capture_output=True, text=True,
                           timeout=10, env=self.env)
        if check and r.returncode != 0:
            raise AssertionError("tmux %s: %s" % (" ".join(args), r.stderr))
        return r

    def start(self, argv, rc_path, x=160, y=40, env=()):
        """Runs argv in an x by y pane (env: NAME=VALUE for it); the shell
        around it writes its exit status to rc_path (tmux itself may be
        slow to reap a command that ended). remain-on-exit keeps the pane's
        last screen for a failure's message; set in the same tmux call as
        the session."""
        self.started = True
        self.rc_path = rc_path
        cmd = "%s; echo $? > %s" % (" ".join(shlex.quote(a) for a in argv), shlex.quote(rc_path))
        envs = [a for e in env for a in ("-e", e)]
        self.tmux("new-session", "-d", "-s", "top", "-x", str(x), "-y", str(y), *envs, cmd, ";",
                  "set-option", "-t", "top", "remain-on-exit", "on")

    def screen(self, escapes=False):
        """The pane's text; with escapes, its colours and attributes too."""
        return self.tmux("capture-pane", "-p", *(["-e"] if escapes else []), "-t", "top").stdout

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "top", *keys)

    def exit_status(self):
        """None while the command runs, else its exit status."""
        try:
            with open(self.rc_path) as f:
                text = f.read()
        except FileNotFoundError:
            return None
        return int(text) if text.endswith("\n") else None

    def kill(self):
        """Ends the server and removes its socket (kill-server leaves it)."""
        if self.started:
            self.tmux("kill-server", check=False)
            folder = os.path.join(os.environ.get("TMUX_TMPDIR", "/tmp"), "tmux-%d" % os.getuid())
            try:
                os.unlink(os.path.join(folder, self.name))
            except OSError:
                pass


def is_row(line, name):
    """Whether line is the pods table's row of pod name: a gutter of two
    cells ('>' the pod picked; '-' / '+' its processes shown / folded),
    then the name."""
    return (len(line) > len(name) + 2 and line[0] in " >" and line[1] in " -+"
            and line[2:].startswith(name + " "))


def row(screen, name):
    """The pods table's row of pod name."""
    for line in screen.splitlines():
        if is_row(line, name):
            return line
    return None


def order(screen, names):
    """The names in the order their rows appear."""
    at = {}
    for i, line in enumerate(screen.splitlines()):
        for n in names:
            if is_row(line, n) and n not in at:
                at[n] = i
    return sorted(at, key=at.get)


def cell(screen, line, title):
    """What line (a row of the pods table) shows under the column title,
    from the table's heading: every column there is left-aligned, two
    cells apart, its title one word. None when the column is not shown."""
    head = next((l for l in screen.splitlines() if l.startswith("  POD ")), None)
    if head is None or line is None:
        return None
    starts = [(m.start(), m.group()) for m in re.finditer(r"\S+", head)]
    for i, (at, t) in enumerate(starts):
        if t == title:
            end = starts[i + 1][0] - 2 if i + 1 < len(starts) else len(line)
            return line[at:end].rstrip()
    return None


def processes_under(screen, name):
    """The process rows right under pod name's row ("pid N ..."), after
    its line of waits if it has one."""
    lines = screen.splitlines()
    for i, line in enumerate(lines):
        if is_row(line, name):
            out = []
            for l in lines[i + 1:]:
                if l.startswith("    waited ") and not out:
                    continue
                if not l.startswith("    pid "):
                    break
                out.append(l)
            return out
    return []


class TopCase(GmtTestCase):
    CONFIG = "2\na 0.3 1.0 1Gi\nb 0.7 1.0 2Gi\n"
    HELD = 96 * MIB

    def setUp(self):
        if not shutil.which("tmux"):
            cannot_run(self, "tmux is not installed (scripts/setup.sh installs it)")
        super().setUp()
        self.node.base_env["GMT_FAKE_DEVICES"] = "1"
        self.node.base_env.pop("CUDA_VISIBLE_DEVICES", None)
        self.tm = Tmux(self.env())

    def tearDown(self):
        self.tm.kill()
        super().tearDown()

    def logs(self):
        return "".join("\n%s: %s" % (d.name, d.output()[-1500:]) for d in self.daemons)

    def hold(self, pod, nbytes, **env):
        """A process of pod holding nbytes on GPU 0 (the fake driver)."""
        p = self.run_prog(pod, DEV_ALLOC, "0:%d" % nbytes, env=self.hook_env(pod, **env))
        p.expect("READY")
        wait_for(lambda: self.pod(pod).get("memory_used") == nbytes, timeout=10,
                 what="pod %s to hold %d bytes" % (pod, nbytes))
        return p

    def start_top(self, *args, x=160, y=40, env=()):
        self.tm.start([GMT, "--schd", self.schd_url, "top"] + list(args),
                      os.path.join(self.tmp, "top.rc"), x=x, y=y, env=env)

    def wait_screen(self, pred, what, timeout=10.0):
        """Waits until pred(screen) is true; returns that screen."""
        last = [""]

        def check():
            last[0] = self.tm.screen()
            return last[0] if pred(last[0]) else None
        try:
            return wait_for(check, timeout=timeout, interval=0.1, what=what)
        except AssertionError:
            raise AssertionError("the screen never showed %s:\n%s%s" % (what, last[0], self.logs()))

    def quit(self):
        self.tm.keys("q")
        wait_for(lambda: self.tm.exit_status() is not None, timeout=5,
                 what="gmt top to end after q")
        self.assertEqual(self.tm.exit_status(), 0, self.tm.screen())



class Top(TopCase):
    def test_pods_memory_order_help_and_quit(self):
        self.start_schd("--no-trace")
        self.start_pmgr("a")
        self.start_pmgr("b")
        self.hold("b", self.HELD, GMT_FAKE_CONTEXT_MIB="200")
        wait_for(lambda: self.pod("b").get("context_bytes"), timeout=10,
                 what="pod b's context memory")
        self.start_top()

        st = self.status()
        pods = {p["name"]: p for p in st["pods"]}
        self.assertEqual(pods["b"]["memory_used"], self.HELD)

        def shows_status(screen):
            for name, p in pods.items():
                r = row(screen, name)
                if not r or "%s / %s" % (human(p["memory_used"]), human(p["memory_limit"])) not in r:
                    return False
                if "%.2f/%.2f" % (p["request"], p["limit"]) not in r:
                    return False
                if p["context_bytes"] and human(p["context_bytes"]) not in r:
                    return False
            return True
        screen = self.wait_screen(shows_status, "both pods with gmt status --json's numbers")
        self.assertIn("96.0 MiB / 2.0 GiB", row(screen, "b"))
        self.assertIn("0 B / 1.0 GiB", row(screen, "a"))
        self.assertIn("200.0 MiB", row(screen, "b"))  # its context, not charged
        self.assertEqual(self.status()["pods"][1]["memory_used"], self.HELD)  # still held
        # The node's GPU line, and why there are no hot buffers.
        self.assertIn("WAITING", screen)
        def gpu_matches(screen):
            g = self.status()["devices"][0]
            want = "%s / %s" % (human(g["memory_free"]), human(g["memory_total"]))
            return any(line.startswith("0 ") and want in line for line in screen.splitlines())
        self.wait_screen(gpu_matches, "GPU 0's free / total as gmt status --json says")
        self.assertIn("hottest buffers: not shown", screen)
        self.assertIn("tracing is off", screen)

        # Default: by share (both idle: then by name); m: most memory first.
        self.assertEqual(order(screen, ["a", "b"]), ["a", "b"], screen)
        self.tm.keys("m")
        screen = self.wait_screen(lambda s: "sort: memory" in s, "sort: memory")
        self.assertEqual(order(screen, ["a", "b"]), ["b", "a"], screen)
        self.tm.keys("n")
        screen = self.wait_screen(lambda s: "sort: name" in s, "sort: name")
        self.assertEqual(order(screen, ["a", "b"]), ["a", "b"], screen)

        self.tm.keys("?")
        self.wait_screen(lambda s: "gmt top: keys" in s and row(s, "b") is None, "the help")
        self.tm.keys("x")
        self.wait_screen(lambda s: row(s, "b") is not None, "the pods again after the help")
        # A smaller terminal: drawn again at its size, cut, the keys still last.
        self.tm.tmux("resize-window", "-t", "top", "-x", "80", "-y", "8")
        screen = self.wait_screen(lambda s: len(s.splitlines()) <= 8 and "more rows" in s,
                                  "the view cut to 80x8")
        self.assertTrue(all(len(l) <= 80 for l in screen.splitlines()), screen)
        self.assertTrue(screen.rstrip("\n").splitlines()[-1].startswith("q quit"), screen)
        self.tm.tmux("resize-window", "-t", "top", "-x", "160", "-y", "40")
        self.wait_screen(lambda s: "more rows" not in s and row(s, "b"), "the view at 160x40")
        self.tm.keys("p")
        self.wait_screen(lambda s: "PAUSED" in s, "PAUSED")
        self.tm.keys("p")
        self.wait_screen(lambda s: "PAUSED" not in s, "the pause ended")
        self.quit()

    def test_scheduler_killed_shows_unreachable_and_the_view_goes_on(self):
        schd = self.start_schd("--no-trace")
        self.start_pmgr("a")
        self.start_pmgr("b")
        self.start_top("-d", "0.5")
        self.wait_screen(lambda s: row(s, "a") and row(s, "b"), "both pods")
        schd.proc.send_signal(signal.SIGKILL)
        schd.proc.wait(timeout=5)
        t0 = time.monotonic()
        screen = self.wait_screen(lambda s: "gmt-schd unreachable: " in s,
                                  "gmt-schd unreachable", timeout=5)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertIsNone(self.tm.exit_status(), screen)
        self.assertIn(self.schd_url, screen)
        self.assertTrue(row(screen, "a") and row(screen, "b"), screen)  # its last answer
        # Still answering keys while it retries.
        self.tm.keys("m")
        self.wait_screen(lambda s: "sort: memory" in s and "gmt-schd unreachable" in s,
                         "sort: memory while unreachable")
        time.sleep(1.5)  # some retries
        self.assertIsNone(self.tm.exit_status())
        # A scheduler back on the same address is found again.
        self.start_schd("--no-trace")
        self.wait_screen(lambda s: "gmt-schd unreachable" not in s and row(s, "a"),
                         "the scheduler back", timeout=10)
        self.quit()

    def test_without_a_terminal_it_points_at_gmt_status(self):
        r = subprocess.run([GMT, "--schd", self.schd_url, "top"], capture_output=True, text=True,
                           timeout=10, env=self.env(), stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("needs a terminal", r.stderr)
        self.assertIn("gmt status", r.stderr)
        self.assertIn("gmt top -n 1", r.stderr)
        self.assertEqual(r.stdout, "")
        r = self.gmt("top", "-d", "0")
        self.assertEqual(r.returncode, 2)
        self.assertIn("-d wants seconds", r.stderr)

    def busy_node(self):
        """Pods a and b; in b a process holding 96 MiB and one launching
        20 ms kernels. Returns (holder, spinner, their pids)."""
        self.start_schd("--no-trace")
        self.start_pmgr("a")
        self.start_pmgr("b")
        held = self.hold("b", self.HELD)
        spin = self.run_prog("b", SPIN, "--kernel-us", "20000", "--seconds", "0")
        spin.expect("READY")
        return held, spin, held.proc.pid, spin.proc.pid

    def test_at_80_columns_bars_history_processes_fold_and_exit(self):
        held, spin, held_pid, spin_pid = self.busy_node()
        self.start_top("-d", "0.25", x=80)

        def shows(screen):
            lines = screen.splitlines()
            b = row(screen, "b")
            if not b or any(len(l) > 80 for l in lines):
                return False
            share, hist = cell(screen, b, "SHARE"), cell(screen, b, "HISTORY")
            mem, used = cell(screen, b, "MEMORY"), cell(screen, b, "USED/QUOTA")
            pids = " ".join(processes_under(screen, "b"))
            return (share and re.fullmatch(r"\[\|[|+.]* *\]", share)
                    and re.fullmatch(r"\d\.\d\d/0\.70", cell(screen, b, "SHARE/REQ") or "")
                    and hist and sum(c in SPARK for c in hist) >= 4
                    and mem and re.fullmatch(r"\[\|\.+\]", mem) and used == "96.0M/2.0G"
                    and "pid %d " % held_pid in pids and "pid %d " % spin_pid in pids)
        screen = self.wait_screen(shows, "pod b's bars, history and processes at 80 columns")
        # The busy pod is first (by share) and picked; a has none of its own.
        self.assertTrue(row(screen, "b").startswith(">-b "), screen)
        self.assertTrue(row(screen, "a").startswith("  a "), screen)
        self.assertRegex(cell(screen, row(screen, "a"), "SHARE"), r"^\[\.+ *\]$")
        # Colour where the terminal has it: the memory bar's cells are green.
        self.assertRegex(self.tm.screen(escapes=True), COLOUR)

        # Enter folds b's processes away, and back; j picks a.
        self.tm.keys("Enter")
        screen = self.wait_screen(lambda s: row(s, "b") and row(s, "b").startswith(">+b ")
                                  and not processes_under(s, "b"), "b's processes folded")
        self.assertNotIn("pid %d " % spin_pid, screen)
        self.tm.keys("Space")
        self.wait_screen(lambda s: len(processes_under(s, "b")) == 2, "b's processes again")
        self.tm.keys("j")
        self.wait_screen(lambda s: row(s, "a") and row(s, "a").startswith(">") and
                         row(s, "b").startswith(" -"), "pod a picked")
        self.tm.keys("k")
        self.wait_screen(lambda s: row(s, "b") and row(s, "b").startswith(">"), "pod b picked")

        # A process that exits leaves the view; the other stays.
        spin.stop()
        screen = self.wait_screen(
            lambda s: processes_under(s, "b") and
            "pid %d " % spin_pid not in s and "pid %d " % held_pid in s,
            "the exited process's row gone", timeout=5)
        self.assertEqual(len(processes_under(screen, "b")), 1, screen)
        self.quit()

    def test_no_colour_with_no_color_set(self):
        self.start_schd("--no-trace")
        self.start_pmgr("a")
        self.start_pmgr("b")
        self.hold("b", self.HELD)
        self.start_top(env=["NO_COLOR=1"])
        self.wait_screen(lambda s: row(s, "b") and "[|" in row(s, "b"), "pod b's memory bar")
        self.assertNotRegex(self.tm.screen(escapes=True), COLOUR)
        self.quit()

    def test_count_prints_refreshes_as_text(self):
        held, spin, held_pid, spin_pid = self.busy_node()

        def top(*args, **env):
            r = subprocess.run([GMT, "--schd", self.schd_url, "top"] + list(args),
                               capture_output=True, text=True, timeout=20,
                               env=self.env(COLUMNS="80", **env), stdin=subprocess.DEVNULL)
            return r.returncode, r.stdout, r.stderr
        rc, out, err = top("-n", "3", "-d", "0.2", LC_ALL="C")
        self.assertEqual(rc, 0, err)
        frames = out.split("\n\ngmt top ")
        self.assertEqual(len(frames), 3, out)
        self.assertNotIn("\x1b", out)  # a pipe: no colour
        self.assertNotIn("q quit", out)
        self.assertTrue(all(len(l) <= 80 for l in out.splitlines()), out)
        last = "gmt top " + frames[-1]
        b = row(last, "b")
        hist = cell(last, b, "HISTORY")
        self.assertEqual(len(hist.strip()), 3, last)  # one a refresh
        self.assertTrue(set(hist.strip()) <= set("_.-=+*%#"), last)  # ASCII in the C locale
        self.assertEqual(cell(last, b, "USED/QUOTA"), "96.0M/2.0G", last)
        self.assertIn("pid %d " % spin_pid, " ".join(processes_under(last, "b")), last)
        # Under the pod, why it waits: its spinner waited for its tokens.
        lines = last.splitlines()
        self.assertRegex(lines[lines.index(b) + 1], r"^    waited for tokens \d+\.\d s", last)
        # A UTF-8 locale: the history in blocks.
        rc, out, err = top("-n", "2", "-d", "0.2", LC_ALL="C.UTF-8")
        self.assertEqual(rc, 0, err)
        last = "gmt top " + out.split("\n\ngmt top ")[-1]
        hist = cell(last, row(last, "b"), "HISTORY").strip()
        self.assertEqual(len(hist), 2, last)
        self.assertTrue(set(hist) <= set("\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588"), last)
        # No scheduler there: the refresh says so, and the exit status.
        r = subprocess.run([GMT, "--schd", "tcp://127.0.0.1:%d" % free_port(), "top", "-n", "1"],
                           capture_output=True, text=True, timeout=20, env=self.env())
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("gmt-schd unreachable", r.stdout)
        self.assertIn("unreachable", r.stderr)
        rc, out, err = top("-n", "0")
        self.assertEqual(rc, 2)
        self.assertIn("-n wants a count", err)

    def test_a_gpu_process_outside_gmt_shows_under_the_gpus(self):
        # A process started without the hook (as test_devices.py's
        # unmanaged one): gmt top -n shows it under the GPU table, with
        # what NVML counts for it; once it is gone, no such line.
        self.start_schd("--no-trace")
        self.start_pmgr("a")
        q = self.run_prog(None, DEV_ALLOC, "0:%d" % self.HELD, env=self.prog_env())
        qpid = int(q.expect("READY")["pid"])

        def listed():
            un = {u["pid"]: u for u in self.status()["unmanaged"]}
            return un.get(qpid)
        un = wait_for(listed, timeout=5, what="the process outside gmt listed")

        def top():
            r = subprocess.run([GMT, "--schd", self.schd_url, "top", "-n", "1"],
                               capture_output=True, text=True, timeout=20,
                               env=self.env(COLUMNS="80", LC_ALL="C"), stdin=subprocess.DEVNULL)
            self.assertEqual(r.returncode, 0, r.stderr)
            return r.stdout
        out = top()
        lines = out.splitlines()
        at = next((i for i, l in enumerate(lines) if l.startswith("UNMANAGED")), None)
        self.assertIsNotNone(at, out)
        mem = human(un["memory_used"])
        self.assertEqual(lines[at], "UNMANAGED 1 process, %s: %d dev_alloc (%s)"
                         % (mem, qpid, mem), out)
        self.assertTrue(lines[at - 1].startswith("0 "), out)  # under GPU 0's row
        self.assertTrue(all(len(l) <= 80 for l in lines), out)
        self.finish_freed(q)
        wait_for(lambda: not self.status()["unmanaged"] or None, timeout=5,
                 what="the unmanaged process gone")
        self.assertNotIn("UNMANAGED", top())

    def test_a_busy_pod_shows_its_share_and_the_token(self):
        self.start_schd("--no-trace")
        self.start_pmgr("a")
        self.start_pmgr("b")
        spin = self.run_prog("b", SPIN, "--kernel-us", "20000", "--seconds", "0")
        spin.expect("READY")
        self.start_top()

        def busy(screen):
            b = row(screen, "b")
            if not b or "gpu 0" not in b:  # holds GPU 0's token
                return False
            share = float(cell(screen, b, "SHARE/REQ").split("/")[0])
            gpu = [l for l in screen.splitlines() if l.startswith("0 ")]
            return share > 0.5 and gpu and " b " in gpu[0]  # the GPU's token holder
        screen = self.wait_screen(busy, "pod b busy: its share, GPU 0's token")
        self.assertIn("0.70/1.00", row(screen, "b"))
        # By share (the default), the busy pod first; by name, a first.
        self.assertEqual(order(screen, ["a", "b"]), ["b", "a"], screen)
        self.tm.keys("n")
        screen = self.wait_screen(lambda s: "sort: name" in s, "sort: name")
        self.assertEqual(order(screen, ["a", "b"]), ["a", "b"], screen)
        self.quit()


@unless_runnable(tracer_missing("gmt top's hottest buffers"))
class TopHotBuffers(TopCase):
    """With gmt-schd's tracer (root): each busy pod's hottest buffers, as
    `gmt trace --pod NAME` counts them, while their process lives; once it
    exits, they leave the view with it."""

    def spots(self, pod, k=3):
        r = self.gmt("trace", "--pod", pod, "-k", str(k), "--json")
        if r.returncode != 0:
            raise AssertionError("gmt trace --pod %s: %s" % (pod, r.stderr))
        return json.loads(r.stdout)

    def test_hottest_buffers_of_a_traced_pod_until_its_process_exits(self):
        self.start_schd()
        self.start_pmgr("a")
        self.start_pmgr("b")
        self.hold("a", 16 * MIB)  # a process that stays
        # pin_buffers: 2 hot 1 MiB buffers of 50 round trips each, 5 cold
        # ones of 1, made after a line (so that the tracer is attached
        # first) and held until the next.
        job = self.run_prog("a", PIN_BUFFERS, "1", "2", "50", "5", "1", "gate")
        pid = int(job.expect("READY")["pid"])
        wait_for(lambda: {p["pid"]: p for p in self.spots("a")["processes"]}
                 .get(pid, {}).get("probed"), timeout=15, what="pid %d probed" % pid)
        job.send()
        job.expect("PINNED", timeout=60)
        wait_for(lambda: self.spots("a")["copies"]["h2d_count"] >= 105, timeout=15,
                 what="the tracer to count pin_buffers' copies")
        # Its device buffer (every copy) and its two hot host buffers (50 +
        # 50 each) are the pod's three hottest.
        want = [(a["kind"], a["h2d_count"], a["d2h_count"]) for a in self.spots("a")["hot"]
                if a["pid"] == pid]
        self.assertEqual(sorted(c[1:] for c in want)[:2], [(50, 50)] * 2, want)
        self.start_top("-d", "0.5")

        def hot_rows(screen):
            """(kind, H2D, D2H) of pid's rows in the hottest buffers."""
            rows = [l.split() for l in screen.splitlines()
                    if l.startswith("a ") and len(l.split()) > 7 and l.split()[1] == str(pid)]
            # POD PID KIND SIZE(2) H2D D2H ...
            return [(r[2], int(r[5]), int(r[6])) for r in rows if r[5].isdigit()]
        screen = self.wait_screen(lambda s: "HOTTEST BUFFERS" in s and hot_rows(s) == want,
                                  "pin_buffers' hottest buffers as gmt trace counts them: %s"
                                  % want)
        self.assertNotIn("hottest buffers: not shown", screen)
        self.assertIn("pid %d " % pid, " ".join(processes_under(screen, "a")), screen)
        # It frees its buffers and exits: its rows go, buffers and all.
        job.send()
        job.expect("FREED")
        job.send()
        self.assertEqual(job.proc.wait(timeout=10), 0, job.stderr())
        screen = self.wait_screen(lambda s: row(s, "a") and not hot_rows(s) and
                                  "pid %d " % pid not in s, "pid %d gone from the view" % pid)
        self.assertEqual(len(processes_under(screen, "a")), 1, screen)  # the holder stays
        self.quit()


if __name__ == "__main__":
    unittest.main(verbosity=2)
