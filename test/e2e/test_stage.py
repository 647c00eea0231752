"""Staged copies (issue 11, hook/pin/stage.c): with pin advice on, a
synchronous copy of 8 MiB or more between the device and pageable memory
goes through gmt's pinned staging buffers, copied by several threads. The
program (memprogs/pin_buffers.c) checks every byte of every round trip
(filled per 4 KiB page and round, scrubbed before the copy back), with
sizes that are not a whole number of 8 MiB chunks; the staging buffers
(3 x 8 MiB) show in the process's pinned_bytes while it lives. Runs under
both builds: staging does not need the hook to own malloc."""
import os
import unittest

from gmt_e2e import BUILD, GmtTestCase, wait_for

PIN_BUFFERS = os.path.join(BUILD, "test", "e2e", "memprogs", "pin_buffers")
MIB = 1 << 20
STAGING = 3 * 8 * MIB


class StagedCopies(GmtTestCase):
    CONFIG = ("2\n"
              "off 0.2 1.0 1Gi\n"
              "use 0.2 1.0 1Gi pin=use\n")

    def run_cold(self, pod, threads, size_mib=20, *extra):
        """Three buffers of size_mib, two round trips each. Pod `use` has
        pin advice on but no profile, so it pins none of them: each copy is
        from pageable memory."""
        p = self.run_prog(pod, PIN_BUFFERS, str(size_mib), "0", "0", "3", "2", *extra,
                          env=self.hook_env(pod, GMT_STAGE_THREADS=str(threads)))
        got = p.expect("PINNED", timeout=60)
        return p, got

    def pinned_bytes(self, pod, pid):
        return (self.process(pod, pid) or {}).get("pinned_bytes")

    def test_staged_copies_bring_back_every_byte(self):
        self.start_schd()
        self.start_pmgr("use")
        for size_mib in (20, 8, 9):
            p, got = self.run_cold("use", 3, size_mib)
            self.assertEqual(got["cold"], "0")  # pageable: the staged path
            wait_for(lambda: self.pinned_bytes("use", p.proc.pid) == STAGING or None,
                     timeout=10, what="the staging buffers in pinned_bytes")
            self.finish_freed(p)

    def test_per_thread_stream_copies(self):
        """The _ptds copies (a program built with the per-thread default
        stream) are staged on that stream, and their bytes come back."""
        self.start_schd()
        self.start_pmgr("use")
        p, got = self.run_cold("use", 2, 12, "ptds")
        self.assertEqual(got["cold"], "0")
        wait_for(lambda: self.pinned_bytes("use", p.proc.pid) == STAGING or None, timeout=10,
                 what="the staging buffers in pinned_bytes")
        self.finish_freed(p)

    def test_idle_staging_buffers_go(self):
        """Unused for GMT_STAGE_IDLE_MS, the staging buffers are freed
        while the process lives."""
        self.start_schd()
        self.start_pmgr("use")
        p = self.run_prog("use", PIN_BUFFERS, "16", "0", "0", "1", "1",
                          env=self.hook_env("use", GMT_STAGE_THREADS="2",
                                            GMT_STAGE_IDLE_MS="1500"))
        p.expect("PINNED", timeout=60)
        wait_for(lambda: self.pinned_bytes("use", p.proc.pid) == STAGING or None, timeout=10,
                 what="the staging buffers in pinned_bytes")
        wait_for(lambda: self.pinned_bytes("use", p.proc.pid) == 0 or None, timeout=10,
                 what="the staging buffers freed when idle")
        self.finish_freed(p)

    def test_async_copies_are_not_staged(self):
        self.start_schd()
        self.start_pmgr("use")
        p, got = self.run_cold("use", 2, 17, "async")
        # Async copies are the program's to order: never staged.
        wait_for(lambda: self.pinned_bytes("use", p.proc.pid) == 0 or None, timeout=10,
                 what="nothing staged for async copies")
        self.finish_freed(p)

    def test_off_without_threads_or_advice(self):
        """GMT_STAGE_THREADS=0, 1 (no second thread) or pin=off: the driver
        makes every copy."""
        self.start_schd()
        self.start_pmgr("off")
        self.start_pmgr("use")
        for pod, threads in (("use", 0), ("use", 1), ("off", 3)):
            p, got = self.run_cold(pod, threads)
            wait_for(lambda: self.pinned_bytes(pod, p.proc.pid) == 0 or None, timeout=10,
                     what="nothing staged (%s, %d threads)" % (pod, threads))
            self.finish_freed(p)


if __name__ == "__main__":
    unittest.main()
