"""Kubernetes objects checked against the official Kubernetes Python
client's models (Debian's python3-kubernetes; PyPI's kubernetes), which are
generated from the API's OpenAPI schema: a registry's validator, where
kube_schema.py is our own.

Each model class has openapi_types (python name -> type: 'str', 'int',
'bool', 'float', 'datetime', 'object', 'list[T]', 'dict(str, T)' or a model
name such as 'V1ObjectMeta') and attribute_map (python name -> JSON name).
The walk: every key must be a JSON name of its model (else "unknown field",
naming the path), every value must have the model's type, and every
required field must be there.

Required fields: the generator writes a required field's setter as
"if client_side_validation and value is None: raise ValueError" and writes
no such check for an optional one (__init__'s signature defaults every
field to None and the docstrings do not say which are required, so neither
can tell). So a field is required when setting it to None on a bare
instance, with client-side validation on, raises ValueError. The same
setters hold the few value checks the generator emitted (patterns such as
caBundle's base64; 22.6's models hold no enums): each present scalar value
of the right type is passed through its setter too.

Two mappings the generator makes are looser than the API, so they are
narrowed here: IntOrString is 'object' (here: an int or a string; the few
free-form 'object' fields are FREE_FORM), and a Quantity is 'str' (so
`cpu: 1` must be written `cpu: "1"` here, though the API takes a number).

The models follow one Kubernetes release (22.6 -> 1.22). A field newer
than that is unknown to them; it passes only when NEWER_FIELDS lists it,
with the release that added it and why we use it. An entry for a release
the models already cover is itself an error (stale: the models decide).

The kubernetes package may be importable only by the interpreter it was
built for (Debian's /usr/bin/python3, not a pyenv one on the PATH), so the
tests run this file as a script with that interpreter (interpreter()):
    python3 kube_models.py < [obj, ...] (JSON; run() and run_in_test() do it)
    -> {"client": "22.6.0", "api": "1.22", "errors": [[...], ...],
        "newer": [[...], ...]}   (one list per object, in order)"""
import json
import os
import re
import subprocess
import sys
import unittest

# Fields newer than the models' release that gmt's objects use:
# (top-level kind, JSON path with [] for a list's items, the Kubernetes
# release that added it, its type as the models would write it, why).
NEWER_FIELDS = [
    # gmt-webhook's patch makes gmt-pmgr a native sidecar: an init container
    # with restartPolicy: Always, started before the application containers
    # and stopped after them (alpha 1.28, beta and on by default 1.29).
    ("Pod", "spec.initContainers[].restartPolicy", "1.28", "str",
     "gmt-webhook's gmt-pmgr sidecar (docs/kubernetes.md)"),
]

# 'object' fields that really are free-form JSON; every other 'object' in
# the models is an IntOrString.
FREE_FORM = {("V1ControllerRevision", "data"), ("V1ManagedFieldsEntry", "fields_v1"),
             ("V1CustomResourceSubresources", "status")}

PY_CANDIDATES = [sys.executable, "/usr/bin/python3"]


def interpreter():
    """The first Python that can import kubernetes.client, or (None, why)."""
    tried = []
    for py in PY_CANDIDATES:
        if not py or not os.path.exists(py) or py in tried:
            continue
        tried.append(py)
        r = subprocess.run([py, "-c", "import kubernetes.client"], capture_output=True, text=True, timeout=60)
        if r.returncode == 0:
            return py, None
    return None, "no Python here can import kubernetes.client (tried %s; Debian: apt-get install " \
                 "python3-kubernetes)" % ", ".join(tried)


def run(objs, timeout=120):
    """check_all(objs) in the interpreter that has the package: the parsed
    answer, or raises RuntimeError saying why."""
    py, why = interpreter()
    if py is None:
        raise RuntimeError(why)
    r = subprocess.run([py, os.path.abspath(__file__)], input=json.dumps(objs), capture_output=True,
                       text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError("%s kube_models.py exited %d: %s" % (py, r.returncode, r.stderr.strip()))
    return json.loads(r.stdout)


def run_in_test(objs):
    """run() for a test, objs as [(where, obj)]: no Python with the
    package fails the test under CI=true (CI installs it: scripts/setup.sh)
    and skips it elsewhere."""
    py, why = interpreter()
    if py is None:
        if os.environ.get("CI") == "true":
            raise AssertionError("the Kubernetes client's models are required under CI=true: %s" % why)
        raise unittest.SkipTest(why)
    out = run([dict(o, __where__=w) for w, o in objs])
    sys.stderr.write("NOTE: kubernetes client %s (%s), models of Kubernetes %s\n" % (out["client"], py, out["api"]))
    return out


# ---- below: runs where kubernetes.client imports ----

def _version_tuple(v):
    return tuple(int(x) for x in v.split("."))


def api_release(client):
    """The Kubernetes release the models follow, as 'MAJOR.MINOR'."""
    m = re.search(r"Version of the API: release-(\d+\.\d+)", client.Configuration().to_debug_report())
    if not m:
        raise RuntimeError("kubernetes.client does not say which API release it follows")
    return m.group(1)


def model_for(client, api_version, kind):
    """The model class of apiVersion/kind, or (None, why). The group must be
    served by the client (an <Group><Version>Api class) with a create
    method for the kind, so a kind is not accepted under the wrong group or
    a version that release no longer serves."""
    if not isinstance(api_version, str) or not isinstance(kind, str) or not kind:
        return None, "apiVersion and kind must be strings"
    group, _, version = api_version.rpartition("/")
    gname = "".join(p.capitalize() for p in re.sub(r"\.k8s\.io$", "", group or "core").split("."))
    vname = version[:1].upper() + version[1:]
    api = getattr(client, "%s%sApi" % (gname, vname), None)
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()
    if api is None or not (hasattr(api, "create_namespaced_" + snake) or hasattr(api, "create_" + snake)):
        return None, "%s %s is not served by Kubernetes %s" % (api_version, kind, api_release(client))
    for name in (vname + kind, gname + vname + kind):
        m = getattr(client, name, None)
        if isinstance(m, type) and hasattr(m, "openapi_types"):
            return m, None
    return None, "no model for %s %s" % (api_version, kind)


def _required(client, model):
    cfg = client.Configuration()
    cfg.client_side_validation = True
    out = set()
    for attr in model.openapi_types:
        inst = model.__new__(model)
        inst.local_vars_configuration = cfg
        try:
            setattr(inst, attr, None)
        except ValueError:
            out.add(attr)
    return out


def _setter_error(client, model, attr, value):
    cfg = client.Configuration()
    cfg.client_side_validation = True
    inst = model.__new__(model)
    inst.local_vars_configuration = cfg
    try:
        setattr(inst, attr, value)
    except ValueError as e:
        return str(e)
    return None


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


class Walker:
    def __init__(self, client, kind):
        self.client, self.kind = client, kind
        self.release = _version_tuple(api_release(client))
        self.errors, self.newer = [], []

    def value(self, v, t, path, gpath, owner=None, attr=None):
        """gpath: the path with list indexes written [], as NEWER_FIELDS has it."""
        lm = re.fullmatch(r"list\[(.+)\]", t)
        dm = re.fullmatch(r"dict\(str, (.+)\)", t)
        if lm:
            if not isinstance(v, list):
                return self.errors.append("%s: want a list (%s), got %s" % (path, t, type(v).__name__))
            for i, x in enumerate(v):
                self.value(x, lm.group(1), "%s[%d]" % (path, i), gpath + "[]", owner, attr)
        elif dm:
            if not isinstance(v, dict):
                return self.errors.append("%s: want a map (%s), got %s" % (path, t, type(v).__name__))
            for k, x in v.items():
                if not isinstance(k, str):
                    self.errors.append("%s: key %r is not a string" % (path, k))
                self.value(x, dm.group(1), "%s.%s" % (path, k), gpath + ".*")
        elif t in ("str", "datetime", "date"):
            if not isinstance(v, str):
                self.errors.append("%s: want a string, got %s %r" % (path, type(v).__name__, v))
        elif t == "int":
            if not _is_int(v):
                self.errors.append("%s: want an integer, got %s %r" % (path, type(v).__name__, v))
        elif t == "float":
            if not (_is_int(v) or isinstance(v, float)):
                self.errors.append("%s: want a number, got %s %r" % (path, type(v).__name__, v))
        elif t == "bool":
            if not isinstance(v, bool):
                self.errors.append("%s: want a boolean, got %s %r" % (path, type(v).__name__, v))
        elif t == "object":
            if (owner, attr) not in FREE_FORM and not (_is_int(v) or isinstance(v, str)):
                self.errors.append("%s: want an integer or a string (IntOrString), got %s %r"
                                   % (path, type(v).__name__, v))
        else:
            model = getattr(self.client, t, None)
            if not (isinstance(model, type) and hasattr(model, "openapi_types")):
                return self.errors.append("%s: the models name a type %r they do not define" % (path, t))
            self.model(v, model, path, gpath)

    def model(self, v, model, path, gpath):
        if not isinstance(v, dict):
            return self.errors.append("%s: want an object (%s), got %s" % (path, model.__name__, type(v).__name__))
        by_json = {j: a for a, j in model.attribute_map.items()}
        for k, x in v.items():
            sub, gsub = ("%s.%s" % (path, k), "%s.%s" % (gpath, k) if gpath else k)
            attr = by_json.get(k)
            if attr is None:
                self.unknown(k, x, sub, gsub, model)
                continue
            n = len(self.errors)
            self.value(x, model.openapi_types[attr], sub, gsub, model.__name__, attr)
            if len(self.errors) == n and model.openapi_types[attr] in ("str", "int", "bool", "float", "list[str]"):
                e = _setter_error(self.client, model, attr, x)
                if e:
                    self.errors.append("%s: %s" % (sub, e))
        for attr in sorted(_required(self.client, model)):
            if model.attribute_map[attr] not in v:
                self.errors.append("%s: %s.%s is required" % (path, model.__name__, model.attribute_map[attr]))

    def unknown(self, k, x, path, gpath, model):
        for kind, p, since, t, why in NEWER_FIELDS:
            if (kind, p) != (self.kind, gpath):
                continue
            if _version_tuple(since) <= self.release:
                self.errors.append("%s: NEWER_FIELDS lists %s since %s, but these models follow %s and "
                                   "do not know it: a wrong entry" % (path, p, since, ".".join(map(str, self.release))))
                return
            self.newer.append("%s (Kubernetes %s+: %s)" % (path, since, why))
            self.value(x, t, path, gpath)
            return
        self.errors.append("%s: unknown field %r in %s (Kubernetes %s)"
                           % (path, k, model.__name__, ".".join(map(str, self.release))))


def check(client, obj, where="object"):
    """(errors, newer fields used) for one object as parsed from YAML/JSON."""
    if not isinstance(obj, dict):
        return ["%s: not an object" % where], []
    model, why = model_for(client, obj.get("apiVersion"), obj.get("kind"))
    if model is None:
        return ["%s: %s" % (where, why)], []
    w = Walker(client, obj["kind"])
    w.model(obj, model, "%s (%s)" % (where, obj["kind"]), "")
    return w.errors, w.newer


def stale_entries(client, release):
    """NEWER_FIELDS entries the models already cover."""
    return ["%s %s: since %s, but the models follow %s" % (k, p, s, release)
            for k, p, s, _, _ in NEWER_FIELDS if _version_tuple(s) <= _version_tuple(release)]


def main():
    import kubernetes
    from kubernetes import client
    objs = json.load(sys.stdin)
    release = api_release(client)
    out = {"client": kubernetes.__version__, "api": release, "errors": [], "newer": [],
           "stale": stale_entries(client, release)}
    for i, o in enumerate(objs):
        where = o.pop("__where__", "object %d" % i) if isinstance(o, dict) else "object %d" % i
        errs, newer = check(client, o, where)
        out["errors"].append(errs)
        out["newer"].append(newer)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
