"""End-to-end: gmt-schd's memory tier flags. Each bad --gpu-capacity,
--host-tier, --disk-tier, --tier-trigger or --tier-stop is a usage error
(exit 2) that names the flag and what is wrong; good ones declare the
spaces the startup log lists and `gmt status` shows. Without
--gpu-capacity each GPU the fake NVML shows (one card of 8 GiB here) has a
space of its memory less the context reserve. (The tiers' ledger itself is
unit tested: test/unit/test_tiers.c.)"""
import os
import subprocess
import time

from gmt_e2e import BUILD, GmtTestCase, SCHD, fake_uuid, wait_for

CARD = 8 << 30  # the fake card (gmt_e2e's GMT_FAKE_MEM)
RESERVE = 512 << 20  # GMT_TIERS_GPU_CONTEXT_RESERVE (server/tiers.h)


class TierFlags(GmtTestCase):
    CONFIG = "1\na 0.5 1.0 1Gi\n"

    def run_schd(self, *flags):
        return subprocess.run([SCHD, "-c", self.config_path, "--listen", self.schd_url,
                               "--state-dir", os.path.join(self.tmp, "state")] + list(flags),
                              capture_output=True, text=True, timeout=20, env=self.env())

    def test_bad_tier_flags_are_usage_errors(self):
        a_file = os.path.join(self.tmp, "a-file")
        open(a_file, "w").close()
        cases = [
            (["--gpu-capacity", "0"], "--gpu-capacity '0': want DEV=BYTES"),
            (["--gpu-capacity", "x=1Gi"], "--gpu-capacity 'x=1Gi': want DEV=BYTES"),
            (["--gpu-capacity", "0=0"], "--gpu-capacity '0=0': want DEV=BYTES or DEV=off"),
            (["--gpu-capacity", "0=of"], "--gpu-capacity '0=of': want DEV=BYTES or DEV=off"),
            (["--gpu-capacity", "0=off", "--gpu-capacity", "0=1Gi"], "device 0 given twice"),
            (["--gpu-capacity", "0=1Gi", "--gpu-capacity", "0=2Gi"], "device 0 given twice"),
            (["--host-tier", "12Q"], "--host-tier '12Q': want a byte count above 0"),
            (["--disk-tier", os.path.join(self.tmp, "none")], "No such file or directory"),
            (["--disk-tier", a_file], a_file + ": not a directory"),
            (["--disk-tier", self.tmp + ":lots"], "BYTES 'lots' is not a byte count"),
            (["--disk-tier", self.tmp, "--disk-tier", self.tmp + "/."], "the same directory as"),
            (["--tier-trigger", "1.5"], "--tier-trigger '1.5': want a fraction above 0"),
            (["--tier-stop", "0"], "--tier-stop '0': want a fraction above 0"),
            (["--tier-stop", "0.9"], "--tier-stop 0.9 must be below --tier-trigger 0.85"),
            (["--tier-trigger", "0.5", "--tier-stop", "0.5"], "must be below --tier-trigger 0.5"),
        ]
        for flags, want in cases:
            r = self.run_schd(*flags)
            self.assertEqual(r.returncode, 2, (flags, r.stderr))
            self.assertIn(want, r.stderr, flags)
            self.assertIn("Try 'gmt-schd --help'", r.stderr, flags)

    def test_tier_flags_declare_the_spaces_logged_at_start(self):
        disk = os.path.join(self.tmp, "spill")
        os.mkdir(disk)
        schd = self.start_schd("--gpu-capacity", "1=512Mi", "--host-tier", "2Gi", "--disk-tier",
                               disk + ":3Gi", "--disk-tier", self.tmp, "--tier-trigger", "0.9",
                               "--tier-stop", "0.5")
        wait_for(lambda: "memory tier disk 1" in schd.output(), timeout=5, what="the tier lines")
        out = schd.output()
        # Device 1 from the flag; device 0, the fake card, from NVML.
        self.assertIn("memory tiers: 2 gpu, 1 host, 2 disk", out)
        self.assertIn("memory tier gpu 1: %d bytes, downgrade at 0.9, stop at 0.5; capacity from "
                      "--gpu-capacity\n" % (512 << 20), out)
        self.assertIn("memory tier gpu 0: %d bytes, downgrade at 0.9, stop at 0.5; capacity from "
                      "NVML: the card's %d bytes less %d for contexts"
                      % (CARD - RESERVE, CARD, RESERVE), out)
        self.assertIn("memory tier host 0: %d bytes" % (2 << 30), out)
        self.assertIn("memory tier disk 0: %d bytes in %s" % (3 << 30, disk), out)
        # Without BYTES: what the filesystem had free (changes as others
        # write: only its presence is checked).
        self.assertIn("memory tier disk 1: ", out)
        self.assertIn(" bytes in %s (" % self.tmp, out)

    def test_host_tier_defaults_to_the_pinned_limit(self):
        schd = self.start_schd("--pinned-limit", "96Mi")
        wait_for(lambda: "memory tier host 0" in schd.output(), timeout=5, what="the tier line")
        self.assertIn("memory tier host 0: %d bytes, downgrade at 0.85, stop at 0.65" % (96 << 20),
                      schd.output())


class TierStatus(GmtTestCase):
    """gmt status shows the node's spaces under host.tiers, in the order
    declared (GPUs, the host, the disks), as the ledger counts them."""
    CONFIG = "1\na 0.5 1.0 1Gi\n"

    @staticmethod
    def space(tier, index, capacity, **more):
        sp = {"tier": tier, "index": index, "capacity": capacity, "limit": capacity,
              "reserved": 0, "used": 0, "trigger": 0.85, "stop": 0.65, "pressure": 0}
        if tier == "gpu":
            # Pod a's quota, on every GPU (no devices=): it fits.
            sp.update(strict_quotas=1 << 30, overcommitted=False, strict_pods=[])
            # No swap pod took a turn: the rate assumed (docs/tiers.md).
            sp.update(move_rate=4e9, switches=0, last_switch_ms=0, last_switch_bytes=0)
        sp.update(more)
        return sp

    def test_status_shows_the_declared_spaces(self):
        disk = os.path.join(self.tmp, "spill")
        os.mkdir(disk)
        self.start_schd("--gpu-capacity", "0=1Gi", "--host-tier", "512Mi", "--disk-tier",
                        disk + ":256Mi")
        self.assertEqual(self.status()["host"]["tiers"], [
            self.space("gpu", 0, 1 << 30),
            self.space("host", 0, 512 << 20),
            self.space("disk", 0, 256 << 20, path=disk),
        ])
        r = self.gmt("status")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        head = next(i for i, line in enumerate(lines) if line.startswith("TIER "))
        self.assertEqual(lines[head].split(), ["TIER", "CAPACITY", "RESERVED", "USED", "PRESSURE",
                                               "DOWN/STOP", "PATH"])
        self.assertEqual([line.split() for line in lines[head + 1:]], [
            ["gpu", "0", "1.0", "GiB", "0", "B", "0", "B", "0", "B", "0.85/0.65", "-"],
            ["host", "0", "512.0", "MiB", "0", "B", "0", "B", "0", "B", "0.85/0.65", "-"],
            ["disk", "0", "256.0", "MiB", "0", "B", "0", "B", "0", "B", "0.85/0.65", disk],
        ])

    def test_thresholds_flags_show_in_every_space(self):
        self.start_schd("--gpu-capacity", "3=2Gi", "--tier-trigger", "0.9", "--tier-stop", "0.5")
        tiers = self.status()["host"]["tiers"]
        # The fake card's space (NVML) and device 3's (the flag), by device.
        self.assertEqual([(t["tier"], t["index"], t["capacity"]) for t in tiers],
                         [("gpu", 0, CARD - RESERVE), ("gpu", 3, 2 << 30),
                          ("host", 0, tiers[2]["capacity"])])
        for t in tiers:
            self.assertEqual((t["trigger"], t["stop"]), (0.9, 0.5), t)

    def test_without_tier_flags_the_card_less_the_reserve_and_the_pinned_limit(self):
        schd = self.start_schd()
        st = self.status()
        # The card's memory (NVML) less the context reserve; --pinned-limit's
        # default (a quarter of RAM) is the host space's.
        self.assertEqual(st["host"]["tiers"],
                         [self.space("gpu", 0, CARD - RESERVE),
                          self.space("host", 0, st["host"]["pinned_limit"])])
        self.assertIn("capacity from NVML: the card's %d bytes less %d for contexts"
                      % (CARD, RESERVE), schd.output())
        # --gpu-capacity 0=off: no GPU space, as without NVML.
        schd = self.start_schd_again("--pinned-limit", "96Mi", "--gpu-capacity", "0=off")
        self.assertEqual(self.status()["host"]["tiers"], [self.space("host", 0, 96 << 20)])
        self.assertIn("memory tier gpu 0: no space (--gpu-capacity 0=off)", schd.output())

    def test_without_nvml_no_gpu_space_and_it_says_why(self):
        self.node.base_env["GMT_NVML_LIB"] = "none"
        schd = self.start_schd("--pinned-limit", "96Mi")
        self.assertEqual(self.status()["host"]["tiers"], [self.space("host", 0, 96 << 20)])
        wait_for(lambda: "memory tier host 0" in schd.output(), timeout=5, what="the tier line")
        out = schd.output()
        self.assertEqual(out.count("GPU spaces: none from NVML"), 1, out)
        self.assertIn("GPU spaces: none from NVML (NVML turned off (GMT_NVML_LIB=none)); only "
                      "--gpu-capacity declares them", out)
        self.assertIn("memory tiers: 0 gpu, 1 host, 0 disk", out)

    def start_schd_again(self, *flags):
        self.daemons[-1].stop()
        self.daemons.pop()
        return self.start_schd(*flags)


class StrictQuotasPastTheCard(GmtTestCase):
    """A config whose strict pods' quotas sum past a GPU's space is said at
    load and on each reload: in gmt-schd's log (warning), in `gmt status`
    (a WARNING line under the tiers; in the JSON, the GPU space's
    strict_quotas, overcommitted and strict_pods) and in /metrics'
    gmt_gpu_space_overcommitted (test_metrics.py). Swap and um pods do not
    count (their memory moves); a pod confined by devices= counts only on
    its GPUs. The fake card: 8 GiB, its space 7.5 GiB."""
    CONFIG = "3\na 0.3 1.0 5Gi\nb 0.3 1.0 3Gi\nc 0.3 1.0 6Gi mode=swap idle-out=0\n"
    WARNING = ("gpu 0: the quotas (GPU_MEM) of the strict pods that may use it sum to %d bytes "
               "(8.0 GiB), past its space of %d bytes (7.5 GiB): a, b; strict mode refuses their "
               "allocations past the space" % (8 << 30, CARD - RESERVE))

    def gpu(self):
        return self.status()["host"]["tiers"][0]

    def test_warned_at_load_and_on_reload_in_the_log_and_status(self):
        schd = self.start_schd()
        gpu = self.gpu()
        self.assertEqual((gpu["tier"], gpu["index"], gpu["capacity"]), ("gpu", 0, CARD - RESERVE))
        self.assertEqual((gpu["strict_quotas"], gpu["overcommitted"], gpu["strict_pods"]),
                         (8 << 30, True, ["a", "b"]))
        wait_for(lambda: self.WARNING in schd.output(), timeout=5, what="the warning in the log")
        self.assertIn("warning: " + self.WARNING, schd.output())
        r = self.gmt("status")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("WARNING: gpu 0: the strict pods' quotas sum to 8.0 GiB, past its space of "
                      "7.5 GiB (a, b): their allocations past it are refused", r.stdout)
        # b confined to another GPU: a alone fits; no warning is logged.
        self.write_config("3\na 0.3 1.0 5Gi\nb 0.3 1.0 3Gi devices=1\nc 0.3 1.0 6Gi mode=swap idle-out=0\n")
        wait_for(lambda: not self.gpu()["overcommitted"] or None, timeout=5,
                 what="the reload to fit the card")
        self.assertEqual((self.gpu()["strict_quotas"], self.gpu()["strict_pods"]), (5 << 30, []))
        self.assertNotIn("WARNING", self.gmt("status").stdout)
        self.assertEqual(schd.output().count(self.WARNING), 1)
        # Back past it (c strict now): warned again, with the pods.
        self.write_config("3\na 0.3 1.0 5Gi\nb 0.3 1.0 3Gi devices=1\nc 0.3 1.0 6Gi\n")
        wait_for(lambda: self.gpu()["overcommitted"] or None, timeout=5,
                 what="the reload past the card")
        self.assertEqual((self.gpu()["strict_quotas"], self.gpu()["strict_pods"]),
                         (11 << 30, ["a", "c"]))
        wait_for(lambda: "strict pods that may use it sum to %d bytes" % (11 << 30)
                 in schd.output(), timeout=5, what="the warning on reload")
        self.assertIn(": a, c; strict mode", schd.output())

    def test_gpu_capacity_still_overrides(self):
        schd = self.start_schd("--gpu-capacity", "0=16Gi")
        gpu = self.gpu()
        self.assertEqual((gpu["capacity"], gpu["strict_quotas"], gpu["overcommitted"]),
                         (16 << 30, 8 << 30, False))
        wait_for(lambda: "memory tier gpu 0" in schd.output(), timeout=5, what="the tier line")
        self.assertIn("memory tier gpu 0: %d bytes, downgrade at 0.85, stop at 0.65; capacity from "
                      "--gpu-capacity (NVML: the card has %d)" % (16 << 30, CARD), schd.output())
        self.assertNotIn("strict pods that may use it", schd.output())
        self.assertNotIn("WARNING", self.gmt("status").stdout)


class DeclaredCapacity(GmtTestCase):
    """--gpu-capacity bounds the strict pods' device reservations together:
    two pods whose quotas each allow 700 MiB cannot hold 1400 MiB on a
    device declared as 1 GiB (strict mode: the second gets out of memory),
    and the second fits once the first has freed. The fake card has 8 GiB.
    (A mode=swap pod's reservations do not occupy the space, its resident
    bytes do: test_swap.py.)"""
    CONFIG = "2\na 0.5 1.0 1Gi\nb 0.5 1.0 1Gi\n"
    MEM_PATHS = os.path.join(BUILD, "test", "e2e", "memprogs", "mem_paths")
    MIB = 1 << 20

    def gpu_reserved(self):
        return self.status()["host"]["tiers"][0]["reserved"]

    def fill(self, pod):
        p = self.run_prog(pod, self.MEM_PATHS, "alloc", str(700 * self.MIB), "--step",
                          str(700 * self.MIB), "--over", "1")
        p.expect("INFO")
        p.send()
        return p, p.expect("FILLED")

    def test_strict_refuses_what_the_card_cannot_hold(self):
        self.start_schd("--gpu-capacity", "0=1Gi")
        self.start_pmgr("a")
        self.start_pmgr("b")
        a, filled = self.fill("a")
        self.assertEqual(filled["ok"], "1", filled)
        held = self.gpu_reserved()
        self.assertTrue(700 * self.MIB <= held <= 1 << 30, held)
        # b's quota allows it, the card as declared does not.
        b, filled = self.fill("b")
        self.assertEqual(filled["ok"], "0", filled)
        self.assertEqual(filled["name"], "CUDA_ERROR_OUT_OF_MEMORY", filled)
        rc, err = b.finish()
        self.assertEqual(rc, 1)
        # Why, on the job's stderr: the card's declared space, not b's quota;
        # and in status, /metrics's counts and gmt-schd's log.
        self.assertIn("an allocation fails with out of memory: device 0 has", err)
        self.assertIn("left of its declared capacity", err)
        b_st = self.pod("b")
        self.assertGreaterEqual(b_st["refused_space"], 1, b_st)
        self.assertEqual(b_st["refused_quota"], 0, b_st)
        self.assertIn("left of its declared capacity", b_st["last_refusal"])
        # ... and who holds the card: a, with its 700 MiB.
        self.assertIn("; held by 'a' 700.0 MiB", err)
        self.assertIn("; held by 'a' 700.0 MiB", b_st["last_refusal"])
        self.assertAlmostEqual(b_st["last_refusal_unix"], time.time(), delta=60)
        self.assertEqual((self.pod("a")["refused_space"], self.pod("a")["last_refusal"]), (0, ""))
        self.assertIn("allocations refused: 0 for its GPU_MEM", self.gmt("status").stdout)
        self.assertIn("pod 'b': an allocation refused", self.daemons[0].output())
        a.expect("OVER")
        a.send()
        a.expect("FREED")
        wait_for(lambda: self.gpu_reserved() == 0 or None, timeout=10,
                 what="a's reservations to go back")
        c, filled = self.fill("b")
        self.assertEqual(filled["ok"], "1", filled)
        for p in (a, c):
            p.stop()


class NodeDevices(DeclaredCapacity):
    """A process shown only GPU 1 (CUDA_VISIBLE_DEVICES=1) calls it device
    0; its reservations count on the node's device 1: with 1 GiB declared
    for device 1 and 700 MiB of pod a there, pod c's 700 MiB fit on GPU 0
    and not on GPU 1 (three pods: each quota holds one fill)."""
    CONFIG = "3\na 0.3 1.0 1Gi\nb 0.3 1.0 1Gi\nc 0.3 1.0 1Gi\n"

    test_strict_refuses_what_the_card_cannot_hold = None

    def fill_three(self, name):
        self.start_schd("--gpu-capacity", "1=1Gi")
        for pod in "abc":
            self.start_pmgr(pod)
        progs = []
        for pod, gpu, ok in (("a", 1, "1"), ("b", 0, "1"), ("c", 1, "0")):
            env = self.hook_env(pod, GMT_FAKE_DEVICES="2", CUDA_VISIBLE_DEVICES=name(gpu))
            p = self.run_prog(pod, self.MEM_PATHS, "alloc", str(700 * self.MIB), "--step",
                              str(700 * self.MIB), "--over", "1", env=env)
            p.expect("INFO")
            p.send()
            filled = p.expect("FILLED")
            self.assertEqual(filled["ok"], ok, (pod, gpu, filled))
            progs.append(p)
        for p in progs:
            p.stop()

    def test_a_device_is_the_nodes_not_the_processs_ordinal(self):
        self.fill_three(str)

    def test_a_gpu_named_by_uuid_is_the_nodes(self):
        """The same with UUIDs in CUDA_VISIBLE_DEVICES: the scheduler names
        each GPU from its bus id (Devices)."""
        self.node.base_env["GMT_FAKE_DEVICES"] = "2"
        self.fill_three(fake_uuid)

