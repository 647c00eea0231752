"""Upgrading without stopping jobs (docs/operators.md): gmt-schd and then
the pod manager are restarted, as `systemctl restart` does after a new
build is installed, while a job holds memory and another launches kernels.
The jobs go on through both restarts, and afterwards are counted, gated
and held to their pod's quota as before."""
import os
import queue
import unittest

from gmt_e2e import BUILD, GmtTestCase, build_path, wait_for

MEM_PATHS = os.path.join(BUILD, "test", "e2e", "memprogs", "mem_paths")
SPIN = build_path("test", "e2e", "tokenprogs", "spin_load")
MIB = 1 << 20
OOM = 2  # CUDA_ERROR_OUT_OF_MEMORY


class Upgrade(GmtTestCase):
    CONFIG = "1\na 0.5 1.0 96Mi\n"

    def held(self, pid):
        p = self.process("a", pid)
        return p["memory_reserved"] if p else None

    @staticmethod
    def launches(spin):
        """The launch count of spin_load's latest progress line: every line
        it has printed so far is read (waiting up to 5 s for a first)."""
        last = None
        while True:
            try:
                line = spin.lines.get(timeout=0.2 if last is not None else 5)
            except queue.Empty:
                break
            if line is None:
                break
            if line.startswith("T "):
                last = int(dict(kv.split("=", 1) for kv in line.split()[1:])["launches"])
        if last is None:
            raise AssertionError("spin_load printed no progress: " + spin.stderr())
        return last

    def test_jobs_run_on_through_a_restart_of_each_daemon(self):
        schd = self.start_schd("--window-ms", "2000", "--base-quota-ms", "100")
        pmgr = self.start_pmgr("a")
        holder = self.run_prog("a", MEM_PATHS, "alloc", str(40 * MIB), "--step", str(8 * MIB),
                               "--over", str(64 * MIB))
        holder.expect("INFO")
        holder.send()
        self.assertEqual(holder.expect("FILLED")["ok"], "1")
        self.assertEqual(int(holder.expect("OVER")["rc"]), OOM)  # 104 MiB > 96 MiB
        spin = self.run_prog("a", SPIN, "--kernel-us", "5000", "--seconds", "0")
        spin.expect("READY")
        wait_for(lambda: (self.pod("a").get("gpu_time_share") or 0) > 0.2, timeout=10,
                 what="the spinning job to be granted GPU time")

        for name, daemon in (("gmt-schd", schd), ("gmt-pmgr", pmgr)):
            before = self.launches(spin)
            self.assertEqual(daemon.stop(), 0, name)
            self.daemons.remove(daemon)
            if name == "gmt-schd":
                schd = self.start_schd("--window-ms", "2000", "--base-quota-ms", "100")
            else:
                pmgr = self.start_pmgr("a")
            # Counted again: the holder's 40 MiB, from its report.
            wait_for(lambda: self.held(holder.proc.pid) == 40 * MIB, timeout=10,
                     what="pod a to hold the job's 40 MiB again after restarting %s (holds %r)"
                     % (name, self.held(holder.proc.pid)))
            # And only that: what the last round's killed process held is
            # reclaimed once the new daemon has the pod's full view.
            wait_for(lambda: self.pod("a").get("memory_reserved") == 40 * MIB, timeout=10,
                     what="pod a to hold only the job's 40 MiB after restarting %s (holds %r)"
                     % (name, self.pod("a").get("memory_reserved")))
            # Gated again: its grants show as GPU time in the new window.
            wait_for(lambda: (self.pod("a").get("gpu_time_share") or 0) > 0.2, timeout=10,
                     what="pod a's grants after restarting " + name)
            # Held to its quota: 40 MiB held, 56 MiB more fit and no byte past.
            q = self.run_prog("a", MEM_PATHS, "alloc", str(56 * MIB), "--step", str(8 * MIB),
                              "--over", "1")
            q.expect("INFO")
            q.send()
            self.assertEqual(q.expect("FILLED")["ok"], "1", "after restarting " + name)
            self.assertEqual(int(q.expect("OVER")["rc"]), OOM, "after restarting " + name)
            q.stop()
            # The job went on through it, and goes on.
            self.assertGreater(self.launches(spin), before, "after restarting " + name)
        rc, err = spin.finish(timeout=20)
        self.assertEqual(rc, 0, err)
        holder.stop()


if __name__ == "__main__":
    unittest.main()
