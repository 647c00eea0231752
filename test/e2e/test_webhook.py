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
import resource
import selectors
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import unittest

from gmt_e2e import ASAN_PRELOAD, BUILD, Daemon, build_path, daemon_env, free_port, wait_for
import kube_models
import kube_schema

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WEBHOOK = build_path("deploy", "webhook", "gmt-webhook")
MAKE_CERT = os.path.join(ROOT, "deploy", "kubernetes", "make-cert.sh")
MAX_BODY = 256 * 1024
TIMEOUT_MS = 2000  # --timeout: a client's time to send its request (default 10 s)
BODIES = 4  # server.h's GMT_WEBHOOK_BODIES: bodies of --max-body held at once
HEAD_MAX = 8192  # GMT_HTTP_HEAD_MAX


def make_cert(d):
    """make-cert.sh's CA and certificate in d/tls, for 127.0.0.1 too: its output."""
    env = dict(os.environ, GMT_CERT_EXTRA_SAN="IP:127.0.0.1,DNS:localhost")
    r = subprocess.run([MAKE_CERT, os.path.join(d, "tls")], env=env, capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError("make-cert.sh failed: %s" % r.stderr)
    return r.stdout


def start_webhook(d, port, *extra, env=None):
    """gmt-webhook on 127.0.0.1:port with d/tls's certificate, once it answers."""
    daemon = Daemon("gmt-webhook", [WEBHOOK, "--cert", os.path.join(d, "tls", "tls.crt"),
                                    "--key", os.path.join(d, "tls", "tls.key"),
                                    "--listen", "127.0.0.1:%d" % port,
                                    "--hook-image", "reg.example/gmt:1",
                                    "--pmgr-image", "reg.example/gmt:1", *extra],
                    env or daemon_env(os.environ), d)
    ctx = ssl.create_default_context(cafile=os.path.join(d, "tls", "ca.crt"))

    def up():
        try:
            c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
            c.request("GET", "/healthz")
            ok = c.getresponse().status == 200
            c.close()
            return ok
        except OSError:
            return False
    try:
        wait_for(up, timeout=15, what="gmt-webhook to answer /healthz over TLS")
    except AssertionError:
        daemon.stop()
        raise AssertionError("gmt-webhook did not start: %s" % daemon.output())
    return daemon, ctx


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
        cls.cert_out = make_cert(d)
        cls.ca = os.path.join(d, "tls", "ca.crt")
        cls.port = free_port()
        cls.daemon, cls.ctx = start_webhook(d, cls.port, "--max-body", str(MAX_BODY),
                                            "--timeout", str(TIMEOUT_MS))

    @classmethod
    def tearDownClass(cls):
        code = cls.daemon.stop()
        out = cls.daemon.output()
        cls.tmp.cleanup()
        assert code == 0, "gmt-webhook exited %s on SIGTERM: %s" % (code, out[-3000:])

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
        # The pod's own /run/gmt (its pod manager's socket), and the node's.
        self.assertEqual(vols["gmt-run"], {"name": "gmt-run", "emptyDir": {}})
        self.assertEqual(vols["gmt-node"]["hostPath"], {"path": "/run/gmt", "type": "Directory"})
        self.assertTrue(spec["shareProcessNamespace"])
        inits = {c["name"]: c for c in spec["initContainers"]}
        copier = inits["gmt-hook-copy"]
        self.assertEqual(copier["image"], "reg.example/gmt:1")
        self.assertEqual(copier["command"], ["cp", "-a", "/usr/local/lib/gmt/.", "/mnt/gmt-hook/"])
        pm = inits["gmt-pmgr"]
        self.assertEqual(pm["image"], "reg.example/gmt:1")
        self.assertEqual(pm["restartPolicy"], "Always")
        self.assertEqual(pm["command"][:5], ["gmt-pmgr", "--port", "50052", "--name", name])
        self.assertEqual(pm["command"][5:], ["--schd", "ipc:///run/gmt-node/schd.sock",
                                             "--ipc", "/run/gmt/pmgr-50052.sock"])
        self.assertEqual(pm["volumeMounts"], [{"name": "gmt-run", "mountPath": "/run/gmt"},
                                              {"name": "gmt-node", "mountPath": "/run/gmt-node"}])
        self.assertEqual(pm["startupProbe"]["tcpSocket"]["port"], 50052)
        names = [c["name"] for c in spec["initContainers"]]
        self.assertLess(names.index("gmt-hook-copy"), names.index("gmt-pmgr"))
        for c in spec["containers"]:
            self.assertIn({"name": "gmt-hook", "mountPath": "/usr/local/lib/gmt", "readOnly": True},
                          c["volumeMounts"], c["name"])
            # The sidecar's socket, which the application may reach and not replace.
            self.assertIn({"name": "gmt-run", "mountPath": "/run/gmt", "readOnly": True},
                          c["volumeMounts"], c["name"])
            env = {e["name"]: e.get("value") for e in c["env"]}
            self.assertTrue(env["LD_PRELOAD"].startswith("/usr/local/lib/gmt/libgmthook.so"), env)
            self.assertEqual(env["GMT_PMGR"], "ipc:///run/gmt/pmgr-50052.sock")
            self.assertEqual(env["GMT_FAIL_CLOSED"], "1")
            # The hook confines the container's processes to the gmt pod's
            # devices= before main (hook/memory/autodev.c).
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
        self.assertEqual([v["name"] for v in spec["volumes"]], ["data", "gmt-hook", "gmt-run", "gmt-node"])
        self.assertEqual([c["name"] for c in spec["initContainers"]], ["fetch", "gmt-hook-copy", "gmt-pmgr"])
        self.assertEqual([c["name"] for c in spec["containers"]], ["trainer", "logger"])
        trainer = spec["containers"][0]
        self.assertEqual(trainer["env"][:2], pod["spec"]["containers"][0]["env"])  # kept, in place
        self.assertEqual([e["name"] for e in trainer["env"]], ["EPOCHS", "NODE", "LD_PRELOAD", "GMT_PMGR",
                                                           "GMT_AUTO_DEVICE", "GMT_FAIL_CLOSED"])
        self.assertEqual(trainer["env"][-2], {"name": "GMT_AUTO_DEVICE", "value": "pod"})
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
        self.assertEqual([v["name"] for v in spec["volumes"]], ["gmt-hook", "gmt-run", "gmt-node"])
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
                               {"name": "GMT_PMGR", "value": "ipc:///run/gmt/pmgr-50052.sock"},
                               {"name": "GMT_AUTO_DEVICE", "value": "pod"},
                               {"name": "GMT_FAIL_CLOSED", "value": "1"}])

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

    def test_fail_closed_annotation_false_opens_it_and_a_bad_value_is_refused(self):
        # gmt.io/fail-closed: "false" lets the pod's processes run ungated
        # while no pod manager registered them; the default fails closed.
        pod = gmt_pod(env=[{"name": "GMT_FAIL_CLOSED", "value": "1"}],
                      volumes=[{"name": "data", "emptyDir": {}}])
        pod["metadata"]["annotations"]["gmt.io/fail-closed"] = "false"
        out, _ = self.patched(pod, uid="uid-open")
        for c in out["spec"]["containers"]:
            env = {e["name"]: e.get("value") for e in c["env"]}
            self.assertEqual(env["GMT_FAIL_CLOSED"], "0", c["name"])
        pod["metadata"]["annotations"]["gmt.io/fail-closed"] = "true"
        out, _ = self.patched(pod, uid="uid-closed")
        self.check_gmt_pod(out)
        pod["metadata"]["annotations"]["gmt.io/fail-closed"] = "no"
        resp = self.answer(review(pod, uid="uid-bad-closed"))
        self.assertIs(resp["allowed"], False)
        self.assertIn("gmt.io/fail-closed", resp["status"]["message"])

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
        # A client that sends the whole body first still reads the 400: what
        # follows the answer is read and dropped before the close, which was
        # a reset before (the kernel's answer to a close with unread bytes).
        pod = gmt_pod(volumes=[{"name": "data", "emptyDir": {}}])
        pod["metadata"]["annotations"]["filler"] = "x" * (MAX_BODY + 1024)
        for _ in range(3):
            status, _, data = self.post(review(pod, uid="uid-big"))
            self.assertEqual(status, 400)
            self.assertIn(b"over --max-body", data)
            self.assertNotIn(b"AdmissionReview", data)
        pod["metadata"]["annotations"]["filler"] = "x" * (MAX_BODY - 4096)
        out, _ = self.patched(pod, uid="uid-just-under")
        self.check_gmt_pod(out)

    def test_answers_given_before_the_body_is_read_are_not_lost_to_a_reset(self):
        body = json.dumps(review(gmt_pod())) + " " * (200 * 1024)
        for path, want in (("/other", 404), ("/healthz", 405)):
            status, _, _ = self.post(body, path=path)
            self.assertEqual(status, want, path)

    def test_clients_that_close_after_an_early_answer_do_not_hold_connections(self):
        """nng 1.5's TLS stream loses a read started after it has seen the
        peer's close: no callback, no timeout, no abort. 40 clients that
        send a POST without a Content-Length and more bytes, and close once
        they have the 411, leave nothing behind: the server closes what is
        past its deadline itself."""
        pid = self.daemon.proc.pid
        base = len(os.listdir("/proc/%d/fd" % pid))
        for _ in range(40):
            with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
                with self.ctx.wrap_socket(s, server_hostname="localhost") as t:
                    t.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\n\r\n" + b"{" * 5000)
                    self.assertTrue(t.recv(4096).startswith(b"HTTP/1.1 411 "))
        wait_for(lambda: len(os.listdir("/proc/%d/fd" % pid)) <= base or None,
                 timeout=TIMEOUT_MS / 1000 + 3, what="the 40 connections to be closed")
        out, _ = self.patched(gmt_pod(volumes=[{"name": "data", "emptyDir": {}}]), uid="uid-after")
        self.check_gmt_pod(out)

    def test_a_body_waits_for_room_among_those_held_and_is_then_served(self):
        """Bodies of at most BODIES x (--max-body + head) bytes are held at
        once. Four clients that declare the largest body and then stall
        hold all of it; a review that comes next waits, and is served once
        their --timeout has closed them."""
        holders = []
        try:
            for _ in range(BODIES):
                s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
                t = self.ctx.wrap_socket(s, server_hostname="localhost")
                t.sendall(b"POST /mutate HTTP/1.1\r\nContent-Length: %d\r\n\r\n{\"a\":\"" % MAX_BODY)
                holders.append(t)
            time.sleep(0.3)
            pod = gmt_pod(volumes=[{"name": "data", "emptyDir": {}}])
            pod["metadata"]["annotations"]["filler"] = "x" * (100 * 1024)  # past what is left
            t0 = time.monotonic()
            out, _ = self.patched(pod, uid="uid-waited")
            took = time.monotonic() - t0
            self.check_gmt_pod(out)
            self.assertGreater(took, TIMEOUT_MS / 1000 - 0.8)
            self.assertLess(took, TIMEOUT_MS / 1000 + 2.0)
            for t in holders:  # closed by the server at their --timeout, unanswered
                self.assertEqual(t.recv(100), b"")
        finally:
            for t in holders:
                t.close()

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


def vm_hwm_mib(pid):
    """The peak resident memory of process pid (VmHWM), in MiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    raise AssertionError("no VmHWM for pid %d" % pid)


def empty_objects(size=3_000_000):
    """A JSON array of empty objects, size bytes: 761 MiB in json-c's tree."""
    n = (size - 2) // 3
    return b"[" + b",".join([b"{}"] * n) + b"]"


class Bounds(unittest.TestCase):
    """gmt-webhook's memory and its connections under what any client of
    its Service can send, each test against a fresh process with the
    default --max-body (3 MiB) and --timeout, measured by its peak resident
    memory (VmHWM). The manifest gives it 128 Mi; before these bounds a 3 MB
    body of empty objects took 761 MiB, a review of 40,000 containers
    483 MiB (allowed, with a patch, after 1.6 s), 32 such bodies at once
    3.1 GiB (release build; ASan builds more)."""
    LIMIT_MIB = 64

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="gmt-webhook-bounds-")
        make_cert(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def setUp(self):
        env = daemon_env(os.environ)
        if ASAN_PRELOAD:
            # ASan keeps freed memory in quarantine (256 MiB by default): that
            # is ASan's, not the webhook's, and would hide what it holds.
            env["ASAN_OPTIONS"] = "quarantine_size_mb=1:thread_local_quarantine_size_kb=64"
        self.port = free_port()
        self.daemon, self.ctx = start_webhook(self.tmp.name, self.port, env=env)

    def tearDown(self):
        code = self.daemon.stop()
        self.assertEqual(code, 0, "gmt-webhook exited %s: %s" % (code, self.daemon.output()[-2000:]))

    def post(self, body, timeout=30):
        c = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=timeout)
        try:
            c.request("POST", "/mutate", body=body, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def peak(self):
        return vm_hwm_mib(self.daemon.proc.pid)

    def test_a_3mb_body_of_empty_objects_keeps_the_webhook_under_64_mib(self):
        status, data = self.post(empty_objects())
        self.assertLess(self.peak(), self.LIMIT_MIB)
        self.assertEqual(status, 400, data[:200])
        self.assertIn(b"bad AdmissionReview: too large", data)

    def test_a_review_of_40000_containers_is_refused_quickly_saying_why(self):
        pod = gmt_pod()
        pod["spec"]["containers"] = [{"name": "c%d" % i, "image": "busybox"} for i in range(40000)]
        body = json.dumps(review(pod, uid="uid-40k")).encode()
        self.assertGreater(len(body), 1_300_000)
        t0 = time.monotonic()
        status, data = self.post(body)
        took = time.monotonic() - t0
        self.assertEqual(status, 200, data[:200])
        resp = json.loads(data)["response"]
        self.assertEqual(resp["uid"], "uid-40k")
        # Refused in the review, so the pod is not created unhooked whatever
        # the failurePolicy, and whoever created it reads why.
        self.assertIs(resp["allowed"], False, "allowed, with a patch of %d bytes"
                      % len(resp.get("patch", "")))
        self.assertNotIn("patch", resp)
        self.assertIn("request.object.spec.containers holds more than 4096 elements",
                      resp["status"]["message"])
        self.assertLess(took, 2.0)
        self.assertLess(self.peak(), self.LIMIT_MIB)

    def parallel(self, body, n=32):
        out = [None] * n

        def one(i):
            try:
                out[i] = self.post(body, timeout=30)
            except (OSError, http.client.HTTPException) as e:
                out[i] = (None, repr(e).encode())
        ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        return out

    def test_32_parallel_3mb_bodies_keep_the_webhook_under_64_mib(self):
        out = self.parallel(empty_objects())
        self.assertLess(self.peak(), self.LIMIT_MIB)
        self.assertEqual([s for s, _ in out], [400] * 32, [d[:100] for _, d in out])

    def test_32_parallel_reviews_of_the_largest_trees_admitted_stay_bounded(self):
        """Reviews the scan admits whose json-c trees are near its 16 MiB
        bound: at most two are parsed at once (GMT_WEBHOOK_PARSERS), so the
        peak stays within the documented budget however many come."""
        pod = gmt_pod(volumes=[{"name": "data", "emptyDir": {}}])
        rev = review(pod, uid="uid-tree")
        rev["request"]["options"]["filler"] = [[{"a": 1, "b": 2}] * 4000] * 3
        out = self.parallel(json.dumps(rev).encode())
        self.assertEqual([s for s, _ in out], [200] * 32, [d[:100] for _, d in out])
        self.assertIs(json.loads(out[0][1])["response"]["allowed"], True)
        self.assertLess(self.peak(), 96)

    def test_a_client_reopening_1000_idle_connections_does_not_fail_reviews(self):
        """Connections that never send anything, from another address,
        reopened as soon as the webhook closes them: each new one closed
        the oldest unfinished connection, the API server's own during its
        TLS handshake too (56 of 56 reviews failed). Now the client holding
        the most loses its own."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < 1200:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
        stop = threading.Event()
        reopened = [0]

        def flood():
            sel = selectors.DefaultSelector()

            def connect():
                s = socket.socket()
                s.bind(("127.0.0.2", 0))
                s.setblocking(False)
                try:
                    s.connect(("127.0.0.1", self.port))
                except BlockingIOError:
                    pass
                except OSError:
                    s.close()
                    return
                sel.register(s, selectors.EVENT_READ)
            for _ in range(1000):
                connect()
            while not stop.is_set():
                for key, _ in sel.select(0.1):
                    try:
                        data = key.fileobj.recv(100)
                    except OSError:
                        data = b""
                    if not data:
                        sel.unregister(key.fileobj)
                        key.fileobj.close()
                        reopened[0] += 1
                        connect()
            for key in list(sel.get_map().values()):
                key.fileobj.close()
        t = threading.Thread(target=flood)
        t.start()
        failed = []
        try:
            wait_for(lambda: reopened[0] > 1000, timeout=20, what="the flood to be reopening")
            body = json.dumps(review(gmt_pod(volumes=[{"name": "data", "emptyDir": {}}]))).encode()
            for i in range(20):
                try:
                    status, data = self.post(body, timeout=5)
                    if status != 200:
                        failed.append((i, status))
                except (OSError, http.client.HTTPException) as e:
                    failed.append((i, repr(e)[:80]))
                time.sleep(0.05)
        finally:
            stop.set()
            t.join(30)
        self.assertEqual(failed, [], "%d of 20 reviews failed under %d reopened connections"
                         % (len(failed), reopened[0]))
        self.assertIn("of the client holding the most", self.daemon.output())


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

    def test_scheduler_socket_in_the_pods_run_gmt_is_a_usage_error(self):
        # The sidecar's /run/gmt is the pod's own now; the node's is /run/gmt-node.
        r = self.run_webhook("--cert", "/x", "--key", "/y", "--schd", "ipc:///run/gmt/schd.sock")
        self.assertEqual(r.returncode, 2)
        self.assertIn("/run/gmt-node", r.stderr)

    def test_help_says_what_the_webhook_may_hold(self):
        r = self.run_webhook("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("56 MiB by default", r.stdout)
        self.assertIn("ipc:///run/gmt/pmgr-N.sock", r.stdout)

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
