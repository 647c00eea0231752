"""deploy/kubernetes/: every manifest checked against the Kubernetes API's
structure, and against each other (the Service selects the webhook's pods
and names their port, the webhook configuration names the Service, the
NetworkPolicy lets only ipBlocks reach the webhook's port, the disruption
budget keeps one replica, the DaemonSet shares /run/gmt with the host).

Three validators. kube_schema.py (strict: unknown fields, types, required
fields, enums, cross-field rules; written here from the API reference)
always runs. kube_models.py walks every manifest through the official
Kubernetes Python client's models (Debian's python3-kubernetes, generated
from the API's OpenAPI schema): unknown fields, types, required fields;
under CI=true a missing package is a failure, elsewhere a skip.
kubernetes-validate from PyPI (the API's published OpenAPI schemas) runs
too where it is importable or can be installed into a venv under the build
folder; where PyPI cannot be reached that is said on stderr, and
GMT_REQUIRE_KUBE_VALIDATE=1 makes it a failure instead."""
import copy
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

from gmt_e2e import BUILD, HOOK
import kube_models
import kube_schema

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KDIR = os.path.join(ROOT, "deploy", "kubernetes")
KUBE_VERSION = "1.29.0"  # the first with native sidecars on by default


def manifests():
    out = []
    for f in sorted(os.listdir(KDIR)):
        if f.endswith(".yaml"):
            with open(os.path.join(KDIR, f)) as fh:
                for i, doc in enumerate(yaml.safe_load_all(fh)):
                    if doc is not None:
                        out.append(("%s#%d" % (f, i), doc))
    return out


def by_kind(kind):
    return [d for _, d in manifests() if d.get("kind") == kind]


def registry_validator():
    """The kubernetes-validate command, or (None, why)."""
    venv = os.path.join(BUILD, "kube-validate-venv")
    exe = os.path.join(venv, "bin", "kubernetes-validate")
    if os.path.exists(exe):
        return exe, None
    try:
        subprocess.run([sys.executable, "-m", "venv", venv], check=True, capture_output=True, timeout=120)
        r = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--retries", "0", "--timeout", "10",
                            "kubernetes-validate"], capture_output=True, text=True, timeout=300)
    except (subprocess.SubprocessError, OSError) as e:
        return None, "could not make a venv for it: %s" % e
    if r.returncode != 0 or not os.path.exists(exe):
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["?"]
        return None, "pip install kubernetes-validate failed: %s" % tail[0]
    return exe, None


class Manifests(unittest.TestCase):
    def test_every_manifest_has_the_api_structure(self):
        docs = manifests()
        kinds = sorted(d["kind"] for _, d in docs)
        self.assertEqual(kinds, ["ConfigMap", "DaemonSet", "Deployment", "MutatingWebhookConfiguration",
                                 "Namespace", "NetworkPolicy", "PodDisruptionBudget", "Service",
                                 "Service", "ServiceAccount"])
        errs = []
        for where, d in docs:
            errs += kube_schema.check(d, where)
        self.assertEqual(errs, [], "\n".join(errs))

    def test_structural_check_refuses_what_the_api_refuses(self):
        """The checker is not a pass-through: each mutation below is one the
        API server refuses."""
        ds = by_kind("DaemonSet")[0]
        wh = by_kind("MutatingWebhookConfiguration")[0]

        def refused(doc, mutate):
            d = copy.deepcopy(doc)
            mutate(d)
            return kube_schema.check(d)
        pod = lambda d: d["spec"]["template"]["spec"]  # noqa: E731
        self.assertTrue(refused(ds, lambda d: pod(d).update(hostPid=True)))  # unknown field (case)
        self.assertTrue(refused(ds, lambda d: pod(d).update(shareProcessNamespace=True)))
        self.assertTrue(refused(ds, lambda d: pod(d)["containers"][0]["volumeMounts"].append(
            {"name": "nope", "mountPath": "/x"})))
        self.assertTrue(refused(ds, lambda d: d["spec"]["selector"]["matchLabels"].update(x="y")))
        self.assertTrue(refused(ds, lambda d: pod(d)["containers"][0]["securityContext"]["capabilities"]
                                ["add"].append("CAP_BPF")))
        self.assertTrue(refused(ds, lambda d: pod(d)["volumes"][0].update(emptyDir={})))
        self.assertTrue(refused(ds, lambda d: pod(d)["containers"][0].update(restartPolicy="Always")))
        self.assertTrue(refused(wh, lambda d: d["webhooks"][0].update(sideEffects="Unknown")))
        self.assertTrue(refused(wh, lambda d: d["webhooks"][0].update(timeoutSeconds=31)))
        self.assertTrue(refused(wh, lambda d: d["webhooks"][0].pop("admissionReviewVersions")))
        self.assertTrue(refused(wh, lambda d: d["webhooks"][0].update(name="gmt")))
        self.assertTrue(refused(wh, lambda d: d["webhooks"][0]["clientConfig"].update(caBundle="%%")))
        self.assertTrue(refused(wh, lambda d: d.update(apiVersion="admissionregistration.k8s.io/v1beta1")))
        np = by_kind("NetworkPolicy")[0]
        pdb = by_kind("PodDisruptionBudget")[0]
        peer = lambda d: d["spec"]["ingress"][0]["from"][0]  # noqa: E731
        self.assertTrue(refused(np, lambda d: peer(d)["ipBlock"].update(cidr="10.0.0.1/8")))  # host bits
        self.assertTrue(refused(np, lambda d: peer(d)["ipBlock"].update(cidr="api-server")))
        self.assertTrue(refused(np, lambda d: peer(d).update(podSelector={})))
        self.assertTrue(refused(np, lambda d: d["spec"].update(policyTypes=["ingress"])))
        self.assertTrue(refused(np, lambda d: d["spec"]["ingress"][0]["ports"][0].update(protocol="HTTP")))
        self.assertTrue(refused(pdb, lambda d: d["spec"].update(maxUnavailable=1)))

    def test_schd_daemonset_shares_run_gmt_with_host_pid_and_bpf_capabilities(self):
        ds = by_kind("DaemonSet")[0]
        spec = ds["spec"]["template"]["spec"]
        self.assertIs(spec["hostPID"], True)
        self.assertEqual(spec["nodeSelector"], {"gmt.io/gpu": "true"})
        c = spec["containers"][0]
        self.assertEqual(c["command"][:3], ["gmt-schd", "-c", "/etc/gmt/resource-config.txt"])
        caps = c["securityContext"]["capabilities"]["add"]
        for cap in ("BPF", "PERFMON", "SYS_RESOURCE"):
            self.assertIn(cap, caps)
        vols = {v["name"]: v for v in spec["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        self.assertEqual(vols[mounts["/run/gmt"]]["hostPath"]["path"], "/run/gmt")
        self.assertEqual(vols[mounts["/etc/gmt"]]["configMap"]["name"], by_kind("ConfigMap")[0]["metadata"]["name"])

    def test_schd_serves_metrics_to_its_service_and_its_liveness_probe(self):
        # gmt-schd's --metrics port is the container's "metrics" port, which
        # the headless Service and the ServiceMonitor name, and the liveness
        # probe asks its /metrics (503 when the loop stalls).
        ds = by_kind("DaemonSet")[0]
        c = ds["spec"]["template"]["spec"]["containers"][0]
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        self.assertEqual(c["command"][c["command"].index("--metrics") + 1],
                         "0.0.0.0:%d" % ports["metrics"])
        probe = c["livenessProbe"]["httpGet"]
        self.assertEqual((probe["path"], probe["port"]), ("/metrics", "metrics"))
        svc = [d for d in by_kind("Service") if d["metadata"]["name"] == "gmt-schd-metrics"][0]
        labels = ds["spec"]["template"]["metadata"]["labels"]
        self.assertTrue(all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()))
        self.assertEqual(svc["spec"]["clusterIP"], "None")
        self.assertEqual(svc["spec"]["ports"][0]["targetPort"], "metrics")
        with open(os.path.join(KDIR, "..", "monitoring", "servicemonitor.yaml")) as f:
            sm = yaml.safe_load(f)
        self.assertEqual(sm["kind"], "ServiceMonitor")
        self.assertTrue(all(svc["metadata"]["labels"].get(k) == v
                            for k, v in sm["spec"]["selector"]["matchLabels"].items()))
        self.assertIn(svc["metadata"]["namespace"], sm["spec"]["namespaceSelector"]["matchNames"])
        self.assertEqual(sm["spec"]["endpoints"][0]["port"], svc["spec"]["ports"][0]["name"])

    def test_config_map_holds_a_resource_config(self):
        text = by_kind("ConfigMap")[0]["data"]["resource-config.txt"]
        lines = [l for l in text.splitlines() if l.strip() and not l.startswith("#")]
        self.assertEqual(int(lines[0]), len(lines) - 1)
        for l in lines[1:]:
            self.assertRegex(l, r"^[A-Za-z0-9._-]{1,62} [0-9.]+ [0-9.]+ \d+[KMGT]?i?( \S+=\S+)*$")

    def test_webhook_service_and_configuration_agree(self):
        dep = by_kind("Deployment")[0]
        svc = [d for d in by_kind("Service") if d["metadata"]["name"] == "gmt-webhook"][0]
        wh = by_kind("MutatingWebhookConfiguration")[0]["webhooks"][0]
        labels = dep["spec"]["template"]["metadata"]["labels"]
        self.assertTrue(all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()))
        c = dep["spec"]["template"]["spec"]["containers"][0]
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        self.assertIn(svc["spec"]["ports"][0]["targetPort"], ports)
        listen = c["command"][c["command"].index("--listen") + 1]
        self.assertEqual(listen, "0.0.0.0:%d" % ports["https"])
        ref = wh["clientConfig"]["service"]
        self.assertEqual((ref["name"], ref["namespace"], ref["port"], ref["path"]),
                         (svc["metadata"]["name"], svc["metadata"]["namespace"], svc["spec"]["ports"][0]["port"],
                          "/mutate"))
        # A pod that asks for gmt is not created without it (docs/kubernetes.md).
        self.assertEqual(wh["failurePolicy"], "Fail")
        self.assertEqual(wh["sideEffects"], "None")
        self.assertEqual(wh["admissionReviewVersions"], ["v1"])
        self.assertIn("namespaceSelector", wh)
        self.assertEqual(wh["rules"][0]["resources"], ["pods"])
        vols = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
        tls = [m for m in c["volumeMounts"] if m["mountPath"] == "/etc/gmt-webhook"][0]
        self.assertEqual(vols[tls["name"]]["secret"]["secretName"], "%s-tls" % svc["metadata"]["name"])
        for flag in ("--cert", "--key"):
            self.assertTrue(c["command"][c["command"].index(flag) + 1].startswith("/etc/gmt-webhook/"))

    def test_only_the_api_servers_addresses_may_reach_the_webhook(self):
        dep = by_kind("Deployment")[0]
        labels = dep["spec"]["template"]["metadata"]["labels"]
        c = dep["spec"]["template"]["spec"]["containers"][0]
        port = {p["name"]: p["containerPort"] for p in c["ports"]}["https"]
        (np,) = by_kind("NetworkPolicy")
        self.assertEqual(np["metadata"]["namespace"], dep["metadata"]["namespace"])
        self.assertTrue(kube_schema._selects(np["spec"]["podSelector"], labels))
        self.assertIn("Ingress", np["spec"]["policyTypes"])
        self.assertTrue(np["spec"]["ingress"])
        for rule in np["spec"]["ingress"]:
            # Addresses only: a pod or namespace selector would let pods in.
            self.assertTrue(rule["from"])
            for peer in rule["from"]:
                self.assertEqual(list(peer), ["ipBlock"], peer)
            self.assertEqual(rule["ports"], [{"protocol": "TCP", "port": port}])

    def test_a_drain_keeps_one_webhook_replica(self):
        dep = by_kind("Deployment")[0]
        (pdb,) = by_kind("PodDisruptionBudget")
        self.assertEqual(pdb["metadata"]["namespace"], dep["metadata"]["namespace"])
        self.assertTrue(kube_schema._selects(pdb["spec"]["selector"],
                                             dep["spec"]["template"]["metadata"]["labels"]))
        self.assertEqual(pdb["spec"]["minAvailable"], 1)
        self.assertGreater(dep["spec"]["replicas"], pdb["spec"]["minAvailable"])

    def test_webhook_memory_limit_is_twice_its_bound(self):
        """gmt-webhook holds at most 8 MiB + 4 x (--max-body + 8 KiB) +
        2 x 18 MiB (server.h); the manifest's limit is at least twice that."""
        c = by_kind("Deployment")[0]["spec"]["template"]["spec"]["containers"][0]
        cmd = c["command"]
        max_body = int(cmd[cmd.index("--max-body") + 1]) if "--max-body" in cmd else 3 << 20
        bound = (8 << 20) + 4 * (max_body + 8192) + 2 * (18 << 20)
        limit = c["resources"]["limits"]["memory"]
        self.assertRegex(limit, r"^\d+Mi$")
        self.assertGreaterEqual(int(limit[:-2]) << 20, 2 * bound)

    def test_registry_validator_accepts_every_manifest(self):
        exe, why = registry_validator()
        if exe is None:
            msg = ("kubernetes-validate (PyPI) unavailable here: %s; kube_schema.py and the client models "
                   "(kube_models.py) checked them" % why)
            if os.environ.get("GMT_REQUIRE_KUBE_VALIDATE") == "1":
                self.fail(msg)
            sys.stderr.write("NOTE: %s\n" % msg)
            return
        files = sorted(os.path.join(KDIR, f) for f in os.listdir(KDIR) if f.endswith(".yaml"))
        r = subprocess.run([exe, "--strict", "-k", KUBE_VERSION, *files], capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertFalse(re.search(r"(?i)error", r.stdout), r.stdout)


class HookFolder(unittest.TestCase):
    """The image's hook folder carries what libgmthook.so needs beside it
    (docs/kubernetes.md): its DT_RPATH, $ORIGIN alone, makes ld.so take
    those copies first, libnng's own mbedTLS libraries included, so that an
    application image without them still loads the hook."""

    SYSTEM = re.compile(r"^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|"
                        r"libasan\.|libgcc_s\.|libstdc\+\+\.)")

    def deps(self, lib):
        out = subprocess.run(["ldd", lib], capture_output=True, text=True, check=True).stdout
        return {m.group(1): m.group(2) for m in re.finditer(r"^\s*(\S+) => (\S+)", out, re.M)}

    def test_the_hook_looks_beside_itself_first(self):
        dyn = subprocess.run(["readelf", "-d", HOOK], capture_output=True, text=True,
                             check=True).stdout
        # Exactly $ORIGIN: an empty entry would mean the job's working folder.
        self.assertRegex(dyn, r"\(RPATH\)\s+Library rpath: \[\$ORIGIN\]")
        self.assertNotIn("RUNPATH", dyn)

    def test_copies_beside_the_hook_are_the_ones_loaded(self):
        ours = {n: p for n, p in self.deps(HOOK).items() if not self.SYSTEM.match(n)}
        self.assertIn("libnng.so.1", ours)
        self.assertIn("libprotobuf-c.so.1", ours)
        d = tempfile.mkdtemp(prefix="gmt-hookdir-")
        try:
            shutil.copy(HOOK, d)
            for name, path in ours.items():
                shutil.copy(path, os.path.join(d, name))
            got = self.deps(os.path.join(d, os.path.basename(HOOK)))
            for name in ours:
                self.assertEqual(os.path.dirname(got[name]), d, "%s came from %s" % (name, got[name]))
            # libnng's own (mbedTLS) too, which only DT_RPATH reaches.
            self.assertTrue(any(n.startswith("libmbed") for n in ours), ours)
        finally:
            shutil.rmtree(d)


class ClientModels(unittest.TestCase):
    """Against the official Kubernetes Python client's models (kube_models.py)."""

    def test_every_manifest_matches_the_client_models(self):
        docs = manifests()
        out = kube_models.run_in_test(docs)
        self.assertEqual(len(out["errors"]), len(docs))
        errs = [e for es in out["errors"] for e in es]
        self.assertEqual(errs, [], "\n".join(errs))
        self.assertEqual(out["stale"], [], "NEWER_FIELDS entries the models already cover")
        # None of the manifests needs a field newer than the models' release.
        self.assertEqual([n for ns in out["newer"] for n in ns], [])

    def test_client_models_refuse_what_the_api_refuses(self):
        """Each mutation is one the API server refuses; each must be refused
        here with an error naming where."""
        ds = by_kind("DaemonSet")[0]
        dep = by_kind("Deployment")[0]
        wh = by_kind("MutatingWebhookConfiguration")[0]
        pod = lambda d: d["spec"]["template"]["spec"]  # noqa: E731
        cases = [
            (ds, lambda d: pod(d).update(hostPid=True), "spec.template.spec.hostPid: unknown field"),
            (dep, lambda d: pod(d)["containers"][0]["ports"][0].update(containerPort="8443"),
             "ports[0].containerPort: want an integer"),
            (ds, lambda d: pod(d)["containers"][0].pop("name"), "containers[0]: V1Container.name is required"),
            (ds, lambda d: pod(d)["containers"][0].update(command="gmt-schd"), "command: want a list"),
            (dep, lambda d: d["spec"].update(replicas=True), "spec.replicas: want an integer"),
            (ds, lambda d: pod(d).update(hostPID="true"), "spec.hostPID: want a boolean"),
            (ds, lambda d: pod(d)["volumes"][0]["hostPath"].pop("path"), "V1HostPathVolumeSource.path is required"),
            (ds, lambda d: d["spec"]["updateStrategy"]["rollingUpdate"].update(maxUnavailable=[1]),
             "maxUnavailable: want an integer or a string"),
            (ds, lambda d: d.update(status2={}), "status2: unknown field"),
            # A native sidecar's restartPolicy is allowed (NEWER_FIELDS) only
            # on a Pod's init containers, not on a container nor in a DaemonSet.
            (ds, lambda d: pod(d)["containers"][0].update(restartPolicy="Always"),
             "containers[0].restartPolicy: unknown field"),
            (wh, lambda d: d["webhooks"][0].pop("sideEffects"), "V1MutatingWebhook.sideEffects is required"),
            (wh, lambda d: d["webhooks"][0]["clientConfig"].update(caBundle="%%"), "caBundle: Invalid value"),
            (wh, lambda d: d.update(apiVersion="admissionregistration.k8s.io/v1beta1"), "is not served by"),
            (wh, lambda d: d.update(apiVersion="apps/v1"), "is not served by"),
        ]
        objs = []
        for i, (doc, mutate, _) in enumerate(cases):
            d = copy.deepcopy(doc)
            mutate(d)
            objs.append(("case%d" % i, d))
        out = kube_models.run_in_test(objs)
        for (_, _, want), errs in zip(cases, out["errors"]):
            self.assertTrue(any(want in e for e in errs), "want %r in %s" % (want, errs))

    def test_newer_fields_pass_only_where_listed_and_with_their_type(self):
        def pod(**init):
            return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                    "spec": {"initContainers": [dict({"name": "gmt-pmgr", "image": "gmt:latest"}, **init)],
                             "containers": [{"name": "app", "image": "app"}]}}
        late = pod(restartPolicy="Always")
        late["spec"]["resourceClaims"] = []  # 1.26, not listed
        out = kube_models.run_in_test([("sidecar", pod(restartPolicy="Always")), ("int", pod(restartPolicy=1)),
                                       ("unlisted", late)])
        self.assertEqual(out["errors"][0], [])
        self.assertEqual(len(out["newer"][0]), 1)
        self.assertIn("spec.initContainers[0].restartPolicy (Kubernetes 1.28+", out["newer"][0][0])
        self.assertTrue(any("restartPolicy: want a string" in e for e in out["errors"][1]), out["errors"][1])
        self.assertTrue(any("spec.resourceClaims: unknown field" in e for e in out["errors"][2]), out["errors"][2])


if __name__ == "__main__":
    unittest.main()
