"""A strict structural check of Kubernetes objects, written from the API
reference (Kubernetes 1.29+: core/v1, apps/v1, admissionregistration.k8s.io/v1,
networking.k8s.io/v1 NetworkPolicy, policy/v1 PodDisruptionBudget)
for the kinds and fields gmt's manifests and patched pods use.

It stands in for a validator from a package registry where none can be
installed (kubernetes-validate from PyPI; test_kubernetes.py uses it when it
can). Like the API server's strict field validation, an unknown field is an
error, as are a missing required field, a wrong type, a bad enum value and
the cross-field rules named below (selector matches template labels, a
mount names a volume, one source per volume, native sidecars only among
init containers, hostPID excludes shareProcessNamespace, a Service's
targetPort names a container port, a webhook's name and caBundle, an
ipBlock's CIDR, a disruption budget's one bound). A field
this table lacks is refused, not passed: extend the table from the API
reference when a manifest needs one.

    errors = check(obj)   # [] when valid"""
import base64
import ipaddress
import re

# Types: "str", "int", "bool", "intstr", "quantity", ["list", T], ["map", T]
# (string keys), or the name of an object type below. An object type maps
# field -> (type, required).
STR, INT, BOOL = "str", "int", "bool"


def L(t):
    return ["list", t]


def M(t):
    return ["map", t]


TYPES = {
    "ObjectMeta": {"name": (STR, False), "generateName": (STR, False), "namespace": (STR, False),
                   "labels": (M(STR), False), "annotations": (M(STR), False)},
    "LabelSelector": {"matchLabels": (M(STR), False),
                      "matchExpressions": (L("LabelSelectorRequirement"), False)},
    "LabelSelectorRequirement": {"key": (STR, True), "operator": (STR, True), "values": (L(STR), False)},
    "PodTemplateSpec": {"metadata": ("ObjectMeta", False), "spec": ("PodSpec", False)},
    "PodSpec": {
        "containers": (L("Container"), True), "initContainers": (L("Container"), False),
        "volumes": (L("Volume"), False), "nodeSelector": (M(STR), False), "hostPID": (BOOL, False),
        "hostNetwork": (BOOL, False), "hostIPC": (BOOL, False), "shareProcessNamespace": (BOOL, False),
        "serviceAccountName": (STR, False), "automountServiceAccountToken": (BOOL, False),
        "tolerations": (L("Toleration"), False), "priorityClassName": (STR, False),
        "restartPolicy": (STR, False), "securityContext": ("PodSecurityContext", False),
        "terminationGracePeriodSeconds": (INT, False), "runtimeClassName": (STR, False),
        "dnsPolicy": (STR, False)},
    "PodSecurityContext": {"runAsUser": (INT, False), "runAsGroup": (INT, False),
                           "runAsNonRoot": (BOOL, False), "fsGroup": (INT, False),
                           "seccompProfile": ("SeccompProfile", False)},
    "SeccompProfile": {"type": (STR, True), "localhostProfile": (STR, False)},
    "Toleration": {"key": (STR, False), "operator": (STR, False), "value": (STR, False),
                   "effect": (STR, False), "tolerationSeconds": (INT, False)},
    "Container": {
        "name": (STR, True), "image": (STR, False), "imagePullPolicy": (STR, False),
        "command": (L(STR), False), "args": (L(STR), False), "workingDir": (STR, False),
        "env": (L("EnvVar"), False), "ports": (L("ContainerPort"), False),
        "volumeMounts": (L("VolumeMount"), False), "securityContext": ("SecurityContext", False),
        "resources": ("ResourceRequirements", False), "startupProbe": ("Probe", False),
        "readinessProbe": ("Probe", False), "livenessProbe": ("Probe", False),
        "restartPolicy": (STR, False)},
    "EnvVar": {"name": (STR, True), "value": (STR, False), "valueFrom": ("EnvVarSource", False)},
    "EnvVarSource": {"fieldRef": ("ObjectFieldSelector", False),
                     "configMapKeyRef": ("KeySelector", False), "secretKeyRef": ("KeySelector", False)},
    "ObjectFieldSelector": {"fieldPath": (STR, True), "apiVersion": (STR, False)},
    "KeySelector": {"name": (STR, False), "key": (STR, True), "optional": (BOOL, False)},
    "ContainerPort": {"containerPort": (INT, True), "name": (STR, False), "protocol": (STR, False),
                      "hostPort": (INT, False)},
    "VolumeMount": {"name": (STR, True), "mountPath": (STR, True), "readOnly": (BOOL, False),
                    "subPath": (STR, False), "mountPropagation": (STR, False)},
    "SecurityContext": {"privileged": (BOOL, False), "capabilities": ("Capabilities", False),
                        "runAsUser": (INT, False), "runAsGroup": (INT, False),
                        "runAsNonRoot": (BOOL, False), "readOnlyRootFilesystem": (BOOL, False),
                        "allowPrivilegeEscalation": (BOOL, False),
                        "seccompProfile": ("SeccompProfile", False)},
    "Capabilities": {"add": (L(STR), False), "drop": (L(STR), False)},
    "ResourceRequirements": {"limits": (M("quantity"), False), "requests": (M("quantity"), False)},
    "Probe": {"httpGet": ("HTTPGetAction", False), "tcpSocket": ("TCPSocketAction", False),
              "exec": ("ExecAction", False), "initialDelaySeconds": (INT, False),
              "periodSeconds": (INT, False), "timeoutSeconds": (INT, False),
              "failureThreshold": (INT, False), "successThreshold": (INT, False)},
    "HTTPGetAction": {"path": (STR, False), "port": ("intstr", True), "scheme": (STR, False),
                      "host": (STR, False)},
    "TCPSocketAction": {"port": ("intstr", True), "host": (STR, False)},
    "ExecAction": {"command": (L(STR), False)},
    "Volume": {"name": (STR, True), "emptyDir": ("EmptyDirVolumeSource", False),
               "hostPath": ("HostPathVolumeSource", False), "configMap": ("ConfigMapVolumeSource", False),
               "secret": ("SecretVolumeSource", False)},
    "EmptyDirVolumeSource": {"medium": (STR, False), "sizeLimit": ("quantity", False)},
    "HostPathVolumeSource": {"path": (STR, True), "type": (STR, False)},
    "KeyToPath": {"key": (STR, True), "path": (STR, True), "mode": (INT, False)},
    "ConfigMapVolumeSource": {"name": (STR, False), "items": (L("KeyToPath"), False),
                              "defaultMode": (INT, False), "optional": (BOOL, False)},
    "SecretVolumeSource": {"secretName": (STR, False), "items": (L("KeyToPath"), False),
                           "defaultMode": (INT, False), "optional": (BOOL, False)},
    "DaemonSetSpec": {"selector": ("LabelSelector", True), "template": ("PodTemplateSpec", True),
                      "updateStrategy": ("DaemonSetUpdateStrategy", False),
                      "minReadySeconds": (INT, False), "revisionHistoryLimit": (INT, False)},
    "DaemonSetUpdateStrategy": {"type": (STR, False), "rollingUpdate": ("RollingUpdate", False)},
    "RollingUpdate": {"maxUnavailable": ("intstr", False), "maxSurge": ("intstr", False)},
    "DeploymentSpec": {"replicas": (INT, False), "selector": ("LabelSelector", True),
                       "template": ("PodTemplateSpec", True), "strategy": ("DeploymentStrategy", False),
                       "minReadySeconds": (INT, False), "revisionHistoryLimit": (INT, False)},
    "DeploymentStrategy": {"type": (STR, False), "rollingUpdate": ("RollingUpdate", False)},
    "ServiceSpec": {"selector": (M(STR), False), "ports": (L("ServicePort"), False), "type": (STR, False),
                    "clusterIP": (STR, False)},
    "ServicePort": {"name": (STR, False), "port": (INT, True), "targetPort": ("intstr", False),
                    "protocol": (STR, False)},
    "MutatingWebhook": {
        "name": (STR, True), "clientConfig": ("WebhookClientConfig", True), "rules": (L("RuleWithOperations"), False),
        "failurePolicy": (STR, False), "matchPolicy": (STR, False), "namespaceSelector": ("LabelSelector", False),
        "objectSelector": ("LabelSelector", False), "sideEffects": (STR, True), "timeoutSeconds": (INT, False),
        "admissionReviewVersions": (L(STR), True), "reinvocationPolicy": (STR, False)},
    "WebhookClientConfig": {"url": (STR, False), "service": ("ServiceReference", False), "caBundle": (STR, False)},
    "ServiceReference": {"namespace": (STR, True), "name": (STR, True), "path": (STR, False), "port": (INT, False)},
    "RuleWithOperations": {"operations": (L(STR), False), "apiGroups": (L(STR), False),
                           "apiVersions": (L(STR), False), "resources": (L(STR), False), "scope": (STR, False)},
    "NetworkPolicySpec": {"podSelector": ("LabelSelector", True), "policyTypes": (L(STR), False),
                          "ingress": (L("NetworkPolicyIngressRule"), False),
                          "egress": (L("NetworkPolicyEgressRule"), False)},
    "NetworkPolicyIngressRule": {"from": (L("NetworkPolicyPeer"), False),
                                 "ports": (L("NetworkPolicyPort"), False)},
    "NetworkPolicyEgressRule": {"to": (L("NetworkPolicyPeer"), False),
                                "ports": (L("NetworkPolicyPort"), False)},
    "NetworkPolicyPeer": {"podSelector": ("LabelSelector", False),
                          "namespaceSelector": ("LabelSelector", False), "ipBlock": ("IPBlock", False)},
    "IPBlock": {"cidr": (STR, True), "except": (L(STR), False)},
    "NetworkPolicyPort": {"protocol": (STR, False), "port": ("intstr", False), "endPort": (INT, False)},
    "PodDisruptionBudgetSpec": {"selector": ("LabelSelector", False), "minAvailable": ("intstr", False),
                                "maxUnavailable": ("intstr", False),
                                "unhealthyPodEvictionPolicy": (STR, False)},
}

# Top-level objects: (apiVersion, kind) -> fields besides apiVersion and kind.
KINDS = {
    ("v1", "Namespace"): {"metadata": ("ObjectMeta", True)},
    ("v1", "ConfigMap"): {"metadata": ("ObjectMeta", True), "data": (M(STR), False),
                          "immutable": (BOOL, False)},
    ("v1", "ServiceAccount"): {"metadata": ("ObjectMeta", True), "automountServiceAccountToken": (BOOL, False)},
    ("v1", "Service"): {"metadata": ("ObjectMeta", True), "spec": ("ServiceSpec", True)},
    ("v1", "Pod"): {"metadata": ("ObjectMeta", True), "spec": ("PodSpec", True)},
    ("apps/v1", "DaemonSet"): {"metadata": ("ObjectMeta", True), "spec": ("DaemonSetSpec", True)},
    ("apps/v1", "Deployment"): {"metadata": ("ObjectMeta", True), "spec": ("DeploymentSpec", True)},
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"): {
        "metadata": ("ObjectMeta", True), "webhooks": (L("MutatingWebhook"), False)},
    ("networking.k8s.io/v1", "NetworkPolicy"): {"metadata": ("ObjectMeta", True),
                                                "spec": ("NetworkPolicySpec", False)},
    ("policy/v1", "PodDisruptionBudget"): {"metadata": ("ObjectMeta", True),
                                           "spec": ("PodDisruptionBudgetSpec", False)},
}

ENUMS = {
    ("LabelSelectorRequirement", "operator"): {"In", "NotIn", "Exists", "DoesNotExist"},
    ("Container", "imagePullPolicy"): {"Always", "IfNotPresent", "Never"},
    ("Container", "restartPolicy"): {"Always"},
    ("PodSpec", "restartPolicy"): {"Always", "OnFailure", "Never"},
    ("PodSpec", "dnsPolicy"): {"ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"},
    ("ContainerPort", "protocol"): {"TCP", "UDP", "SCTP"},
    ("ServicePort", "protocol"): {"TCP", "UDP", "SCTP"},
    ("ServiceSpec", "type"): {"ClusterIP", "NodePort", "LoadBalancer", "ExternalName"},
    ("Toleration", "operator"): {"Exists", "Equal"},
    ("Toleration", "effect"): {"NoSchedule", "PreferNoSchedule", "NoExecute"},
    ("HTTPGetAction", "scheme"): {"HTTP", "HTTPS"},
    ("HostPathVolumeSource", "type"): {"", "DirectoryOrCreate", "Directory", "FileOrCreate", "File",
                                       "Socket", "CharDevice", "BlockDevice"},
    ("SeccompProfile", "type"): {"RuntimeDefault", "Unconfined", "Localhost"},
    ("DaemonSetUpdateStrategy", "type"): {"RollingUpdate", "OnDelete"},
    ("DeploymentStrategy", "type"): {"RollingUpdate", "Recreate"},
    ("MutatingWebhook", "failurePolicy"): {"Ignore", "Fail"},
    ("MutatingWebhook", "matchPolicy"): {"Exact", "Equivalent"},
    ("MutatingWebhook", "sideEffects"): {"None", "NoneOnDryRun"},  # v1 refuses Some and Unknown
    ("MutatingWebhook", "reinvocationPolicy"): {"Never", "IfNeeded"},
    ("RuleWithOperations", "scope"): {"Cluster", "Namespaced", "*"},
    ("VolumeMount", "mountPropagation"): {"None", "HostToContainer", "Bidirectional"},
    ("NetworkPolicySpec", "policyTypes"): {"Ingress", "Egress"},
    ("NetworkPolicyPort", "protocol"): {"TCP", "UDP", "SCTP"},
    ("PodDisruptionBudgetSpec", "unhealthyPodEvictionPolicy"): {"IfHealthyBudget", "AlwaysAllow"},
}

DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+)?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
CAPABILITIES = {"BPF", "PERFMON", "SYS_RESOURCE", "SYS_PTRACE", "SYS_ADMIN", "NET_ADMIN", "ALL",
                "CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "NET_BIND_SERVICE", "KILL"}


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _check(v, t, path, errs, owner=None, field=None):
    if isinstance(t, list):
        kind, sub = t
        if kind == "list":
            if not isinstance(v, list):
                errs.append("%s: want a list, got %s" % (path, type(v).__name__))
                return
            for i, x in enumerate(v):
                _check(x, sub, "%s[%d]" % (path, i), errs, owner, field)
        else:
            if not isinstance(v, dict):
                errs.append("%s: want a map, got %s" % (path, type(v).__name__))
                return
            for k, x in v.items():
                if not isinstance(k, str):
                    errs.append("%s: key %r is not a string" % (path, k))
                _check(x, sub, "%s.%s" % (path, k), errs)
        return
    if t == STR:
        if not isinstance(v, str):
            errs.append("%s: want a string, got %s %r" % (path, type(v).__name__, v))
        elif (owner, field) in ENUMS and v not in ENUMS[(owner, field)]:
            errs.append("%s: %r is not one of %s" % (path, v, sorted(ENUMS[(owner, field)])))
        return
    if t == INT:
        if not _is_int(v):
            errs.append("%s: want an integer, got %s %r" % (path, type(v).__name__, v))
        return
    if t == BOOL:
        if not isinstance(v, bool):
            errs.append("%s: want a boolean, got %s %r" % (path, type(v).__name__, v))
        return
    if t == "intstr":
        if not (_is_int(v) or isinstance(v, str)):
            errs.append("%s: want an integer or a string, got %r" % (path, v))
        return
    if t == "quantity":
        if not ((_is_int(v) or isinstance(v, str)) and QUANTITY.match(str(v))):
            errs.append("%s: %r is not a quantity" % (path, v))
        return
    _object(v, t, TYPES[t], path, errs)


def _object(v, name, fields, path, errs):
    if not isinstance(v, dict):
        errs.append("%s: want an object (%s), got %s" % (path, name, type(v).__name__))
        return
    for k, x in v.items():
        if k not in fields:
            errs.append("%s: unknown field %r in %s" % (path, k, name))
            continue
        _check(x, fields[k][0], "%s.%s" % (path, k), errs, name, k)
    for k, (_, req) in fields.items():
        if req and k not in v:
            errs.append("%s: %s.%s is required" % (path, name, k))
    _rules(v, name, path, errs)


def _names(items):
    return [x.get("name") for x in items or [] if isinstance(x, dict)]


def _rules(v, name, path, errs):
    if name == "ObjectMeta":
        n = v.get("name")
        if isinstance(n, str) and not DNS1123_SUBDOMAIN.match(n):
            errs.append("%s.name: %r is not a DNS-1123 subdomain" % (path, n))
        for k, val in (v.get("labels") or {}).items():
            if isinstance(val, str) and (len(val) > 63 or not LABEL_VALUE.match(val)):
                errs.append("%s.labels.%s: %r is not a label value" % (path, k, val))
    elif name == "LabelSelectorRequirement":
        op, vals = v.get("operator"), v.get("values")
        if op in ("In", "NotIn") and not vals:
            errs.append("%s: operator %s wants values" % (path, op))
        if op in ("Exists", "DoesNotExist") and vals:
            errs.append("%s: operator %s takes no values" % (path, op))
    elif name == "PodSpec":
        if v.get("hostPID") and v.get("shareProcessNamespace"):
            errs.append("%s: hostPID and shareProcessNamespace may not both be true" % path)
        vols = _names(v.get("volumes"))
        if len(vols) != len(set(vols)):
            errs.append("%s.volumes: duplicate names %s" % (path, vols))
        cs = v.get("containers") or []
        ics = v.get("initContainers") or []
        allc = _names(cs) + _names(ics)
        if len(allc) != len(set(allc)):
            errs.append("%s: duplicate container names %s" % (path, allc))
        for group, lst in (("containers", cs), ("initContainers", ics)):
            for i, c in enumerate(lst):
                if not isinstance(c, dict):
                    continue
                cp = "%s.%s[%d]" % (path, group, i)
                if group == "containers" and "restartPolicy" in c:
                    errs.append("%s: restartPolicy is allowed on init containers only" % cp)
                if group == "initContainers" and "startupProbe" in c and c.get("restartPolicy") != "Always":
                    errs.append("%s: a probe on an init container wants restartPolicy Always" % cp)
                mounts = [m for m in c.get("volumeMounts") or [] if isinstance(m, dict)]
                paths = [m.get("mountPath") for m in mounts]
                if len(paths) != len(set(paths)):
                    errs.append("%s.volumeMounts: duplicate mountPath %s" % (cp, paths))
                for m in mounts:
                    if m.get("name") not in vols:
                        errs.append("%s.volumeMounts: %r names no volume of the pod" % (cp, m.get("name")))
                envs = _names(c.get("env"))
                for e in c.get("env") or []:
                    if isinstance(e, dict) and "value" in e and "valueFrom" in e:
                        errs.append("%s.env.%s: value and valueFrom both set" % (cp, e.get("name")))
                if len(envs) != len(set(envs)):
                    # The API keeps the last one and warns; a patch that duplicates one is wrong.
                    errs.append("%s.env: duplicate names %s" % (cp, envs))
                for p in ("startupProbe", "readinessProbe", "livenessProbe"):
                    pr = c.get(p)
                    if isinstance(pr, dict):
                        handlers = [h for h in ("httpGet", "tcpSocket", "exec") if h in pr]
                        if len(handlers) != 1:
                            errs.append("%s.%s: want exactly one handler, got %s" % (cp, p, handlers))
                        port = (pr.get("httpGet") or pr.get("tcpSocket") or {}).get("port")
                        if isinstance(port, str) and port not in _names(c.get("ports")):
                            errs.append("%s.%s: port %r names no container port" % (cp, p, port))
    elif name == "Volume":
        sources = [k for k in v if k != "name"]
        if len(sources) != 1:
            errs.append("%s: want exactly one volume source, got %s" % (path, sources))
    elif name == "Capabilities":
        for c in (v.get("add") or []) + (v.get("drop") or []):
            if isinstance(c, str) and (c.startswith("CAP_") or c not in CAPABILITIES):
                errs.append("%s: %r is not a capability name as Kubernetes writes them (no CAP_)" % (path, c))
    elif name == "MutatingWebhook":
        n = v.get("name", "")
        if not (isinstance(n, str) and DNS1123_SUBDOMAIN.match(n) and n.count(".") >= 2):
            errs.append("%s.name: %r is not a fully qualified name of 3 or more segments" % (path, n))
        if "v1" not in (v.get("admissionReviewVersions") or []):
            errs.append("%s.admissionReviewVersions: want v1" % path)
        t = v.get("timeoutSeconds")
        if _is_int(t) and not 1 <= t <= 30:
            errs.append("%s.timeoutSeconds: %d is not 1..30" % (path, t))
    elif name == "WebhookClientConfig":
        if ("url" in v) == ("service" in v):
            errs.append("%s: want exactly one of url and service" % path)
        ca = v.get("caBundle")
        if isinstance(ca, str):
            try:
                base64.b64decode(ca, validate=True)
            except ValueError:
                errs.append("%s.caBundle: not base64" % path)
    elif name == "IPBlock":
        for c in [v.get("cidr")] + list(v.get("except") or []):
            try:
                ipaddress.ip_network(c, strict=True)
            except (TypeError, ValueError):
                errs.append("%s: %r is not a CIDR" % (path, c))
    elif name == "NetworkPolicyPeer":
        if not v:
            errs.append("%s: want podSelector, namespaceSelector or ipBlock" % path)
        if "ipBlock" in v and len(v) > 1:
            errs.append("%s: ipBlock stands alone in a peer" % path)
    elif name == "PodDisruptionBudgetSpec":
        if ("minAvailable" in v) == ("maxUnavailable" in v):
            errs.append("%s: want exactly one of minAvailable and maxUnavailable" % path)
    elif name == "ServiceReference":
        p = v.get("port")
        if _is_int(p) and not 1 <= p <= 65535:
            errs.append("%s.port: %d is not 1..65535" % (path, p))


def _selects(selector, labels):
    for k, val in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != val:
            return False
    for e in selector.get("matchExpressions") or []:
        op, k, vals = e.get("operator"), e.get("key"), e.get("values") or []
        if op == "In" and labels.get(k) not in vals:
            return False
        if op == "NotIn" and labels.get(k) in vals:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
    return True


def check(obj, where="object"):
    """Every error in obj, a Kubernetes object as parsed from YAML or JSON."""
    errs = []
    if not isinstance(obj, dict):
        return ["%s: not an object" % where]
    key = (obj.get("apiVersion"), obj.get("kind"))
    if key not in KINDS:
        return ["%s: apiVersion/kind %s/%s is not known here" % (where, key[0], key[1])]
    path = "%s (%s)" % (where, key[1])
    fields = dict(KINDS[key])
    rest = {k: x for k, x in obj.items() if k not in ("apiVersion", "kind")}
    _object(rest, key[1], fields, path, errs)
    meta = obj.get("metadata") or {}
    if key[1] != "Pod" and not meta.get("name"):
        errs.append("%s: metadata.name is required" % path)
    if key[1] in ("DaemonSet", "Deployment"):
        spec = obj.get("spec") or {}
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        sel = spec.get("selector") or {}
        if not (sel.get("matchLabels") or sel.get("matchExpressions")) or not _selects(sel, labels):
            errs.append("%s: spec.selector does not select spec.template.metadata.labels" % path)
    return errs
