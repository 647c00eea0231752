"""Pinned memory near its GPU (issue 13, item 3; docs/devices.md, "Pinned
memory near its GPU"). The hook reads the GPU's NUMA node from a fake /sys
(GMT_SYSFS_ROOT) and sets MPOL_PREFERRED for it: as the thread's policy
around the program's cuMemAllocHost / cuMemHostAlloc (the pinned pool's
fresh blocks and the staging buffers included), and with mbind on a swap
host copy before it is registered. The fake driver logs, inside each of
those calls, the calling thread's policy and (cuMemHostRegister) the
range's: that is where a real driver's pages would go. This machine has
one NUMA node, node 0, so the calls succeed for real here; a node it lacks
must change nothing and fail nothing."""
import os
import re
import shutil
import tempfile

from gmt_e2e import BUILD, GmtTestCase, Node, wait_for

HOST_PINS = os.path.join(BUILD, "test", "e2e", "memprogs", "host_pins")
PIN_BUFFERS = os.path.join(BUILD, "test", "e2e", "memprogs", "pin_buffers")
SWAP_JOB = os.path.join(BUILD, "test", "e2e", "memprogs", "swap_job")
MIB = 1 << 20
DEFAULT, PREFERRED, INTERLEAVE = 0, 1, 3  # <linux/mempolicy.h>


def fake_bus_id(dev):
    """/sys's name of the fake machine's device dev (test/fakecuda/machine.c,
    gmt__machine_bus; the driver writes it in capitals)."""
    return "0000:%02x:00.0" % (dev + 1)


def policies(stderr, call, kind="thread"):
    """(mode, node mask) of each call the fake driver logged."""
    pat = r"fakecuda\[\d+\]: %s: %s policy (-?\d+) nodes 0x([0-9a-f]+)" % (re.escape(call), kind)
    return [(int(m), int(n, 16)) for m, n in re.findall(pat, stderr)]


class Numa(GmtTestCase):
    CONFIG = ("3\n"
              "off 0.3 1.0 1Gi\n"
              "use 0.3 1.0 1Gi pin=use\n"
              "sw 0.3 1.0 256Mi mode=swap idle-out=0\n")

    def setUp(self):
        super().setUp()
        self.sys = tempfile.mkdtemp(prefix="gmt-numa-e2e-")
        self.addCleanup(shutil.rmtree, self.sys, True)

    def gpu_node(self, dev, node):
        """The fake /sys says the fake device dev is on node (None: /sys
        has no such device)."""
        d = os.path.join(self.sys, "bus", "pci", "devices", fake_bus_id(dev))
        if node is None:
            shutil.rmtree(d, True)
            return
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "numa_node"), "w") as f:
            f.write("%d\n" % node)

    def fresh(self):
        """A new node for the next case of a loop (the fake /sys stays)."""
        self.node.stop()
        self.node = Node(self.CONFIG, fake=self.FAKE)

    def pins(self, pod, *args, **env):
        """host_pins in pod: its pinned allocations' and registration's
        logged policies, and the policy its thread had after them."""
        self.start_schd()
        self.start_pmgr(pod)
        e = self.hook_env(pod, GMT_FAKE_LOG="1", GMT_SYSFS_ROOT=self.sys)
        e.update(env)
        p = self.run_prog(pod, HOST_PINS, *args, env=e)
        after = int(p.expect("PINNED")["policy"])
        self.finish_freed(p)
        err = p.stderr()
        got = {c: policies(err, c) for c in ("cuMemAllocHost_v2", "cuMemHostAlloc",
                                             "cuMemHostRegister_v2")}
        got["range"] = policies(err, "cuMemHostRegister_v2", "range")
        for c in ("cuMemAllocHost_v2", "cuMemHostAlloc", "cuMemHostRegister_v2", "range"):
            self.assertEqual(len(got[c]), 1, "%s: %s" % (c, err[-3000:]))
        return got, after, err

    def test_program_pinned_memory_is_preferred_on_its_gpus_node(self):
        """pin=off: the program's own calls go to the driver as they are;
        pin=use: the pinned pool allocates its fresh blocks (rounded to
        their class) there too. Either way the thread's policy is
        MPOL_PREFERRED for node 0 during the call and the default after;
        the program's own registration of its malloc'd buffer runs under
        the default and its range gets no policy (its pages exist)."""
        self.gpu_node(0, 0)
        for pod in ("off", "use"):
            with self.subTest(pod=pod):
                got, after, err = self.pins(pod)
                self.assertEqual(got["cuMemAllocHost_v2"], [(PREFERRED, 1)], err[-3000:])
                self.assertEqual(got["cuMemHostAlloc"], [(PREFERRED, 1)], err[-3000:])
                self.assertEqual(got["cuMemHostRegister_v2"], [(DEFAULT, 0)])
                self.assertEqual(got["range"], [(DEFAULT, 0)])
                self.assertEqual(after, DEFAULT)
                self.fresh()

    def test_bus_id_is_matched_in_lowercase(self):
        """The driver writes "0000:0B:00.0"; /sys names it 0000:0b:00.0."""
        self.gpu_node(10, 0)
        got, after, err = self.pins("off", GMT_FAKE_DEVICES="12", CUDA_VISIBLE_DEVICES="10")
        self.assertEqual(got["cuMemHostAlloc"], [(PREFERRED, 1)], err[-3000:])
        self.assertEqual(after, DEFAULT)

    def test_unknown_node_sets_nothing(self):
        """A VM's /sys says -1; a tree without the device says nothing."""
        for node in (-1, None):
            with self.subTest(node=node):
                self.gpu_node(0, node)
                got, after, err = self.pins("off")
                self.assertEqual(got["cuMemAllocHost_v2"], [(DEFAULT, 0)], err[-3000:])
                self.assertEqual(got["cuMemHostAlloc"], [(DEFAULT, 0)])
                self.assertEqual(after, DEFAULT)
                self.fresh()

    def test_a_node_the_machine_lacks_fails_nothing(self):
        """/sys names node 7 on a machine that has node 0 only: the kernel
        refuses the policy, and the allocations succeed as without it."""
        self.gpu_node(0, 7)
        got, after, err = self.pins("off")
        self.assertEqual(got["cuMemHostAlloc"], [(DEFAULT, 0)], err[-3000:])
        self.assertEqual(after, DEFAULT)

    def test_gmt_numa_0_turns_it_off(self):
        self.gpu_node(0, 0)
        got, after, err = self.pins("off", GMT_NUMA="0")
        self.assertEqual(got["cuMemAllocHost_v2"], [(DEFAULT, 0)], err[-3000:])
        self.assertEqual(got["cuMemHostAlloc"], [(DEFAULT, 0)])
        self.assertEqual(after, DEFAULT)

    def test_a_program_with_its_own_policy_keeps_it(self):
        self.gpu_node(0, 0)
        got, after, err = self.pins("off", "interleave")
        self.assertEqual(got["cuMemAllocHost_v2"], [(INTERLEAVE, 1)], err[-3000:])
        self.assertEqual(got["cuMemHostAlloc"], [(INTERLEAVE, 1)])
        self.assertEqual(after, INTERLEAVE)

    def test_staging_buffers_are_preferred_on_the_gpus_node(self):
        """pin=use without a profile: pin_buffers' copies are from pageable
        memory, so they go through gmt's three staging buffers, whose
        cuMemHostAlloc (gmt's own, to the real driver) runs under the
        preferred policy."""
        self.gpu_node(0, 0)
        self.start_schd()
        self.start_pmgr("use")
        p = self.run_prog("use", PIN_BUFFERS, "20", "0", "0", "3", "2",
                          env=self.hook_env("use", GMT_FAKE_LOG="1", GMT_SYSFS_ROOT=self.sys,
                                            GMT_STAGE_THREADS="2"))
        self.assertEqual(p.expect("PINNED", timeout=60)["cold"], "0")
        self.finish_freed(p)
        err = p.stderr()
        self.assertEqual(policies(err, "cuMemHostAlloc"), [(PREFERRED, 1)] * 3, err[-3000:])

    def swap_copy(self, **env):
        """swap_job's allocation moved out once (the test knob): the logged
        policies of its host copy's registration (range, thread)."""
        self.start_schd()
        self.start_pmgr("sw")
        e = self.hook_env("sw", GMT_FAKE_LOG="1", GMT_HOOK_DEBUG="1", GMT_SYSFS_ROOT=self.sys,
                          GMT_SWAP_TEST_EVICT_MS="300")
        e.update(env)
        p = self.run_prog("sw", SWAP_JOB, "--mib", "16", env=e)
        p.expect("READY")
        wait_for(lambda: re.search(r"moved 1 allocations \(\d+ bytes\) off the GPU", p.stderr()),
                 timeout=10, what="a move out; stderr: %s" % p.stderr()[-2000:])
        p.send("check")  # brought back, byte for byte
        p.expect("OK", timeout=30)
        p.send("exit")
        rc, err = p.finish()
        self.assertEqual(rc, 0, err[-3000:])
        ranges = policies(err, "cuMemHostRegister_v2", "range")
        threads = policies(err, "cuMemHostRegister_v2")
        self.assertGreaterEqual(len(ranges), 1, err[-3000:])
        return ranges, threads, err

    def test_swap_host_copy_is_preferred_on_the_gpus_node(self):
        """mbind on the fresh mapping: the range has the policy, the thread
        that moves it out keeps its own (default)."""
        self.gpu_node(0, 0)
        ranges, threads, err = self.swap_copy()
        self.assertEqual(set(ranges), {(PREFERRED, 1)}, err[-3000:])
        self.assertEqual(set(threads), {(DEFAULT, 0)})

    def test_swap_host_copy_unplaced_when_unknown_or_off(self):
        for node, env in ((-1, {}), (0, {"GMT_NUMA": "0"})):
            with self.subTest(node=node, env=env):
                self.gpu_node(0, node)
                ranges, _, err = self.swap_copy(**env)
                self.assertEqual(set(ranges), {(DEFAULT, 0)}, err[-3000:])
                self.fresh()
