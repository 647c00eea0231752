"""NVML's memory view under the hook (hook/memory/nvml.c): nvmlDeviceGetMemoryInfo
and _v2, linked or found with dlsym, show the pod's quota and use, equal to
cuMemGetInfo's; without the hook, or outside a pod, the card's numbers."""
import os
import unittest

from gmt_e2e import BUILD, GmtTestCase, free_port

MEMPROGS = os.path.join(BUILD, "test", "e2e", "memprogs")
NVML_VIEW = os.path.join(MEMPROGS, "nvml_view")
NVML_VIEW_DL = os.path.join(MEMPROGS, "nvml_view_dl")
MIB = 1 << 20
GIB = 1 << 30
CARD = 8 * GIB  # the fake card (GMT_FAKE_MEM in gmt_e2e.py)
ALLOC = 256 * MIB


class NvmlView(GmtTestCase):
    CONFIG = "1\na 0.5 1.0 1Gi\n"

    def view(self, prog, env):
        p = self.run_prog("a", prog, str(ALLOC), env=env)
        lines = {}
        while True:
            prefix, fields = self.next_line(p)
            if prefix == "DONE":
                break
            lines[prefix] = fields
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)
        return lines

    def next_line(self, p):
        line = p.lines.get(timeout=20)
        if line is None:
            raise AssertionError("nvml_view ended early: %s" % p.stderr())
        if line.startswith("FAIL"):
            raise AssertionError("nvml_view: %s; stderr: %s" % (line, p.stderr()))
        head, *rest = line.split()
        if head == "IDX":
            head, rest = "IDX" + rest[0], rest[1:]
        return head, {k: int(v) for k, v in (kv.split("=", 1) for kv in rest)}

    def check_routes(self, lines, routes, total, used):
        cu = lines["CU"]
        self.assertEqual(cu["total"], total, cu)
        self.assertEqual(cu["free"], total - used, cu)
        for route in routes:
            for v in ("1", "2"):
                got = lines[route + v]
                with self.subTest(route=route + v):
                    self.assertEqual(got["total"], total, got)
                    self.assertEqual(got["used"], used, got)
                    self.assertEqual(got["free"], total - used, got)
                    self.assertEqual((got["total"], got["free"]), (cu["total"], cu["free"]))
                    if v == "2":
                        self.assertEqual(got["reserved"], 0, got)  # the fake reserves none
                        self.assertEqual(got["version"], (2 << 24) | 40, got)

    def test_linked_and_dlsym_show_the_pods_quota_and_use(self):
        self.start_schd()
        self.start_pmgr("a")
        lines = self.view(NVML_VIEW, self.hook_env("a"))
        self.check_routes(lines, ["LINK", "DEF", "DL"], GIB, ALLOC)

    def test_dlopen_only_shows_the_pods_quota_and_use(self):
        self.start_schd()
        self.start_pmgr("a")
        lines = self.view(NVML_VIEW_DL, self.hook_env("a"))
        self.check_routes(lines, ["DL"], GIB, ALLOC)
        self.assertNotIn("LINK1", lines)

    def test_without_the_hook_the_card_is_seen(self):
        for prog, routes in ((NVML_VIEW, ["LINK", "DEF", "DL"]), (NVML_VIEW_DL, ["DL"])):
            with self.subTest(prog=os.path.basename(prog)):
                self.check_routes(self.view(prog, self.prog_env()), routes, CARD, ALLOC)

    def test_outside_a_pod_the_card_is_seen(self):
        # The hook loaded, but no pod manager answers: unhooked.
        env = self.prog_env(LD_PRELOAD=self.preload(), GMT_PMGR="tcp://127.0.0.1:%d" % free_port())
        self.check_routes(self.view(NVML_VIEW, env), ["LINK", "DEF", "DL"], CARD, ALLOC)

    def test_a_device_hidden_from_cuda_keeps_the_cards_numbers(self):
        # Two cards, CUDA sees only the second: NVML index 1 is CUDA device
        # 0 (the pod's view), NVML index 0 is not this process's.
        self.start_schd()
        self.start_pmgr("a")
        env = self.hook_env("a", GMT_FAKE_DEVICES="2", CUDA_VISIBLE_DEVICES="1")
        lines = self.view(NVML_VIEW, env)
        self.check_routes(lines, ["LINK", "DEF", "DL"], GIB, ALLOC)
        self.assertEqual(lines["IDX1"], {"total": GIB, "used": ALLOC, "free": GIB - ALLOC})
        self.assertEqual(lines["IDX0"], {"total": CARD, "used": 0, "free": CARD})


if __name__ == "__main__":
    unittest.main()
