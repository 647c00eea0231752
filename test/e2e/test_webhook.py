"""gmt-webhook over HTTPS (deploy/webhook/): a certificate made by
deploy/kubernetes/make-cert.sh with openssl, the real server on
127.0.0.1:<free port>, real AdmissionReview v1 requests with http.client
over TLS checked against that CA. A gmt pod's patch is applied with the
small JSONPatch applier below and the result checked field by field,
against the API's structure (kube_schema.py) and against the Kubernetes
client's models (kube_models.py; the gmt-pmgr sidecar's restartPolicy is
newer than them and passes as its NEWER_FIELDS entry)."""
import base64
import copy
import http.client
import json
import os
import socket
import ssl
import subprocess
import tempfile
import time
import unittest

from gmt_e2e import BUILD, Daemon, build_path, daemon_env, free_port, wait_for
import kube_models
import kube_schema

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WEBHOOK = build_path("deploy", "webhook", "gmt-webhook")
MAKE_CERT = os.path.join(ROOT, "deploy", "kubernetes", "make-cert.sh")
MAX_BODY = 256 * 1024
TIMEOUT_MS = 2000  # --timeout: a client's time to send its request (default 10 s)


def pointer(path):
    """A JSON Pointer's reference tokens, unescaped (~1 is '/', ~0 is '~')."""
    assert path.startswith("/"), path
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def apply_patch(doc, ops):
    """RFC 6902's add, replace and remove: what the API server does with
    the webhook's patch (it refuses the whole patch if one op fails)."""
    doc = copy.deepcopy(doc)
    for op in ops:
        tokens = pointer(op["path"])
        parent = doc
        for t in tokens[:-1]:
            parent = parent[int(t)] if isinstance(parent, list) else parent[t]
        last = tokens[-1]
        if op["op"] == "add":
            if isinstance(parent, list):
                if last == "-":
                    parent.append(copy.deepcopy(op["value"]))
                else:
                    i = int(last)
                    if not 0 <= i <= len(parent):
                        raise ValueError("add past the end: %s" % op["path"])
                    parent.insert(i, copy.deepcopy(op["value"]))
            else:
                parent[last] = copy.deepcopy(op["value"])  # adds or replaces a member
        elif op["op"] == "replace":
            if isinstance(parent, list):
                parent[int(last)] = copy.deepcopy(op["value"])
            else:
                if last not in parent:
                    raise ValueError("replace of a missing member: %s" % op["path"])
                parent[last] = copy.deepcopy(op["value"])
        elif op["op"] == "remove":
            if isinstance(parent, list):
                del parent[int(last)]
            else:
                del parent[last]
        else:
            raise ValueError("op %s not expected" % op["op"])
    return doc


def review(pod, uid="7f0a8c1e-0001", operation="CREATE", kind="Pod"):
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "kind": {"group": "", "version": "v1", "kind": kind},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "requestKind": {"group": "", "version": "v1", "kind": kind},
                        "namespace": "ml", "operation": operation,
                        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
                        "object": pod, "oldObject": None, "dryRun": False,
                        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}}


def gmt_pod(name="train", env=None, volumes=None):
    c0 = {"name": "trainer", "image": "pytorch:2", "command": ["python", "train.py"],
          "volumeMounts": [{"name": "data", "mountPath": "/data"}]}
    if env is not None:
        c0["env"] = env
    spec = {"containers": [c0, {"name": "logger", "image": "busybox"}], "restartPolicy": "Never"}
    if volumes is not None:
        spec["volumes"] = volumes
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "job-1", "namespace": "ml", "annotations": {"gmt.io/pod": name}},
            "spec": spec}


class Webhook(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="gmt-webhook-")
        d = cls.tmp.name
        env = dict(os.environ, GMT_CERT_EXTRA_SAN="IP:127.0.0.1,DNS:localhost")
        r = subprocess.run([MAKE_CERT, os.path.join(d, "tls")], env=env, capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 0:
            raise AssertionError("make-cert.sh failed: %s" % r.stderr)
        cls.cert_out = r.stdout
        cls.ca = os.path.join(d, "tls", "ca.crt")
        cls.port = free_port()
        cls.daemon = Daemon("gmt-webhook", [WEBHOOK, "--cert", os.path.join(d, "tls", "tls.crt"),
                                            "--key", os.path.join(d, "tls", "tls.key"),
                                            "--listen", "127.0.0.1:%d" % cls.port,
                                            "--hook-image", "reg.example/gmt:1",
                                            "--pmgr-image", "reg.example/gmt:1",
                                            "--max-body", str(MAX_BODY),
                                            "--timeout", str(TIMEOUT_MS)],
                            daemon_env(os.environ), d)
        cls.ctx = ssl.create_default_context(cafile=cls.ca)

        def up():
            try:
                return cls.get("/healthz")[0] == 200
            except OSError:
                return False
        try:
            wait_for(up, timeout=15, what="gmt-webhook to answer /healthz over TLS")
        except AssertionError:
            cls.daemon.stop()
            raise AssertionError("gmt-webhook did not start: %s" % cls.daemon.output())

    @classmethod
    def tearDownClass(cls):
        code = cls.daemon.stop()
        cls.tmp.cleanup()
        assert code == 0, "gmt-webhook exited %s on SIGTERM" % code

    @classmethod
    def conn(cls):
        return http.client.HTTPSConnection("127.0.0.1", cls.port, context=cls.ctx, timeout=10)

    @classmethod
    def get(cls, path):
        c = cls.conn()
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def post(self, body, path="/mutate"):
        if not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        c = self.conn()
        try:
            c.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            return r.status, r.getheader("Content-Type"), r.read()
        finally:
            c.close()

    def answer(self, rev):
        status, ctype, data = self.post(rev)
        self.assertEqual(status, 200, data)
        self.assertEqual(ctype, "application/json")
        out = json.loads(data)
        self.assertEqual(out["apiVersion"], "admission.k8s.io/v1")
        self.assertEqual(out["kind"], "AdmissionReview")
        self.assertEqual(out["response"]["uid"], rev["request"]["uid"])
        return out["response"]

    def patched(self, pod, uid="uid-patch"):
        resp = self.answer(review(pod, uid=uid))
        self.assertIs(resp["allowed"], True, resp)
        self.assertEqual(resp["patchType"], "JSONPatch")
        ops = json.loads(base64.b64decode(resp["patch"], validate=True))
        return apply_patch(pod, ops), ops

    def check_gmt_pod(self, out, name="train", autodev=None):
        """autodev: GMT_AUTO_DEVICE of the containers that set their own,
        by name; the others must have been given =pod."""
        errs = kube_schema.check(out, "patched pod")
        self.assertEqual(errs, [], "\n".join(errs))
        models = kube_models.run_in_test([("patched pod", out)])
        self.assertEqual(models["errors"][0], [], "\n".join(models["errors"][0]))
        self.assertEqual(len(models["newer"][0]), 1, models["newer"][0])  # the sidecar's restartPolicy
        spec = out["spec"]
        vols = {v["name"]: v for v in spec["volumes"]}
        self.assertEqual(vols["gmt-hook"], {"name": "gmt-hook", "emptyDir": {}})
        self.assertEqual(vols["gmt-run"]["hostPath"], {"path": "/run/gmt", "type": "Directory"})
        self.assertTrue(spec["shareProcessNamespace"])
        inits = {c["name"]: c for c in spec["initContainers"]}
        copier = inits["gmt-hook-copy"]
        self.assertEqual(copier["image"], "reg.example/gmt:1")
        self.assertEqual(copier["command"], ["cp", "-a", "/usr/local/lib/gmt/.", "/mnt/gmt-hook/"])
        pm = inits["gmt-pmgr"]
        self.assertEqual(pm["image"], "reg.example/gmt:1")
        self.assertEqual(pm["restartPolicy"], "Always")
        self.assertEqual(pm["command"][:5], ["gmt-pmgr", "--port", "50052", "--name", name])
        self.assertIn("ipc:///run/gmt/schd.sock", pm["command"])
        self.assertEqual(pm["volumeMounts"], [{"name": "gmt-run", "mountPath": "/run/gmt"}])
        self.assertEqual(pm["startupProbe"]["tcpSocket"]["port"], 50052)
        names = [c["name"] for c in spec["initContainers"]]
        self.assertLess(names.index("gmt-hook-copy"), names.index("gmt-pmgr"))
        for c in spec["containers"]:
            self.assertIn({"name": "gmt-hook", "mountPath": "/usr/local/lib/gmt", "readOnly": True},
                          c["volumeMounts"], c["name"])
            env = {e["name"]: e.get("value") for e in c["env"]}
            self.assertTrue(env["LD_PRELOAD"].startswith("/usr/local/lib/gmt/libgmthook.so"), env)
            self.assertEqual(env["GMT_PMGR"], "tcp://127.0.0.1:50052")
            # The hook confines the container's processes to the gmt pod's
            # devices= before main (hook/autodev.c).
            self.assertEqual(env.get("GMT_AUTO_DEVICE"), (autodev or {}).get(c["name"], "pod"),
                             c["name"])
        self.assertEqual(out["metadata"]["annotations"]["gmt.io/injected"], name)
        return spec

    def test_gmt_pod_gets_volume_mounts_env_and_sidecar_keeping_its_own(self):
        pod = gmt_pod(env=[{"name": "EPOCHS", "value": "3"},
                           {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                      volumes=[{"name": "data", "emptyDir": {}}])
        pod["spec"]["initContainers"] = [{"name": "fetch", "image": "busybox"}]
        out, ops = self.patched(pod)
        spec = self.check_gmt_pod(out)
        self.assertEqual([v["name"] for v in spec["volumes"]], ["data", "gmt-hook", "gmt-run"])
        self.assertEqual([c["name"] for c in spec["initContainers"]], ["fetch", "gmt-hook-copy", "gmt-pmgr"])
        self.assertEqual([c["name"] for c in spec["containers"]], ["trainer", "logger"])
        trainer = spec["containers"][0]
        self.assertEqual(trainer["env"][:2], pod["spec"]["containers"][0]["env"])  # kept, in place
        self.assertEqual([e["name"] for e in trainer["env"]], ["EPOCHS", "NODE", "LD_PRELOAD", "GMT_PMGR",
                                                           "GMT_AUTO_DEVICE"])
        self.assertEqual(trainer["env"][-1], {"name": "GMT_AUTO_DEVICE", "value": "pod"})
        self.assertEqual(trainer["volumeMounts"][0], {"name": "data", "mountPath": "/data"})
        self.assertEqual(trainer["command"], ["python", "train.py"])
        self.assertEqual(out["metadata"]["annotations"]["gmt.io/pod"], "train")
        # Appends where lists exist, never a whole list replaced.
        paths = [o["path"] for o in ops]
        self.assertIn("/spec/volumes/-", paths)
        self.assertNotIn("/spec/volumes", paths)
        self.assertIn("/metadata/annotations/gmt.io~1injected", paths)

    def test_gmt_pod_without_volumes_or_env_gets_the_lists_created(self):
        pod = gmt_pod(name="infer")
        del pod["spec"]["containers"][0]["volumeMounts"]
        out, ops = self.patched(pod)
        spec = self.check_gmt_pod(out, name="infer")
        self.assertEqual([v["name"] for v in spec["volumes"]], ["gmt-hook", "gmt-run"])
        self.assertIn("/spec/volumes", [o["path"] for o in ops])
        # A patched pod sent again (reinvocation) gets nothing more.
        resp = self.answer(review(out, uid="uid-again"))
        self.assertIs(resp["allowed"], True)
        self.assertNotIn("patch", resp)

    def test_existing_ld_preload_is_kept_after_the_hook_and_gmt_pmgr_replaced(self):
        pod = gmt_pod(env=[{"name": "LD_PRELOAD", "value": "/opt/libjemalloc.so"},
                           {"name": "GMT_PMGR", "value": "tcp://10.0.0.1:1"}],
                      volumes=[{"name": "data", "emptyDir": {}}])
        out, _ = self.patched(pod)
        self.check_gmt_pod(out)
        env = out["spec"]["containers"][0]["env"]
        self.assertEqual(env, [{"name": "LD_PRELOAD",
                                "value": "/usr/local/lib/gmt/libgmthook.so /opt/libjemalloc.so"},
                               {"name": "GMT_PMGR", "value": "tcp://127.0.0.1:50052"},
                               {"name": "GMT_AUTO_DEVICE", "value": "pod"}])

    def test_containers_own_gmt_auto_device_is_kept(self):
        # =1 asks for the best GPU among the pod's (or =0 turns it off):
        # the pod's own choice, not replaced by =pod.
        pod = gmt_pod(env=[{"name": "GMT_AUTO_DEVICE", "value": "1"}],
                      volumes=[{"name": "data", "emptyDir": {}}])
        out, _ = self.patched(pod)
        self.check_gmt_pod(out, autodev={"trainer": "1"})
        env = out["spec"]["containers"][0]["env"]
        self.assertEqual([e for e in env if e["name"] == "GMT_AUTO_DEVICE"],
                         [{"name": "GMT_AUTO_DEVICE", "value": "1"}])
        self.assertEqual(env[0], {"name": "GMT_AUTO_DEVICE", "value": "1"})

    def test_pod_without_annotation_is_allowed_unpatched(self):
        pod = gmt_pod()
        del pod["metadata"]["annotations"]
        resp = self.answer(review(pod, uid="uid-plain"))
        self.assertIs(resp["allowed"], True)
        self.assertNotIn("patch", resp)
        self.assertNotIn("patchType", resp)

    def test_bad_pod_name_is_refused_in_the_review_with_why(self):
        resp = self.answer(review(gmt_pod(name="../etc"), uid="uid-bad-name"))
        self.assertIs(resp["allowed"], False)
        self.assertEqual(resp["status"]["code"], 400)
        self.assertIn("gmt.io/pod", resp["status"]["message"])
        self.assertIn("bad character '/'", resp["status"]["message"])
        self.assertNotIn("patch", resp)

    def test_review_without_object_is_refused_in_the_review(self):
        rev = review(gmt_pod(), uid="uid-no-object")
        del rev["request"]["object"]
        resp = self.answer(rev)
        self.assertIs(resp["allowed"], False)
        self.assertIn("request.object", resp["status"]["message"])

    def test_malformed_reviews_get_400_saying_why(self):
        no_uid = review(gmt_pod())
        del no_uid["request"]["uid"]
        v1beta1 = review(gmt_pod())
        v1beta1["apiVersion"] = "admission.k8s.io/v1beta1"
        wrong_kind = review(gmt_pod())
        wrong_kind["kind"] = "Pod"
        for body, says in ((b"{\"apiVersion\": ", "not JSON"), (b"", "no body"),
                           (b"[]", "not a JSON object"), (json.dumps(no_uid), "request.uid"),
                           (json.dumps(v1beta1), "apiVersion"), (json.dumps(wrong_kind), "kind")):
            status, ctype, data = self.post(body)
            self.assertEqual(status, 400, (body[:40], data))
            self.assertTrue(ctype.startswith("text/plain"), ctype)
            self.assertIn("bad AdmissionReview", data.decode())
            self.assertIn(says, data.decode())

    def test_other_methods_and_paths_are_refused(self):
        self.assertEqual(self.get("/mutate")[0], 405)
        status, _, _ = self.post(review(gmt_pod()), path="/other")
        self.assertEqual(status, 404)

    def test_body_over_the_bound_is_refused_unread_and_one_under_it_served(self):
        # Only the headers: the answer comes before any of the body is read.
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            with self.ctx.wrap_socket(s, server_hostname="localhost") as t:
                t.sendall(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % (MAX_BODY + 1))
                head = t.recv(4096)
        self.assertTrue(head.startswith(b"HTTP/1.1 400 "), head[:80])
        pod = gmt_pod(volumes=[{"name": "data", "emptyDir": {}}])
        pod["metadata"]["annotations"]["filler"] = "x" * (MAX_BODY + 1024)
        try:
            status, _, data = self.post(review(pod, uid="uid-big"))
            self.assertEqual(status, 400)
            self.assertNotIn(b"AdmissionReview", data)
        except OSError:
            pass  # closed while the client was still sending: refused as well
        pod["metadata"]["annotations"]["filler"] = "x" * (MAX_BODY - 4096)
        out, _ = self.patched(pod, uid="uid-just-under")
        self.check_gmt_pod(out)

    def test_idle_and_slow_clients_cannot_hold_the_webhook(self):
        """Any pod can reach the webhook's Service. 200 connections that
        never start TLS and 40 that finish it but send half a request
        leave gmt-webhook with at most 32 connections (nng's HTTP server
        kept every one), reviews are still answered at once, and a
        connection that sends nothing is closed within its --timeout."""
        pid = self.daemon.proc.pid

        def fds():
            return len(os.listdir("/proc/%d/fd" % pid))
        base = fds()
        socks = []
        try:
            for _ in range(200):
                socks.append(socket.create_connection(("127.0.0.1", self.port), timeout=10))
            for _ in range(40):
                s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
                t = self.ctx.wrap_socket(s, server_hostname="localhost")
                t.sendall(b"POST /mutate HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"a")
                socks.append(t)
            wait_for(lambda: fds() <= base + 32 + 4 or None, timeout=5,
                     what="gmt-webhook to hold at most 32 connections (%d descriptors, %d before)"
                          % (fds(), base))
            t0 = time.monotonic()
            self.assertEqual(self.get("/healthz"), (200, b"ok\n"))
            out, _ = self.patched(gmt_pod(volumes=[{"name": "data", "emptyDir": {}}]),
                                  uid="uid-under-load")
            self.check_gmt_pod(out)
            self.assertLess(time.monotonic() - t0, 3.0)
            # The newest silent connection: closed by the server in time.
            last = socket.create_connection(("127.0.0.1", self.port), timeout=15)
            socks.append(last)
            t0 = time.monotonic()
            self.assertEqual(last.recv(100), b"")
            took = time.monotonic() - t0
            self.assertGreater(took, TIMEOUT_MS / 1000 - 0.5)
            self.assertLess(took, TIMEOUT_MS / 1000 + 2.0)
        finally:
            for s in socks:
                s.close()
        self.assertIn("32 connections at once", self.daemon.output())
        self.assertEqual(self.get("/healthz"), (200, b"ok\n"))

    def test_plain_http_client_is_refused(self):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        got = None
        try:
            c.request("POST", "/mutate", body=json.dumps(review(gmt_pod())),
                      headers={"Content-Type": "application/json"})
            got = c.getresponse().status
        except (OSError, http.client.HTTPException):
            pass
        finally:
            c.close()
        self.assertIsNone(got, "a plain-HTTP request got an HTTP answer")
        # And the server still serves TLS afterwards.
        self.assertEqual(self.get("/healthz"), (200, b"ok\n"))

    def test_client_that_does_not_trust_the_ca_is_refused(self):
        ctx = ssl.create_default_context()  # the system's CAs only
        c = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=10)
        with self.assertRaises(ssl.SSLCertVerificationError):
            c.request("GET", "/healthz")
        c.close()

    def test_certificate_names_the_service(self):
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            with self.ctx.wrap_socket(s, server_hostname="gmt-webhook.gmt-system.svc") as t:
                names = [v for k, v in t.getpeercert()["subjectAltName"] if k == "DNS"]
        self.assertIn("gmt-webhook.gmt-system.svc", names)
        self.assertIn("caBundle: ", self.cert_out)


class Flags(unittest.TestCase):
    def run_webhook(self, *args):
        return subprocess.run([WEBHOOK, *args], capture_output=True, text=True, timeout=20,
                              env=daemon_env(os.environ))

    def test_missing_cert_is_a_usage_error(self):
        r = self.run_webhook("--listen", "127.0.0.1:1")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--cert FILE and --key FILE are required", r.stderr)

    def test_bad_hook_path_is_a_usage_error(self):
        r = self.run_webhook("--cert", "/x", "--key", "/y", "--hook-path", "/a b")
        self.assertEqual(r.returncode, 2)
        self.assertIn("LD_PRELOAD", r.stderr)

    def test_unreadable_cert_exits_1_naming_it(self):
        r = self.run_webhook("--cert", "/nonexistent/tls.crt", "--key", "/nonexistent/tls.key",
                             "--listen", "127.0.0.1:%d" % free_port())
        self.assertEqual(r.returncode, 1)
        self.assertIn("/nonexistent/tls.crt", r.stderr)

    def test_key_that_is_not_pem_exits_1(self):
        with tempfile.TemporaryDirectory() as d:
            for n in ("c", "k"):
                with open(os.path.join(d, n), "w") as f:
                    f.write("not a pem\n")
            r = self.run_webhook("--cert", os.path.join(d, "c"), "--key", os.path.join(d, "k"),
                                 "--listen", "127.0.0.1:%d" % free_port())
        self.assertEqual(r.returncode, 1)
        self.assertIn("PEM", r.stderr)

    def test_help_names_the_default_listen_address(self):
        r = self.run_webhook("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("0.0.0.0:8443", r.stdout)
        self.assertIn("--timeout MS", r.stdout)

    def test_bad_timeout_is_a_usage_error(self):
        for v in ("99", "60001", "-5", "1s", ""):
            r = self.run_webhook("--cert", "/x", "--key", "/y", "--timeout", v)
            self.assertEqual(r.returncode, 2, v)
            self.assertIn("--timeout wants milliseconds 100..60000, not '%s'" % v, r.stderr)


if __name__ == "__main__":
    unittest.main()
