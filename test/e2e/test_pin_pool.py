"""The caching pinned pool (issue 11): with pin advice on, pinned blocks a
program frees come back to its next allocation of the same size class,
flags and context without a new cuMemHostAlloc; they go back to the driver
when idle, before their context goes, and never with pin=off. The program
(memprogs/host_pool.c) checks its own bytes, and queues a copy from each
block just before it frees it, so a pool that handed a block out again too
early would show in them. Runs under both builds: the pool does not need
the hook to own malloc."""
import os
import unittest

from gmt_e2e import BUILD, GmtTestCase, wait_for

HOST_POOL = os.path.join(BUILD, "test", "e2e", "memprogs", "host_pool")
HOST_PINS = os.path.join(BUILD, "test", "e2e", "memprogs", "host_pins")
MIB = 1 << 20
SIZE_MIB, ROUNDS = 8, 6


class PinPool(GmtTestCase):
    CONFIG = ("2\n"
              "off 0.2 1.0 1Gi\n"
              "adaptive 0.2 1.0 1Gi pin=adaptive\n")

    def start(self, pod):
        self.start_schd()
        self.start_pmgr(pod)

    def pool(self, pod, pid):
        """(pinned_bytes, pinned_cached, pinned_reused) of the process, and
        the node's pinned_cached."""
        proc = self.process(pod, pid) or {}
        host = self.status().get("host", {})
        return (proc.get("pinned_bytes"), proc.get("pinned_cached"), proc.get("pinned_reused"),
                host.get("pinned_cached"))

    def wait_pool(self, pod, pid, want):
        return wait_for(lambda: self.pool(pod, pid) == want or None, timeout=10,
                        what="pool %r for pid %d (have %r)" % (want, pid, self.pool(pod, pid)))

    def rounds(self, pod, **env):
        p = self.run_prog(pod, HOST_POOL, str(SIZE_MIB), str(ROUNDS),
                          env=self.hook_env(pod, **env))
        return p, int(p.expect("ROUNDS", timeout=60)["distinct"])

    def step(self, p, line):
        p.send()
        p.expect(line, timeout=30)

    def test_freed_blocks_come_back_and_contexts_take_theirs(self):
        self.start("adaptive")
        p, distinct = self.rounds("adaptive", GMT_PIN_POOL_IDLE_MS="60000")
        self.assertEqual(distinct, 1)
        block, pid = SIZE_MIB * MIB, p.proc.pid
        # Each round after the first got the block the one before freed.
        self.wait_pool("adaptive", pid, (block, block, ROUNDS - 1, block))
        # A block of another context is not this one's: a new one, cached.
        self.step(p, "OWNCTX")
        self.wait_pool("adaptive", pid, (2 * block, 2 * block, ROUNDS - 1, 2 * block))
        # Before a context goes, the cache goes back to the driver.
        self.step(p, "DESTROYED")
        self.wait_pool("adaptive", pid, (0, 0, ROUNDS - 1, 0))
        # And a new allocation gets a new block that works.
        self.step(p, "AGAIN")
        self.wait_pool("adaptive", pid, (block, block, ROUNDS - 1, block))
        p.send()
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)

    def test_idle_blocks_go_back(self):
        """A program that frees its pinned blocks and goes on without them
        gets its pinned bytes back to 0 once they have been idle."""
        self.start("adaptive")
        p, distinct = self.rounds("adaptive", GMT_PIN_POOL_IDLE_MS="300")
        self.assertEqual(distinct, 1)
        self.wait_pool("adaptive", p.proc.pid, (0, 0, ROUNDS - 1, 0))
        p.send()
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)

    def test_off_and_no_pool_free_for_real(self):
        """pin=off, and GMT_PIN_POOL_MIB=0 with advice on: every free goes
        to the driver; nothing cached, nothing reused."""
        self.start_schd()
        self.start_pmgr("off")
        self.start_pmgr("adaptive")
        for pod, env in (("off", {}), ("adaptive", {"GMT_PIN_POOL_MIB": "0"})):
            p, _ = self.rounds(pod, **env)
            self.wait_pool(pod, p.proc.pid, (0, 0, 0, 0))
            for line in ("OWNCTX", "DESTROYED", "AGAIN"):
                self.step(p, line)
            self.wait_pool(pod, p.proc.pid, (0, 0, 0, 0))
            p.send()
            rc, err = p.finish()
            self.assertEqual(rc, 0, err)

    def test_program_pinned_memory_is_cached_then_freed(self):
        """host_pins' cuMemAllocHost and cuMemHostAlloc(PORTABLE) blocks
        are cached when it frees them, its registered buffer is not (it is
        the program's malloc'd memory), and all of it goes when idle."""
        self.start("adaptive")
        p = self.run_prog("adaptive", HOST_PINS,
                          env=self.hook_env("adaptive", GMT_PIN_POOL_IDLE_MS="60000"))
        self.assertEqual(int(p.expect("PINNED")["bytes"]), 14 * MIB)
        self.wait_pool("adaptive", p.proc.pid, (14 * MIB, 0, 0, 0))
        self.step(p, "FREED")
        self.wait_pool("adaptive", p.proc.pid, (12 * MIB, 12 * MIB, 0, 12 * MIB))
        p.send()
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)


if __name__ == "__main__":
    unittest.main()
