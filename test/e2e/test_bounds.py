"""End-to-end: bounded resources and bad inputs (issue 10, parts 4 and 5).
A peer that declares huge frames, lists 50,000 processes or holds 1,100
idle connections, and a config that is a FIFO, /dev/zero or 100,001 pods,
cost gmt-schd little and are refused quickly and clearly."""
import glob
import os
import resource
import socket
import stat
import struct
import time
import unittest

from gmt_e2e import SCHD, Daemon, GmtTestCase, free_port, wait_for
from rawwire import SP_REQ, call_raw, connect, field

def heartbeat(pod, nprocs, seq=1):
    procs = b"".join(field(3, field(1, 1000 + i) + field(2, b"x")) for i in range(nprocs))
    body = field(1, pod.encode()) + field(2, seq) + procs + field(4, 1)
    return field(1, 1) + field(12, body)  # Envelope: version 1, heartbeat_req


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for pid %d" % pid)


class Frames(GmtTestCase):
    def test_huge_frames_are_dropped_not_allocated(self):
        d = self.start_schd()
        before = rss_kib(d.proc.pid)
        # A header declaring 2^63 bytes made the ASan build abort.
        s = connect(self.schd_port)
        s.sendall(struct.pack(">Q", 1 << 63))
        s.close()
        # 256 MiB declared and sent: the daemon must close, not buffer it.
        s = connect(self.schd_port)
        chunk = b"\0" * (1 << 20)
        try:
            s.sendall(struct.pack(">Q", 256 << 20))
            for _ in range(256):
                s.sendall(chunk)
        except OSError:
            pass  # closed on us: what we want
        s.close()
        self.assertTrue(d.alive(), d.output()[-2000:])
        self.assertIsNotNone(self.try_status())
        grown = rss_kib(d.proc.pid) - before
        self.assertLess(grown, 64 << 10, "gmt-schd grew by %d KiB" % grown)


class Heartbeats(GmtTestCase):
    def test_heartbeat_of_50000_processes_is_refused_quickly(self):
        self.start_schd()
        t0 = time.monotonic()
        rep = call_raw(self.schd_port, heartbeat("a", 50000), timeout=10)
        took = time.monotonic() - t0
        self.assertIn(b"a pod may have at most 4096", rep)
        self.assertLess(took, 2.0)
        t0 = time.monotonic()
        self.assertIsNotNone(self.try_status())
        self.assertLess(time.monotonic() - t0, 3.0)
        self.assertEqual(self.pod("a").get("processes", []), [])

    def test_heartbeat_of_4096_processes_is_applied(self):
        self.start_schd()
        rep = call_raw(self.schd_port, heartbeat("a", 4096), timeout=10)
        self.assertNotIn(b"at most", rep)
        self.assertEqual(len(self.pod("a")["processes"]), 4096)
        # The status of the most processes one pod may have stays far
        # below the 16 MiB frame cap (docs/protocol.md quotes this size).
        status = call_raw(self.schd_port, field(1, 1) + field(24, b""))
        print("status of 4096 processes: %d bytes" % len(status))
        self.assertLess(len(status), 1 << 20)


class Descriptors(GmtTestCase):
    def test_status_answers_past_1100_idle_connections(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard < 4096:
            self.skipTest("hard open-file limit %d is too low for this test" % hard)
        # The daemon starts with the usual soft limit of 1,024 ...
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
        try:
            self.start_schd()
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        idle = []
        try:
            for _ in range(1100):
                idle.append(socket.create_connection(("127.0.0.1", self.schd_port), timeout=5))
            t0 = time.monotonic()
            r = self.gmt("status", "--json", timeout=10)
            took = time.monotonic() - t0
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertLess(took, 3.5)
        finally:
            for s in idle:
                s.close()
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    def test_status_gives_up_on_a_peer_that_never_handshakes(self):
        # Accepts TCP (the kernel does) but never speaks SP: as a daemon
        # out of descriptors looks.
        mute = socket.socket()
        mute.bind(("127.0.0.1", 0))
        mute.listen(16)
        try:
            url = "tcp://127.0.0.1:%d" % mute.getsockname()[1]
            t0 = time.monotonic()
            r = self.gmt("--schd", url, "status", timeout=15)
            took = time.monotonic() - t0
            self.assertNotEqual(r.returncode, 0)
            self.assertLess(took, 3.5, r.stderr)
            self.assertIn("timed out", r.stderr.lower())
        finally:
            mute.close()


class BadConfigs(GmtTestCase):
    def start_refused(self, path):
        """gmt-schd -c path must exit with an error within a second."""
        argv = [SCHD, "-c", path, "--listen", "tcp://127.0.0.1:%d" % free_port(),
                "--state-dir", os.path.join(self.tmp, "state")]
        d = Daemon("schd", argv, self.env(), self.tmp)
        t0 = time.monotonic()
        try:
            d.proc.wait(timeout=5)
        finally:
            if d.alive():
                d.proc.kill()
                d.proc.wait()
        self.assertLess(time.monotonic() - t0, 2.0)
        self.assertNotEqual(d.proc.returncode, 0)
        return d.output()

    def test_fifo_config_is_refused_at_start(self):
        fifo = os.path.join(self.tmp, "fifo.txt")
        os.mkfifo(fifo)
        self.assertIn(fifo + ": not a regular file (a FIFO)", self.start_refused(fifo))

    def test_dev_zero_config_is_refused_at_start(self):
        self.assertIn("/dev/zero: not a regular file (a character device)",
                      self.start_refused("/dev/zero"))

    def test_100001_pods_are_refused_at_start(self):
        path = os.path.join(self.tmp, "big.txt")
        with open(path, "w") as f:
            f.write("100001\n")
            f.writelines("pod-%d 0.00001 0.5 1M\n" % i for i in range(100001))
        self.assertIn("100001 pods is too many (at most 4096)", self.start_refused(path))

    def test_fifo_swapped_in_does_not_hang_reload(self):
        d = self.start_schd()
        fifo = self.config_path + ".fifo"
        os.mkfifo(fifo)
        os.replace(fifo, self.config_path)
        os.kill(d.proc.pid, 1)  # SIGHUP: reload now
        time.sleep(2.5)  # past the watcher's poll too
        t0 = time.monotonic()
        self.assertIsNotNone(self.try_status())
        self.assertLess(time.monotonic() - t0, 3.0)
        wait_for(lambda: "not a regular file (a FIFO)" in d.output(), timeout=5,
                 what="the reload to be refused")

    def test_requests_above_one_are_a_warning(self):
        self.write_config("2\na 0.7 1.0 1Gi\nb 0.7 1.0 2Gi\n")
        d = self.start_schd()
        self.assertIn("requests add up to 1.4, more than 1", d.output())


class Store(GmtTestCase):
    def test_corrupt_database_is_set_aside(self):
        state = os.path.join(self.tmp, "state")
        os.makedirs(state)
        with open(os.path.join(state, "gmt.db"), "wb") as f:
            f.write(b"this is not a database, it is garbage " * 200)
        d = self.start_schd()
        aside = glob.glob(os.path.join(state, "gmt.db.corrupt-*"))
        self.assertEqual(len(aside), 1, os.listdir(state))
        with open(aside[0], "rb") as f:
            self.assertTrue(f.read().startswith(b"this is not a database"))
        self.assertIn("moved aside to " + aside[0], d.output())

    def test_state_is_private(self):
        self.start_schd()
        state = os.path.join(self.tmp, "state")
        self.assertEqual(stat.S_IMODE(os.stat(state).st_mode), 0o700)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(state, "gmt.db")).st_mode), 0o600)


if __name__ == "__main__":
    unittest.main()
