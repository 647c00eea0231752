"""Stopping is bounded: a pod manager told to stop (SIGTERM) exits within a
few seconds even when its scheduler is stalled with calls in flight
(SIGSTOP) or not there yet, and says so when it had to leave a wait."""
import signal
import time

from gmt_e2e import GmtTestCase, build_path, wait_for

SPIN = build_path("test", "e2e", "tokenprogs", "spin_load")
# gmt_daemon.h's GMT_DAEMON_STOP_MS is 6 s; the waits inside it are bounded
# at 2 s each (GMT_CLIENT_CLOSE_MS, GMT_SERVER_CLOSE_MS). Some room for ASan.
STOP_BOUND_S = 8.0


class Stop(GmtTestCase):
    CONFIG = "1\na 0.5 1.0 96Mi\n"

    def stop_timed(self, daemon):
        """SIGTERM; returns (exit code, seconds it took)."""
        t0 = time.monotonic()
        rc = daemon.stop(timeout=STOP_BOUND_S)
        self.daemons.remove(daemon)
        return rc, time.monotonic() - t0

    def test_pod_manager_stops_with_calls_in_flight_to_a_stalled_scheduler(self):
        schd = self.start_schd()
        pmgr = self.start_pmgr("a")
        spin = self.run_prog("a", SPIN, "--kernel-us", "5000", "--seconds", "0")
        spin.expect("READY")
        wait_for(lambda: (self.pod("a").get("gpu_time_share") or 0) > 0.2, timeout=10,
                 what="the spinning job to be granted GPU time")
        schd.proc.send_signal(signal.SIGSTOP)
        try:
            # The job's next token request and the heartbeats now wait on a
            # scheduler that reads nothing (a token call may wait 30 s).
            time.sleep(1.0)
            rc, took = self.stop_timed(pmgr)
        finally:
            schd.proc.send_signal(signal.SIGCONT)
        self.assertEqual(rc, 0, pmgr.output()[-3000:])
        self.assertLess(took, STOP_BOUND_S)
        spin.stop()

    def test_pod_manager_stops_at_once_while_waiting_for_the_scheduler(self):
        # No scheduler: the pod manager would wait --wait 60 s for it.
        pmgr = self.start_pmgr("a", "--wait", "60", wait=False)
        wait_for(lambda: "waiting for the scheduler" in pmgr.output(), timeout=10,
                 what="gmt-pmgr to wait for the scheduler")
        rc, took = self.stop_timed(pmgr)
        self.assertEqual(rc, 0, pmgr.output()[-3000:])
        self.assertLess(took, 3.0)  # within one try of registering (1 s)
        self.assertIn("SIGTERM while waiting for the scheduler", pmgr.output())


if __name__ == "__main__":
    import unittest
    unittest.main()
