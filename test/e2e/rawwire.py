"""gmt's wire written by hand, as any local program could: nng's SP
framing over loopback TCP and protobuf fields built and read without
protoc, for the tests that send what gmt's own clients never would
(huge or forged requests)."""
import os
import socket
import struct

# nng's SP handshake: "\0SP\0", the protocol (REQ 0x30), two zero bytes.
SP_REQ = b"\x00SP\x00\x00\x30\x00\x00"


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, value):
    """One protobuf field: an int is a varint, bytes are length-delimited."""
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    return varint(num << 3 | 2) + varint(len(value)) + value


def fields(buf):
    """(number, value) of each varint or length-delimited field of buf."""
    i, out = 0, []

    def read_varint():
        nonlocal i
        v, shift = 0, 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return v
    while i < len(buf):
        key = read_varint()
        v = read_varint()
        if key & 7 == 2:
            out.append((key >> 3, buf[i:i + v]))
            i += v
        else:
            out.append((key >> 3, v))
    return out


def error_of(reply):
    """(code, message) of an envelope that carries an Error, else None."""
    for num, v in fields(reply):
        if num == 2:
            f = dict(fields(v))
            code = f.get(1, 0)
            return (code >> 1) ^ -(code & 1), f.get(2, b"").decode(errors="replace")
    return None


def caller(pid, fd):
    """Envelope.caller: who the request says it comes from."""
    return field(3, field(1, pid) + field(2, fd))


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(SP_REQ)
    peer = s.recv(8)
    if len(peer) != 8 or peer[:4] != b"\x00SP\x00":
        raise AssertionError("no SP handshake on port %d: %r" % (port, peer))
    return s


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise AssertionError("the daemon closed the connection")
        buf += chunk
    return buf


def call_raw(port, envelope, timeout=5.0, claim=None):
    """Sends one REQ frame (request id, envelope) on a new connection and
    returns the reply's envelope. The envelope names this process and its
    socket as the caller, as gmt's hook does, unless claim gives another
    (pid, fd): fd None means this socket's."""
    s = connect(port)
    try:
        s.settimeout(timeout)
        pid, fd = claim if claim else (os.getpid(), None)
        envelope += caller(pid, s.fileno() if fd is None else fd)
        payload = struct.pack(">I", 0x80000001) + envelope
        s.sendall(struct.pack(">Q", len(payload)) + payload)
        n = struct.unpack(">Q", recv_exact(s, 8))[0]
        return recv_exact(s, n)[4:]
    finally:
        s.close()


def sp_answers(path, timeout=0.3):
    """Whether a gmt server answers at the ipc path: the whole handshake,
    then a frame that does not decode, which nng's threads answer with an
    error (what proto/ipc_watch.c asks)."""
    body = b"\x80\x00\x00\x01" + b"\xff" * 4
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(timeout)
            s.connect(path)
            s.sendall(SP_REQ + b"\x01" + len(body).to_bytes(8, "big") + body)
            got = b""
            while len(got) < 17:
                chunk = s.recv(64)
                if not chunk:
                    return False
                got += chunk
            return got[:4] == b"\x00SP\x00" and got[8] == 1
    except OSError:
        return False
