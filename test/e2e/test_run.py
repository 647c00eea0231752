"""End-to-end: `gmt run` and the hook's GMT_AUTO_DEVICE (docs/devices.md,
"gmt run and GMT_AUTO_DEVICE" and "Confining a pod to GPUs"). A fake machine of two GPUs (8 GiB each);
another process holds 6 GiB on GPU 0, so the scheduler's Pick must name
GPU 1. show_devices prints what a program is shown: its
CUDA_VISIBLE_DEVICES and the UUIDs CUDA numbers for it."""
import os
import signal
import socket
import subprocess
import time
import unittest

from gmt_e2e import GMT, PMGR, PROGS, Daemon, GmtTestCase, free_port, wait_for

SHOW = os.path.join(PROGS, "show_devices")
HELD = 6 << 30  # of GPU 0's 8 GiB


def uuid(dev):
    """The fake driver's UUID of its device dev (test/fakecuda/machine.c)."""
    return "GPU-fa4ec0da-0000-0000-0000-0000000000%02x" % dev


class Run(GmtTestCase):
    CONFIG = "3\na 0.5 1.0 2Gi\nb 0.5 1.0 2Gi\nc 0.5 1.0 2Gi devices=1\n"

    def setUp(self):
        super().setUp()
        # Every program of the node (the scheduler's NVML too) sees the
        # same fake machine of two GPUs.
        self.node.base_env["GMT_FAKE_DEVICES"] = "2"
        for k in ("CUDA_VISIBLE_DEVICES", "GMT_AUTO_DEVICE", "GMT_PMGR", "GMT_HOOK_LIB"):
            self.node.base_env.pop(k, None)

    def hold_gpu0(self):
        """Another process, outside gmt, holding most of GPU 0. Before any
        Pick of the test: gmt-schd keeps the numbers it sampled for a
        second (daemon.max-cache-time-interval)."""
        p = self.run_prog(None, SHOW, "--hold", str(HELD),
                          env=self.prog_env(CUDA_VISIBLE_DEVICES="0"))
        p.expect("HELD")
        return p

    def gmt_run(self, *args, env=None, schd=None):
        """`gmt [--schd URL] run ARGS` as a Prog (it execs the program)."""
        argv = [GMT, "--schd", schd or self.schd_url, "run"] + list(args)
        p = self.run_prog(None, argv[0], *argv[1:], env=env or self.env())
        return p

    def shown(self, p):
        """The ENV and DEVICES lines of a show_devices."""
        got = p.expect_all(["ENV", "DEVICES"])
        return got["ENV"], got["DEVICES"]

    # ---- gmt run --auto-device ----

    def test_auto_device_runs_cmd_on_the_gpu_with_room(self):
        self.start_schd()
        self.hold_gpu0()
        p = self.gmt_run("--auto-device", "--", SHOW)
        env, devs = self.shown(p)
        self.assertEqual(env["cvd"], uuid(1), p.stderr())
        self.assertEqual(devs["n"], "1")
        self.assertEqual(devs["uuid0"], uuid(1))
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)
        # One line saying which GPU and why.
        lines = [l for l in err.splitlines() if l.startswith("gmt run:")]
        self.assertEqual(len(lines), 1, err)
        self.assertIn("picked GPU 1 (score", lines[0])
        self.assertIn("CUDA_VISIBLE_DEVICES=" + uuid(1), lines[0])

    def test_quiet_says_nothing(self):
        self.start_schd()
        p = self.gmt_run("-q", "--auto-device", "--", SHOW)
        env, _ = self.shown(p)
        self.assertTrue(env["cvd"].startswith("GPU-"), p.stderr())
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)
        self.assertNotIn("gmt run:", err)

    def test_no_gpu_fits_is_the_schedulers_refusal(self):
        self.start_schd()
        p = self.gmt_run("--auto-device", "--bytes", "64Gi", "--", SHOW)
        rc, err = p.finish()
        self.assertEqual(rc, 1, err)
        self.assertIn("gmt run: scheduler at %s: cannot pick a GPU" % self.schd_url, err)
        self.assertIn("nothing was run", err)

    def test_unknown_pod_is_the_schedulers_refusal(self):
        self.start_schd()
        p = self.gmt_run("--pod", "zz", "--pmgr", "tcp://127.0.0.1:1", "--auto-device", "--",
                         SHOW)
        rc, err = p.finish()
        self.assertEqual(rc, 1, err)
        self.assertIn("pod 'zz' is not in", err)
        self.assertIn("nothing was run", err)

    def test_auto_device_leaves_a_set_cuda_visible_devices(self):
        self.start_schd()
        self.hold_gpu0()
        p = self.gmt_run("--auto-device", "--", SHOW, env=self.env(CUDA_VISIBLE_DEVICES="0"))
        env, devs = self.shown(p)
        self.assertEqual(env["cvd"], "0")
        self.assertEqual(devs["uuid0"], uuid(0))
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)
        self.assertIn("CUDA_VISIBLE_DEVICES is already set", err)

    # ---- no scheduler ----

    def test_no_scheduler_is_a_clear_error_at_once(self):
        url = "tcp://127.0.0.1:%d" % free_port()
        t0 = time.monotonic()
        r = subprocess.run([GMT, "--schd", url, "run", "--auto-device", "--", SHOW],
                           capture_output=True, text=True, timeout=20, env=self.env())
        took = time.monotonic() - t0
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("gmt run: no scheduler at %s" % url, r.stderr)
        self.assertNotIn("ENV", r.stdout)  # nothing was run
        self.assertLess(took, 3.0)

    def test_gmt_schd_names_the_scheduler_for_every_command(self):
        self.start_schd()
        # The test's gmt-schd, named only by the environment.
        env = dict(self.env(), GMT_SCHD=self.schd_url)
        r = subprocess.run([GMT, "status", "--json"], capture_output=True, text=True, timeout=20,
                           env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('"pods"', r.stdout)
        # --schd wins over it, and the error names the address tried and
        # how to name another.
        url = "tcp://127.0.0.1:%d" % free_port()
        r = subprocess.run([GMT, "--schd", url, "status"], capture_output=True, text=True,
                           timeout=20, env=env)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("gmt status: no scheduler at %s" % url, r.stderr)
        self.assertIn("--schd URL or GMT_SCHD=URL", r.stderr)
        r = subprocess.run([GMT, "--help"], capture_output=True, text=True, timeout=20, env=env)
        self.assertIn("$GMT_SCHD", r.stdout)

    def start_pmgr_env(self, name, gmt_schd, *flags):
        """gmt-pmgr for pod name with GMT_SCHD=gmt_schd in its environment
        and flags (no --schd unless flags has one), not waited for."""
        port = free_port()
        argv = [PMGR, "--port", str(port), "--name", name, "--wait", "5",
                "--ipc", os.path.join(self.tmp, "run", "pmgr-%s.sock" % name), "-v"] + list(flags)
        d = Daemon("pmgr-" + name, argv, dict(self.env(), GMT_SCHD=gmt_schd), self.tmp)
        self.daemons.append(d)
        return d

    def wait_connected(self, d, name):
        wait_for(lambda: not d.alive() or self.pod(name).get("connected"),
                 what="pod %s to connect" % name)
        self.assertTrue(d.alive(), "gmt-pmgr exited: " + d.output())

    def test_pmgr_takes_gmt_schd_without_schd(self):
        self.start_schd()
        d = self.start_pmgr_env("a", self.schd_url)
        self.wait_connected(d, "a")
        self.assertIn(self.schd_url, d.output())
        self.assertEqual(d.stop(), 0, d.output())
        r = subprocess.run([PMGR, "--help"], capture_output=True, text=True, timeout=20,
                           env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("$GMT_SCHD", r.stdout)

    def test_pmgr_schd_flag_wins_over_gmt_schd(self):
        self.start_schd()
        nowhere = "tcp://127.0.0.1:%d" % free_port()
        # GMT_SCHD names no scheduler; the flag names the test's.
        d = self.start_pmgr_env("a", nowhere, "--schd", self.schd_url)
        self.wait_connected(d, "a")
        self.assertNotIn(nowhere, d.output())
        self.assertEqual(d.stop(), 0, d.output())
        # And the other way round: GMT_SCHD names the test's scheduler, the
        # flag names none, and gmt-pmgr gives up on the flag's address.
        d = self.start_pmgr_env("b", self.schd_url, "--schd", nowhere, "--wait", "1")
        try:
            rc = d.proc.wait(timeout=20)
        finally:
            d.stop()
        self.assertEqual(rc, 1, d.output())
        self.assertIn("scheduler at %s not reachable" % nowhere, d.output())
        self.assertFalse(self.pod("b").get("connected"))

    def test_scheduler_that_never_answers_is_bounded(self):
        # Accepts connections (the kernel does) and never says a word.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(8)
            url = "tcp://127.0.0.1:%d" % s.getsockname()[1]
            t0 = time.monotonic()
            r = subprocess.run([GMT, "--schd", url, "run", "--auto-device", "--timeout", "1500",
                                "--", SHOW], capture_output=True, text=True, timeout=20,
                               env=self.env())
            took = time.monotonic() - t0
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(url, r.stderr)
        self.assertNotIn("ENV", r.stdout)
        self.assertLess(took, 5.0)

    # ---- gmt run --pod ----

    def test_pod_runs_cmd_under_the_hook_in_the_pod(self):
        self.start_schd()
        self.start_pmgr("a")
        p = self.gmt_run("--pod", "a", "--pmgr", self.pmgr_urls["a"][0], "--", SHOW, "--wait")
        env, devs = self.shown(p)
        self.assertEqual(env["cvd"], "-")  # no --auto-device: nothing picked
        self.assertEqual(devs["n"], "2")
        # exec: the program has gmt's pid, and the pod shows it.
        self.assertEqual(int(env["pid"]), p.proc.pid)
        self.wait_process("a", p.proc.pid)
        p.send()
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)
        self.assertNotIn("gmt run:", err)

    def test_pod_takes_gmt_pmgr_from_the_environment(self):
        self.start_schd()
        self.start_pmgr("b")
        p = self.gmt_run("--pod", "b", "--", SHOW, "--wait",
                         env=self.env(GMT_PMGR=self.pmgr_urls["b"][0]))
        env, _ = self.shown(p)
        self.wait_process("b", int(env["pid"]))
        p.send()
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)

    def test_pod_without_a_pod_manager_address_is_refused(self):
        r = subprocess.run([GMT, "run", "--pod", "a", "--", SHOW], capture_output=True,
                           text=True, timeout=20, env=self.env())
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--pmgr URL or set GMT_PMGR", r.stderr)
        self.assertNotIn("ENV", r.stdout)

    def test_pod_with_devices_sees_only_its_gpus(self):
        # Pod c may use GPU 1 alone: its job's device 0 is GPU 1, not a GPU
        # the scheduler would refuse.
        self.start_schd()
        self.start_pmgr("c")
        p = self.gmt_run("--pod", "c", "--pmgr", self.pmgr_urls["c"][0], "--", SHOW, "--wait")
        env, devs = self.shown(p)
        self.assertEqual(env["cvd"], uuid(1), p.stderr())
        self.assertEqual((devs["n"], devs["uuid0"]), ("1", uuid(1)))
        self.wait_process("c", p.proc.pid)
        p.send()
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)
        self.assertIn("gmt run: pod c may use 1 GPU: CUDA_VISIBLE_DEVICES=%s" % uuid(1), err)

    def test_pod_with_devices_leaves_a_set_cuda_visible_devices(self):
        self.start_schd()
        self.start_pmgr("c")
        p = self.gmt_run("--pod", "c", "--pmgr", self.pmgr_urls["c"][0], "--", SHOW,
                         env=self.env(CUDA_VISIBLE_DEVICES="0"))
        env, _ = self.shown(p)
        self.assertEqual(env["cvd"], "0")
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)
        self.assertNotIn("gmt run:", err)

    def test_pod_with_devices_runs_when_the_scheduler_cannot_say(self):
        # No scheduler: the job runs as it would have (the scheduler, once
        # up, still refuses other GPUs), and gmt run says why it is not
        # confined.
        p = self.gmt_run("--pod", "c", "--pmgr", "tcp://127.0.0.1:%d" % free_port(), "--", SHOW,
                         schd="tcp://127.0.0.1:%d" % free_port())
        env, _ = self.shown(p)
        self.assertEqual(env["cvd"], "-")
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)
        self.assertIn("which GPUs pod c may use is not known (no scheduler at", err)

    def test_pod_and_auto_device_together(self):
        self.start_schd()
        self.start_pmgr("a")
        self.hold_gpu0()
        p = self.gmt_run("--pod", "a", "--pmgr", self.pmgr_urls["a"][0], "--auto-device", "--",
                         SHOW, "--wait")
        env, devs = self.shown(p)
        self.assertEqual(env["cvd"], uuid(1), p.stderr())
        self.assertEqual(devs["uuid0"], uuid(1))
        self.wait_process("a", p.proc.pid)
        p.send()
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)

    # ---- exit codes and signals are the command's ----

    def test_exit_code_and_signal_are_the_commands(self):
        self.start_schd()
        self.start_pmgr("a")
        for extra in ([], ["--pod", "a", "--pmgr", self.pmgr_urls["a"][0]]):
            r = subprocess.run([GMT, "run"] + extra + ["--", SHOW, "--exit", "7"],
                               capture_output=True, text=True, timeout=20, env=self.env())
            self.assertEqual(r.returncode, 7, (extra, r.stderr))
        r = subprocess.run([GMT, "run", "--", "sh", "-c", "kill -TERM $$"], capture_output=True,
                           timeout=20, env=self.env())
        self.assertEqual(r.returncode, -signal.SIGTERM)
        r = subprocess.run([GMT, "run", "--", "/nonexistent/prog"], capture_output=True,
                           text=True, timeout=20, env=self.env())
        self.assertEqual(r.returncode, 127)
        self.assertIn("cannot run '/nonexistent/prog'", r.stderr)

    # ---- the hook's GMT_AUTO_DEVICE ----

    def test_hook_auto_device_picks_the_same_gpu(self):
        self.start_schd()
        self.start_pmgr("a")
        self.hold_gpu0()
        p = self.run_prog("a", SHOW, "--wait", env=self.hook_env("a", GMT_AUTO_DEVICE="1"))
        env, devs = self.shown(p)
        self.assertEqual(env["cvd"], uuid(1), p.stderr())
        self.assertEqual(devs["n"], "1")
        self.assertEqual(devs["uuid0"], uuid(1))
        self.wait_process("a", p.proc.pid)
        p.send()
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)
        self.assertNotIn("GMT_AUTO_DEVICE", err)  # success is said at debug level only

    def test_hook_auto_device_leaves_no_descriptor_or_thread(self):
        self.start_schd()
        self.start_pmgr("a")
        # The shell's own globs: no child or pipe of its own in the lists.
        script = 'echo "cvd=$CUDA_VISIBLE_DEVICES"; echo /proc/$$/fd/*; echo /proc/$$/task/*'

        def run(env):
            r = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True,
                               text=True, timeout=20)
            self.assertEqual(r.returncode, 0, r.stderr)
            return r.stdout.splitlines()

        plain = run(self.prog_env())
        hooked = run(self.hook_env("a", GMT_AUTO_DEVICE="1"))
        self.assertTrue(hooked[0].startswith("cvd=GPU-"), hooked)

        def fds(line):
            return [path.rsplit("/", 1)[1] for path in line.split()]

        self.assertEqual(fds(hooked[1]), fds(plain[1]))  # the same as without the hook
        self.assertEqual(len(hooked[2].split()), 1, hooked)  # one thread

    def test_hook_auto_device_leaves_a_set_cuda_visible_devices(self):
        self.start_schd()
        self.start_pmgr("a")
        self.hold_gpu0()
        p = self.run_prog("a", SHOW, env=self.hook_env("a", GMT_AUTO_DEVICE="1",
                                                       CUDA_VISIBLE_DEVICES="0",
                                                       GMT_HOOK_DEBUG="1"))
        env, devs = self.shown(p)
        self.assertEqual(env["cvd"], "0")
        self.assertEqual(devs["uuid0"], uuid(0))
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)
        self.assertIn("CUDA_VISIBLE_DEVICES is already set ('0'): left as it is", err)

    def test_hook_auto_device_failure_leaves_the_environment(self):
        # No pod manager there: refused at once.
        url = "tcp://127.0.0.1:%d" % free_port()
        env = self.prog_env(LD_PRELOAD=self.preload(), GMT_PMGR=url, GMT_AUTO_DEVICE="1")
        p = self.run_prog(None, SHOW, env=env)
        got, _ = self.shown(p)
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)
        self.assertEqual(got["cvd"], "-")
        lines = [l for l in err.splitlines() if "GMT_AUTO_DEVICE" in l]
        self.assertEqual(len(lines), 1, err)
        self.assertIn("no GPU picked: no pod manager at " + url, lines[0])
        self.assertIn("CUDA_VISIBLE_DEVICES left unset", lines[0])

    def test_hook_auto_device_wait_is_bounded(self):
        with socket.socket() as s:  # a pod manager that never answers
            s.bind(("127.0.0.1", 0))
            s.listen(8)
            url = "tcp://127.0.0.1:%d" % s.getsockname()[1]
            env = self.prog_env(LD_PRELOAD=self.preload(), GMT_PMGR=url, GMT_AUTO_DEVICE="1",
                                GMT_AUTO_DEVICE_TIMEOUT_MS="300")
            t0 = time.monotonic()
            r = subprocess.run(["/bin/true"], env=env, capture_output=True, text=True, timeout=20)
            took = time.monotonic() - t0
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("did not answer within 300 ms", r.stderr)
        self.assertLess(took, 2.0)

    def test_hook_without_auto_device_or_pmgr_does_nothing(self):
        for extra in ({}, {"GMT_AUTO_DEVICE": "1"}):
            env = self.prog_env(LD_PRELOAD=self.preload(), **extra)
            r = subprocess.run(["/bin/sh", "-c", "echo ${CUDA_VISIBLE_DEVICES-unset}"], env=env,
                               capture_output=True, text=True, timeout=20)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip(), "unset")
            if extra:
                self.assertIn("GMT_PMGR is not set", r.stderr)
            else:
                self.assertEqual(r.stderr, "")

    # ---- the hook's GMT_AUTO_DEVICE=pod: a pod's processes confined to
    # its devices= with only LD_PRELOAD and GMT_PMGR (the webhook's way) ----

    def test_hook_pod_with_devices_sees_only_its_gpus(self):
        # Pod c may use GPU 1 alone: without gmt run, its program's device 0
        # is GPU 1, where the scheduler lets it allocate.
        self.start_schd()
        self.start_pmgr("c")
        p = self.run_prog("c", SHOW, "--hold", str(1 << 20), "--wait",
                          env=self.hook_env("c", GMT_AUTO_DEVICE="pod"))
        env, devs = self.shown(p)
        self.assertEqual(env["cvd"], uuid(1), p.stderr())
        self.assertEqual((devs["n"], devs["uuid0"]), ("1", uuid(1)))
        p.expect("HELD")
        self.wait_process("c", p.proc.pid)
        p.send()
        p.send()
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)
        self.assertNotIn("GMT_AUTO_DEVICE", err)  # success is said at debug level only

    def test_hook_pod_without_devices_sees_every_gpu_and_children_ask_nothing(self):
        self.start_schd()
        self.start_pmgr("a")
        url = self.pmgr_urls["a"][0]
        # The shell asks; the program it execs inherits the answer.
        script = 'echo "MARK all=${GMT_POD_ALL_GPUS-unset}"; exec "$0" --wait'
        p = self.run_prog("a", "/bin/sh", "-c", script, SHOW,
                          env=self.hook_env("a", GMT_AUTO_DEVICE="pod", GMT_HOOK_DEBUG="1"))
        got = p.expect_all(["MARK", "ENV", "DEVICES"])
        self.assertEqual(got["MARK"]["all"], url, p.stderr())
        self.assertEqual(got["ENV"]["cvd"], "-")
        self.assertEqual(got["DEVICES"]["n"], "2")
        self.wait_process("a", p.proc.pid)
        p.send()
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)
        self.assertIn("the pod has no devices= (every GPU is its own)", err)  # the shell asked
        self.assertIn("GMT_POD_ALL_GPUS=%s: the pod has no devices=, nothing asked" % url, err)

    def test_hook_pod_leaves_a_set_cuda_visible_devices(self):
        self.start_schd()
        self.start_pmgr("c")
        p = self.run_prog("c", SHOW, env=self.hook_env("c", GMT_AUTO_DEVICE="pod",
                                                       CUDA_VISIBLE_DEVICES="0",
                                                       GMT_HOOK_DEBUG="1"))
        env, devs = self.shown(p)
        self.assertEqual(env["cvd"], "0")
        self.assertEqual(devs["uuid0"], uuid(0))
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)
        self.assertIn("CUDA_VISIBLE_DEVICES is already set ('0'): left as it is, nothing asked",
                      err)
        self.assertNotIn("not confined", err)

    def test_hook_pod_without_a_pod_manager_runs_unconfined_at_once(self):
        url = "tcp://127.0.0.1:%d" % free_port()
        env = self.prog_env(LD_PRELOAD=self.preload(), GMT_PMGR=url, GMT_AUTO_DEVICE="pod")
        t0 = time.monotonic()
        p = self.run_prog(None, SHOW, env=env)
        got, devs = self.shown(p)
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)
        self.assertLess(time.monotonic() - t0, 5.0)
        self.assertEqual((got["cvd"], devs["n"]), ("-", "2"))
        lines = [l for l in err.splitlines() if "GMT_AUTO_DEVICE" in l]
        self.assertEqual(len(lines), 1, err)
        self.assertIn("GMT_AUTO_DEVICE=pod: not confined to the pod's GPUs: no pod manager at "
                      + url, lines[0])
        self.assertIn("CUDA_VISIBLE_DEVICES left unset", lines[0])

    def test_hook_pod_wait_for_a_stalled_pod_manager_is_bounded(self):
        with socket.socket() as s:  # a pod manager that never answers
            s.bind(("127.0.0.1", 0))
            s.listen(8)
            url = "tcp://127.0.0.1:%d" % s.getsockname()[1]
            env = self.prog_env(LD_PRELOAD=self.preload(), GMT_PMGR=url, GMT_AUTO_DEVICE="pod",
                                GMT_AUTO_DEVICE_TIMEOUT_MS="300")
            t0 = time.monotonic()
            r = subprocess.run(["/bin/sh", "-c", "echo ${CUDA_VISIBLE_DEVICES-unset}"], env=env,
                               capture_output=True, text=True, timeout=20)
            took = time.monotonic() - t0
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "unset")
        lines = [l for l in r.stderr.splitlines() if "GMT_AUTO_DEVICE" in l]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("not confined to the pod's GPUs: pod manager at %s did not answer within "
                      "300 ms" % url, lines[0])
        self.assertLess(took, 2.0)

    def test_hook_pod_refused_while_the_scheduler_is_away(self):
        # The pod manager cannot say which GPUs its pod may use without
        # the scheduler: it refuses, and the program runs as it would have.
        schd = self.start_schd()
        self.start_pmgr("c")
        schd.proc.kill()
        schd.proc.wait(timeout=5)
        t0 = time.monotonic()
        p = self.run_prog("c", SHOW, env=self.hook_env("c", GMT_AUTO_DEVICE="pod"))
        got, _ = self.shown(p)
        self.assertLess(time.monotonic() - t0, 8.0)
        rc, err = p.finish()
        self.assertEqual(rc, 0, err)
        self.assertEqual(got["cvd"], "-")
        lines = [l for l in err.splitlines() if "GMT_AUTO_DEVICE" in l]
        self.assertEqual(len(lines), 1, err)
        self.assertIn("not confined to the pod's GPUs: cannot pick a GPU: the scheduler is "
                      "unreachable from pod 'c'", lines[0])


if __name__ == "__main__":
    unittest.main()
