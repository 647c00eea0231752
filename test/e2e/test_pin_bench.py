"""End-to-end: the pin-advice benchmark's plumbing on the fake driver
(bench/pin_advice.py with bench/pin_workload, a small size, one run per
mode): it starts and stops its own daemons, every mode's run completes
with its data checked, the all-pinned mode is seen 100% pinned both by the
driver and by `gmt status`, the unpinned ones 0%, and the JSON has a row
and the issue's targets for every mode. What profile, use and adaptive
pin is the hook's to decide and is not checked here: the benchmark is what
measures that, on a GPU."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from gmt_e2e import BUILD

HERE = os.path.dirname(os.path.abspath(__file__))
PIN_ADVICE = os.path.join(HERE, "..", "..", "bench", "pin_advice.py")
WORKLOAD = os.path.join(BUILD, "bench", "pin_workload")
MODES = ("native", "unpinned", "pinned", "profile", "use", "use-nostage", "adaptive",
         "adaptive-nostage")


@unittest.skipUnless(os.path.exists(WORKLOAD), "bench/pin_workload not built")
class PinBenchCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gmt-pinbench-")

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.tmp])

    def test_every_mode_runs_checked_and_all_pinned_is_seen_pinned(self):
        out = os.path.join(self.tmp, "pin.json")
        r = subprocess.run([sys.executable, PIN_ADVICE, "--fake", "--sizes", "0.25", "--reps", "1",
                            "--hot-copies", "12", "--cold", "6", "--out", out],
                           capture_output=True, text=True, timeout=240,
                           env=dict(os.environ, TMPDIR=self.tmp))
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        self.assertIn("targets", r.stdout)
        with open(out) as f:
            res = json.load(f)
        self.assertTrue(res["complete"])
        self.assertEqual(sorted(x["mode"] for x in res["runs"]), sorted(MODES))
        for run in res["runs"]:
            w = run["workload"]
            self.assertTrue(run["ok"], run)
            self.assertTrue(w["verified"], run)
            self.assertEqual(w["copies"], 2 * (2 * 12 + 6), run)
            self.assertEqual(w["detect"], "cuMemHostGetFlags", run)
        by = {s["mode"]: s for s in res["summary"]}
        total = by["pinned"]["total_bytes"]
        self.assertEqual(total, 8 * 256 * 1024)
        self.assertEqual(by["pinned"]["pinned_pct"], 100.0)
        self.assertEqual(by["pinned"]["status_peak_pinned_bytes"], total)
        for mode in ("native", "unpinned"):
            self.assertEqual(by[mode]["pinned_pct"], 0.0, mode)
        self.assertEqual(by["unpinned"]["status_peak_pinned_bytes"], 0)
        self.assertEqual(by["pinned"]["speed_vs_pinned"], 1.0)
        self.assertEqual(len(res["targets"]), 4)
        self.assertTrue(all(t["verdict"] in ("PASS", "FAIL") for t in res["targets"]))


if __name__ == "__main__":
    unittest.main()
