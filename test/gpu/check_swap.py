#!/usr/bin/env python3
"""mode=swap on the real driver (run on the GPU machine): the test of
test/e2e/test_swap_jobs.py whose programs only copy (the other launches
the fake driver's kernels), unchanged, with the real libcuda: two swap pods
of 700 MiB on a device declared as 1 GiB with --gpu-capacity, each
read-back compared byte for byte, each allocation moved out and back at
the same address through the driver's VMM. Exits non-zero on a failure.
GMT_BUILD_DIR names the build."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

import test_swap_jobs  # noqa: E402


class SwapOnGpu(test_swap_jobs.TwoSwapPods):
    FAKE = False

    test_two_jobs_launching_kernels_get_their_bytes_back = None  # fake kernels only


class StrictOnGpu(test_swap_jobs.TwoStrictPods):
    FAKE = False


if __name__ == "__main__":
    loader = unittest.defaultTestLoader
    suite = unittest.TestSuite([loader.loadTestsFromTestCase(SwapOnGpu),
                                loader.loadTestsFromTestCase(StrictOnGpu)])
    ok = unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful()
    sys.exit(0 if ok else 1)
