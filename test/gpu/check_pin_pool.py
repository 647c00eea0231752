#!/usr/bin/env python3
"""The caching pinned pool on the real driver (run on the GPU machine):
test/e2e/test_pin_pool.py's tests, unchanged, with the real libcuda
instead of the fake one. Its program checks its own bytes (a copy queued
from each block just before the block is freed must read that round's
bytes, not the next round's), and the tests read the pool from `gmt status
--json`. Exits non-zero on a failure. GMT_BUILD_DIR names the build."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

import test_pin_pool  # noqa: E402


class PinPoolOnGpu(test_pin_pool.PinPool):
    FAKE = False


if __name__ == "__main__":
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(PinPoolOnGpu)
    ok = unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful()
    sys.exit(0 if ok else 1)
