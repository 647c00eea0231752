#!/usr/bin/env python3
"""Checks gmt's structure: no two files call or include each other, directly
or around a loop, and no include runs from a lower layer to a higher one.

    scripts/check-deps.py BUILD_DIR [-v]

A node is a module: x.c and x.h in one folder are one node. Edges:
  - includes: `#include "name.h"` resolved to a header of the project,
    searched in the including file's folder first, then in every folder of
    the project (as the build's include paths do);
  - calls: every global symbol an object file of BUILD_DIR needs (nm -u)
    that another object file of the build defines (nm --defined-only).
Macros and static inline functions leave no symbol, so they are seen only
through their header's include. Generated files (in BUILD_DIR) and tests
are left out: test code may reach anywhere.

Layers, lowest first: proto, then bpf and topo side by side, then server,
client and hook side by side (none of these three includes another's
headers; nor do bpf and topo). A file may include from its own layer or
below.

Within a layer, folders that must not know each other: proto/util/
includes nothing from the rest of proto/ (the wire above it), and
client/'s two programs, pmgr/ and cli/, include nothing of each other;
hook/base/ includes nothing from hook/'s other folders.

Exit 0 when clean; 1 with one line per cycle or upward include. Python 3
standard library and binutils' nm only."""
import os
import re
import subprocess
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKED = ("proto", "bpf", "topo", "server", "client", "hook")
RANK = {"proto": 0, "bpf": 1, "topo": 1, "server": 2, "client": 2, "hook": 2}
# (folder, folder it may not include from): prefixes of paths.
APART = (("proto/util/", "proto/"), ("client/pmgr/", "client/cli/"), ("client/cli/", "client/pmgr/"),
         ("hook/base/", "hook/"))
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def top(rel):
    return rel.split(os.sep, 1)[0]


def node_of(rel):
    """x.c, x.h and x.bpf.c stay apart only by folder and stem."""
    d, f = os.path.split(rel)
    stem = f.split(".", 1)[0]
    return os.path.join(d, stem)


def project_files():
    out = []
    for t in CHECKED:
        for dirpath, _, names in os.walk(os.path.join(ROOT, t)):
            for n in names:
                if n.endswith((".c", ".h")):
                    out.append(os.path.relpath(os.path.join(dirpath, n), ROOT))
    return sorted(out)


def include_edges(files):
    by_name = defaultdict(list)
    for f in files:
        by_name[os.path.basename(f)].append(f)
    edges = defaultdict(set)  # node -> {(node, why)}
    upward = []
    for f in files:
        with open(os.path.join(ROOT, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for inc in INCLUDE_RE.findall(text):
            local = os.path.normpath(os.path.join(os.path.dirname(f), inc))
            if local in by_name.get(os.path.basename(inc), []):
                target = local
            else:
                cands = [c for c in by_name.get(os.path.basename(inc), []) if c.endswith(inc)]
                if not cands:
                    continue  # generated (gmt.pb-c.h, the skeleton) or a system header
                # One name in two programs (hook/swap/swap.h, server/swap.h):
                # each program's build finds its own first.
                target = min(cands, key=lambda c: (top(c) != top(f), c))
            a, b = node_of(f), node_of(target)
            if a != b:
                edges[a].add((b, "includes %s" % target))
            for fa, fb in APART:
                if f.startswith(fa) and target.startswith(fb) and not target.startswith(fa):
                    upward.append("%s includes %s (%s may not include from %s)" % (f, target, fa, fb))
            ta, tb = top(f), top(target)
            if ta != tb and (RANK[tb] > RANK[ta] or RANK[tb] == RANK[ta]):
                upward.append("%s includes %s (%s may not include from %s)" % (f, target, ta, tb))
    return edges, upward


def source_of_object(obj, build):
    """CMake names an object after its source: dir/CMakeFiles/t.dir/x.c.o,
    with ../ written as __/."""
    rel = os.path.relpath(obj, build)
    m = re.match(r"(.*?)/?CMakeFiles/[^/]+\.dir/(.*)\.o$", rel)
    if not m:
        return None
    src = os.path.normpath(os.path.join(m.group(1), m.group(2).replace("__", "..")))
    return src if os.path.exists(os.path.join(ROOT, src)) else None


def nm(obj, *flags):
    r = subprocess.run(["nm", "-P", *flags, obj], capture_output=True, text=True)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def call_edges(build):
    defined = defaultdict(set)  # symbol -> {source}
    needs = defaultdict(set)    # source -> {symbol}
    for dirpath, _, names in os.walk(build):
        for n in names:
            if not n.endswith(".o"):
                continue
            obj = os.path.join(dirpath, n)
            src = source_of_object(obj, build)
            if not src or top(src) not in CHECKED:
                continue
            for s in nm(obj, "--defined-only", "-g"):
                defined[s].add(src)
            needs[src].update(nm(obj, "-u"))
    edges = defaultdict(set)
    for src, syms in needs.items():
        for s in syms:
            for d in defined.get(s, ()):
                a, b = node_of(src), node_of(d)
                if a != b:
                    edges[a].add((b, "calls %s" % s))
    return edges, len(needs)


def cycles(edges):
    """Tarjan's strongly connected components of more than one node."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w, _ in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(set(edges) | {w for es in edges.values() for w, _ in es}):
        if v not in index:
            visit(v)
    return out


def main():
    args = [a for a in sys.argv[1:] if a != "-v"]
    verbose = "-v" in sys.argv[1:]
    if len(args) != 1 or not os.path.isdir(args[0]):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    build = os.path.abspath(args[0])
    files = project_files()
    inc, upward = include_edges(files)
    calls, nobjs = call_edges(build)
    if nobjs == 0:
        print("check-deps: no object files of gmt in %s: build it first" % build, file=sys.stderr)
        return 2
    edges = defaultdict(set)
    for e in (inc, calls):
        for a, bs in e.items():
            edges[a].update(bs)
    bad = 0
    for line in upward:
        print("upward include: " + line)
        bad += 1
    for comp in cycles(edges):
        bad += 1
        members = set(comp)
        print("cycle: " + " <-> ".join(comp))
        for a in comp:
            for b, why in sorted(edges[a]):
                if b in members:
                    print("    %s -> %s: %s" % (a, b, why))
    if verbose:
        for a in sorted(edges):
            for b, why in sorted(edges[a]):
                print("%s -> %s: %s" % (a, b, why))
    print("check-deps: %d modules, %d object files, %d problem%s"
          % (len(set(node_of(f) for f in files)), nobjs, bad, "" if bad == 1 else "s"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
