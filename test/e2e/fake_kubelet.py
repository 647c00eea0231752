"""A fake kubelet for gmt-device-plugin's end-to-end test: the kubelet's
side of the device-plugin API v1beta1 over Unix sockets in a folder,
driven over stdin and reporting on stdout, one JSON object a line.

    fake_kubelet.py DIR

It serves Registration on DIR/kubelet.sock. On each Register it reports
{"event": "register", ...}, answers, then (as the kubelet does) dials the
plugin's endpoint in DIR, calls GetDevicePluginOptions ({"event":
"options"}) and reads ListAndWatch, reporting each list ({"event":
"devices"}) and the stream's end ({"event": "stream_end"}). Commands on
stdin: allocate, prefer, prestart and call (a unary call to any method
path) against a registered resource; restart (what a starting kubelet
does: it removes every socket of DIR and listens on a new kubelet.sock);
stop. It ends at EOF. Every call has a 5 s deadline.

Needs python3-grpcio (Debian). The messages are encoded and decoded here
by hand, from upstream's api.proto field numbers, not from gmt's .proto:
a field the plugin sends under a number upstream does not have is
reported as an error event."""
import json
import os
import sys
import threading
from concurrent import futures

import grpc

CALL_S = 5.0
PREFIX = "/v1beta1.DevicePlugin/"
out_lock = threading.Lock()


def emit(**obj):
    with out_lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


# ---- the protobuf wire, as much of it as these messages use ----

def varint(n):
    n &= (1 << 64) - 1
    b = bytearray()
    while True:
        x = n & 0x7F
        n >>= 7
        if n:
            b.append(x | 0x80)
        else:
            b.append(x)
            return bytes(b)


def field_bytes(num, data):
    return varint(num << 3 | 2) + varint(len(data)) + data


def field_str(num, s):
    return field_bytes(num, s.encode())


def field_int(num, v):
    return varint(num << 3) + varint(v)


def decode(buf, schema, where):
    """buf as {name: value or [values]} by schema {num: (name, kind,
    repeated)}, kind 'str', 'bool', 'int' or a sub-schema (a message).
    A field number or wire type the schema lacks raises ValueError."""
    out = {name: [] if rep else None for name, _, rep in schema.values()}
    i = 0
    while i < len(buf):
        key, i = read_varint(buf, i)
        num, wt = key >> 3, key & 7
        if num not in schema:
            raise ValueError("%s: field %d is not upstream's" % (where, num))
        name, kind, rep = schema[num]
        if wt == 0 and kind in ("bool", "int"):
            v, i = read_varint(buf, i)
            v = bool(v) if kind == "bool" else (v - (1 << 64) if v >= 1 << 63 else v)
        elif wt == 2 and kind not in ("bool", "int"):
            n, i = read_varint(buf, i)
            data, i = buf[i:i + n], i + n
            v = data.decode() if kind == "str" else decode(data, kind, where + "." + name)
        else:
            raise ValueError("%s: field %d (%s) has wire type %d" % (where, num, name, wt))
        if rep:
            out[name].append(v)
        else:
            out[name] = v
    return out


def read_varint(buf, i):
    shift = v = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


# upstream's k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto
OPTIONS = {1: ("pre_start_required", "bool", False),
           2: ("get_preferred_allocation_available", "bool", False)}
REGISTER = {1: ("version", "str", False), 2: ("endpoint", "str", False),
            3: ("resource_name", "str", False), 4: ("options", OPTIONS, False)}
EMPTY = {}
TOPOLOGY = {1: ("nodes", {1: ("ID", "int", False)}, True)}
DEVICE = {1: ("ID", "str", False), 2: ("health", "str", False), 3: ("topology", TOPOLOGY, False)}
LIST = {1: ("devices", DEVICE, True)}
ENTRY = {1: ("key", "str", False), 2: ("value", "str", False)}
MOUNT = {1: ("container_path", "str", False), 2: ("host_path", "str", False),
         3: ("read_only", "bool", False)}
SPEC = {1: ("container_path", "str", False), 2: ("host_path", "str", False),
        3: ("permissions", "str", False)}
CDI = {1: ("name", "str", False)}
CONTAINER_ALLOC = {1: ("envs", ENTRY, True), 2: ("mounts", MOUNT, True), 3: ("devices", SPEC, True),
                   4: ("annotations", ENTRY, True), 5: ("cdi_devices", CDI, True)}
ALLOCATE = {1: ("container_responses", CONTAINER_ALLOC, True)}
PREFERRED = {1: ("container_responses", {1: ("deviceIDs", "str", True)}, True)}


def allocate_request(containers):
    return b"".join(field_bytes(1, b"".join(field_str(1, i) for i in ids)) for ids in containers)


def preferred_request(available, must, size):
    c = b"".join(field_str(1, i) for i in available) + b"".join(field_str(2, i) for i in must)
    c += field_int(3, size)
    return field_bytes(1, c)


# ---- the kubelet ----

class Kubelet:
    def __init__(self, folder):
        self.dir = folder
        self.sock = os.path.join(folder, "kubelet.sock")
        self.server = None
        self.plugins = {}  # resource -> (endpoint, channel)
        self.lock = threading.Lock()

    def start(self):
        handler = grpc.method_handlers_generic_handler(
            "v1beta1.Registration", {"Register": grpc.unary_unary_rpc_method_handler(self.register)})
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=(handler,))
        self.server.add_insecure_port("unix:" + self.sock)
        self.server.start()
        emit(event="listening", socket=self.sock)

    def stop(self):
        with self.lock:
            plugins, self.plugins = self.plugins, {}
        for _, ch in plugins.values():
            ch.close()
        if self.server:
            self.server.stop(grace=None).wait(5)
            self.server = None
        if os.path.exists(self.sock):
            os.unlink(self.sock)

    def restart(self):
        """What a starting kubelet does: its folder's sockets go, then it
        listens on a new kubelet.sock."""
        self.stop()
        for name in os.listdir(self.dir):
            p = os.path.join(self.dir, name)
            if _is_socket(p):
                os.unlink(p)
        self.start()

    def register(self, req, context):
        try:
            r = decode(req, REGISTER, "RegisterRequest")
        except ValueError as e:
            emit(event="error", what=str(e))
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        emit(event="register", **r)
        if r["version"] != "v1beta1" or "/" in r["endpoint"]:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad version or endpoint")
        ch = grpc.insecure_channel("unix:" + os.path.join(self.dir, r["endpoint"]))
        with self.lock:
            old = self.plugins.get(r["resource_name"])
            self.plugins[r["resource_name"]] = (r["endpoint"], ch)
        if old:
            old[1].close()
        threading.Thread(target=self.watch, args=(r["resource_name"], ch), daemon=True).start()
        return b""

    def watch(self, resource, ch):
        """As the kubelet's endpoint does after a Register."""
        try:
            opts = ch.unary_unary(PREFIX + "GetDevicePluginOptions")(b"", timeout=CALL_S)
            emit(event="options", resource=resource, **decode(opts, OPTIONS, "DevicePluginOptions"))
            for msg in ch.unary_stream(PREFIX + "ListAndWatch")(b""):
                lst = decode(msg, LIST, "ListAndWatchResponse")
                emit(event="devices", resource=resource,
                     devices=[[d["ID"], d["health"]] for d in lst["devices"]])
            emit(event="stream_end", resource=resource, code="OK")
        except grpc.RpcError as e:
            emit(event="stream_end", resource=resource, code=e.code().name, details=e.details())
        except ValueError as e:
            emit(event="error", resource=resource, what=str(e))

    def call(self, resource, method, body, schema, name):
        with self.lock:
            plugin = self.plugins.get(resource)
        if not plugin:
            emit(event=name, resource=resource, ok=False, code="NOT_REGISTERED")
            return
        try:
            rep = plugin[1].unary_unary(PREFIX + method)(body, timeout=CALL_S)
            emit(event=name, resource=resource, ok=True, reply=decode(rep, schema, method))
        except grpc.RpcError as e:
            emit(event=name, resource=resource, ok=False, code=e.code().name, details=e.details())
        except ValueError as e:
            emit(event="error", resource=resource, what=str(e))


def _is_socket(p):
    import stat
    try:
        return stat.S_ISSOCK(os.lstat(p).st_mode)
    except OSError:
        return False


def main():
    k = Kubelet(sys.argv[1])
    k.start()
    for line in sys.stdin:
        if not line.strip():
            continue
        c = json.loads(line)
        cmd = c["cmd"]
        if cmd == "allocate":
            k.call(c["resource"], "Allocate", allocate_request(c["containers"]), ALLOCATE, "allocate")
        elif cmd == "prefer":
            k.call(c["resource"], "GetPreferredAllocation",
                   preferred_request(c["available"], c.get("must", []), c["size"]), PREFERRED, "prefer")
        elif cmd == "prestart":
            body = b"".join(field_str(1, i) for i in c["ids"])
            k.call(c["resource"], "PreStartContainer", body, EMPTY, "prestart")
        elif cmd == "call":
            k.call(c["resource"], c["method"], bytes.fromhex(c.get("body", "")), EMPTY, "call")
        elif cmd == "restart":
            k.restart()
            emit(event="restarted")
        elif cmd == "stop":
            k.stop()
            emit(event="stopped")
        else:
            emit(event="error", what="unknown command %r" % cmd)
    k.stop()


if __name__ == "__main__":
    main()
