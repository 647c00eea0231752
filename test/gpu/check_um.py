#!/usr/bin/env python3
"""mode=um on the real driver (run on the GPU machine; docs/tiers.md,
"Unified memory"): two um pods of 700 MiB on a device declared as 1 GiB
with --gpu-capacity take turns reading back what they wrote, every byte
compared, every move a prefetch of the driver's managed memory; and a um
allocation of more than the card has free is refused by the hook before
the driver is asked (managed memory past the card can hang the GPU). Exits
non-zero on a failure. GMT_BUILD_DIR names the build."""
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

import test_um  # noqa: E402
from test_swap_jobs import MIB, SWAP_JOB  # noqa: E402


class UmOnGpu(test_um.TwoUmPods):
    FAKE = False

    test_two_um_jobs_take_turns_on_the_declared_card = None  # fake kernels only
    test_managed_memory_never_passes_the_card = None  # the fake card's size

    def test_two_copying_um_jobs_get_their_bytes_back(self):
        self.alternate(700 * MIB, 1 << 30, 2)


class UmCardOnGpu(test_um.TwoUmPods):
    """A um pod whose quota is larger than the card: only the card's rule
    stops it."""
    FAKE = False
    CONFIG = "1\na 0.5 1.0 1024Gi mode=um\n"

    test_two_um_jobs_take_turns_on_the_declared_card = None
    test_managed_memory_never_passes_the_card = None

    def test_more_managed_memory_than_the_card_has_free_is_refused(self):
        free_mib = int(subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.free", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True, text=True, check=True, timeout=30).stdout.split()[0])
        self.start_schd()
        self.start_pmgr("a")
        p = self.run_prog("a", SWAP_JOB, "--mib", str(free_mib + 1024), env=self.hook_env("a"))
        p.expect("CUDAFAIL cuMemAlloc_v2(&d[p], bytes / pieces) CUDA_ERROR_OUT_OF_MEMORY",
                 timeout=60)
        rc, err = p.finish()
        self.assertEqual(rc, 1, err[-3000:])
        self.assertIn("managed memory past the card's free memory can hang the GPU", err)


if __name__ == "__main__":
    loader = unittest.defaultTestLoader
    suite = unittest.TestSuite([loader.loadTestsFromTestCase(UmOnGpu),
                                loader.loadTestsFromTestCase(UmCardOnGpu)])
    ok = unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful()
    sys.exit(0 if ok else 1)
