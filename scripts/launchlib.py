"""What launch-backend.py and launch-command.py share: the pods of a
resource-config.txt in the file's order (read as server/config.c reads it),
the port and URL of each pod's manager, and where gmt's programs are.
Python 3 standard library only."""
import os
import shutil
import socket
import stat

DEFAULT_SCHD_PORT = 50051  # proto/gmt_wire.h: GMT_DEFAULT_SCHD_TCP
DEFAULT_BASE_PORT = 50052  # proto/gmt_wire.h: GMT_DEFAULT_PMGR_PORT
DEFAULT_RUN_DIR = "/run/gmt"  # where the daemons' ipc sockets go by default
MAX_CONFIG_BYTES = 16 << 20  # server/config.h: GMT_CONFIG_MAX_BYTES
MAX_SUN_PATH = 107  # sizeof(sockaddr_un.sun_path) - 1 on Linux

# C's isspace() in the C locale, which config.c splits fields on.
_C_SPACE = b" \t\n\v\f\r"

# Where `make install` puts them (server/, client/, hook/ CMakeLists.txt),
# after PATH.
_INSTALLED = {
    "gmt-schd": ["/usr/local/sbin", "/usr/sbin", "/usr/local/bin", "/usr/bin"],
    "gmt-pmgr": ["/usr/local/bin", "/usr/bin"],
    "gmt": ["/usr/local/bin", "/usr/bin"],
}
_IN_BUILD = {
    "gmt-schd": ("server", "gmt-schd"),
    "gmt-pmgr": ("client", "gmt-pmgr"),
    "gmt": ("client", "gmt"),
}


class LaunchError(Exception):
    """A failure to report in one line (or a few) and exit on."""

    def __init__(self, msg, code=1):
        super().__init__(msg)
        self.code = code


def pod_names(path):
    """The pods of resource-config.txt at path, in the file's order.

    Read as server/config.c reads it: lines split on '\\n', blank lines and
    lines whose first non-blank is '#' skipped, the first other line the
    pod count, each later line `ID REQUEST LIMIT GPU_MEM [key=value...]`
    split on C blanks. Only the IDs are taken: checking the file is
    gmt-schd's job, which says what is wrong as `file:line: reason`.
    Raises LaunchError (code 2) when the file cannot be read or names no
    pod count."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise LaunchError("%s: cannot open: %s" % (path, e.strerror), 2)
    if not stat.S_ISREG(st.st_mode):
        # Opening a FIFO would block; gmt-schd refuses it at once.
        raise LaunchError("%s: not a regular file" % path, 2)
    if st.st_size > MAX_CONFIG_BYTES:
        raise LaunchError("%s: larger than 16 MiB" % path, 2)
    try:
        with open(path, "rb") as f:
            text = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise LaunchError("%s: cannot read: %s" % (path, e.strerror), 2)
    names, count_seen = [], False
    for raw in text.split(b"\n"):
        line = raw.lstrip(_C_SPACE)
        if not line or line.startswith(b"#"):
            continue
        if not count_seen:
            count_seen = True
            continue
        fields = [f for f in _split_c_blanks(line) if f]
        names.append(fields[0].decode("utf-8", errors="replace"))
    if not count_seen:
        raise LaunchError("%s: no pod count: the first line that is not blank or a comment "
                          "must be the number of pods" % path, 2)
    return names


def _split_c_blanks(line):
    out, cur = [], bytearray()
    for b in line:
        if bytes((b,)) in _C_SPACE:
            if cur:
                out.append(bytes(cur))
                cur = bytearray()
        else:
            cur.append(b)
    if cur:
        out.append(bytes(cur))
    return out


def tcp_url(port):
    return "tcp://127.0.0.1:%d" % port


def pod_port(names, pod, base_port, config_path):
    """The port of pod's manager: base_port plus the pod's position in the
    config. Raises LaunchError (code 2) for a pod the config does not list."""
    if pod not in names:
        raise LaunchError("pod '%s' is not in %s (its pods: %s)"
                          % (pod, config_path, ", ".join(names) or "none"), 2)
    port = base_port + names.index(pod)
    if port > 65535:
        raise LaunchError("pod '%s' would be on port %d (--base-port %d + its position %d): "
                          "above 65535" % (pod, port, base_port, names.index(pod)), 2)
    return port


def find_program(name, build_dir=None):
    """The path of one of gmt's programs (gmt-schd, gmt-pmgr, gmt): in
    GMT_BUILD_DIR's build tree when that is set (and then only there: a
    variable that is set but wrong is an error), else on PATH, else where
    `make install` puts it. Raises LaunchError."""
    if build_dir is None:
        build_dir = os.environ.get("GMT_BUILD_DIR", "")
    if build_dir:
        path = os.path.join(build_dir, *_IN_BUILD[name])
        if os.access(path, os.X_OK):
            return os.path.abspath(path)
        raise LaunchError("GMT_BUILD_DIR=%s has no %s (build it, or unset GMT_BUILD_DIR to use "
                          "the installed one)" % (build_dir, os.path.join(*_IN_BUILD[name])))
    found = shutil.which(name)
    if found:
        return found
    for d in _INSTALLED[name]:
        path = os.path.join(d, name)
        if os.access(path, os.X_OK):
            return path
    raise LaunchError("%s not found on PATH or in %s; set GMT_BUILD_DIR to gmt's build folder"
                      % (name, ", ".join(_INSTALLED[name])))


def port_in_use(port):
    """None when port can be listened on at 127.0.0.1, else the reason.
    SO_REUSEADDR as the daemons' listeners use it, so that a port left in
    TIME_WAIT counts as free and a listening one does not."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            s.listen(1)
        except OSError as e:
            return e.strerror or str(e)
    return None


def listening(url, timeout=0.5):
    """Whether something accepts connections at url (tcp:// or ipc://)."""
    if url.startswith("ipc://"):
        fam, addr = socket.AF_UNIX, url[len("ipc://"):]
    elif url.startswith("tcp://"):
        host, _, port = url[len("tcp://"):].rpartition(":")
        fam, addr = socket.AF_INET, (host.strip("[]"), int(port))
        if ":" in addr[0]:
            fam = socket.AF_INET6
    else:
        return False
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(addr)
        except OSError:
            return False
        # A gmt daemon speaks first (nng's SP header); answering it before
        # hanging up matters: nng 1.5 stops accepting on an ipc socket
        # whose client hangs up mid-handshake (proto/gmt_ipc_watch.h).
        try:
            head = b""
            while len(head) < 8:
                chunk = s.recv(8 - len(head))
                if not chunk:
                    break
                head += chunk
            if head[:4] == b"\x00SP\x00":
                s.sendall(b"\x00SP\x00\x00\x30\x00\x00")
        except OSError:
            pass
        return True
