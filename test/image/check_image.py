#!/usr/bin/env python3
"""gmt's image (scripts/build-image.sh) end to end under podman, on the fake
driver, run as deploy/kubernetes/ says, with this script as the kubelet:

- gmt-schd in a container made from the DaemonSet's: its image, command,
  capabilities, the host's pid namespace (hostPID), /run/gmt and
  /var/lib/gmt from the "host" (a folder here standing for them), the
  ConfigMap's resource-config.txt at /etc/gmt; its liveness probe's
  /metrics asked in its network namespace;
- gmt-webhook in a container made from the Deployment's (user 65534,
  read-only root, every capability dropped), answering a real
  AdmissionReview over TLS (make-cert.sh) for a pod annotated
  gmt.io/pod: train;
- that pod as the webhook's patch makes it: a podman pod sharing one pid
  namespace (shareProcessNamespace), its emptyDir volumes, the init
  container gmt-hook-copy copying the image's hook folder, the gmt-pmgr
  sidecar reaching gmt-schd's socket through the hostPath, waited for by
  its startup probe, then the job in an application image that has none of
  gmt's libraries (Debian 12's Essential set), with the env and mounts the
  patch gives it; and the copied hook folder preloaded in a Debian 11
  image (glibc 2.31) as well;
- the fake driver (test/fakecuda: libcuda.so.1, libnvidia-ml.so.1) mounted
  where NVIDIA's container runtime mounts the real one, and its machine
  folder shared, in the gmt-schd and job containers only.

Then `gmt status --json` (in the gmt-schd container, as `kubectl exec`
would) must show the job in pod train with its memory to the byte, its pod
and node pids, its launches, its allocation past the ConfigMap's quota
refused, the hook's libraries loaded from the hook folder, and gmt-schd's
tracer probing it; once it frees and exits, the memory is gone. Everything started is removed.

Not run by CI (it needs root and podman, and fetches Debian packages for
the application image): run it by hand after scripts/build-image.sh.

usage: test/image/check_image.py [--image NAME] [--build DIR] [--app-image NAME] [--keep]
  --image      run NAME where the manifests name gmt:latest
  --build      the build holding the fake driver and dev_alloc (default
               build-img/build, build-image.sh's)
  --app-image  the job's image (default localhost/gmt-check-app:bookworm;
               it and localhost/gmt-check-app:bullseye are made here with
               mmdebstrap on first use, under a minute each)
  --keep       leave the containers and the folder for a look
Exits 0 when every check passed, 1 when one failed, 2 when podman cannot
run containers here (it says what failed)."""
import argparse
import base64
import http.client
import json
import os
import resource
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
KDIR = os.path.join(ROOT, "deploy", "kubernetes")
MIB = 1 << 20
GIB = 1 << 30
POD = "train"  # a pod of the ConfigMap
APP_IMAGE = "localhost/gmt-check-app:bookworm"
OLD_APP_IMAGE = "localhost/gmt-check-app:bullseye"  # glibc 2.31: the oldest the hook is for
FAKE_MEM = "80Gi"
LIBDIR = "/usr/lib/x86_64-linux-gnu"  # where NVIDIA's runtime mounts the driver

failed = []


def check(what, ok, got=None):
    print("%-68s %s" % (what, "ok" if ok else "FAILED: %s" % (got,)), flush=True)
    if not ok:
        failed.append(what)
    return ok


def run(argv, timeout=60, env=None, check_rc=True, input=None):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, input=input)
    if check_rc and r.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(argv), r.returncode,
                                                  (r.stderr or r.stdout).strip()[-2000:]))
    return r


def wait_for(pred, timeout, what, interval=0.2):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(interval)
    raise RuntimeError("timed out after %.0f s waiting for %s (last: %r)" % (timeout, what, last))


class Podman:
    """podman with the settings that let it run containers here, found by
    trying: the machine's own, then ulimits no higher than this process's
    (podman asks for more open files and processes than a process without
    CAP_SYS_RESOURCE may set), then runc (crun refuses a hybrid cgroup
    hierarchy whose v2 half holds a controller)."""

    def __init__(self, tmp):
        self.env = dict(os.environ)
        self.names = []  # containers and pods to remove, in order
        self.tmp = tmp

    def __call__(self, *args, timeout=60, check_rc=True, input=None):
        return run(["podman"] + list(args), timeout=timeout, env=self.env, check_rc=check_rc,
                   input=input)

    def settle(self, image):
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        nofile = 1 << 20 if nofile == resource.RLIM_INFINITY else nofile
        nproc = 32768 if nproc == resource.RLIM_INFINITY else min(nproc, 32768)
        limits = 'default_ulimits = ["nofile=%d:%d", "nproc=%d:%d"]' % (nofile, nofile, nproc, nproc)
        tries = [("the machine's settings", None),
                 ("ulimits nofile=%d nproc=%d" % (nofile, nproc), "[containers]\n%s\n" % limits)]
        if shutil.which("runc"):
            tries.append(("those ulimits and runc",
                          '[containers]\n%s\n[engine]\nruntime = "runc"\n' % limits))
        errors = []
        for what, conf in tries:
            env = dict(os.environ)
            if conf:
                path = os.path.join(self.tmp, "containers.conf")
                with open(path, "w") as f:
                    f.write(conf)
                env["CONTAINERS_CONF"] = path
            r = run(["podman", "run", "--rm", image, "true"], env=env, check_rc=False, timeout=120)
            if r.returncode == 0:
                self.env = env
                print("podman runs containers with %s%s" % (
                    what, "" if not errors else " (%s)" % "; ".join(errors)), flush=True)
                return True
            err = (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
            errors.append("with %s: %s" % (what, err))
        print("podman cannot run a container here:\n  " + "\n  ".join(errors), file=sys.stderr)
        return False

    def start(self, name, *args, timeout=60):
        self.names.append(("container", name))
        self("run", "-d", "--name", name, *args, timeout=timeout)

    def pid(self, name):
        return int(self("inspect", "--format", "{{.State.Pid}}", name).stdout.strip())

    def running(self, name):
        r = self("inspect", "--format", "{{.State.Running}}", name, check_rc=False)
        return r.stdout.strip() == "true"

    def logs(self, name):
        r = self("logs", name, check_rc=False)
        return (r.stdout + r.stderr)[-3000:]

    def remove_all(self):
        for kind, name in reversed(self.names):
            if kind == "pod":
                self("pod", "rm", "-f", "-t", "5", name, check_rc=False, timeout=60)
            else:
                self("rm", "-f", "-t", "5", name, check_rc=False, timeout=60)


def load_manifests():
    import yaml
    docs = []
    for f in sorted(os.listdir(KDIR)):
        if f.endswith(".yaml"):
            with open(os.path.join(KDIR, f)) as fh:
                docs += [d for d in yaml.safe_load_all(fh) if d]
    return docs


def one(docs, kind, name):
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, "%d %s/%s in deploy/kubernetes" % (len(found), kind, name)
    return found[0]


def container_args(c, volumes, pod_sc=None):
    """podman run's arguments for a Kubernetes container: its env, mounts
    (volumes: name -> host folder) and security context (pod_sc: the pod's).
    What the kubelet would do with the fields these manifests use; a field
    it cannot do here is an error rather than left out."""
    args = []
    for e in c.get("env", []):
        if "value" not in e:
            raise RuntimeError("container %s: env %s is not a plain value" % (c["name"], e["name"]))
        args += ["--env", "%s=%s" % (e["name"], e["value"])]
    for m in c.get("volumeMounts", []):
        args += ["--volume", "%s:%s%s" % (volumes[m["name"]], m["mountPath"],
                                           ":ro" if m.get("readOnly") else "")]
    sc = c.get("securityContext", {})
    if sc.get("privileged"):
        args.append("--privileged")
    if "runAsUser" in sc:
        args += ["--user", str(sc["runAsUser"])]
    if sc.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    if sc.get("readOnlyRootFilesystem"):
        args.append("--read-only")
    caps = sc.get("capabilities", {})
    if "ALL" in caps.get("drop", []):
        args.append("--cap-drop=ALL")
    for cap in caps.get("add", []):
        args.append("--cap-add=" + cap)
    # No seccompProfile is Unconfined under a kubelet's defaults (its
    # --seccomp-default is off unless set), where podman would apply its own.
    seccomp = sc.get("seccompProfile", (pod_sc or {}).get("seccompProfile", {})).get("type", "Unconfined")
    if seccomp == "Unconfined":
        args += ["--security-opt", "seccomp=unconfined"]
    elif seccomp != "RuntimeDefault":
        raise RuntimeError("container %s: seccompProfile %s" % (c["name"], seccomp))
    limit = c.get("resources", {}).get("limits", {}).get("memory")
    if limit:
        args += ["--memory", limit.replace("Mi", "m").replace("Gi", "g")]
    return args


def command_of(c):
    return list(c.get("command", [])) + list(c.get("args", []))


def in_netns(pid, code, timeout=20):
    """Runs python code in the network namespace of pid (a probe's view)."""
    r = run(["nsenter", "-t", str(pid), "-n", sys.executable, "-c", code], timeout=timeout,
            check_rc=False)
    return r.returncode == 0, (r.stdout + r.stderr).strip()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def app_image(pm, name, tmp):
    """name, made from Debian's Essential set of the suite its tag names
    (no libnng, no protobuf-c) when it is one of ours and missing."""
    if pm("image", "exists", name, check_rc=False).returncode == 0:
        return
    if name not in (APP_IMAGE, OLD_APP_IMAGE):
        raise RuntimeError("no image %s" % name)
    t0 = time.monotonic()
    tar = os.path.join(tmp, "app.tar")
    run(["mmdebstrap", "--variant=essential", "--hook-dir=/usr/share/mmdebstrap/hooks/maybe-merged-usr",
         name.rsplit(":", 1)[1], tar, "http://deb.debian.org/debian"], timeout=900)
    pm("import", "--quiet", tar, name, timeout=300)
    os.unlink(tar)
    print("made %s with mmdebstrap in %.0f s" % (name, time.monotonic() - t0), flush=True)


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split("usage: ")[1].split("\n")[0])
    ap.add_argument("--image")
    ap.add_argument("--build", default=os.path.join(ROOT, "build-img", "build"))
    ap.add_argument("--app-image", default=APP_IMAGE)
    ap.add_argument("--keep", action="store_true")
    opts = ap.parse_args()
    build = os.path.abspath(opts.build)
    fakecuda = os.path.join(build, "test", "fakecuda")
    dev_alloc = os.path.join(build, "test", "e2e", "memprogs", "dev_alloc")
    for f in (os.path.join(fakecuda, "libcuda.so.1"), os.path.join(fakecuda, "libnvidia-ml.so.1"),
              dev_alloc):
        if not os.path.exists(f):
            print("check_image.py: %s is missing (scripts/build-image.sh builds it)" % f,
                  file=sys.stderr)
            return 2
    if os.geteuid() != 0 or not shutil.which("podman"):
        print("check_image.py: needs root and podman", file=sys.stderr)
        return 2
    os.environ["GMT_BUILD_DIR"] = build
    sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
    from test_webhook import apply_patch, make_cert, review  # the webhook's own test's helpers

    docs = load_manifests()
    ds = one(docs, "DaemonSet", "gmt-schd")
    schd_c = [c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "gmt-schd"][0]
    wh = one(docs, "Deployment", "gmt-webhook")
    wh_spec = wh["spec"]["template"]["spec"]
    wh_c = wh_spec["containers"][0]
    config = one(docs, "ConfigMap", "gmt-config")["data"]["resource-config.txt"]
    image = opts.image or schd_c["image"]
    if not opts.image:
        wh_argv = command_of(wh_c)
        names = [("the DaemonSet's %s" % c["name"], c["image"])
                 for c in ds["spec"]["template"]["spec"]["containers"]]
        names += [("the webhook's Deployment", wh_c["image"])]
        names += [("its %s" % f, wh_argv[wh_argv.index(f) + 1]) for f in ("--hook-image", "--pmgr-image")]
        for what, name in names:
            check("%s names the image %s" % (what, image), name == image, name)
    t_start = time.monotonic()

    tmp = tempfile.mkdtemp(prefix="gmt-image-check-")
    os.chmod(tmp, 0o755)
    tag = "gmt-check-%d" % os.getpid()
    pm = Podman(tmp)
    try:
        if pm("image", "exists", image, check_rc=False).returncode != 0:
            print("check_image.py: no image %s: run scripts/build-image.sh" % image,
                  file=sys.stderr)
            return 2
        if not pm.settle(image):
            return 2
        labels = json.loads(pm("image", "inspect", "--format", "{{json .Labels}}", image).stdout)
        print("image %s: revision %s, hook for glibc %s" % (
            image, labels.get("org.opencontainers.image.revision"), labels.get("io.gmt.hook.glibc")))
        app_image(pm, opts.app_image, tmp)
        r = pm("run", "--rm", opts.app_image, "sh", "-c",
               "ls %s | grep -E '^lib(nng|protobuf-c)' || true" % LIBDIR)
        check("the application image has no libnng or libprotobuf-c", r.stdout.strip() == "", r.stdout)

        # The node: the host's folders the manifests name, as folders here.
        host = {}
        for v in ds["spec"]["template"]["spec"]["volumes"]:
            if "hostPath" in v:
                host[v["hostPath"]["path"]] = os.path.join(tmp, "host" + v["hostPath"]["path"])
                os.makedirs(host[v["hostPath"]["path"]], exist_ok=True)
        etc = os.path.join(tmp, "configmap")
        os.makedirs(etc)
        with open(os.path.join(etc, "resource-config.txt"), "w") as f:
            f.write(config)
        fake_dir = os.path.join(tmp, "fake-machine")  # the fake GPUs' shared state
        os.makedirs(fake_dir)
        # The fake driver where NVIDIA's runtime puts the real one, and its machine.
        fake = ["--volume", "%s/libcuda.so.1:%s/libcuda.so.1:ro" % (fakecuda, LIBDIR),
                "--volume", "%s/libnvidia-ml.so.1:%s/libnvidia-ml.so.1:ro" % (fakecuda, LIBDIR),
                "--volume", "%s:/run/gmt-fake" % fake_dir,
                "--env", "GMT_FAKE_DIR=/run/gmt-fake", "--env", "GMT_FAKE_MEM=" + FAKE_MEM]

        # 1. gmt-schd, as the DaemonSet runs it.
        vols = {}
        for v in ds["spec"]["template"]["spec"]["volumes"]:
            vols[v["name"]] = host[v["hostPath"]["path"]] if "hostPath" in v else etc
        schd = tag + "-schd"
        args = container_args(schd_c, vols, ds["spec"]["template"]["spec"].get("securityContext"))
        if ds["spec"]["template"]["spec"].get("hostPID"):
            args.append("--pid=host")
        pm.start(schd, *args, *fake, image, *command_of(schd_c))

        def status():
            r = pm("exec", schd, "gmt", "status", "--json", check_rc=False, timeout=20)
            return json.loads(r.stdout) if r.returncode == 0 else None
        try:
            wait_for(lambda: not pm.running(schd) or status(), 30, "gmt-schd to answer")
        except RuntimeError:
            pass
        if not check("gmt-schd runs in its container and answers gmt status", pm.running(schd)
                     and status() is not None, pm.logs(schd)):
            return 1
        with open("/proc/%d/status" % pm.pid(schd)) as f:
            caps = [ln.split()[1] for ln in f if ln.startswith("CapEff:")][0]
        print("gmt-schd's capabilities: CapEff %s; its log:\n  %s" % (
            caps, "\n  ".join(pm.logs(schd).strip().splitlines()[:12])), flush=True)
        probe = schd_c["livenessProbe"]["httpGet"]
        port = [p["containerPort"] for p in schd_c["ports"] if p["name"] == probe["port"]][0]
        ok, out = in_netns(pm.pid(schd), "import http.client as h; c = h.HTTPConnection('127.0.0.1', %d, "
                           "timeout=5); c.request('GET', '%s'); r = c.getresponse(); print(r.status); "
                           "print(r.read().decode()[:20000])" % (port, probe["path"]))
        check("its liveness probe: GET %s on port %d answers 200" % (probe["path"], port),
              ok and out.startswith("200"), out[:300])

        # 2. gmt-webhook, as its Deployment runs it, on this machine's loopback.
        cert_dir = os.path.join(tmp, "webhook")
        os.makedirs(cert_dir)
        make_cert(cert_dir)
        tls = os.path.join(cert_dir, "tls")
        fs_group = wh_spec["securityContext"]["fsGroup"]
        for f in os.listdir(tls):  # the Secret's files: root's, mode 0440, group fsGroup
            os.chown(os.path.join(tls, f), 0, fs_group)
            os.chmod(os.path.join(tls, f), 0o440)
        os.chmod(cert_dir, 0o755)
        os.chmod(tls, 0o755)
        wh_port = free_port()
        argv = command_of(wh_c)
        argv[argv.index("--listen") + 1] = "127.0.0.1:%d" % wh_port
        for flag in ("--hook-image", "--pmgr-image"):
            argv[argv.index(flag) + 1] = image
        webhook = tag + "-webhook"
        pm.start(webhook, "--network=host", "--user", "%d:%d" % (wh_spec["securityContext"]["runAsUser"],
                                                                  fs_group),
                 *container_args(wh_c, {"tls": tls}, wh_spec.get("securityContext")), image, *argv)
        ctx = ssl.create_default_context(cafile=os.path.join(tls, "ca.crt"))

        def post(path, body=None):
            c = http.client.HTTPSConnection("127.0.0.1", wh_port, context=ctx, timeout=10)
            try:
                c.request("POST" if body else "GET", path, body=body,
                          headers={"Content-Type": "application/json"})
                r = c.getresponse()
                return r.status, r.read()
            finally:
                c.close()

        def healthy():
            try:
                return post("/healthz")[0] == 200
            except OSError:
                return False
        try:
            wait_for(lambda: not pm.running(webhook) or healthy(), 30, "gmt-webhook's /healthz")
        except RuntimeError:
            pass
        if not check("gmt-webhook runs as %d, read-only, and answers /healthz over TLS"
                     % wh_spec["securityContext"]["runAsUser"], healthy(), pm.logs(webhook)):
            return 1
        job_argv = ["/opt/job/dev_alloc", "--launch", "0:%d" % (64 * MIB), "0:%d" % (41 * GIB)]
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "job-1", "namespace": "ml", "annotations": {"gmt.io/pod": POD}},
               "spec": {"restartPolicy": "Never",
                        "containers": [{"name": "job", "image": opts.app_image, "command": job_argv}]}}
        st, body = post("/mutate", json.dumps(review(pod)))
        resp = json.loads(body)["response"] if st == 200 else {}
        if not check("the webhook patches a pod annotated gmt.io/pod: %s" % POD,
                     resp.get("allowed") is True and resp.get("patchType") == "JSONPatch",
                     (st, body[:500])):
            return 1
        patched = apply_patch(pod, json.loads(base64.b64decode(resp["patch"])))
        spec = patched["spec"]

        # 3. The pod, as a kubelet makes it from the patched spec.
        pvols = {}
        for v in spec["volumes"]:
            if "emptyDir" in v:
                pvols[v["name"]] = os.path.join(tmp, "pod", v["name"])
                os.makedirs(pvols[v["name"]])
            elif "hostPath" in v:
                if v["hostPath"]["path"] not in host:
                    raise RuntimeError("the pod's hostPath %s is no folder gmt-schd's DaemonSet shares"
                                       % v["hostPath"]["path"])
                pvols[v["name"]] = host[v["hostPath"]["path"]]
            else:
                raise RuntimeError("volume %s: not an emptyDir or hostPath" % v["name"])
        podname = tag + "-pod"
        share = "pid,net,ipc,uts" if spec.get("shareProcessNamespace") else "net,ipc,uts"
        pm.names.append(("pod", podname))
        pm("pod", "create", "--name", podname, "--share", share, timeout=120)
        pm("pod", "start", podname, timeout=120)
        infra = pm.pid(pm("pod", "inspect", "--format", "{{.InfraContainerID}}", podname).stdout.strip())
        for c in spec["initContainers"]:
            name = "%s-%s" % (tag, c["name"])
            args = (["--pod", podname] + container_args(c, pvols, spec.get("securityContext"))
                    + [c["image"]] + command_of(c))
            if c.get("restartPolicy") == "Always":  # a native sidecar: started, then probed
                pm.start(name, *args)
                tcp = c["startupProbe"]["tcpSocket"]["port"]
                code = "import socket; socket.create_connection(('127.0.0.1', %d), 1)" % tcp
                try:
                    wait_for(lambda: not pm.running(name) or in_netns(infra, code)[0], 30,
                             "%s's startup probe (tcp %d)" % (c["name"], tcp), interval=0.5)
                except RuntimeError:
                    pass
                if not check("init %s: a sidecar, up by its startup probe (tcp %d)" % (c["name"], tcp),
                             pm.running(name) and in_netns(infra, code)[0], pm.logs(name)):
                    return 1
            else:
                pm.names.append(("container", name))
                r = pm("run", "--name", name, *args, timeout=120, check_rc=False)
                if not check("init %s: %s exits 0" % (c["name"], " ".join(command_of(c))),
                             r.returncode == 0, r.stderr):
                    return 1
        hook_files = sorted(os.listdir(pvols["gmt-hook"]))
        print("the pod's gmt-hook volume: %s" % " ".join(hook_files))
        # The same folder preloaded in a Debian 11 application image (the
        # job below is built here and needs glibc 2.34, so only a load).
        app_image(pm, OLD_APP_IMAGE, tmp)
        r = pm("run", "--rm", "--volume", "%s:/usr/local/lib/gmt:ro" % pvols["gmt-hook"], OLD_APP_IMAGE,
               "sh", "-c", "ldd --version | head -1; LD_PRELOAD=/usr/local/lib/gmt/libgmthook.so "
               "cat /proc/self/maps", check_rc=False)
        check("the hook folder preloads in %s (%s)" % (OLD_APP_IMAGE, r.stdout.split("\n")[0]),
              r.returncode == 0 and r.stderr == "" and "/usr/local/lib/gmt/libgmthook.so" in r.stdout
              and "/usr/local/lib/gmt/libnng.so.1" in r.stdout, r.stderr or r.stdout[-1000:])
        check("pod %s connected to gmt-schd" % POD,
              any(p["name"] == POD and p.get("connected") for p in (status() or {}).get("pods", [])),
              status())

        job_c = spec["containers"][0]
        env = {e["name"]: e["value"] for e in job_c["env"]}
        print("the job's env from the patch: %s" % " ".join("%s=%s" % kv for kv in sorted(env.items())))
        job = "%s-%s" % (tag, job_c["name"])
        pm.names.append(("container", job))
        argv = (["podman", "run", "-i", "--name", job, "--pod", podname]
                + container_args(job_c, pvols, spec.get("securityContext"))
                + fake + ["--volume", "%s:/opt/job/dev_alloc:ro" % dev_alloc, job_c["image"]]
                + command_of(job_c))
        from gmt_e2e import Prog
        p = Prog(argv, pm.env)
        try:
            rows = p.records(prefixes=("ALLOC ", "LAUNCH "), done="READY", timeout=60)
            allocs = [r for r in rows if "bytes" in r]
            check("the job's 64 MiB allocated", allocs[0].get("rc") == "0", allocs)
            check("its 41 GiB refused past pod %s's 40Gi quota (the ConfigMap's)" % POD,
                  allocs[1].get("name") == "CUDA_ERROR_OUT_OF_MEMORY", allocs)
            launched = [r for r in rows if "ms" in r]
            check("its kernel launched under the gate", launched and launched[0].get("rc") == "0", launched)
            job_pid = int(rows[-1]["pid"])

            def proc():
                for pd in (status() or {}).get("pods", []):
                    if pd["name"] == POD:
                        for pr in pd.get("processes", []):
                            if pr["pid"] == job_pid:
                                return pr
                return None
            try:
                wait_for(lambda: (proc() or {}).get("memory_used") == 64 * MIB
                         and (proc() or {}).get("launches", 0) >= 1, 15, "the job in gmt status")
            except RuntimeError:
                pass
            pr = proc() or {}
            check("gmt status --json: pod %s's process %d holds 64 MiB to the byte" % (POD, job_pid),
                  pr.get("memory_used") == 64 * MIB, pr or status())
            check("its launches counted", pr.get("launches", 0) >= 1, pr)
            node_pid = pr.get("node_pid")
            exe = nspid = maps = ""
            if node_pid:
                try:
                    exe = os.readlink("/proc/%d/exe" % node_pid)
                    with open("/proc/%d/status" % node_pid) as f:
                        nspid = [ln.split()[1:] for ln in f if ln.startswith("NSpid:")][0]
                    with open("/proc/%d/maps" % node_pid) as f:
                        maps = f.read()
                except OSError as e:
                    exe = str(e)
            check("its node_pid %s is the job on the node (%s), pid %d in its pod"
                  % (node_pid, exe, job_pid),
                  exe.endswith("/dev_alloc") and nspid and nspid[-1] == str(job_pid), (exe, nspid))
            hook_path = env["LD_PRELOAD"].split(":")[0].rsplit("/", 1)[0]
            for lib in [f for f in hook_files if ".so" in f]:
                check("the job maps %s from %s" % (lib, hook_path),
                      " %s/%s\n" % (hook_path, lib) in maps, "not mapped")
            # The tracer, under the DaemonSet's capabilities, probes the
            # job's libcuda in another container (hostPID, /proc/PID/root).
            def traced():
                r = pm("exec", schd, "gmt", "trace", "--pod", POD, "--json", check_rc=False)
                if r.returncode != 0:
                    return None
                procs = json.loads(r.stdout).get("processes", [])
                return [x for x in procs if x.get("probed")] or None
            try:
                probed = wait_for(traced, 15, "gmt-schd's tracer to probe the job", interval=0.5)
            except RuntimeError as e:
                probed = e
            check("gmt trace --pod %s: the job's libcuda probed by gmt-schd's tracer" % POD,
                  isinstance(probed, list), probed)
            text = pm("exec", schd, "gmt", "status", check_rc=False).stdout
            print("gmt status in the gmt-schd container:\n  " + "\n  ".join(text.rstrip().splitlines()))
            p.send()
            p.expect("FREED", timeout=20)
            rc, err = p.finish(timeout=30)
            check("the job exits 0", rc == 0, err[-2000:])
            try:
                wait_for(lambda: proc() is None or proc().get("memory_used") == 0, 15,
                         "the job's memory gone")
                check("its memory gone from gmt status once it exits", True)
            except RuntimeError as e:
                check("its memory gone from gmt status once it exits", False, e)
        finally:
            p.stop()
        pm("stop", "-t", "10", schd, timeout=60)
        code = pm("inspect", "--format", "{{.State.ExitCode}}", schd).stdout.strip()
        check("gmt-schd stops on SIGTERM with 0", code == "0", pm.logs(schd))
    except (RuntimeError, AssertionError, subprocess.TimeoutExpired, KeyError, IndexError) as e:
        check("the check ran to its end", False, e)
        for kind, name in pm.names:
            if kind == "container":
                print("--- %s's log:\n%s" % (name, pm.logs(name)), file=sys.stderr)
    finally:
        if opts.keep:
            print("kept: %s and podman containers named %s-*" % (tmp, tag))
        else:
            pm.remove_all()
            shutil.rmtree(tmp, ignore_errors=True)
    print("%s in %.0f s" % ("FAILED: " + "; ".join(failed) if failed else "all passed",
                            time.monotonic() - t_start))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
