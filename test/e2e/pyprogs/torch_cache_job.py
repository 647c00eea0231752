#!/usr/bin/env python3
"""A PyTorch job's memory as gmt sees it, without PyTorch (test_torch_cache.py):
two device allocations made through the driver API with ctypes, "live"
(what the job uses) and "cached" (what PyTorch's caching allocator keeps
after the job freed it), and a stand-in `torch` module whose
torch.cuda.empty_cache() frees the cached one, as PyTorch's does, and prints
EMPTIED. Usage: torch_cache_job.py LIVE_MIB CACHED_MIB. Prints READY, then
for each line on stdin:
  check     reads "live" back and prints OK <bytes> or BAD <offset>;
  hold S    prints HOLDING and holds the GIL for S seconds (a C sleep
            called through ctypes.PyDLL, which keeps the GIL), then HELD;
  launch US prints LAUNCHING, launches the fake driver's spin kernel (US
            microseconds) through ctypes.PyDLL, holding the GIL while the
            hook's gate waits for the token, as PyTorch's launches do,
            waits for it, and prints LAUNCHED;
  exit      exits 0.
A CUDA failure prints CUDAFAIL <call> <code> and exits 1."""
import ctypes
import sys
import types

MIB = 1 << 20
cuda = ctypes.CDLL("libcuda.so.1")


def ck(name, *args):
    rc = getattr(cuda, name)(*args)
    if rc != 0:
        print("CUDAFAIL %s %d" % (name, rc), flush=True)
        sys.exit(1)


def alloc(n, fill):
    p = ctypes.c_uint64()
    ck("cuMemAlloc_v2", ctypes.byref(p), ctypes.c_size_t(n))
    buf = (ctypes.c_ubyte * n)()
    ctypes.memset(buf, fill, n)
    ck("cuMemcpyHtoD_v2", p, buf, ctypes.c_size_t(n))
    return p.value


def main():
    live_n, cached_n = int(sys.argv[1]) * MIB, int(sys.argv[2]) * MIB
    ck("cuInit", 0)
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    ck("cuDeviceGet", ctypes.byref(dev), 0)
    ck("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
    ck("cuCtxSetCurrent", ctx)
    live = alloc(live_n, 0x5a)
    cached = [alloc(cached_n, 0x33)]

    def empty_cache():
        ck("cuCtxSetCurrent", ctx)  # the caller's thread is gmt's, not ours
        while cached:
            ck("cuMemFree_v2", ctypes.c_uint64(cached.pop()))
        print("EMPTIED", flush=True)

    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_initialized=lambda: True, empty_cache=empty_cache)
    sys.modules["torch"] = torch
    print("READY live=%d cached=%d" % (live_n, cached_n), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "check":
            out = (ctypes.c_ubyte * live_n)()
            ck("cuMemcpyDtoH_v2", out, ctypes.c_uint64(live), ctypes.c_size_t(live_n))
            data = bytes(out)
            wrong = next((i for i, b in enumerate(data) if b != 0x5a), None) \
                if data != b"\x5a" * live_n else None
            print("OK %d" % live_n if wrong is None else "BAD %d" % wrong, flush=True)
        elif words[0] == "hold":
            print("HOLDING", flush=True)
            ctypes.PyDLL(None).usleep(int(float(words[1]) * 1e6))
            print("HELD", flush=True)
        elif words[0] == "launch":
            print("LAUNCHING", flush=True)
            mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
            ck("cuModuleLoadData", ctypes.byref(mod), b"spin")
            ck("cuModuleGetFunction", ctypes.byref(fn), mod, b"spin")
            us = ctypes.c_uint(int(words[1]))
            params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(us), ctypes.c_void_p))
            u = ctypes.c_uint
            launch = ctypes.PyDLL("libcuda.so.1").cuLaunchKernel
            rc = launch(fn, u(1), u(1), u(1), u(1), u(1), u(1), u(0), None, params, None)
            if rc != 0:
                print("CUDAFAIL cuLaunchKernel %d" % rc, flush=True)
                sys.exit(1)
            ck("cuCtxSynchronize")
            print("LAUNCHED", flush=True)
        elif words[0] == "exit":
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
