"""End-to-end: `gmt topo` runs locally, needs no daemon, and reads /sys
under GMT_SYSFS_ROOT. Against a fake tree (two NUMA nodes, two GPUs under
one PCIe switch, one on the other socket, a NIC, an NVMe) and with NVML
turned away (GMT_NVML_LIB pointing nowhere), its JSON must show exactly
what the tree holds and say why NVML was not used."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from gmt_e2e import FAKECUDA_DIR, GMT


def pci(root, path, vendor, cls, numa, cpus=None):
    d = os.path.join(root, "devices", path)
    os.makedirs(d, exist_ok=True)
    for name, text in (("vendor", vendor), ("class", cls), ("numa_node", str(numa))):
        with open(os.path.join(d, name), "w") as f:
            f.write(text + "\n")
    if cpus is not None:
        with open(os.path.join(d, "local_cpulist"), "w") as f:
            f.write(cpus + "\n")
    os.symlink(d, os.path.join(root, "bus", "pci", "devices", os.path.basename(path)))
    return d


def class_dev(root, cls, name, pci_dir):
    d = os.path.join(pci_dir, cls, name)
    os.makedirs(d)
    os.symlink(pci_dir, os.path.join(d, "device"))
    os.symlink(d, os.path.join(root, "class", cls, name))


def fake_sysfs(root):
    for d in ("bus/pci/devices", "class/net", "class/nvme", "devices/system/node/node0",
              "devices/system/node/node1"):
        os.makedirs(os.path.join(root, d))
    for n, cpus in ((0, "0-7"), (1, "8-15")):
        with open(os.path.join(root, "devices/system/node/node%d/cpulist" % n), "w") as f:
            f.write(cpus + "\n")
    sw = "pci0000:00/0000:00:01.0/0000:01:00.0"
    pci(root, "pci0000:00/0000:00:01.0", "0x8086", "0x060400", 0)
    pci(root, sw, "0x10b5", "0x060400", 0)
    pci(root, sw + "/0000:02:08.0", "0x10b5", "0x060400", 0)
    pci(root, sw + "/0000:02:10.0", "0x10b5", "0x060400", 0)
    pci(root, sw + "/0000:02:08.0/0000:03:00.0", "0x10de", "0x030200", 0, "0-7")
    pci(root, sw + "/0000:02:10.0/0000:04:00.0", "0x10de", "0x030200", 0, "0-7")
    pci(root, "pci0000:80/0000:80:01.0", "0x8086", "0x060400", 1)
    pci(root, "pci0000:80/0000:80:01.0/0000:81:00.0", "0x10de", "0x030200", 1, "8-15")
    nic = pci(root, "pci0000:80/0000:80:02.0", "0x15b3", "0x020000", 1)
    class_dev(root, "net", "eth9", nic)
    nvme = pci(root, "pci0000:00/0000:00:1d.0", "0x144d", "0x010802", 0)
    class_dev(root, "nvme", "nvme0", nvme)


class Topo(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gmt-topo-e2e-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.root = os.path.join(self.tmp, "sys")
        fake_sysfs(self.root)

    def gmt_topo(self, *args, **env):
        e = dict(os.environ)
        e.update(env)
        return subprocess.run([GMT, "topo", *args], env=e, capture_output=True, text=True,
                              timeout=20)

    def test_json_shows_the_fake_tree_without_nvml(self):
        r = self.gmt_topo("--json", GMT_SYSFS_ROOT=self.root, GMT_NVML_LIB="/nonexistent/libnvml.so")
        self.assertEqual(r.returncode, 0, r.stderr)
        t = json.loads(r.stdout)
        self.assertFalse(t["nvml"]["available"])
        self.assertIn("/nonexistent/libnvml.so", t["nvml"]["error"])
        self.assertEqual(t["sysfs_root"], self.root)
        self.assertEqual([g["bus_id"] for g in t["gpus"]],
                         ["0000:03:00.0", "0000:04:00.0", "0000:81:00.0"])
        self.assertEqual([g["index"] for g in t["gpus"]], [0, 1, 2])
        self.assertEqual([g["numa_node"] for g in t["gpus"]], [0, 0, 1])
        self.assertEqual([g["cpus"] for g in t["gpus"]], ["0-7", "0-7", "8-15"])
        for g in t["gpus"]:
            self.assertIsNone(g["uuid"])
            self.assertIsNone(g["memory_total"])
            self.assertIsNone(g["mig"])
        self.assertEqual(t["matrix"], [["X", "PIX", "SYS"], ["PIX", "X", "SYS"],
                                       ["SYS", "SYS", "X"]])
        self.assertEqual(t["links"], [
            {"a": 0, "b": 1, "level": "PIX", "nvlinks": 0},
            {"a": 0, "b": 2, "level": "SYS", "nvlinks": 0},
            {"a": 1, "b": 2, "level": "SYS", "nvlinks": 0},
        ])
        self.assertEqual(t["numa_nodes"], [{"node": 0, "cpus": "0-7"}, {"node": 1, "cpus": "8-15"}])
        self.assertEqual(t["nics"], [{"name": "eth9", "bus_id": "0000:80:02.0", "numa_node": 1}])
        self.assertEqual(t["nvme"], [{"name": "nvme0", "bus_id": "0000:00:1d.0", "numa_node": 0}])

    def test_table_names_the_note_and_the_matrix(self):
        r = self.gmt_topo(GMT_SYSFS_ROOT=self.root, GMT_NVML_LIB="none")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("NVML not available (NVML turned off (GMT_NVML_LIB=none))", r.stdout)
        self.assertIn("0000:81:00.0", r.stdout)
        self.assertRegex(r.stdout, r"GPU0\s+X\s+PIX\s+SYS")
        self.assertIn("Legend:", r.stdout)
        self.assertRegex(r.stdout, r"eth9\s+0000:80:02.0\s+1")

    def test_runs_on_this_machine_and_exits_zero(self):
        """Whatever this node has (on CI: no GPU, no NVML), a clear answer."""
        r = self.gmt_topo("--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        t = json.loads(r.stdout)
        self.assertIn("available", t["nvml"])
        if not t["nvml"]["available"]:
            self.assertTrue(t["nvml"]["error"])

    def test_json_through_the_fake_nvml(self):
        """NVML's path, through the fake libnvidia-ml.so.1 playing a
        2-socket, 4-GPU machine with two NVLink pairs (GMT_FAKE_TOPO): GPU
        facts and pair levels come from NVML, not from /sys."""
        fake = os.path.join(self.tmp, "fake")
        os.makedirs(fake)
        r = self.gmt_topo("--json", GMT_SYSFS_ROOT=self.root,
                          GMT_NVML_LIB=os.path.join(FAKECUDA_DIR, "libnvidia-ml.so.1"),
                          GMT_FAKE_DIR=fake, GMT_FAKE_DEVICES="4", GMT_FAKE_MEM="8Gi",
                          GMT_FAKE_TOPO="numa=0,0,1,1;nvlink=0-1:4,2-3:2;pcie=0-1:single")
        self.assertEqual(r.returncode, 0, r.stderr)
        t = json.loads(r.stdout)
        self.assertTrue(t["nvml"]["available"], t["nvml"])
        self.assertEqual([g["index"] for g in t["gpus"]], [0, 1, 2, 3])
        self.assertEqual([g["numa_node"] for g in t["gpus"]], [0, 0, 1, 1])
        self.assertEqual([g["memory_total"] for g in t["gpus"]], [8 << 30] * 4)
        self.assertEqual(len({g["uuid"] for g in t["gpus"]}), 4)
        for g in t["gpus"]:
            self.assertTrue(g["uuid"].startswith("GPU-"), g)
            self.assertFalse(g["mig"])
        self.assertEqual(t["matrix"], [["X", "NV4", "SYS", "SYS"], ["NV4", "X", "SYS", "SYS"],
                                       ["SYS", "SYS", "X", "NV2"], ["SYS", "SYS", "NV2", "X"]])

    def test_bad_argument_is_usage_error(self):
        r = self.gmt_topo("--bogus")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown argument '--bogus'", r.stderr)


if __name__ == "__main__":
    unittest.main()
